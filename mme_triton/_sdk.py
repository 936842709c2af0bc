"""The SageMaker Python SDK (``sagemaker``), optional: its ``Session`` accepted, its defaults derived.

In a SageMaker notebook users write ``role = sagemaker.get_execution_role()`` and
``bucket = sagemaker.Session().default_bucket()``. Every AWS-facing entry point of the library takes a
``sagemaker_session=`` beside ``boto3_session=`` (:func:`boto3_session_of` turns it into the boto3
session it wraps, ``Session.boto_session``), and :func:`deploy_defaults` derives what ``deploy_mme``
was not given — the execution role and the S3 prefix — the way the SDK does, saying in the log what it
chose.

The SDK is never imported by ``import mme_triton``: a ``sagemaker.Session`` is recognised by its class's
module, and the SDK (about 1 GB installed, seconds to import) is imported only when a default has to be
derived. Both layouts are supported: v3 (``sagemaker.core.helper.session_helper``) and v2
(``sagemaker.session``). Only the standard library is imported at module level.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

__all__ = ["SDK_INSTALL", "boto3_session_of", "default_model_data_url", "default_role", "deploy_defaults"]

logger = logging.getLogger(__name__)

SDK_INSTALL = "pip install 'mme-triton[sagemaker]'"
"""How to install the SDK for the defaults below (the ``sagemaker`` extra)."""

#: Where ``deploy_mme`` puts an endpoint's artifacts when it derives the prefix from the default bucket.
DEFAULT_PREFIX = "mme-triton"


@dataclass(frozen=True)
class _SDK:
    session_class: Any
    get_execution_role: Any


def _load_sdk() -> _SDK | None:
    """The SDK's ``Session`` and ``get_execution_role``, v3 layout first; ``None`` when not installed."""
    try:
        from sagemaker.core.helper.session_helper import Session, get_execution_role
    except ImportError:
        try:
            from sagemaker.session import Session, get_execution_role
        except ImportError:
            return None
    return _SDK(Session, get_execution_role)


def is_sagemaker_session(obj: object) -> bool:
    """Whether ``obj`` is a ``sagemaker.Session`` (or a subclass such as ``LocalSession``)."""
    module = type(obj).__module__ or ""
    return (module == "sagemaker" or module.startswith("sagemaker.")) and hasattr(obj, "boto_session")


def boto3_session_of(boto3_session: Any, sagemaker_session: Any) -> boto3.Session | None:
    """The boto3 session to make clients from: ``boto3_session``, or the one a ``sagemaker.Session`` wraps.

    A ``sagemaker.Session`` passed as ``boto3_session`` is unwrapped too.

    Raises:
        ValueError: both are given.
        TypeError: ``sagemaker_session`` is not a ``sagemaker.Session``.

    Example:
        >>> boto3_session_of(None, None) is None
        True
    """
    if sagemaker_session is None:
        if boto3_session is not None and is_sagemaker_session(boto3_session):
            return boto3_session.boto_session  # type: ignore[no-any-return]
        return boto3_session  # type: ignore[no-any-return]
    if boto3_session is not None:
        raise ValueError("pass boto3_session= or sagemaker_session=, not both")
    inner = getattr(sagemaker_session, "boto_session", None)
    if inner is None:
        raise TypeError(
            "sagemaker_session must be a sagemaker.Session (it has no boto_session), "
            f"got {type(sagemaker_session).__name__}"
        )
    return inner  # type: ignore[no-any-return]


def _sdk_session(sdk: _SDK, boto3_session: Any, sagemaker_session: Any) -> Any:
    """``sagemaker_session``, or a new ``sagemaker.Session`` on ``boto3_session`` (default: boto3's)."""
    if sagemaker_session is not None:
        return sagemaker_session
    import boto3
    from botocore.exceptions import NoRegionError

    session = boto3_session if boto3_session is not None else boto3.DEFAULT_SESSION or boto3.Session()
    if session.region_name is None:
        raise NoRegionError()  # what the SDK says as "Must setup local AWS configuration with a region"
    return sdk.session_class(boto_session=session)


def default_role(*, boto3_session: Any = None, sagemaker_session: Any = None) -> str:
    """The execution role as ``sagemaker.get_execution_role()`` finds it (the notebook's or Studio's role,
    or the role of the caller's assumed-role credentials). Read calls only.

    Raises:
        ValueError: the SDK is not installed, or it finds no role (the message says to pass ``role=``;
            the SDK's error is chained).
        botocore.exceptions.NoRegionError: no region is set up (as for every AWS call of the library).
    """
    sdk = _load_sdk()
    if sdk is None:
        raise ValueError(
            "role is required: pass role='arn:aws:iam::<account>:role/<name>', the execution role "
            f"SageMaker assumes (with the SageMaker SDK installed, {SDK_INSTALL}, the notebook's or "
            "Studio's execution role is found by itself)"
        )
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    try:
        role = str(sdk.get_execution_role(_sdk_session(sdk, boto3_session, sagemaker_session)))
    except NoRegionError:
        raise
    except (ValueError, ClientError, BotoCoreError) as exc:
        raise ValueError(
            f"role is required: the SageMaker SDK found no execution role ({exc}); "
            "pass role='arn:aws:iam::<account>:role/<name>'"
        ) from exc
    logger.info("role: %s (the SageMaker SDK's execution role)", role)
    return role


