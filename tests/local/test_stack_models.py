"""What users bring, on the stack: names other tools upload, backends the stack lacks, broken models, and
the InvokeEndpoint route boto3 reaches."""

from __future__ import annotations

import http.client
import io
import json
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from botocore.exceptions import ClientError

import mme_triton
from mme_triton import (
    InferenceError,
    InvalidInputError,
    MMEClient,
    ModelLoadError,
    deploy_mme,
    encode_request,
)
from mme_triton.local import LocalStack

pytestmark = [pytest.mark.triton, pytest.mark.moto]

ENDPOINT = "users"
PREFIX = "users/"
X = np.ones((1, 4), dtype=np.float32)


def _archive(model_dir: Path, arcname: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(model_dir, arcname=arcname or model_dir.name)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def users(repository: Path) -> Iterator[dict[str, Any]]:
    """One stack and an empty multi-model endpoint; tests put their artifacts under its prefix."""
    with LocalStack() as stack:
        session = stack.boto3_session()
        deploy_mme(
            ENDPOINT,
            stack.model_data_url(PREFIX),
            role=stack.role_arn,
            instance_type="ml.m5.large",
            poll_interval=0.1,
            boto3_session=session,
        )
        yield {"stack": stack, "session": session, "runtime": session.client("sagemaker-runtime")}


def _put(users: dict[str, Any], target_model: str, body: bytes) -> None:
    stack: LocalStack = users["stack"]
    stack.client("s3").put_object(Bucket=stack.default_bucket, Key=PREFIX + target_model, Body=body)


def _invoke(users: dict[str, Any], target_model: str) -> dict[str, Any]:
    body, content_type = encode_request({"INPUT0": X}, binary=False)
    answer = users["runtime"].invoke_endpoint(
        EndpointName=ENDPOINT, TargetModel=target_model, Body=bytes(body), ContentType=content_type
    )
    return dict(json.loads(answer["Body"].read()))


@pytest.mark.parametrize(
    "target_model",
    ["my scale.tar.gz", "models/v2/scale.tar.gz", "scale;touch INJECTED.tar.gz"],
    ids=["space", "slashes", "shell-command"],
)
def test_stack_serves_a_target_model_whatever_printable_name_another_tool_gave_it(
    users: dict[str, Any], repository: Path, target_model: str
) -> None:
    _put(users, target_model, _archive(repository / "scale"))

    document = _invoke(users, target_model)

    assert document["model_name"] == target_model
    assert document["outputs"][0]["data"] == [2.0, 2.0, 2.0, 2.0]
    runtime = users["stack"].endpoint_runtime(ENDPOINT)
    assert not list(runtime.workdir.rglob("INJECTED*"))


def test_stack_serves_a_model_whose_directory_name_has_a_space(
    users: dict[str, Any], repository: Path
) -> None:
    _put(users, "spaced.tar.gz", _archive(repository / "scale", arcname="scale model"))

    assert _invoke(users, "spaced.tar.gz")["outputs"][0]["data"] == [2.0, 2.0, 2.0, 2.0]


def test_stack_refuses_a_backend_it_cannot_run_in_one_sentence(users: dict[str, Any], tmp_path: Path) -> None:
    model = tmp_path / "classifier"
    (model / "1" / "model.savedmodel").mkdir(parents=True)
    (model / "1" / "model.savedmodel" / "saved_model.pb").write_bytes(b"\0")
    (model / "config.pbtxt").write_text('platform: "tensorflow_savedmodel"\nmax_batch_size: 1\n')
    _put(users, "classifier.tar.gz", _archive(model))

    with pytest.raises(ClientError) as raw:
        _invoke(users, "classifier.tar.gz")

    message = json.loads(raw.value.response["OriginalMessage"])["error"]
    assert raw.value.response["Error"]["Code"] == "ModelError"
    assert message.startswith("load failed for model 'classifier.tar.gz': model 'classifier'")
    assert "no TensorFlow runtime" in message and "ONNX" in message
    assert "unable to find backend library" not in message
    assert str(users["stack"].endpoint_runtime(ENDPOINT).workdir) not in message


def test_stack_names_the_archives_file_when_triton_refuses_a_model(
    users: dict[str, Any], repository: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "linear"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "model.onnx").write_bytes(b"this is not an ONNX model")
    (broken / "config.pbtxt").write_text((repository / "linear" / "config.pbtxt").read_text())
    _put(users, "broken.tar.gz", _archive(broken))

    with pytest.raises(ClientError) as raw:
        _invoke(users, "broken.tar.gz")

    message = json.loads(raw.value.response["OriginalMessage"])["error"]
    workdir = str(users["stack"].endpoint_runtime(ENDPOINT).workdir)
    assert message.startswith("load failed for model 'broken.tar.gz'")
    assert "broken.tar.gz:linear/1/model.onnx" in message and workdir not in message
    # No scratch path of the stack (its temporary directories); the traceback Triton's python backend
    # appends names installed files (onnxruntime's), which may live anywhere, /tmp included.
    for installed in (sys.prefix, str(Path(mme_triton.__file__).parent)):
        message = message.replace(installed, "<installed>")
    assert "/tmp/" not in message


def test_stack_sessions_reach_the_invoke_endpoint_route_on_its_own_port(users: dict[str, Any]) -> None:
    stack: LocalStack = users["stack"]

    assert users["runtime"].meta.endpoint_url == stack.runtime_url != stack.endpoint_url
    assert stack.client("sagemaker").meta.endpoint_url == stack.endpoint_url
    assert stack.environment()["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"] == stack.runtime_url


def test_stack_answers_invoke_endpoint_in_front_of_moto_too(users: dict[str, Any], repository: Path) -> None:
    stack: LocalStack = users["stack"]
    _put(users, "scale.tar.gz", _archive(repository / "scale"))
    moto_route = users["session"].client("sagemaker-runtime", endpoint_url=stack.endpoint_url)

    answer = moto_route.invoke_endpoint(
        EndpointName=ENDPOINT,
        TargetModel="scale.tar.gz",
        Body=b'{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}',
        ContentType="application/json",
    )

    assert json.loads(answer["Body"].read())["outputs"][0]["data"] == [2.0, 4.0, 6.0, 8.0]


def test_invoke_endpoint_route_keeps_a_connection_for_many_requests(
    users: dict[str, Any], repository: Path
) -> None:
    _put(users, "scale.tar.gz", _archive(repository / "scale"))
    MMEClient(ENDPOINT, boto3_session=users["session"]).infer("scale.tar.gz", {"INPUT0": X})  # loaded
    url = urlsplit(users["stack"].runtime_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    body, content_type = encode_request({"INPUT0": X})
    headers = {"X-Amzn-SageMaker-Target-Model": "scale.tar.gz", "Content-Type": content_type}
    answers = []
    for _ in range(3):
        conn.request("POST", f"/endpoints/{ENDPOINT}/invocations", body=bytes(body), headers=headers)
        response = conn.getresponse()
        answers.append(
            (response.status, response.getheader("x-Amzn-Invoked-Production-Variant"), response.read())
        )
        sock = conn.sock

    assert [a[:2] for a in answers] == [(200, "AllTraffic")] * 3
    assert conn.sock is sock is not None  # the same connection all along
    conn.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", f"/endpoints/{ENDPOINT}/invocations", b"\0" * (6 * 1024 * 1024 + 1), 413),
        ("GET", "/", b"", 404),
        ("POST", "/endpoints/nobody/invocations", b"{}", 400),
    ],
    ids=["over-6-mib", "other-route", "unknown-endpoint"],
)
def test_invoke_endpoint_route_answers_what_sagemaker_answers(
    users: dict[str, Any], method: str, path: str, body: bytes, status: int
) -> None:
    url = urlsplit(users["stack"].runtime_url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    conn.request(method, path, body=body, headers={"X-Amzn-SageMaker-Target-Model": "scale.tar.gz"})
    response = conn.getresponse()
    response.read()

    assert response.status == status
    conn.close()


def test_stack_refusing_a_model_is_an_inference_error_for_the_client(users: dict[str, Any]) -> None:
    _put(users, "empty.tar.gz", _archive_of_nothing())

    with pytest.raises(InferenceError, match="holds no model directory"):
        MMEClient(ENDPOINT, boto3_session=users["session"]).infer("empty.tar.gz", {"INPUT0": X})


def _archive_of_nothing() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz"):
        pass
    return buffer.getvalue()


def test_client_raises_a_corrupt_artifact_as_model_load_error_with_tritons_reason(
    users: dict[str, Any], repository: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "linear"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "model.onnx").write_bytes(b"\x08\x07 truncated")
    (broken / "config.pbtxt").write_text((repository / "linear" / "config.pbtxt").read_text())
    _put(users, "corrupt.tar.gz", _archive(broken))

    with pytest.raises(ModelLoadError) as caught:
        MMEClient(ENDPOINT, boto3_session=users["session"]).infer("corrupt.tar.gz", {"INPUT0": X})

    assert caught.value.target_model == "corrupt.tar.gz"
    assert caught.value.reason.startswith("version 1 is at UNAVAILABLE state")
    assert "corrupt.tar.gz:linear/1/model.onnx" in caught.value.reason
    assert not isinstance(caught.value, InvalidInputError)
