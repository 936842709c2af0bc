"""What a TargetModel that is not in S3 was probably meant to be: ``resnet`` for ``resnet.tar.gz``.

SageMaker answers a TargetModel it cannot download with a ``ValidationError`` that names the S3 object it
looked for ("Failed to download model data(bucket: b, key: prefix/resnet). Please ensure ..."). The
endpoint does not say what is there instead; the client can, with one ``ListObjectsV2`` call on the
objects whose key starts with the one SageMaker looked for, made only on that error: ``resnet`` finds
``resnet.tar.gz`` (and ``resnet-v2.tar.gz``), a ``.tar`` finds its ``.tar.gz``. A listing that fails
(no permission to list, another account's bucket) leaves the error as SageMaker worded it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from mme_triton._sagemaker import ARCHIVE_SUFFIX, make_client
from mme_triton.errors import ModelNotFoundError

__all__ = ["MAX_SUGGESTIONS", "needs_target_model_hint", "suggest_target_models", "with_target_model_hint"]

logger = logging.getLogger(__name__)

#: At most this many TargetModels are suggested (the closest first).
MAX_SUGGESTIONS = 3

# "Failed to download model data(bucket: my-bucket, key: blog/resnet). Please ensure that ..."
_DOWNLOAD_FAILED = re.compile(r"model data\s*\(bucket:\s*(?P<bucket>[^,\s]+),\s*key:\s*(?P<key>[^)]*)\)")
_LISTED = 50  # keys read from the one listing: enough for a name's variants, never a whole prefix


def suggest_target_models(s3_client: Any, bucket: str, key: str, target_model: str) -> list[str]:
    """The TargetModels beside ``key`` (the object SageMaker looked for ``target_model`` at) whose archive
    name starts with it, closest first: ``<target_model>.tar.gz`` itself, then the shorter names. One
    ``ListObjectsV2`` call.

    Raises:
        botocore.exceptions.ClientError, BotoCoreError: the listing failed.
    """
    if not key.endswith(target_model):
        return []
    prefix = key[: len(key) - len(target_model)]
    answer = s3_client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=_LISTED)
    names = []
    for item in answer.get("Contents", []):
        name = str(item.get("Key", ""))[len(prefix) :]
        if name != target_model and name.endswith(ARCHIVE_SUFFIX) and "/" not in name[len(target_model) :]:
            names.append(name)
    exact = target_model + ARCHIVE_SUFFIX
    return sorted(names, key=lambda name: (name != exact, len(name), name))[:MAX_SUGGESTIONS]


def needs_target_model_hint(error: Exception) -> bool:
    """Whether ``error`` is the one :func:`with_target_model_hint` may add to: a
    :class:`~mme_triton.errors.ModelNotFoundError` naming the object SageMaker could not download. No AWS
    call."""
    return (
        isinstance(error, ModelNotFoundError)
        and error.target_model is not None
        and _DOWNLOAD_FAILED.search(error.message) is not None
    )


def with_target_model_hint(
    error: Exception,
    *,
    s3_client: Any = None,
    boto3_session: Any = None,
    boto_config: Any = None,
) -> Exception:
    """``error``, or for a :class:`~mme_triton.errors.ModelNotFoundError` whose message names the S3 object
    SageMaker could not download, the same error saying which TargetModels are there instead ("...; did
    you mean 'resnet.tar.gz'?") with them in ``suggestions``. Any other error is returned as it is, and no
    AWS call is made for it."""
    if not isinstance(error, ModelNotFoundError) or error.target_model is None:
        return error
    found = _DOWNLOAD_FAILED.search(error.message)
    if found is None:
        return error
    try:
        s3 = make_client("s3", client=s3_client, boto3_session=boto3_session, boto_config=boto_config)
        suggestions = suggest_target_models(s3, found["bucket"], found["key"].strip(), error.target_model)
    except (ClientError, BotoCoreError) as exc:
        logger.debug("no TargetModel suggested for %s: listing s3://%s failed: %s", error.target_model,
                     found["bucket"], exc)  # fmt: skip
        return error
    if not suggestions:
        return error
    quoted = " or ".join(repr(name) for name in suggestions)
    hinted = ModelNotFoundError(
        f"{error.message.rstrip()} (did you mean {quoted}?)",
        endpoint_name=error.endpoint_name,
        target_model=error.target_model,
        status=error.status,
        error_code=error.error_code,
        log_stream_arn=error.log_stream_arn,
    )
    hinted.suggestions = tuple(suggestions)
    return hinted