def _bucket_name(session: Any, *, create: bool) -> str:
    """The session's default bucket; created when missing only with ``create`` (``default_bucket()``)."""
    if create:
        return str(session.default_bucket())
    # The name default_bucket() gives, without the CreateBucket it sends for a bucket that does not exist:
    # the session's bucket (given to it, or from the SDK's config file; v2 and v3 keep it in these
    # attributes), else sagemaker-<region>-<account>, the account from STS (a read).
    for attribute in ("_default_bucket", "_default_bucket_name_override"):
        named = getattr(session, attribute, None)
        if named:
            return str(named)
    return f"sagemaker-{session.boto_session.region_name}-{session.account_id()}"


def default_model_data_url(
    endpoint_name: str,
    *,
    boto3_session: Any = None,
    sagemaker_session: Any = None,
    create_bucket: bool = True,
) -> str:
    """``s3://<default bucket>/[<default prefix>/]mme-triton/<endpoint_name>/``, as the SDK names defaults.

    The bucket is ``sagemaker.Session().default_bucket()`` (``sagemaker-<region>-<account>`` unless the
    session or the SDK's config names one; the SDK creates it when it does not exist), under the
    session's ``default_bucket_prefix`` when it has one. Each endpoint gets its own prefix, so
    ``teardown(delete_artifacts=True)`` of one endpoint leaves the others' artifacts alone. With
    ``create_bucket=False`` the bucket is only named (read calls only), as ``plan_deployment`` needs.

    Raises:
        ValueError: the SDK is not installed, or it cannot name the bucket (the message says to pass
            ``model_data_url``; the SDK's error is chained).
        botocore.exceptions.NoRegionError: no region is set up (as for every AWS call of the library).
    """
    sdk = _load_sdk()
    if sdk is None:
        raise ValueError(
            "model_data_url is required: pass model_data_url='s3://<bucket>/<prefix>/', the S3 prefix the "
            f"models sit under (with the SageMaker SDK installed, {SDK_INSTALL}, the session's default "
            f"bucket is used: s3://sagemaker-<region>-<account>/{DEFAULT_PREFIX}/{endpoint_name}/)"
        )
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    try:
        session = _sdk_session(sdk, boto3_session, sagemaker_session)
        bucket = _bucket_name(session, create=create_bucket)
    except NoRegionError:
        raise
    except (ValueError, ClientError, BotoCoreError) as exc:
        raise ValueError(
            f"model_data_url is required: the SageMaker SDK found no default bucket ({exc}); "
            "pass model_data_url='s3://<bucket>/<prefix>/'"
        ) from exc
    prefix = str(getattr(session, "default_bucket_prefix", None) or "").strip("/")
    url = f"s3://{bucket}/{prefix + '/' if prefix else ''}{DEFAULT_PREFIX}/{endpoint_name}/"
    logger.info("model_data_url: %s (the SageMaker session's default bucket)", url)
    return url


def deploy_defaults(
    endpoint_name: str,
    model_data_url: str | None,
    role: str | None,
    *,
    boto3_session: Any,
    sagemaker_session: Any,
    create_bucket: bool = True,
) -> tuple[boto3.Session | None, str, str]:
    """``(boto3 session, model_data_url, role)`` for ``deploy_mme``: what it was given, else derived.

    The role is derived first (read calls), then the prefix: a role that cannot be found leaves no
    bucket behind. ``create_bucket=False`` names the default bucket without creating it.

    Raises:
        ValueError: as :func:`default_role` and :func:`default_model_data_url`, or both sessions given.
        botocore.exceptions.NoRegionError: a default is to be derived and no region is set up.
    """
    session = boto3_session_of(boto3_session, sagemaker_session)
    if sagemaker_session is None and boto3_session is not None and is_sagemaker_session(boto3_session):
        sagemaker_session = boto3_session
    if sagemaker_session is None and (model_data_url is None or role is None):
        sdk = _load_sdk()
        if sdk is not None:  # one SDK session for both defaults
            sagemaker_session = _sdk_session(sdk, session, None)
    if role is None:
        role = default_role(boto3_session=session, sagemaker_session=sagemaker_session)
    if model_data_url is None:
        model_data_url = default_model_data_url(
            endpoint_name,
            boto3_session=session,
            sagemaker_session=sagemaker_session,
            create_bucket=create_bucket,
        )
    return session, model_data_url, role
