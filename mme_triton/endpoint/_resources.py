"""Names and tags of the SageMaker resources the endpoint stage manages, and reading them back."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import is_not_found

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

TAG_MANAGED = "mme-triton:managed"
TAG_ENDPOINT = "mme-triton:endpoint"
TAG_CREATED_AT = "mme-triton:created-at"
TAG_PREFIX = "mme-triton:"

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
NAME_MAX = 63
_BASE_MAX = NAME_MAX - 10  # room for "-m" / "-c" and 8 hex digits


def describe_or_none(call: Any, **kwargs: Any) -> dict[str, Any] | None:
    """``call(**kwargs)`` (a Describe* call), or None when the resource does not exist."""
    try:
        result: dict[str, Any] = call(**kwargs)
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


def list_tags(sagemaker: SageMakerClient, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": arn}
    while True:
        page = sagemaker.list_tags(**kwargs)
        tags.update(tag_dict(page.get("Tags")))
        token = page.get("NextToken")
        if not token:
            return tags
        kwargs["NextToken"] = token
