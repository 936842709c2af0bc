"""Checks of ``deploy_mme``'s arguments, made before any AWS call (nothing is created when one fails)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.endpoint._resources import TAG_PREFIX
from mme_triton.endpoint.environment import (
    DEFAULT_ENVIRONMENT,
    INFERENCE_TYPE,
    TritonEnvironment,
    validate_environment,
)

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.artifact.package import Artifact

__all__ = [
    "check_kms_key",
    "check_role",
    "check_vpc",
    "environment_dict",
    "environment_warnings",
    "models_list",
    "normalise_tags",
    "region_of",
    "target_names",
]

_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-/]+$")
_KMS_KEY = re.compile(r"^[a-zA-Z0-9:/_-]+$")
_TAG_TEXT = re.compile(r"^[\w\s.:/=+\-@]*$")
_MAX_TAGS = 50


def check_role(role: str) -> None:
    if not isinstance(role, str):
        raise TypeError(f"role must be an IAM role ARN (str), got {type(role).__name__}")
    if not (20 <= len(role) <= 2048 and _ROLE_ARN.match(role)):
        raise ValueError(
            f"role {role!r} is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)"
        )


def normalise_tags(tags: Mapping[str, str] | Sequence[Mapping[str, str]] | None) -> dict[str, str]:
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        pairs = dict(tags)
    else:
        pairs = {}
        for tag in tags:
            if set(tag) != {"Key", "Value"}:
                raise ValueError(f"a tag must have exactly 'Key' and 'Value', got {dict(tag)!r}")
            pairs[tag["Key"]] = tag["Value"]
    for key, value in pairs.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"tag keys and values must be str, got {key!r}: {value!r}")
        if not 1 <= len(key) <= 128 or not _TAG_TEXT.match(key):
            raise ValueError(f"tag key {key!r}: 1-128 letters, digits, spaces and _.:/=+-@")
        if len(value) > 256 or not _TAG_TEXT.match(value):
            raise ValueError(f"tag value for {key!r}: at most 256 letters, digits, spaces and _.:/=+-@")
        if key.lower().startswith("aws:"):
            raise ValueError(f"tag key {key!r}: the aws: prefix is reserved")
        if key.startswith(TAG_PREFIX):
            raise ValueError(f"tag key {key!r}: the {TAG_PREFIX} prefix is reserved for this library")
    if len(pairs) + 3 > _MAX_TAGS:
        raise ValueError(f"at most {_MAX_TAGS - 3} tags (SageMaker allows {_MAX_TAGS}; 3 are this library's)")
    return pairs


def check_vpc(vpc_config: Mapping[str, Any] | None) -> dict[str, list[str]] | None:
    if vpc_config is None:
        return None
    groups = list(vpc_config.get("SecurityGroupIds", []))
    subnets = list(vpc_config.get("Subnets", []))
    if set(vpc_config) - {"SecurityGroupIds", "Subnets"}:
        raise ValueError(f"vpc_config takes SecurityGroupIds and Subnets only, got {sorted(vpc_config)}")
    if not 1 <= len(groups) <= 5 or not all(isinstance(g, str) and g.startswith("sg-") for g in groups):
        raise ValueError("vpc_config['SecurityGroupIds'] must list 1-5 security group ids (sg-...)")
    if not 1 <= len(subnets) <= 16 or not all(
        isinstance(s, str) and s.startswith("subnet-") for s in subnets
    ):
        raise ValueError("vpc_config['Subnets'] must list 1-16 subnet ids (subnet-...)")
    return {"SecurityGroupIds": groups, "Subnets": subnets}


def environment_dict(
    environment: TritonEnvironment | Mapping[str, str | None] | None,
    *,
    multi_model: bool = True,
) -> dict[str, str]:
    """The model's Environment: ``environment`` over :data:`DEFAULT_ENVIRONMENT`, validated (for a
    multi-model container, or with ``multi_model=False`` for a single-model one).

    A mapping value of None removes the variable, a default included (the container's own default then
    applies); a :class:`TritonEnvironment` field left at None keeps the default.
    """
    if environment is None:
        given: dict[str, str | None] = {}
    elif isinstance(environment, TritonEnvironment):
        given = dict(environment.to_environment(multi_model=multi_model))
    elif isinstance(environment, Mapping):
        given = dict(environment)
    else:
        raise TypeError(
            f"environment must be a TritonEnvironment or a mapping, got {type(environment).__name__}"
        )
    removed = {key for key, value in given.items() if value is None}
    merged: dict[str, str] = {k: v for k, v in DEFAULT_ENVIRONMENT.items() if k not in removed}
    merged.update({key: value for key, value in given.items() if value is not None})
    return validate_environment(merged, multi_model=multi_model)


def environment_warnings(environment: Mapping[str, str]) -> list[str]:
    """Settings of a multi-model endpoint's Environment that will not do what they seem to."""
    found = []
    if INFERENCE_TYPE in environment:
        found.append(
            f"{INFERENCE_TYPE} acts only on a single-model endpoint's /invocations route; a multi-model "
            "endpoint's requests go to /models/<name>/invoke, which ignores it (Triton's "
            "sagemaker_server.cc)"
        )
    return found


def target_names(models: Iterable[str | os.PathLike[str] | Artifact]) -> list[str]:
    """The TargetModel names the given models will get by default (to catch duplicates early)."""
    names = []
    for item in models:
        if isinstance(item, str | os.PathLike):
            names.append(f"{Path(item).name}.tar.gz")
        else:
            names.append(str(item.name))
    return names


def models_list(
    models: str | os.PathLike[str] | Artifact | Iterable[str | os.PathLike[str] | Artifact],
) -> list[str | os.PathLike[str] | Artifact]:
    from mme_triton.artifact.package import Artifact

    if isinstance(models, str | os.PathLike | Artifact):
        return [models]
    return list(models)


def region_of(sagemaker: SageMakerClient, region: str | None) -> str:
    resolved = region or getattr(getattr(sagemaker, "meta", None), "region_name", None)
    if not resolved:
        raise ValueError("no AWS region: pass region= or a boto3 session/client with a region")
    return str(resolved)


def check_kms_key(kms_key_id: str | None) -> None:
    if kms_key_id is not None and (len(kms_key_id) > 2048 or not _KMS_KEY.match(kms_key_id)):
        raise ValueError(f"kms_key_id {kms_key_id!r} is not a KMS key id, ARN or alias")
