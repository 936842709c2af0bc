"""Fixtures of the artifact tests: model repositories written into tmp_path (Python-backend models only,
so the tests need no ONNX and run in the core test run), and moto's S3 server with real boto3 clients and
a fresh bucket per test.

``repo`` holds:
    scale/      python backend, with an executable script, a nested data directory and junk
    offset/     python backend
    pipeline/   ensemble: scale -> offset
    stray/      python backend that nothing references (must never appear in the pipeline's archive)
    broken/     config.pbtxt with a syntax error
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_s3 import S3Client

PYTHON_CONFIG = """\
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] }} ]
"""

MODEL_PY = """\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 2)
                ]
            )
            for r in requests
        ]
"""

ENSEMBLE_CONFIG = """\
name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "scale"
      model_version: -1
      input_map { key: "INPUT0" value: "INPUT0" }
      output_map { key: "OUTPUT0" value: "scaled" }
    },
    {
      model_name: "offset"
      model_version: -1
      input_map { key: "INPUT0" value: "scaled" }
      output_map { key: "OUTPUT0" value: "OUTPUT0" }
    }
  ]
}
"""


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
    scale = write_python_model(repo, "scale")
    (scale / "1" / "weights.bin").write_bytes(os.urandom(300_000))
    (scale / "1" / "data" / "nested").mkdir(parents=True)
    (scale / "1" / "data" / "nested" / "vocab.txt").write_text("a\nb\nc\n")
    (scale / "1" / "data" / "empty.bin").write_bytes(b"")
    script = scale / "1" / "prepare.sh"
    script.write_text("#!/bin/sh\necho ready\n")
    script.chmod(0o750)
    (scale / "__pycache__").mkdir()
    (scale / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\x00" * 64)
    (scale / ".DS_Store").write_bytes(b"\x00" * 16)
    (scale / "1" / ".ipynb_checkpoints").mkdir()
    (scale / "1" / ".ipynb_checkpoints" / "model-checkpoint.py").write_text(MODEL_PY)

    write_python_model(repo, "offset")
    write_python_model(repo, "stray")

    pipeline = repo / "pipeline"
    (pipeline / "1").mkdir(parents=True)
    (pipeline / "config.pbtxt").write_text(ENSEMBLE_CONFIG)

    broken = write_python_model(repo, "broken")
    (broken / "config.pbtxt").write_text('name: "broken"\nbackend: "python"\ninput [ { name: "X" \n')
    return repo


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "out"


@pytest.fixture
def session() -> boto3.session.Session:
    import boto3

    return boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )


@pytest.fixture
def s3(moto_url: str, session: boto3.session.Session) -> S3Client:
    from botocore.config import Config

    return session.client("s3", endpoint_url=moto_url, config=Config(s3={"addressing_style": "path"}))


@pytest.fixture
def bucket(s3: S3Client) -> str:
    name = f"models-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def url(bucket: str) -> str:
    return f"s3://{bucket}/mme/models/"
