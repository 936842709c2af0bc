"""Error mapping with real answers: Triton's own error bodies, wrapped the way SageMaker wraps them, parsed
by botocore, raised by the client as typed exceptions that keep Triton's message."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from mme_triton.client.codec import encode_request
from mme_triton.errors import (
    EndpointNotFoundError,
    InferenceError,
    InvalidInputError,
    ModelNotFoundError,
    ModelNotReadyError,
    ModelOutOfMemoryError,
    ThrottlingError,
)

if TYPE_CHECKING:
    from conftest import SageMakerFront, ServedModels

pytestmark = pytest.mark.triton

ENDPOINT = "client-test-endpoint"

GOOD_INPUT = np.arange(6, dtype=np.float32).reshape(2, 3)


def _triton_error(
    triton: ServedModels, target_model: str, inputs: dict[str, np.ndarray[Any, Any]], binary: bool
) -> tuple[int, str]:
    """What Triton itself answers to this request: its status and its ``error`` text."""
    body, content_type = encode_request(inputs, binary=binary)
    status, _, answer = triton.server.invoke(
        triton.hashes[target_model], target_model, bytes(body), content_type
    )
    return status, json.loads(answer)["error"]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize(
    ("inputs", "fragment"),
    [
        ({"NO_SUCH_INPUT": GOOD_INPUT}, "unexpected inference input 'NO_SUCH_INPUT'"),
        ({"IN_FP32": GOOD_INPUT.reshape(6)}, "unexpected shape for input 'IN_FP32'"),
        ({"IN_FP32": GOOD_INPUT.astype(np.int32)}, "data-type is 'INT32'"),
    ],
    ids=["bad-input-name", "bad-shape", "bad-datatype"],
)
def test_infer_triton_400_raises_invalid_input_with_tritons_message(
    triton: ServedModels,
    front: SageMakerFront,
    make_client: Callable[..., Any],
    inputs: dict[str, np.ndarray[Any, Any]],
    fragment: str,
    binary: bool,
) -> None:
    status, triton_message = _triton_error(triton, "echo.tar.gz", inputs, binary)
    assert status == 400
    assert fragment in triton_message
    client = make_client()
    with pytest.raises(InvalidInputError) as caught:
        client.infer("echo.tar.gz", inputs, binary=binary)
    error = caught.value
    assert error.message == triton_message
    assert error.status == 400
    assert error.error_code == "ModelError"
    assert error.endpoint_name == ENDPOINT
    assert error.target_model == "echo.tar.gz"
    assert triton_message in str(error)
    assert error.log_stream_arn is not None and error.log_stream_arn.startswith("arn:aws:logs:")


def test_infer_batch_over_max_batch_size_raises_invalid_input(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    client = make_client()
    with pytest.raises(InvalidInputError, match="batch"):
        client.infer("linear.tar.gz", {"INPUT0": np.zeros((9, 4), np.float32)})


def test_infer_target_model_not_under_prefix_raises_model_not_found(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    client = make_client()
    with pytest.raises(ModelNotFoundError) as caught:
        client.infer("missing.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.error_code == "ValidationError"
    assert caught.value.status == 400
    assert "missing.tar.gz" in caught.value.message


def test_infer_model_unknown_to_triton_raises_model_not_found(
    triton: ServedModels, front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    # served under another TargetModel than the one it was loaded as: Triton answers 400 "unknown model"
    hashes = {**triton.hashes, "renamed.tar.gz": triton.hashes["echo.tar.gz"]}
    front.served = dataclasses.replace(triton, hashes=hashes)
    client = make_client()
    with pytest.raises(ModelNotFoundError) as caught:
        client.infer("renamed.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.status == 400
    assert "renamed.tar.gz" in caught.value.message
    assert len(front.seen()) == 3  # the first answer and the client's two retries (its default)


def _unknown_to_triton(triton: ServedModels, target_model: str) -> str:
    """Triton's own answer for a TargetModel it has no model of, reworded for ``target_model``."""
    body, content_type = encode_request({"IN_FP32": GOOD_INPUT})
    status, _, answer = triton.server.invoke(
        triton.hashes["echo.tar.gz"], "nothing-loaded.tar.gz", bytes(body), content_type
    )
    assert status == 400
    return answer.decode().replace("nothing-loaded.tar.gz", target_model)


