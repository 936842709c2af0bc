"""Updating a step of an ensemble: upload_models names the ensembles under the prefix that embed an older copy
of the model, and update_ensembles=True repackages them from the repository as new versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mme_triton import ArtifactError, MMETritonWarning, package_model, upload_models
from mme_triton.artifact._ensembles import ENSEMBLE_METADATA, EnsembleObject, stale_ensembles

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.moto


def _new_weights(repo: Path, step: str, payload: bytes) -> None:
    (repo / step / "1" / "weights.bin").write_bytes(payload)


def test_upload_models_records_the_steps_of_an_ensemble(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    [pipeline, scale] = upload_models([repo / "pipeline", repo / "scale"], url, s3_client=s3)

    head = s3.head_object(Bucket=bucket, Key="mme/models/pipeline.tar.gz")
    recorded = json.loads(head["Metadata"][ENSEMBLE_METADATA])
    assert recorded["model"] == "pipeline"
    assert recorded["steps"] == {
        name: pipeline.member_digests[name].removeprefix("sha256:")[:16] for name in ("offset", "scale")
    }
    # a step's digest inside the ensemble is the digest of the step packaged on its own
    assert pipeline.member_digests["scale"] == scale.content_digest
    assert ENSEMBLE_METADATA not in s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz")["Metadata"]


def test_upload_models_names_ensembles_that_embed_an_older_copy(repo: Path, s3: S3Client, url: str) -> None:
    upload_models([repo / "pipeline", repo / "scale"], url, s3_client=s3)
    _new_weights(repo, "scale", b"version 2")

    with pytest.warns(MMETritonWarning) as caught:
        [scale] = upload_models(repo / "scale", url, s3_client=s3, versioned=True)

    assert scale.stale_ensembles == ("pipeline.tar.gz",)
    [message] = [str(w.message) for w in caught]
    assert message == (
        f"pipeline.tar.gz under {url} is an ensemble that embeds an older copy of scale: its TargetModel "
        "keeps serving the old one; upload_models(..., update_ensembles=True) repackages it as a new version"
    )


def test_upload_models_without_check_ensembles_does_not_look_for_them(
    repo: Path, s3: S3Client, url: str
) -> None:
    upload_models([repo / "pipeline", repo / "scale"], url, s3_client=s3)
    _new_weights(repo, "scale", b"version 2")
    listed: list[str] = []
    s3.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: listed.append("list"))

    [scale] = upload_models(repo / "scale", url, s3_client=s3, versioned=True, check_ensembles=False)

    assert (scale.status, scale.stale_ensembles, listed) == ("uploaded", (), [])
    with pytest.raises(ValueError, match="update_ensembles=True needs check_ensembles=True"):
        upload_models(repo / "scale", url, s3_client=s3, update_ensembles=True, check_ensembles=False)


def test_upload_models_update_ensembles_uploads_a_new_version(repo: Path, s3: S3Client, url: str) -> None:
    upload_models([repo / "pipeline", repo / "scale"], url, s3_client=s3)
    _new_weights(repo, "scale", b"version 2")

    [scale, pipeline] = upload_models(
        repo / "scale", url, s3_client=s3, versioned=True, update_ensembles=True
    )

    assert scale.stale_ensembles == ()
    assert pipeline.supersedes == "pipeline.tar.gz"
    assert pipeline.name.startswith("pipeline-") and pipeline.status == "uploaded"
    assert pipeline.member_digests["scale"] == scale.content_digest
    # nothing is stale any more: the older ensemble artifact stays, its newer version embeds the new copy
    again = upload_models(repo / "scale", url, s3_client=s3, versioned=True)
    assert [(a.name, a.status, a.stale_ensembles) for a in again] == [(scale.name, "unchanged", ())]


def test_upload_models_update_ensembles_without_a_repository_says_so(
    repo: Path, s3: S3Client, url: str, tmp_path: Path
) -> None:
    upload_models([repo / "pipeline", repo / "scale"], url, s3_client=s3)
    _new_weights(repo, "scale", b"version 2")
    artifact = package_model(repo / "scale", tmp_path / "built", versioned=True)

    with pytest.warns(MMETritonWarning, match="no repository to repackage pipeline from"):
        [scale] = upload_models(artifact, url, s3_client=s3, update_ensembles=True)
    assert scale.stale_ensembles == ("pipeline.tar.gz",)


def test_upload_models_ignores_steps_ensembles_do_not_embed(repo: Path, s3: S3Client, url: str) -> None:
    upload_models([repo / "pipeline", repo / "stray"], url, s3_client=s3)
    _new_weights(repo, "stray", b"version 2")

    [stray] = upload_models(repo / "stray", url, s3_client=s3, versioned=True)

    assert stray.stale_ensembles == ()


def _object(name: str, model: str, step_digest: str, minute: int) -> EnsembleObject:
    from datetime import datetime, timezone

    stamp = datetime(2026, 1, 1, 0, minute, tzinfo=timezone.utc)
    return EnsembleObject(name, model, {"scale": step_digest}, stamp)


def test_stale_ensembles_reports_an_ensemble_only_without_a_current_artifact() -> None:
    current = "sha256:" + "a" * 64
    objects = [
        _object("pipeline.tar.gz", "pipeline", "b" * 16, 1),
        _object("pipeline-1.tar.gz", "pipeline", "c" * 16, 2),
        _object("other.tar.gz", "other", "a" * 16, 1),
        _object("other-0.tar.gz", "other", "b" * 16, 0),
    ]

    [stale] = stale_ensembles(objects, "scale", current)

    assert (stale.ensemble, stale.step, stale.target_models) == (
        "pipeline",
        "scale",
        ("pipeline-1.tar.gz", "pipeline.tar.gz"),
    )


def test_ensemble_metadata_is_left_out_when_it_does_not_fit(tmp_path: Path) -> None:
    """S3 keeps 2 KB of user metadata per object: an ensemble of very many steps is uploaded without its
    step digests (and its steps' updates cannot find it), rather than refused."""
    from mme_triton.artifact._ensembles import ensemble_metadata
    from mme_triton.artifact.package import Artifact

    def artifact(steps: int) -> Artifact:
        digests = {f"step_{i:03d}": "sha256:" + "ab" * 32 for i in range(steps)}
        return Artifact(
            tmp_path / "e.tar.gz",
            "e.tar.gz",
            "0" * 64,
            1,
            "sha256:" + "0" * 64,
            "e",
            tuple(digests),
            member_digests={"e": "sha256:" + "0" * 64, **digests},
        )

    assert json.loads(ensemble_metadata(artifact(20))[ENSEMBLE_METADATA])["steps"]["step_000"] == "ab" * 8
    assert ensemble_metadata(artifact(200)) == {}


def _deny_listing(s3: S3Client) -> None:
    """S3 answers ListObjectsV2 with AccessDenied, as for a role that may write the prefix but not list it."""
    from botocore.exceptions import ClientError

    def deny(**_: object) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")

    s3.meta.events.register("before-call.s3.ListObjectsV2", deny)


def test_upload_models_uploads_even_when_the_prefix_cannot_be_listed(
    repo: Path, s3: S3Client, bucket: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _deny_listing(s3)

    [scale] = upload_models(repo / "scale", url, s3_client=s3)

    assert scale.status == "uploaded" and scale.stale_ensembles == ()
    assert any("could not look for ensembles" in r.getMessage() for r in caplog.records)
    with pytest.raises(ArtifactError, match="cannot read the artifacts under"):
        upload_models(repo / "scale", url, s3_client=s3, update_ensembles=True)
