"""Conformance with a real Triton: requests from our encoder, answers through our decoder, over Triton's
SageMaker front-end (``POST /models/<hash>/invoke``) in multi-model mode.

The echo model (python backend) hands every ``IN_<datatype>`` back as ``OUT_<datatype>``, so what comes
back must equal what went out, bit for bit, with the same shape and datatype. The linear model is a real
ONNX graph served by ONNX Runtime; its answer is compared with numpy.

Two things Triton itself does shape the JSON cases: it refuses to write FP16 and BF16 outputs as JSON
(those outputs are asked for in binary), and its JSON parser rounds about one FP64 value in ten to a
neighbouring double (1 ulp), so FP64 sent as JSON is compared to within 1 ulp. The python backend
cannot turn BF16 into numpy (``as_numpy()`` refuses it), so the echo model passes BF16 through DLPack.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import pytest

from mme_triton.client.codec import InferRequestedOutput, decode_response, encode_request
from mme_triton.client.datatypes import DATATYPES

if TYPE_CHECKING:
    from conftest import ServedModels

pytestmark = pytest.mark.triton

SHAPES = [(2, 3), (1, 1), (0, 3), (3, 0), (4, 257)]
SHAPE_IDS = ["2x3", "1x1", "0x3", "3x0", "4x257"]
LINEAR_WEIGHTS = np.array(
    [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.125, 3.0, -1.25]], dtype=np.float32
)
LINEAR_BIAS = np.array([0.1, -0.2, 0.3], dtype=np.float32)

_NUMPY = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(ml_dtypes.bfloat16),
}
_BYTES_POOL = [b"", b"a", b"hello world", "h\u00e9llo \u2603".encode(), b"x" * 300, b'line\nbreak "quoted"']


def sample(datatype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray[Any, Any]:
    """Deterministic test data spanning the datatype's range (extremes included when there is room)."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    if datatype == "BYTES":
        picks = [_BYTES_POOL[i % len(_BYTES_POOL)] for i in range(size)]
        return np.array(picks, dtype=object).reshape(shape)
    dtype = _NUMPY[datatype]
    if datatype == "BOOL":
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
        values[: min(size, 2)] = [info.min, info.max][: min(size, 2)]
        return values.reshape(shape)
    values = (rng.standard_normal(size) * 1000).astype(dtype)
    extremes = np.array([0.0, -0.0, 1.0, -1.0], dtype=np.float64).astype(dtype)
    values[: min(size, len(extremes))] = extremes[: min(size, len(extremes))]
    return values.reshape(shape)


def _echo(triton: ServedModels, body: Any, content_type: str) -> tuple[bytes, str]:
    status, headers, answer = triton.server.invoke(
        triton.hashes["echo.tar.gz"], "echo.tar.gz", bytes(body), content_type
    )
    assert status == 200, answer
    return answer, headers.get("content-type", "application/json")


NOT_IN_JSON = ("FP16", "BF16")


def assert_same_tensor(
    actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], *, max_ulp: int = 0
) -> None:
    assert actual.shape == expected.shape
    if expected.dtype == object:
        assert actual.dtype == object
        assert actual.tolist() == expected.tolist()
        return
    assert actual.dtype == expected.dtype
    if max_ulp:
        np.testing.assert_array_max_ulp(actual, expected, maxulp=max_ulp)
        return
    # compare bits: exact, and NaN/-0.0 safe
    np.testing.assert_array_equal(
        actual.view(f"u{actual.dtype.itemsize}")
        if actual.dtype.kind == "f" or actual.dtype == _NUMPY["BF16"]
        else actual,
        expected.view(f"u{expected.dtype.itemsize}")
        if expected.dtype.kind == "f" or expected.dtype == _NUMPY["BF16"]
        else expected,
    )


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("datatype", DATATYPES)
def test_echo_round_trip_every_datatype(
    triton: ServedModels, datatype: str, shape: tuple[int, ...], binary: bool
) -> None:
    tensor = sample(datatype, shape)
    output = f"OUT_{datatype}"
    binary_outputs = [output] if datatype in NOT_IN_JSON else None
    body, content_type = encode_request(
        {f"IN_{datatype}": tensor}, [output], binary=binary, binary_outputs=binary_outputs
    )
    answer, answer_type = _echo(triton, body, content_type)
    outputs = decode_response(answer, answer_type)
    assert list(outputs) == [output]
    assert_same_tensor(outputs[output], tensor, max_ulp=1 if datatype == "FP64" and not binary else 0)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_echo_round_trip_all_datatypes_in_one_request(triton: ServedModels, binary: bool) -> None:
    tensors = {f"IN_{dt}": sample(dt, (3, 5), seed=i) for i, dt in enumerate(DATATYPES)}
    body, content_type = encode_request(
        tensors,
        [f"OUT_{dt}" for dt in DATATYPES],
        binary=binary,
        binary_outputs=[f"OUT_{dt}" for dt in NOT_IN_JSON],
    )
    answer, answer_type = _echo(triton, body, content_type)
    outputs = decode_response(answer, answer_type)
    assert sorted(outputs) == sorted(f"OUT_{dt}" for dt in DATATYPES)
    for dt in DATATYPES:
        max_ulp = 1 if dt == "FP64" and not binary else 0
        assert_same_tensor(outputs[f"OUT_{dt}"], tensors[f"IN_{dt}"], max_ulp=max_ulp)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_echo_round_trip_bytes_that_are_not_utf8(triton: ServedModels, binary: bool) -> None:
    tensor = np.array([[b"\xff\xfe", b"\x00"], [b"\xc3\x28", b"ok"]], dtype=object)
    body, content_type = encode_request({"IN_BYTES": tensor}, ["OUT_BYTES"], binary=binary)
    answer, answer_type = _echo(triton, body, content_type)
    assert_same_tensor(decode_response(answer, answer_type)["OUT_BYTES"], tensor)


