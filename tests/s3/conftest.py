"""moto's S3 server on 127.0.0.1 (one per test module), real boto3 clients, a fresh bucket per test, and
a small model repository of Python-backend models."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PYTHON_CONFIG = """\
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] }} ]
"""

MODEL_PY = """\
class TritonPythonModel:
    def execute(self, requests):
        raise NotImplementedError
"""


@pytest.fixture
def session() -> boto3.session.Session:
    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


@pytest.fixture
def s3(moto_url: str, session: boto3.session.Session) -> S3Client:
    return session.client("s3", endpoint_url=moto_url, config=Config(s3={"addressing_style": "path"}))


@pytest.fixture
def bucket(s3: S3Client) -> str:
    name = f"models-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def url(bucket: str) -> str:
    return f"s3://{bucket}/mme/models/"


def write_python_model(repo: Path, name: str, weights: bytes = b"") -> Path:
    model = repo / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(PYTHON_CONFIG.format(name=name))
    (model / "1" / "model.py").write_text(MODEL_PY)
    if weights:
        (model / "1" / "weights.bin").write_bytes(weights)
    return model


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "model_repository"
    write_python_model(repo, "scale", os.urandom(10_000))
    write_python_model(repo, "offset", os.urandom(5_000))
    broken = write_python_model(repo, "broken")
    (broken / "config.pbtxt").write_text('name: "broken"\nbackend: "python"\ninput [ { name: "X" \n')
    return repo
