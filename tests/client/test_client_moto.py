"""AWS call shapes against moto's server: what InvokeEndpoint carries, the botocore configuration, and the
``models()`` shortcut to the endpoint stage.

moto answers InvokeEndpoint with canned results queued through its ``/moto-api/static/sagemaker/
endpoint-results`` route; it keys each answer on the request's ``X-Amzn-SageMaker-*`` headers and body, so
the answer a call gets shows which TargetModel it carried.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.config import Config

from mme_triton.client.aio import AsyncMMEClient
from mme_triton.client.client import MMEClient

pytestmark = pytest.mark.moto

REGION = "us-east-1"
FAKE_CREDENTIALS: dict[str, Any] = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _aws(service: str, moto_url: str) -> Any:
    # The stubs type boto3.client() for literal service names only.
    return boto3.client(service, endpoint_url=moto_url, region_name=REGION, **FAKE_CREDENTIALS)  # type: ignore[call-overload]


def _queue_answers(moto_url: str, *answers: dict[str, Any]) -> None:
    payload = json.dumps({"region": REGION, "results": list(answers)}).encode()
    request = urllib.request.Request(
        f"{moto_url}/moto-api/static/sagemaker/endpoint-results",
        data=payload,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        assert response.status in (200, 201)


def _json_answer(name: str, values: list[float]) -> dict[str, Any]:
    body = {"outputs": [{"name": name, "datatype": "FP32", "shape": [len(values)], "data": values}]}
    return {"Body": json.dumps(body), "ContentType": "application/json"}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_infer_carries_target_model_and_content_type(moto_url: str) -> None:
    runtime = _aws("sagemaker-runtime", moto_url)
    sent: list[dict[str, Any]] = []

    def record(request: Any, **_: Any) -> None:
        sent.append({name.lower(): value for name, value in request.headers.items()})

    runtime.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", record)
    _queue_answers(moto_url, _json_answer("OUTPUT0", [1.5, -2.0]))
    client = MMEClient(_unique("ep"), runtime_client=runtime)
    out = client.infer("resnet.tar.gz", {"INPUT0": np.ones((1, 4), np.float32)}, binary=False)
    np.testing.assert_array_equal(out["OUTPUT0"], np.array([1.5, -2.0], np.float32))
    (headers,) = sent
    assert headers["x-amzn-sagemaker-target-model"] == b"resnet.tar.gz"
    assert headers["content-type"] == b"application/json"


def test_infer_answer_depends_on_target_model(moto_url: str) -> None:
    client = MMEClient(_unique("ep"), runtime_client=_aws("sagemaker-runtime", moto_url))
    _queue_answers(moto_url, _json_answer("OUT", [1.0]), _json_answer("OUT", [2.0]))
    inputs = {"INPUT0": np.zeros((1, 1), np.float32)}
    first_a = client.infer("a.tar.gz", inputs)["OUT"]
    first_b = client.infer("b.tar.gz", inputs)["OUT"]
    again_a = client.infer("a.tar.gz", inputs)["OUT"]
    # moto hands out one queued answer per distinct (TargetModel, body): a, then b, then a's again
    assert first_a.tolist() == [1.0]
    assert first_b.tolist() == [2.0]
    assert again_a.tolist() == [1.0]


def test_client_default_botocore_config() -> None:
    session = boto3.Session(region_name=REGION, **FAKE_CREDENTIALS)
    config: Any = MMEClient("ep", boto3_session=session).runtime_client.meta.config
    assert config.read_timeout == 70
    assert config.connect_timeout == 10
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_client_boto_config_is_merged_over_defaults() -> None:
    session = boto3.Session(region_name=REGION, **FAKE_CREDENTIALS)
    client = MMEClient(
        "ep", boto3_session=session, boto_config=Config(connect_timeout=3, max_pool_connections=50)
    )
    config: Any = client.runtime_client.meta.config
    assert config.connect_timeout == 3
    assert config.max_pool_connections == 50
    assert config.read_timeout == 70


def test_client_ready_runtime_client_wins(moto_url: str) -> None:
    runtime = _aws("sagemaker-runtime", moto_url)
    client = MMEClient("ep", runtime_client=runtime, boto_config=Config(read_timeout=5))
    assert client.runtime_client is runtime


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_concurrency", 0),
        ("max_retries_not_ready", -1),
        ("max_retries_unknown_model", -1),
        ("not_ready_backoff", -0.5),
        ("max_batch_size", {"m.tar.gz": 0}),
        ("model_data_url", "bucket/prefix"),
    ],
    ids=["concurrency", "retries", "unknown-model-retries", "backoff", "max-batch-size", "url-scheme"],
)
@pytest.mark.parametrize("client_class", [MMEClient, AsyncMMEClient], ids=["threads", "asyncio"])
def test_client_rejects_bad_options(moto_url: str, option: str, value: Any, client_class: type[Any]) -> None:
    with pytest.raises(ValueError, match=option):
        client_class("ep", runtime_client=_aws("sagemaker-runtime", moto_url), **{option: value})


@pytest.mark.parametrize("attempt", [0, 3, 1023, 1024, 10**6], ids=str)
def test_client_not_ready_delay_stays_within_its_cap(moto_url: str, attempt: int) -> None:
    # max_retries_not_ready is the caller's: a large one must not end in OverflowError (2.0**1024)
    client = MMEClient("ep", runtime_client=_aws("sagemaker-runtime", moto_url), max_retries_not_ready=10**6)
    assert 0 < client._not_ready_delay(attempt) <= 30.0


def test_client_models_shortcut_lists_the_prefix_it_was_given(moto_url: str) -> None:
    s3 = _aws("s3", moto_url)
    bucket = f"models-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="mme/linear.tar.gz", Body=b"x")
    client = MMEClient(
        "endpoint-that-does-not-exist",
        runtime_client=_aws("sagemaker-runtime", moto_url),
        s3_client=s3,
        model_data_url=f"s3://{bucket}/mme/",
    )
    assert client.models() == ["linear.tar.gz"]


def test_async_client_models_shortcut_lists_the_prefix_it_was_given(moto_url: str) -> None:
    s3 = _aws("s3", moto_url)
    bucket = f"models-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="mme/b.tar.gz", Body=b"x")
    s3.put_object(Bucket=bucket, Key="mme/a.tar.gz", Body=b"x")

    async def listed() -> list[str]:
        async with AsyncMMEClient(
            "endpoint-that-does-not-exist",
            runtime_client=_aws("sagemaker-runtime", moto_url),
            s3_client=s3,
            model_data_url=f"s3://{bucket}/mme/",
        ) as client:
            return await client.models()

    assert asyncio.run(listed()) == ["a.tar.gz", "b.tar.gz"]


def test_suggest_target_models_lists_the_archives_that_start_with_the_name(moto_url: str) -> None:
    """The TargetModel with its .tar.gz first, then the shorter names; nothing deeper under the prefix."""
    from mme_triton.client._target_hint import suggest_target_models

    s3 = _aws("s3", moto_url)
    bucket = f"models-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    for key in ("blog/resnet-v2.tar.gz", "blog/resnet50.tar.gz", "blog/resnet.tar.gz", "blog/resnet/x.tar.gz",
                "blog/resnet.onnx", "blog/bert.tar.gz", "other/resnet.tar.gz"):  # fmt: skip
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")

    assert suggest_target_models(s3, bucket, "blog/resnet", "resnet") == [
        "resnet.tar.gz",
        "resnet50.tar.gz",
        "resnet-v2.tar.gz",
    ]
    assert suggest_target_models(s3, bucket, "blog/resnet.tar", "resnet.tar") == ["resnet.tar.gz"]
    assert suggest_target_models(s3, bucket, "blog/vit", "vit") == []
