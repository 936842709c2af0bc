"""parse_s3_url: what a ModelDataUrl prefix is (no S3 needed)."""

from __future__ import annotations

import pytest

from mme_triton.artifact.s3 import parse_s3_url

# --- parse_s3_url ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://my-bucket/mme/models/", ("my-bucket", "mme/models/")),
        ("s3://my-bucket/mme/models", ("my-bucket", "mme/models/")),
        ("s3://my-bucket", ("my-bucket", "")),
        ("s3://my-bucket/", ("my-bucket", "")),
        ("s3://my.bucket.v2/a", ("my.bucket.v2", "a/")),
    ],
    ids=["trailing-slash", "no-trailing-slash", "bucket-only", "bucket-root-slash", "dotted-bucket"],
)
def test_parse_s3_url_splits_bucket_and_prefix(url: str, expected: tuple[str, str]) -> None:
    assert parse_s3_url(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://my-bucket.s3.amazonaws.com/mme/", "is not an S3 URL"),
        ("my-bucket/mme/", "is not an S3 URL"),
        ("s3://", "is not a valid S3 bucket name"),
        ("s3://My_Bucket/mme/", "is not a valid S3 bucket name"),
        ("s3://ab/mme/", "is not a valid S3 bucket name"),
        ("s3://my-bucket//mme/", "empty path segment"),
        ("s3://my-bucket/mme//models/", "empty path segment"),
        ("s3://my-bucket/mme/resnet.tar.gz", "names an artifact"),
    ],
    ids=[
        "https",
        "no-scheme",
        "no-bucket",
        "bad-bucket",
        "short-bucket",
        "leading-empty",
        "inner-empty",
        "artifact",
    ],
)
def test_parse_s3_url_rejects_what_is_not_a_prefix(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_s3_url(url)
