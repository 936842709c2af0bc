"""Ensembles that carry copies: which artifacts under a prefix embed an older copy of a model just uploaded.

An ensemble's archive holds its own copy of every step (the SageMaker front-end loads the ensemble and its
steps from the one archive), so uploading a new version of a step leaves every ensemble artifact serving
the copy it was packaged with. Each ensemble artifact the library uploads records its steps' content
digests as the user metadata ``mme-triton-ensemble`` (``{"model": "pipeline", "steps": {"linear":
"<16 hex>", ...}}``; a step's digest is the digest of the step packaged on its own, see
:attr:`~mme_triton.artifact.package.Artifact.member_digests`). :func:`stale_ensembles` reads it back and
names, for a model, the ensembles none of whose artifacts embeds its current copy.

Models are told apart by directory name, as the ensemble's ``ensemble_scheduling`` names its steps.
Artifacts uploaded without the metadata (by another tool, or too many steps for S3's 2 KB of user
metadata) are not seen, and the log says how many were skipped.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.errors import MMETritonWarning

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from mme_triton.artifact.package import Artifact
    from mme_triton.artifact.s3 import UploadedArtifact

__all__ = [
    "ENSEMBLE_METADATA",
    "EnsembleObject",
    "StaleEnsemble",
    "ensemble_metadata",
    "ensemble_object",
    "ensemble_objects",
    "follow_ensembles",
    "stale_ensembles",
]

logger = logging.getLogger(__name__)

ENSEMBLE_METADATA = "mme-triton-ensemble"
_DIGEST_HEX = 16
# S3 allows 2 KB of user metadata per object (keys and values); the other two entries take about 170.
_METADATA_BUDGET = 1600
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _short(digest: str) -> str:
    return digest.removeprefix("sha256:")[:_DIGEST_HEX]


def ensemble_metadata(artifact: Artifact) -> dict[str, str]:
    """The ``mme-triton-ensemble`` metadata of an ensemble's artifact; ``{}`` for a single model (or when
    the steps do not fit S3's metadata limit, which is logged)."""
    steps = {name: _short(digest) for name, digest in artifact.member_digests.items()}
    steps.pop(artifact.model_name, None)
    if not steps:
        return {}
    value = json.dumps({"model": artifact.model_name, "steps": steps}, separators=(",", ":"), sort_keys=True)
    if len(value) > _METADATA_BUDGET:
        logger.info(
            "%s: its %d steps do not fit in S3's user metadata; updates of its steps will not find it",
            artifact.name,
            len(steps),
        )
        return {}
    return {ENSEMBLE_METADATA: value}


@dataclass(frozen=True)
class EnsembleObject:
    """An ensemble's artifact under the prefix, as its metadata describes it."""

    name: str
    """Its TargetModel."""
    model: str
    """The ensemble's directory name."""
    steps: Mapping[str, str]
    """Step directory name -> the first 16 hex digits of its content digest."""
    last_modified: datetime


@dataclass(frozen=True)
class StaleEnsemble:
    """An ensemble none of whose artifacts under the prefix embeds the current copy of ``step``."""

    ensemble: str
    """The ensemble's directory name."""
    step: str
    """The model it embeds an older copy of."""
    target_models: tuple[str, ...]
    """Its artifacts under the prefix, newest first."""


def ensemble_object(name: str, head: Mapping[str, Any]) -> EnsembleObject | None:
    """The ensemble an archive's HeadObject answer describes (its ``mme-triton-ensemble`` metadata); None
    for a single model's archive, or one this library did not upload."""
    raw = head.get("Metadata", {}).get(ENSEMBLE_METADATA)
    if not raw:
        return None
    try:
        document = json.loads(raw)
        model, steps = document["model"], document["steps"]
        if not isinstance(model, str) or not isinstance(steps, dict):
            raise TypeError(model)
    except (ValueError, KeyError, TypeError):
        logger.info("%s: unreadable %s metadata %r; left out", name, ENSEMBLE_METADATA, raw[:80])
        return None
    stamp = head.get("LastModified")
    return EnsembleObject(
        name=name,
        model=model,
        steps={str(k): str(v) for k, v in steps.items()},
        last_modified=stamp if isinstance(stamp, datetime) else _EPOCH,
    )


