"""Names and tags of the SageMaker resources the endpoint stage manages, and reading them back.

Every read here takes a :class:`~mme_triton.endpoint._retry.Deadline`: it is retried while the control
plane throttles or fails (:func:`~mme_triton.endpoint._retry.read`) until that deadline.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import error_code, is_not_found
from mme_triton.endpoint._retry import Deadline, read

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

TAG_MANAGED = "mme-triton:managed"
TAG_ENDPOINT = "mme-triton:endpoint"
TAG_CREATED_AT = "mme-triton:created-at"
TAG_PREFIX = "mme-triton:"

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
NAME_MAX = 63
_BASE_MAX = NAME_MAX - 10  # room for "-m" / "-c" and 8 hex digits


def describe_or_none(call: Any, *, deadline: Deadline, **kwargs: Any) -> dict[str, Any] | None:
    """``call(**kwargs)`` (a Describe* call, retried until ``deadline``), or None when there is no such
    resource."""
    try:
        result: dict[str, Any] = read(call, deadline=deadline, what=_what(call, kwargs), **kwargs)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    return result


def check_name(kind: str, name: str) -> None:
    """SageMaker's rule for endpoint, config, variant and model names: 1-63 of [a-zA-Z0-9-], no edge '-'."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} must be a str, got {type(name).__name__}")
    if not 1 <= len(name) <= NAME_MAX or not NAME_PATTERN.match(name):
        raise ValueError(
            f"{kind} {name!r} is invalid: 1-63 characters, letters, digits and hyphens, "
            "starting and ending with a letter or digit"
        )


def settings_hash(settings: Mapping[str, Any]) -> str:
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def name_base(endpoint_name: str) -> str:
    return endpoint_name[:_BASE_MAX].rstrip("-")


def model_name_for(endpoint_name: str, digest: str) -> str:
    return f"{name_base(endpoint_name)}-m{digest}"


def config_name_for(endpoint_name: str, digest: str) -> str:
    return f"{name_base(endpoint_name)}-c{digest}"


def is_derived_name(endpoint_name: str, name: str, kind: str) -> bool:
    """Whether ``name`` has the form deploy_mme gives models (``kind="m"``) or configs (``"c"``)."""
    return re.fullmatch(re.escape(name_base(endpoint_name)) + f"-{kind}[0-9a-f]{{8}}", name) is not None


def tag_dict(tags: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or []}


def _what(call: Any, kwargs: dict[str, Any]) -> str:
    name = getattr(call, "__name__", "call")
    return f"{name}({', '.join(f'{k}={v}' for k, v in kwargs.items() if k != 'NextToken')})"


def list_tags(sagemaker: SageMakerClient, arn: str, *, deadline: Deadline) -> dict[str, str]:
    """The tags of the resource ``arn`` (every page)."""
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": arn}
    while True:
        page = read(sagemaker.list_tags, deadline=deadline, what=f"ListTags({arn})", **kwargs)
        tags.update(tag_dict(page.get("Tags")))
        token = page.get("NextToken")
        if not token:
            return tags
        kwargs["NextToken"] = token


def tags_or_empty(sagemaker: SageMakerClient, arn: str, *, deadline: Deadline) -> dict[str, str]:
    """The resource's tags; none for a resource deleted since it was listed (e.g. by a concurrent run).

    SageMaker answers ListTags on a deleted resource's ARN with a ValidationException (not always with a
    message); the ARN itself comes from a listing, so that error means "gone".
    """
    try:
        return list_tags(sagemaker, arn, deadline=deadline)
    except Exception as exc:
        if is_not_found(exc) or error_code(exc) == "ValidationException":
            return {}
        raise


def paginate(call: Any, key: str, *, deadline: Deadline, **kwargs: Any) -> list[dict[str, Any]]:
    """Every item under ``key`` of a List* call, page after page."""
    items: list[dict[str, Any]] = []
    while True:
        page = read(call, deadline=deadline, what=_what(call, kwargs), **kwargs)
        items += page.get(key, [])
        if not page.get("NextToken"):
            return items
        kwargs["NextToken"] = page["NextToken"]


def tagged_leftovers(
    sagemaker: SageMakerClient, endpoint_name: str, *, deadline: Deadline
) -> tuple[list[str], list[str]]:
    """Configs and models named like, and tagged for, this endpoint (whatever run created them)."""
    base = name_base(endpoint_name)

    def ours(items: list[dict[str, Any]], name_key: str, arn_key: str, kind: str) -> list[str]:
        return [
            item[name_key]
            for item in items
            if is_derived_name(endpoint_name, item[name_key], kind)
            and tags_or_empty(sagemaker, item[arn_key], deadline=deadline).get(TAG_ENDPOINT) == endpoint_name
        ]

    configs = paginate(
        sagemaker.list_endpoint_configs, "EndpointConfigs", deadline=deadline, NameContains=base
    )
    models = paginate(sagemaker.list_models, "Models", deadline=deadline, NameContains=base)
    return (
        ours(configs, "EndpointConfigName", "EndpointConfigArn", "c"),
        ours(models, "ModelName", "ModelArn", "m"),
    )
