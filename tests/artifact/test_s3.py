"""upload_models / list_models / remove_model against moto's S3 server."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from mme_triton.artifact.package import package_model
from mme_triton.artifact.s3 import (
    CONTENT_DIGEST_METADATA,
    SHA256_METADATA,
    list_models,
    remove_model,
    upload_models,
)
from mme_triton.errors import ArtifactConflictError, ArtifactError, ModelValidationError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.moto


def keys(s3: S3Client, bucket: str) -> list[str]:
    return [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


# --- upload_models ---------------------------------------------------------------------------------


def test_upload_models_uploads_a_directory_with_digests(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    [uploaded] = upload_models(repo / "scale", url, s3_client=s3)

    assert (uploaded.name, uploaded.status) == ("scale.tar.gz", "uploaded")
    assert uploaded.url == f"s3://{bucket}/mme/models/scale.tar.gz"
    head = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz", ChecksumMode="ENABLED")
    body = s3.get_object(Bucket=bucket, Key="mme/models/scale.tar.gz")["Body"].read()
    assert hashlib.sha256(body).hexdigest() == uploaded.sha256
    assert len(body) == uploaded.size
    assert head["Metadata"] == {
        CONTENT_DIGEST_METADATA: uploaded.content_digest,
        SHA256_METADATA: uploaded.sha256,
    }
    assert head["ChecksumSHA256"] == base64.b64encode(bytes.fromhex(uploaded.sha256)).decode()
    assert not uploaded.path.exists(), "the temporary archive is removed after the upload"


def test_upload_models_skips_an_object_with_the_same_content(
    repo: Path, s3: S3Client, bucket: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    [first] = upload_models(repo / "scale", url, s3_client=s3)
    before = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz")
    os.utime(repo / "scale" / "config.pbtxt", (1_000_000_000, 1_000_000_000))

    [second] = upload_models(repo / "scale", url, s3_client=s3)

    after = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz")
    assert second.status == "unchanged"
    assert second.content_digest == first.content_digest
    assert (after["ETag"], after["LastModified"]) == (before["ETag"], before["LastModified"])
    assert any("not uploading it again" in record.getMessage() for record in caplog.records)


def test_upload_models_same_content_another_compressor_is_unchanged(
    repo: Path, s3: S3Client, bucket: str, url: str, tmp_path: Path
) -> None:
    [first] = upload_models(repo / "scale", url, s3_client=s3)
    recompressed = package_model(repo / "scale", tmp_path / "build", compresslevel=9)
    assert recompressed.sha256 != first.sha256  # other archive bytes ...

    [second] = upload_models(recompressed, url, s3_client=s3)

    assert second.status == "unchanged"  # ... same content: nothing sent
    head = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz")
    assert head["Metadata"][SHA256_METADATA] == first.sha256


def test_upload_models_refuses_to_replace_different_content(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    [first] = upload_models(repo / "scale", url, s3_client=s3)
    (repo / "scale" / "1" / "weights.bin").write_bytes(os.urandom(10_000))

    with pytest.raises(ArtifactConflictError) as raised:
        upload_models(repo / "scale", url, s3_client=s3)

    error = raised.value
    assert error.url == f"s3://{bucket}/mme/models/scale.tar.gz"
    assert error.existing_digest == first.content_digest
    assert error.new_digest not in (None, first.content_digest)
    assert "versioned=True" in str(error)
    head = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz")
    assert head["Metadata"][CONTENT_DIGEST_METADATA] == first.content_digest


def test_upload_models_refuses_an_object_without_a_content_digest(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    s3.put_object(Bucket=bucket, Key="mme/models/scale.tar.gz", Body=b"uploaded by something else")

    with pytest.raises(ArtifactConflictError) as raised:
        upload_models(repo / "scale", url, s3_client=s3)

    assert raised.value.existing_digest is None
    body = s3.get_object(Bucket=bucket, Key="mme/models/scale.tar.gz")["Body"].read()
    assert body == b"uploaded by something else"


def test_upload_models_overwrite_replaces_different_content(
    repo: Path, s3: S3Client, bucket: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    upload_models(repo / "scale", url, s3_client=s3)
    (repo / "scale" / "1" / "weights.bin").write_bytes(os.urandom(10_000))

    [replaced] = upload_models(repo / "scale", url, s3_client=s3, overwrite=True)

    assert replaced.status == "replaced"
    head = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz")
    assert head["Metadata"][CONTENT_DIGEST_METADATA] == replaced.content_digest
    assert any(record.levelno == logging.WARNING for record in caplog.records)


def test_upload_models_versioned_names_keep_both_versions(repo: Path, s3: S3Client, url: str) -> None:
    [first] = upload_models(repo / "scale", url, s3_client=s3, versioned=True)
    (repo / "scale" / "1" / "weights.bin").write_bytes(os.urandom(10_000))
    [second] = upload_models(repo / "scale", url, s3_client=s3, versioned=True)

    assert first.name == f"scale-{first.content_digest.removeprefix('sha256:')[:12]}.tar.gz"
    assert second.name != first.name
    assert (first.status, second.status) == ("uploaded", "uploaded")
    assert list_models(url, s3_client=s3) == sorted([first.name, second.name])


def test_upload_models_uploads_an_artifact_and_keeps_its_file(
    repo: Path, s3: S3Client, bucket: str, url: str, tmp_path: Path
) -> None:
    artifact = package_model(repo / "offset", tmp_path / "build", name="offset-v3.tar.gz")

    [uploaded] = upload_models([artifact], url, s3_client=s3)

    assert uploaded.name == "offset-v3.tar.gz"
    assert uploaded.path == artifact.path
    assert artifact.path.is_file()
    assert keys(s3, bucket) == ["mme/models/offset-v3.tar.gz"]


def test_upload_models_refuses_an_artifact_whose_file_changed(
    repo: Path, s3: S3Client, bucket: str, url: str, tmp_path: Path
) -> None:
    artifact = package_model(repo / "offset", tmp_path / "build")
    with open(artifact.path, "ab") as file:
        file.write(b"appended")

    with pytest.raises(ArtifactError, match="changed"):
        upload_models(artifact, url, s3_client=s3)

    assert keys(s3, bucket) == []


def test_upload_models_keeps_archives_in_workdir(repo: Path, s3: S3Client, url: str, tmp_path: Path) -> None:
    uploaded = upload_models([repo / "scale", repo / "offset"], url, s3_client=s3, workdir=tmp_path / "work")

    assert [artifact.path for artifact in uploaded] == [
        tmp_path / "work" / "scale.tar.gz",
        tmp_path / "work" / "offset.tar.gz",
    ]
    assert all(artifact.path.is_file() for artifact in uploaded)


def test_upload_models_validates_every_model_before_uploading(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    with pytest.raises(ModelValidationError):
        upload_models([repo / "scale", repo / "broken"], url, s3_client=s3)

    assert keys(s3, bucket) == []


def test_upload_models_refuses_two_models_under_one_name(
    repo: Path, s3: S3Client, bucket: str, url: str, tmp_path: Path
) -> None:
    artifact = package_model(repo / "scale", tmp_path / "build")

    with pytest.raises(ValueError, match=re.escape("scale.tar.gz")):
        upload_models([repo / "scale", artifact], url, s3_client=s3)

    assert keys(s3, bucket) == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"kms_key_id": "arn:aws:kms:us-east-1:123456789012:key/1234abcd"}, "aws:kms"),
        ({"kms_key_id": "alias/models", "sse": "aws:kms"}, "aws:kms"),
        ({"sse": "AES256"}, "AES256"),
    ],
    ids=["kms-key-arn", "kms-alias", "aes256"],
)
def test_upload_models_passes_server_side_encryption(
    repo: Path, s3: S3Client, bucket: str, url: str, options: dict[str, str], expected: str
) -> None:
    upload_models(repo / "offset", url, s3_client=s3, **options)  # type: ignore[arg-type]

    head = s3.head_object(Bucket=bucket, Key="mme/models/offset.tar.gz")
    assert head["ServerSideEncryption"] == expected
    assert head.get("SSEKMSKeyId") == options.get("kms_key_id")


@pytest.mark.parametrize(
    "options",
    [{"sse": "aws:kms:other"}, {"kms_key_id": "alias/models", "sse": "AES256"}, {"kms_key_id": ""}],
    ids=["unknown-sse", "kms-key-with-aes256", "empty-kms-key"],
)
def test_upload_models_rejects_bad_encryption_options(
    repo: Path, s3: S3Client, url: str, options: dict[str, str]
) -> None:
    with pytest.raises(ValueError, match=r"sse must be one of|kms_key_id"):
        upload_models(repo / "offset", url, s3_client=s3, **options)  # type: ignore[arg-type]


def test_upload_models_multipart_upload_reports_progress(
    repo: Path, s3: S3Client, bucket: str, url: str, tmp_path: Path
) -> None:
    (repo / "scale" / "1" / "weights.bin").write_bytes(os.urandom(12 << 20))
    calls: list[tuple[str, str, int, int]] = []

    [uploaded] = upload_models(
        repo / "scale",
        url,
        s3_client=s3,
        multipart_threshold=5 << 20,
        multipart_chunksize=5 << 20,
        max_concurrency=2,
        progress=lambda stage, name, done, total: calls.append((stage, name, done, total)),
        workdir=tmp_path / "work",
    )

    head = s3.head_object(Bucket=bucket, Key="mme/models/scale.tar.gz", ChecksumMode="ENABLED")
    assert head["ETag"].strip('"').endswith("-3"), "three parts"
    assert head.get("ChecksumSHA256")
    body = s3.get_object(Bucket=bucket, Key="mme/models/scale.tar.gz")["Body"].read()
    assert body == uploaded.path.read_bytes()
    package_calls = [call for call in calls if call[0] == "package"]
    upload_calls = [call for call in calls if call[0] == "upload"]
    assert package_calls[-1][1:] == ("scale", package_calls[-1][3], package_calls[-1][3])
    assert upload_calls[0] == ("upload", "scale.tar.gz", 0, uploaded.size)
    assert upload_calls[-1] == ("upload", "scale.tar.gz", uploaded.size, uploaded.size)
    assert [call[2] for call in upload_calls] == sorted(call[2] for call in upload_calls)


def test_upload_models_failed_multipart_upload_leaves_nothing(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    (repo / "scale" / "1" / "weights.bin").write_bytes(os.urandom(12 << 20))

    def progress(stage: str, name: str, done: int, total: int) -> None:
        if stage == "upload" and done > 6 << 20:
            raise RuntimeError("connection lost")

    with pytest.raises(RuntimeError, match="connection lost"):
        upload_models(
            repo / "scale",
            url,
            s3_client=s3,
            multipart_threshold=5 << 20,
            multipart_chunksize=5 << 20,
            max_concurrency=1,
            progress=progress,
        )

    assert keys(s3, bucket) == []
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_upload_models_missing_bucket_is_an_artifact_error(repo: Path, s3: S3Client) -> None:
    with pytest.raises(ArtifactError, match="does-not-exist"):
        upload_models(repo / "offset", "s3://does-not-exist-bucket/mme/", s3_client=s3)


def test_upload_models_uses_boto3_session_when_no_client_is_given(
    repo: Path,
    session: boto3.session.Session,
    s3: S3Client,
    bucket: str,
    url: str,
    moto_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_url)

    [uploaded] = upload_models(repo / "offset", url, boto3_session=session)

    assert uploaded.status == "uploaded"
    assert keys(s3, bucket) == ["mme/models/offset.tar.gz"]


def test_upload_models_s3_client_wins_over_boto3_session(
    repo: Path, s3: S3Client, bucket: str, url: str
) -> None:
    unusable = boto3.session.Session(
        aws_access_key_id="x", aws_secret_access_key="x", region_name="eu-west-3"
    )

    upload_models(repo / "offset", url, s3_client=s3, boto3_session=unusable)

    assert keys(s3, bucket) == ["mme/models/offset.tar.gz"]


# --- list_models / remove_model --------------------------------------------------------------------


def test_list_models_lists_artifacts_directly_under_the_prefix(s3: S3Client, bucket: str) -> None:
    for key in [
        "mme/b.tar.gz",
        "mme/a.tar.gz",
        "mme/notes.txt",
        "mme/.tar.gz",
        "mme/archive/old.tar.gz",
        "mme-other/c.tar.gz",
        "top.tar.gz",
    ]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")

    assert list_models(f"s3://{bucket}/mme", s3_client=s3) == ["a.tar.gz", "b.tar.gz"]
    assert list_models(f"s3://{bucket}/mme/", s3_client=s3) == ["a.tar.gz", "b.tar.gz"]
    assert list_models(f"s3://{bucket}", s3_client=s3) == ["top.tar.gz"]
    assert list_models(f"s3://{bucket}/empty/", s3_client=s3) == []


@pytest.mark.slow
def test_list_models_reads_every_page(s3: S3Client, bucket: str) -> None:
    names = [f"model-{index:04d}.tar.gz" for index in range(1001)]  # one more than a ListObjectsV2 page
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda name: s3.put_object(Bucket=bucket, Key=f"mme/{name}", Body=b""), names))

    assert list_models(f"s3://{bucket}/mme/", s3_client=s3) == names


def test_list_models_missing_bucket_is_an_artifact_error(s3: S3Client) -> None:
    with pytest.raises(ArtifactError):
        list_models("s3://does-not-exist-bucket/mme/", s3_client=s3)


def test_remove_model_deletes_once(repo: Path, s3: S3Client, bucket: str, url: str) -> None:
    upload_models([repo / "scale", repo / "offset"], url, s3_client=s3)

    assert remove_model(url, "scale.tar.gz", s3_client=s3) is True
    assert remove_model(url, "scale.tar.gz", s3_client=s3) is False
    assert list_models(url, s3_client=s3) == ["offset.tar.gz"]


@pytest.mark.parametrize("name", ["scale", "sub/scale.tar.gz", ""], ids=["no-suffix", "slash", "empty"])
def test_remove_model_rejects_a_bad_name(s3: S3Client, url: str, name: str) -> None:
    with pytest.raises(ValueError, match=r"not a valid TargetModel|one object directly under the prefix"):
        remove_model(url, name, s3_client=s3)