def ensemble_objects(
    client: S3Client, bucket: str, prefix: str, *, suffix: str, workers: int = 8
) -> list[EnsembleObject]:
    """The ensemble artifacts directly under ``s3://bucket/prefix`` (one HeadObject per archive, run
    ``workers`` at a time).

    Raises:
        botocore's ClientError / BotoCoreError: S3 refused the listing or a HeadObject.
    """
    names: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        for item in page.get("Contents", []):
            name = item["Key"][len(prefix) :]
            if name.endswith(suffix) and len(name) > len(suffix):
                names.append(name)
    if not names:
        return []

    def head(name: str) -> EnsembleObject | None:
        return ensemble_object(name, client.head_object(Bucket=bucket, Key=prefix + name))

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        found = [obj for obj in pool.map(head, names) if obj is not None]
    logger.info(
        "s3://%s/%s: %d of %d artifacts are ensembles with recorded steps",
        bucket,
        prefix,
        len(found),
        len(names),
    )
    return found


def stale_ensembles(objects: Iterable[EnsembleObject], step: str, digest: str) -> list[StaleEnsemble]:
    """The ensembles (by directory name) that embed ``step`` and of which no artifact embeds the copy whose
    content digest is ``digest``; each with its artifacts, newest first. Older artifacts of an ensemble
    that also has a current one are not reported: keeping them is what versioned names are for."""
    groups: dict[str, list[EnsembleObject]] = {}
    for obj in objects:
        if obj.model != step and step in obj.steps:
            groups.setdefault(obj.model, []).append(obj)
    wanted = _short(digest)
    stale: list[StaleEnsemble] = []
    for ensemble, members in sorted(groups.items()):
        if any(obj.steps[step] == wanted for obj in members):
            continue
        members.sort(key=lambda obj: (obj.last_modified, obj.name), reverse=True)
        stale.append(StaleEnsemble(ensemble, step, tuple(obj.name for obj in members)))
    return stale


def follow_ensembles(
    results: list[UploadedArtifact],
    repositories: Mapping[str, Path | None],
    objects: Callable[[], list[EnsembleObject]],
    *,
    update: bool,
    republish: Callable[[Path], UploadedArtifact],
    where: str,
) -> list[UploadedArtifact]:
    """Say which ensembles under the prefix embed an older copy of each uploaded model, and with ``update``
    repackage them from the model's repository and upload them as new versions.

    ``repositories`` maps an uploaded artifact's name to the repository its model came from (``None`` for
    an :class:`~mme_triton.artifact.package.Artifact` given as it is, whose ensembles cannot be
    repackaged); ``republish`` packages an ensemble directory under a versioned name and uploads it.
    Returns ``results`` with ``stale_ensembles`` filled in, then the republished ensembles (each with
    ``supersedes``).
    """
    if not results:
        return results
    found = objects()
    done: dict[str, UploadedArtifact] = {}
    updated: list[UploadedArtifact] = []
    out: list[UploadedArtifact] = []
    for result in results:
        digest = result.member_digests.get(result.model_name, result.content_digest)
        stale = [s for s in stale_ensembles(found, result.model_name, digest) if s.ensemble not in done]
        left: list[str] = []
        for item in stale:
            repository = repositories.get(result.name)
            source = None if repository is None else repository / item.ensemble
            if update and source is not None and source.is_dir():
                fresh = replace(republish(source), supersedes=item.target_models[0])
                done[item.ensemble] = fresh
                updated.append(fresh)
                logger.info(
                    "%s embedded an older copy of %s: uploaded %s from %s",
                    item.target_models[0],
                    item.step,
                    fresh.name,
                    source,
                )
                continue
            left.extend(item.target_models[:1])
            if not update:
                why = "; upload_models(..., update_ensembles=True) repackages it as a new version"
            elif repository is None:
                why = (
                    f"; {result.name} was given packaged, there is no repository to repackage "
                    f"{item.ensemble} from: upload the model's directory"
                )
            else:
                why = f"; there is no {item.ensemble}/ beside it in {repository} to repackage"
            message = (
                f"{item.target_models[0]} under {where} is an ensemble that embeds an older copy of "
                f"{item.step}: its TargetModel keeps serving the old one{why}"
            )
            logger.warning("%s", message)
            warnings.warn(message, MMETritonWarning, stacklevel=3)
        out.append(replace(result, stale_ensembles=tuple(left)))
    return out + updated