def test_infer_retries_a_lookup_that_raced_a_load_then_succeeds(
    triton: ServedModels, front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    # Triton's model map is read unlocked while a load or unload of another model replaces it: a loaded
    # model is then, once, "unknown"
    raced = front.model_error(ENDPOINT, 400, _unknown_to_triton(triton, "echo.tar.gz"))
    front.script(raced, raced)
    client = make_client()
    out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
    assert [seen.target_model for seen in front.seen()] == ["echo.tar.gz"] * 3


def test_infer_without_unknown_model_retries_raises_at_once(
    triton: ServedModels, front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(front.model_error(ENDPOINT, 400, _unknown_to_triton(triton, "echo.tar.gz")))
    client = make_client(max_retries_unknown_model=0)
    with pytest.raises(ModelNotFoundError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.status == 400
    assert "'echo.tar.gz' is not found" in caught.value.message
    assert len(front.seen()) == 1


def test_infer_does_not_retry_when_triton_does_not_know_another_model(
    triton: ServedModels, front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    # an ensemble's step or a BLS call's target: not a race of this request's own model
    front.script(front.model_error(ENDPOINT, 400, _unknown_to_triton(triton, "step.tar.gz")))
    client = make_client()
    with pytest.raises(ModelNotFoundError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert "'step.tar.gz' is not found" in caught.value.message
    assert len(front.seen()) == 1


def test_infer_model_hash_not_loaded_raises_model_not_found(
    triton: ServedModels, front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    # a hash Triton never loaded: its front-end answers 404 with an empty body
    front.served = dataclasses.replace(triton, hashes={**triton.hashes, "unloaded.tar.gz": "neverloaded"})
    client = make_client()
    with pytest.raises(ModelNotFoundError) as caught:
        client.infer("unloaded.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.status == 404
    assert caught.value.error_code == "ModelError"


def test_infer_unknown_endpoint_raises_endpoint_not_found(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    client = make_client(endpoint_name="no-such-endpoint")
    with pytest.raises(EndpointNotFoundError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.endpoint_name == "no-such-endpoint"
    assert caught.value.message == f"Endpoint no-such-endpoint of account {front.account_id} not found."


@pytest.mark.parametrize(
    ("answer", "expected", "status"),
    [
        (("model", 507, '{"error":"failed to load: out of memory"}'), ModelOutOfMemoryError, 507),
        (("model", 500, '{"error":"model crashed"}'), InferenceError, 500),
        ((500, "InternalFailure", "An internal failure occurred."), InferenceError, 500),
        ((503, "ServiceUnavailable", "The service is unavailable."), InferenceError, 503),
        ((530, "InternalDependencyException", "dependency failed"), InferenceError, 530),
    ],
    ids=["model-507", "model-500", "internal-failure", "service-unavailable", "internal-dependency"],
)
def test_infer_aws_error_shapes_map_to_exceptions(
    front: SageMakerFront,
    make_client: Callable[..., Any],
    answer: tuple[Any, Any, str],
    expected: type[InferenceError],
    status: int,
) -> None:
    kind, code_or_status, text = answer
    if kind == "model":
        error = front.model_error(ENDPOINT, code_or_status, text)
    else:
        error = front.aws_error(kind, code_or_status, text)
    front.script(*[error] * 5)
    client = make_client()
    with pytest.raises(InferenceError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert type(caught.value) is expected
    assert caught.value.status == status
    assert caught.value.error_code == dict(error.headers)["x-amzn-ErrorType"]
    expected_message = json.loads(text)["error"] if kind == "model" else text
    assert caught.value.message == expected_message


def test_infer_retries_model_not_ready_then_succeeds(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(front.model_not_ready("echo.tar.gz"), front.model_not_ready("echo.tar.gz"))
    # botocore's standard mode, as the client configures it, must leave these retries to the client
    retries = {"retries": {"mode": "standard", "total_max_attempts": 3}}
    client = make_client(not_ready_backoff=0.01, config=retries)
    out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
    assert len(front.seen()) == 3


def test_infer_model_not_ready_after_retries_raises(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(*[front.model_not_ready("echo.tar.gz")] * 3)
    client = make_client(not_ready_backoff=0.01, max_retries_not_ready=2)
    with pytest.raises(ModelNotReadyError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.status == 429
    assert caught.value.error_code == "ModelNotReadyException"
    assert len(front.seen()) == 3


def test_infer_throttling_is_retried_by_botocore_then_raises(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    throttled = front.aws_error(400, "ThrottlingException", "Rate exceeded")
    front.script(throttled, throttled)
    client = make_client(config={"retries": {"mode": "standard", "total_max_attempts": 2}})
    with pytest.raises(ThrottlingError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.message == "Rate exceeded"
    assert len(front.seen()) == 2


def test_infer_throttling_then_success_returns_outputs(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(front.aws_error(400, "ThrottlingException", "Rate exceeded"))
    client = make_client(config={"retries": {"mode": "standard", "total_max_attempts": 2}})
    out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
