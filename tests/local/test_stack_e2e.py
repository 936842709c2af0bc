"""The whole flow on the embedded stack: upload, deploy_mme, InvokeEndpoint (boto3 and MMEClient), teardown.

One stack and one endpoint serve the module; tests that change the endpoint's state come last.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

from mme_triton import (
    EndpointNotFoundError,
    InvalidInputError,
    MMEClient,
    ModelNotFoundError,
    PayloadTooLargeError,
    deploy_mme,
    upload_models,
)
from mme_triton.local.route.endpoint_runtime import target_model_hash

pytestmark = [pytest.mark.triton, pytest.mark.moto]

ENDPOINT = "stack-e2e"
X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


@pytest.fixture(scope="module")
def endpoint(stack: Any, repository: Path) -> Iterator[dict[str, Any]]:
    """``linear`` and ``scale`` deployed to one endpoint of the module's stack."""
    session = stack.boto3_session()
    url = stack.model_data_url("e2e/")
    deploy_mme(
        ENDPOINT,
        url,
        models=[repository / "linear", repository / "scale"],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        environment={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"},
        poll_interval=0.1,
        boto3_session=session,
    )
    yield {
        "session": session,
        "url": url,
        "runtime": session.client("sagemaker-runtime"),
        "client": MMEClient(ENDPOINT, boto3_session=session),
    }


def _json_body(name: str = "INPUT0") -> str:
    tensor = {"name": name, "shape": [2, 4], "datatype": "FP32", "data": X.ravel().tolist()}
    return json.dumps({"inputs": [tensor]})


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_stack_serves_two_models_on_one_endpoint(
    endpoint: dict[str, Any], expected_linear: Any, binary: bool
) -> None:
    client: MMEClient = endpoint["client"]

    linear = client.infer("linear.tar.gz", {"INPUT0": X}, binary=binary)
    scale = client.infer("scale.tar.gz", {"INPUT0": X}, binary=binary)

    np.testing.assert_allclose(linear["OUTPUT0"], expected_linear(X), rtol=1e-6)
    np.testing.assert_allclose(scale["OUTPUT0"], X * 2)


def test_stack_answers_boto3_like_sagemaker(endpoint: dict[str, Any], expected_linear: Any) -> None:
    answer = endpoint["runtime"].invoke_endpoint(
        EndpointName=ENDPOINT, TargetModel="linear.tar.gz", Body=_json_body(), ContentType="application/json"
    )

    assert answer["ContentType"] == "application/json"
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    document = json.loads(answer["Body"].read())
    assert document["model_name"] == "linear.tar.gz"
    output = next(o for o in document["outputs"] if o["name"] == "OUTPUT0")
    np.testing.assert_allclose(np.reshape(output["data"], (2, 3)), expected_linear(X), rtol=1e-6)


def test_stack_serves_a_model_added_while_the_endpoint_is_live(
    stack: Any, endpoint: dict[str, Any], repository: Path, expected_linear: Any
) -> None:
    # an ensemble archive: pipeline with its steps scale and linear
    upload_models([repository / "pipeline"], endpoint["url"], boto3_session=endpoint["session"])

    outputs = endpoint["client"].infer("pipeline.tar.gz", {"INPUT0": X})

    np.testing.assert_allclose(outputs["OUTPUT0"], expected_linear(X * 2), rtol=1e-6)
    assert "pipeline.tar.gz" in stack.loaded_models(ENDPOINT)


def test_stack_batches_concurrent_requests_of_the_onnx_model(
    endpoint: dict[str, Any], expected_linear: Any
) -> None:
    client: MMEClient = endpoint["client"]
    client.infer("linear.tar.gz", {"INPUT0": X})  # loaded before the burst
    inputs = [np.full((1, 4), i, dtype=np.float32) for i in range(8)]
    results: list[dict[str, np.ndarray[Any, Any]] | None] = [None] * len(inputs)
    barrier = threading.Barrier(len(inputs))

    def call(i: int) -> None:
        barrier.wait()
        results[i] = client.infer("linear.tar.gz", {"INPUT0": inputs[i]})

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    for x, result in zip(inputs, results, strict=True):
        assert result is not None
        np.testing.assert_allclose(result["OUTPUT0"], expected_linear(x), rtol=1e-6)
    # ROWS is the row count of the ONNX Runtime call that served the request
    assert max(float(r["ROWS"].max()) for r in results if r is not None) > 1


def test_stack_loads_a_model_once_for_concurrent_first_requests(
    stack: Any, endpoint: dict[str, Any], repository: Path, tmp_path: Path, model_writers: dict[str, Any]
) -> None:
    model_writers["scale"](tmp_path, name="scale_twin")
    upload_models([tmp_path / "scale_twin"], endpoint["url"], boto3_session=endpoint["session"])
    runtime = stack.endpoint_runtime(ENDPOINT)
    loads_before = runtime.loads
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def call() -> None:
        barrier.wait()
        try:
            out = endpoint["client"].infer("scale_twin.tar.gz", {"INPUT0": X})
            np.testing.assert_allclose(out["OUTPUT0"], X * 2)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert runtime.loads == loads_before + 1


def test_stack_unknown_target_model(endpoint: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as raw:
        endpoint["runtime"].invoke_endpoint(
            EndpointName=ENDPOINT,
            TargetModel="missing.tar.gz",
            Body=_json_body(),
            ContentType="application/json",
        )
    assert raw.value.response["Error"]["Code"] == "ValidationError"
    assert raw.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "e2e/missing.tar.gz" in raw.value.response["Error"]["Message"]

    with pytest.raises(ModelNotFoundError) as mapped:
        endpoint["client"].infer("missing.tar.gz", {"INPUT0": X})
    assert mapped.value.target_model == "missing.tar.gz"


def test_stack_target_model_without_tar_gz_is_named_in_the_clients_error(endpoint: dict[str, Any]) -> None:
    """SageMaker's answer names only the object it looked for; the client's error names the archive the
    prefix holds, from one S3 listing made on that error and no other."""
    listings: list[str] = []

    def count(**kwargs: Any) -> None:
        listings.append(kwargs["params"]["Prefix"])

    session = endpoint["session"]
    session.events.register("provide-client-params.s3.ListObjectsV2", count)
    try:
        client = MMEClient(ENDPOINT, boto3_session=session)
        with pytest.raises(ClientError) as raw:
            endpoint["runtime"].invoke_endpoint(
                EndpointName=ENDPOINT, TargetModel="linear", Body=_json_body()
            )
        assert "did you mean" not in raw.value.response["Error"]["Message"]
        assert client.infer("linear.tar.gz", {"INPUT0": X})["OUTPUT0"].shape == (2, 3)
        with pytest.raises(InvalidInputError):
            client.infer("linear.tar.gz", {"BAD": X})
        assert listings == []

        with pytest.raises(ModelNotFoundError) as mapped:
            client.infer("linear", {"INPUT0": X})
    finally:
        session.events.unregister("provide-client-params.s3.ListObjectsV2", count)

    assert listings == ["e2e/linear"]
    assert mapped.value.suggestions == ("linear.tar.gz",)
    assert str(mapped.value).endswith("(did you mean 'linear.tar.gz'?)")
    assert "key: e2e/linear)" in str(mapped.value)  # SageMaker's words are kept


def test_stack_bad_input_is_a_model_error(endpoint: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as raw:
        endpoint["runtime"].invoke_endpoint(
            EndpointName=ENDPOINT,
            TargetModel="linear.tar.gz",
            Body=_json_body("BAD"),
            ContentType="application/json",
        )
    response = raw.value.response
    assert response["Error"]["Code"] == "ModelError"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert response["OriginalStatusCode"] == 400
    assert "BAD" in response["OriginalMessage"]
    assert response["LogStreamArn"].endswith(f"/aws/sagemaker/Endpoints/{ENDPOINT}")

    with pytest.raises(InvalidInputError) as mapped:
        endpoint["client"].infer("linear.tar.gz", {"BAD": X})
    assert mapped.value.status == 400 and "BAD" in mapped.value.message


def test_stack_refuses_a_body_over_6_mib(endpoint: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as raw:
        endpoint["runtime"].invoke_endpoint(
            EndpointName=ENDPOINT, TargetModel="linear.tar.gz", Body=b"\0" * (6 * 1024 * 1024 + 1)
        )
    assert raw.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413

    big = np.zeros((6 * 1024 * 1024 // 16 + 1, 4), dtype=np.float32)
    with pytest.raises(PayloadTooLargeError):
        endpoint["client"].infer("linear.tar.gz", {"INPUT0": big})


def test_stack_unknown_endpoint(stack: Any, endpoint: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as raw:
        endpoint["runtime"].invoke_endpoint(
            EndpointName="no-such-endpoint", TargetModel="linear.tar.gz", Body=b"{}"
        )
    assert raw.value.response["Error"]["Code"] == "ValidationError"
    assert raw.value.response["Error"]["Message"] == (
        f"Endpoint no-such-endpoint of account {stack.account_id} not found."
    )

    with pytest.raises(EndpointNotFoundError):
        MMEClient("no-such-endpoint", boto3_session=endpoint["session"]).infer("linear.tar.gz", {"INPUT0": X})


def test_stack_applies_the_models_environment_to_triton(stack: Any, endpoint: dict[str, Any]) -> None:
    triton = stack.triton(ENDPOINT)
    argv = Path(f"/proc/{triton.pid}/cmdline").read_bytes().split(b"\0")

    assert b"--backend-config=python,shm-default-byte-size=33554432" in argv


def test_stack_serves_from_an_extracted_copy_named_like_sagemaker(
    stack: Any, endpoint: dict[str, Any]
) -> None:
    endpoint["client"].infer("linear.tar.gz", {"INPUT0": X})
    runtime = stack.endpoint_runtime(ENDPOINT)

    instance = runtime.instances[0]  # the one instance: its volume holds the copy
    extracted = list(Path(instance.workdir).glob(f"models/{target_model_hash('linear.tar.gz')}/model/linear"))

    assert len(extracted) == 1 and (extracted[0] / "1" / "model.onnx").is_file()


def test_stack_leaves_the_process_environment_alone(stack: Any, endpoint: dict[str, Any]) -> None:
    import boto3

    before = dict(os.environ)
    from mme_triton.local import LocalStack

    with LocalStack() as other:
        other.create_bucket("another-bucket")
        assert other.endpoint_url != stack.endpoint_url

    assert dict(os.environ) == before
    assert "127.0.0.1" not in (boto3.Session(region_name="us-east-1").client("s3").meta.endpoint_url or "")


def test_stack_teardown_stops_the_endpoints_triton(
    stack: Any, endpoint: dict[str, Any], is_alive: Any
) -> None:
    from mme_triton import teardown

    pid = stack.triton(ENDPOINT).pid
    assert pid is not None and is_alive(pid)

    teardown(ENDPOINT, boto3_session=endpoint["session"])

    assert not is_alive(pid)
    assert stack.triton(ENDPOINT) is None
    with pytest.raises(EndpointNotFoundError):
        endpoint["client"].infer("linear.tar.gz", {"INPUT0": X})