def test_echo_str_input_comes_back_as_utf8_bytes(triton: ServedModels) -> None:
    tensor = np.array([["caf\u00e9", ""]], dtype=object)
    body, content_type = encode_request({"IN_BYTES": tensor}, ["OUT_BYTES"])
    answer, answer_type = _echo(triton, body, content_type)
    assert decode_response(answer, answer_type)["OUT_BYTES"].tolist() == [["caf\u00e9".encode(), b""]]


@pytest.mark.parametrize("datatype", ["FP16", "FP32", "FP64", "BF16"])
def test_echo_round_trip_special_floats_in_binary(triton: ServedModels, datatype: str) -> None:
    tensor = np.array([[np.inf, -np.inf, np.nan, -0.0]], dtype=np.float64).astype(_NUMPY[datatype])
    body, content_type = encode_request({f"IN_{datatype}": tensor}, [f"OUT_{datatype}"], binary=True)
    answer, answer_type = _echo(triton, body, content_type)
    assert_same_tensor(decode_response(answer, answer_type)[f"OUT_{datatype}"], tensor)


@pytest.mark.parametrize("datatype", ["FP32", "FP64"])
@pytest.mark.parametrize("binary_outputs", [True, False], ids=["binary-out", "json-out"])
def test_echo_round_trip_special_floats_sent_as_json(
    triton: ServedModels, datatype: str, binary_outputs: bool
) -> None:
    tensor = np.array([[np.inf, -np.inf, np.nan, -0.0, 1.5]], dtype=np.float64).astype(_NUMPY[datatype])
    body, content_type = encode_request(
        {f"IN_{datatype}": tensor}, [f"OUT_{datatype}"], binary=False, binary_outputs=binary_outputs
    )
    assert b"NaN" in bytes(body) and b"-Infinity" in bytes(body)
    answer, answer_type = _echo(triton, body, content_type)
    assert_same_tensor(decode_response(answer, answer_type)[f"OUT_{datatype}"], tensor)


def test_echo_non_contiguous_and_big_endian_inputs(triton: ServedModels) -> None:
    base = sample("INT32", (6, 8))
    strided = base[::2, ::3]
    big_endian = sample("FP64", (2, 3)).astype(">f8")
    body, content_type = encode_request(
        {"IN_INT32": strided, "IN_FP64": big_endian}, ["OUT_INT32", "OUT_FP64"]
    )
    answer, answer_type = _echo(triton, body, content_type)
    outputs = decode_response(answer, answer_type)
    np.testing.assert_array_equal(outputs["OUT_INT32"], strided)
    np.testing.assert_array_equal(outputs["OUT_FP64"], big_endian)


def test_echo_mixed_binary_and_json_outputs(triton: ServedModels) -> None:
    ints = sample("INT64", (2, 2))
    floats = sample("FP32", (2, 2))
    body, content_type = encode_request(
        {"IN_INT64": ints, "IN_FP32": floats},
        [
            InferRequestedOutput("OUT_INT64", binary_data=True),
            InferRequestedOutput("OUT_FP32", binary_data=False),
        ],
    )
    answer, answer_type = _echo(triton, body, content_type)
    header_size = int(answer_type.split("json-header-size=")[1])
    header = json.loads(answer[:header_size])
    by_name = {output["name"]: output for output in header["outputs"]}
    assert "data" in by_name["OUT_FP32"] and "data" not in by_name["OUT_INT64"]
    outputs = decode_response(answer, answer_type)
    np.testing.assert_array_equal(outputs["OUT_INT64"], ints)
    np.testing.assert_array_equal(outputs["OUT_FP32"], floats)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("rows", [1, 5, 8])
def test_linear_onnx_matches_numpy(triton: ServedModels, rows: int, binary: bool) -> None:
    x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
    body, content_type = encode_request({"INPUT0": x}, binary=binary)
    status, headers, answer = triton.server.invoke(
        triton.hashes["linear.tar.gz"], "linear.tar.gz", bytes(body), content_type
    )
    assert status == 200, answer
    outputs = decode_response(answer, headers.get("content-type", "application/json"))
    assert outputs["OUTPUT0"].dtype == np.float32
    assert outputs["OUTPUT0"].shape == (rows, 3)
    np.testing.assert_allclose(outputs["OUTPUT0"], x @ LINEAR_WEIGHTS + LINEAR_BIAS, rtol=1e-5, atol=1e-5)
