"""``MMEClient.infer`` end to end: boto3 → a SageMaker-shaped front → a real Triton → our decoder.

Covers the request options, the 6 MiB limit and ``split_batches`` (order, concatenation,
``max_batch_size``), and one client shared by many threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from mme_triton.client.client import MAX_PAYLOAD_BYTES
from mme_triton.client.codec import InferInput, InferRequestedOutput, encode_request
from mme_triton.errors import InvalidInputError, ModelNotFoundError, PayloadTooLargeError

if TYPE_CHECKING:
    from conftest import SageMakerFront

pytestmark = pytest.mark.triton

LINEAR_WEIGHTS = np.array(
    [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.125, 3.0, -1.25]], dtype=np.float32
)
LINEAR_BIAS = np.array([0.1, -0.2, 0.3], dtype=np.float32)


def _rows(n: int, width: int) -> np.ndarray[Any, Any]:
    """Rows whose values encode their own index, so order mistakes show."""
    return (np.arange(n, dtype=np.float32)[:, None] * 1000 + np.arange(width, dtype=np.float32)).astype(
        np.float32
    )


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_round_trip_through_invoke_endpoint(make_client: Callable[..., Any], binary: bool) -> None:
    inputs: dict[str, np.ndarray[Any, Any]] = {
        "IN_FP32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "IN_INT64": np.array([[-(2**62), 2**62]], dtype=np.int64),
        "IN_BYTES": np.array([["caf\u00e9", "x"]], dtype=object),
        "IN_BOOL": np.array([[True, False, True]]),
    }
    out = make_client().infer("echo.tar.gz", inputs, binary=binary)
    assert sorted(out) == ["OUT_BOOL", "OUT_BYTES", "OUT_FP32", "OUT_INT64"]
    np.testing.assert_array_equal(out["OUT_FP32"], inputs["IN_FP32"])
    np.testing.assert_array_equal(out["OUT_INT64"], inputs["IN_INT64"])
    np.testing.assert_array_equal(out["OUT_BOOL"], inputs["IN_BOOL"])
    assert out["OUT_BYTES"].tolist() == [["caf\u00e9".encode(), b"x"]]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_sends_the_codecs_content_type_and_target_model(
    front: SageMakerFront, make_client: Callable[..., Any], binary: bool
) -> None:
    make_client(binary=binary).infer("echo.tar.gz", {"IN_INT8": np.ones((1, 2), np.int8)})
    (seen,) = front.seen()
    assert seen.target_model == "echo.tar.gz"
    assert seen.endpoint == front.endpoint
    if binary:
        assert seen.content_type.startswith("application/vnd.sagemaker-triton.binary+json;json-header-size=")
    else:
        assert seen.content_type == "application/json"


def test_infer_returns_only_requested_outputs(make_client: Callable[..., Any]) -> None:
    inputs = {"IN_FP32": np.ones((1, 2), np.float32), "IN_INT32": np.ones((1, 2), np.int32)}
    out = make_client().infer("echo.tar.gz", inputs, ["OUT_INT32"])
    assert list(out) == ["OUT_INT32"]


def test_infer_accepts_tritonclient_style_objects(make_client: Callable[..., Any]) -> None:
    data = np.arange(8, dtype=np.int16).reshape(2, 4)
    tensor = InferInput("IN_INT16", [2, 4], "INT16")
    tensor.set_data_from_numpy(data)
    out = make_client().infer("echo.tar.gz", [tensor], [InferRequestedOutput("OUT_INT16")])
    np.testing.assert_array_equal(out["OUT_INT16"], data)


def test_infer_binary_outputs_are_read_only_unless_copied(make_client: Callable[..., Any]) -> None:
    client = make_client()
    inputs = {"IN_FP64": np.ones((2, 2))}
    view = client.infer("echo.tar.gz", inputs)["OUT_FP64"]
    owned = client.infer("echo.tar.gz", inputs, copy=True)["OUT_FP64"]
    assert not view.flags.writeable
    assert owned.flags.writeable
    owned[0, 0] = 5.0
    assert owned[0, 0] == 5.0


def test_infer_passes_custom_attributes_and_inference_id(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    make_client().infer(
        "echo.tar.gz",
        {"IN_UINT8": np.ones((1, 1), np.uint8)},
        custom_attributes="trace=abc",
        inference_id="req-1",
    )
    (seen,) = front.seen()
    assert seen.headers["x-amzn-sagemaker-custom-attributes"] == "trace=abc"
    assert seen.headers["x-amzn-sagemaker-inference-id"] == "req-1"


def test_infer_request_id_and_parameters_reach_the_request(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    make_client().infer(
        "echo.tar.gz", {"IN_UINT8": np.ones((1, 1), np.uint8)}, request_id="r-42", parameters={"priority": 1}
    )
    header = front.seen()[0].header_json()
    assert header["id"] == "r-42"
    assert header["parameters"]["priority"] == 1


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_linear_onnx_matches_numpy(make_client: Callable[..., Any], binary: bool) -> None:
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    out = make_client().infer("linear.tar.gz", {"INPUT0": x}, binary=binary)
    np.testing.assert_allclose(out["OUTPUT0"], x @ LINEAR_WEIGHTS + LINEAR_BIAS, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("target_model", "reason"),
    [
        ("", "must not be empty"),
        ("x" * 1025, "at most 1024 characters"),
        (" echo.tar.gz", "must not start with whitespace"),
        ("\techo.tar.gz", "must not start with whitespace"),
        ("tab\there", "only printable ASCII"),
        ("caf\u00e9.tar.gz", "only printable ASCII"),
    ],
    ids=["empty", "too-long", "leading-space", "leading-tab", "inner-tab", "non-ascii"],
)
def test_infer_rejects_bad_target_model(
    front: SageMakerFront, make_client: Callable[..., Any], target_model: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=f"not a valid TargetModel: .*{reason}"):
        make_client().infer(target_model, {"IN_FP32": np.ones((1, 1), np.float32)})
    assert front.seen() == []


@pytest.mark.parametrize(
    "target_model",
    ["my model.tar.gz", "\u00e9cho.tar.gz", "x" * 1024],
    ids=["inner-space", "non-ascii-first", "1024-chars"],
)
def test_infer_sends_any_target_model_sagemaker_accepts(
    front: SageMakerFront, make_client: Callable[..., Any], target_model: str
) -> None:
    # The front answers "model data not found" for names it does not serve: the request was sent.
    with pytest.raises(ModelNotFoundError):
        make_client().infer(target_model, {"IN_FP32": np.ones((1, 1), np.float32)})
    assert [request.target_model for request in front.seen()] == [target_model]


# -- the 6 MiB limit -------------------------------------------------------------------------------------


def test_infer_over_limit_raises_before_sending(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    big = np.zeros((1600, 1024), np.float32)  # 6.55 MB of tensor data
    with pytest.raises(PayloadTooLargeError, match="split_batches") as caught:
        make_client().infer("echo.tar.gz", {"IN_FP32": big})
    assert f"{MAX_PAYLOAD_BYTES:,}" in str(caught.value)
    assert caught.value.target_model == "echo.tar.gz"
    assert front.seen() == []


def test_infer_large_body_travels_whole_through_boto3(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    # Between the codec's large-body size (a bytearray on huge pages) and InvokeEndpoint's limit.
    data = _rows(1, 1_250_000)
    body, _ = encode_request({"IN_FP32": data})
    assert isinstance(body, bytearray) and 4 * 2**20 < len(body) < MAX_PAYLOAD_BYTES
    out = make_client().infer("echo.tar.gz", {"IN_FP32": data})
    np.testing.assert_array_equal(out["OUT_FP32"], data)
    (request,) = front.seen()
    assert request.body == bytes(body)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_split_batches_joins_outputs_in_order(
    front: SageMakerFront, make_client: Callable[..., Any], binary: bool
) -> None:
    rows = 1700 if binary else 1100
    data = _rows(rows, 1024)
    labels = np.array([f"row {i}".encode() for i in range(rows)], dtype=object).reshape(rows, 1)
    out = make_client(split_batches=True).infer(
        "echo.tar.gz", {"IN_FP32": data, "IN_BYTES": labels}, binary=binary
    )
    np.testing.assert_array_equal(out["OUT_FP32"], data)
    assert out["OUT_BYTES"].tolist() == labels.tolist()
    seen = front.seen()
    assert len(seen) >= 2
    assert all(len(request.body) <= MAX_PAYLOAD_BYTES for request in seen)
    assert sum(request.rows() for request in seen) == rows


def test_infer_split_batches_respects_max_batch_size(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    x = np.random.default_rng(7).standard_normal((30, 4)).astype(np.float32)
    client = make_client(split_batches=True, max_batch_size={"linear.tar.gz": 8}, max_concurrency=3)
    out = client.infer("linear.tar.gz", {"INPUT0": x})
    np.testing.assert_allclose(out["OUTPUT0"], x @ LINEAR_WEIGHTS + LINEAR_BIAS, rtol=1e-5, atol=1e-5)
    assert sorted(request.rows() for request in front.seen()) == [6, 8, 8, 8]


def test_infer_without_max_batch_size_sends_the_whole_batch(make_client: Callable[..., Any]) -> None:
    x = np.zeros((30, 4), np.float32)
    with pytest.raises(InvalidInputError):
        make_client(split_batches=True).infer("linear.tar.gz", {"INPUT0": x})


def test_infer_split_batches_small_request_is_sent_once(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    out = make_client(split_batches=True).infer("echo.tar.gz", {"IN_FP32": _rows(10, 4)})
    np.testing.assert_array_equal(out["OUT_FP32"], _rows(10, 4))
    assert len(front.seen()) == 1


def test_infer_split_batches_single_row_over_limit_raises(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    wide = np.zeros((3, MAX_PAYLOAD_BYTES // 4 + 1), np.float32)
    with pytest.raises(PayloadTooLargeError, match="cannot be split"):
        make_client(split_batches=True).infer("echo.tar.gz", {"IN_FP32": wide})
    assert front.seen() == []


def test_infer_split_batches_inputs_must_share_dimension_zero(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    inputs = {"IN_FP32": np.zeros((4, 2), np.float32), "IN_INT32": np.zeros((5, 2), np.int32)}
    with pytest.raises(ValueError, match="dimension 0"):
        make_client(split_batches=True).infer("echo.tar.gz", inputs)
    assert front.seen() == []


def test_infer_split_batches_per_call_override(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    data = _rows(1700, 1024)
    out = make_client().infer("echo.tar.gz", {"IN_FP32": data}, split_batches=True)
    np.testing.assert_array_equal(out["OUT_FP32"], data)
    assert len(front.seen()) >= 2


def test_infer_split_batches_keeps_infer_input_settings(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    data = _rows(1700, 1024)
    tensor = InferInput("IN_FP32", list(data.shape), "FP32").set_data_from_numpy(data, binary_data=True)
    out = make_client(binary=False).infer("echo.tar.gz", [tensor], split_batches=True)
    np.testing.assert_array_equal(out["OUT_FP32"], data)
    seen = front.seen()
    assert len(seen) >= 2
    assert all(
        request.content_type.startswith("application/vnd.sagemaker-triton.binary+json") for request in seen
    )


def test_infer_split_batches_failure_of_one_request_is_raised(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(front.model_error(front.endpoint, 400, '{"error":"refused one part"}'))
    client = make_client(split_batches=True, max_batch_size={"echo.tar.gz": 2}, max_concurrency=1)
    with pytest.raises(InvalidInputError, match="refused one part"):
        client.infer("echo.tar.gz", {"IN_FP32": _rows(8, 2)})


# -- threads ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("client_path", ["fast", "botocore"], indirect=True)
def test_infer_many_threads_share_one_client(make_client: Callable[..., Any]) -> None:
    client = make_client(max_batch_size={"linear.tar.gz": 8}, split_batches=True)
    failures: list[BaseException] = []
    start = threading.Barrier(8)

    def work(worker: int) -> None:
        try:
            start.wait()
            for call in range(6):
                data = np.full((2, 3), worker * 100 + call, dtype=np.int32)
                out = client.infer("echo.tar.gz", {"IN_INT32": data}, binary=call % 2 == 0)
                np.testing.assert_array_equal(out["OUT_INT32"], data)
                x = np.full((11, 4), worker + call / 10, dtype=np.float32)
                linear = client.infer("linear.tar.gz", {"INPUT0": x})
                np.testing.assert_allclose(linear["OUTPUT0"], x @ LINEAR_WEIGHTS + LINEAR_BIAS, rtol=1e-5)
        except BaseException as exc:  # collected and re-raised in the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
