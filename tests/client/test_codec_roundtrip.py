"""Encoding and decoding agree for every datatype, in JSON and in binary, for requests and responses."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from mme_triton.client.codec import (
    BINARY_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    InferInput,
    InferRequestedOutput,
    decode_request,
    decode_response,
    decode_response_full,
    encode_request,
    encode_response,
)
from mme_triton.client.datatypes import numpy_dtype

SameTensor = Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], None]
NOT_IN_JSON = {"FP16", "BF16"}


def _header(body: bytes | bytearray, content_type: str) -> dict[str, Any]:
    size = int(content_type.rpartition("=")[2]) if content_type.startswith(BINARY_CONTENT_TYPE) else len(body)
    header: dict[str, Any] = json.loads(bytes(body[:size]))
    return header


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_encode_request_roundtrips_every_datatype(
    sample_datatype: str,
    sample: np.ndarray[Any, Any],
    binary: bool,
    json_backend: str,
    same_tensor: SameTensor,
) -> None:
    body, content_type = encode_request({"t": sample}, binary=binary)
    inputs, header = decode_request(body, content_type)
    same_tensor(inputs["t"], sample)
    entry = header["inputs"][0]
    assert entry["datatype"] == sample_datatype
    assert entry["shape"] == list(sample.shape)
    sent_binary = "binary_data_size" in entry.get("parameters", {})
    # JSON carries everything but FP16 and BF16; those travel in binary even in a JSON request.
    assert sent_binary == (binary or sample_datatype in NOT_IN_JSON)
    assert content_type.startswith(BINARY_CONTENT_TYPE) == sent_binary
    if not sent_binary:
        assert content_type == JSON_CONTENT_TYPE


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_encode_response_roundtrips_every_datatype(
    sample_datatype: str,
    sample: np.ndarray[Any, Any],
    binary: bool,
    json_backend: str,
    same_tensor: SameTensor,
) -> None:
    body, content_type = encode_response({"out": sample}, binary=binary, model_name="m", model_version="3")
    response = decode_response_full(body, content_type)
    same_tensor(response.outputs["out"], sample)
    assert (response.model_name, response.model_version) == ("m", "3")


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (0, 0)], ids=["0", "2x0x3", "0x0"])
def test_roundtrip_empty_tensors_keep_their_shape(
    sample_datatype: str, shape: tuple[int, ...], binary: bool, json_backend: str, same_tensor: SameTensor
) -> None:
    empty = np.empty(shape, dtype=numpy_dtype(sample_datatype))
    body, content_type = encode_request({"e": empty}, binary=binary)
    same_tensor(decode_request(body, content_type)[0]["e"], empty)
    body, content_type = encode_response({"e": empty}, binary=binary)
    same_tensor(decode_response(body, content_type)["e"], empty)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_roundtrip_scalar_has_shape_empty_list(binary: bool, json_backend: str) -> None:
    body, content_type = encode_request(
        {"s": np.float32(2.5), "b": np.array(b"x", dtype=object)}, binary=binary
    )
    inputs, header = decode_request(body, content_type)
    assert [entry["shape"] for entry in header["inputs"]] == [[], []]
    assert inputs["s"].shape == () and inputs["s"] == np.float32(2.5)
    assert inputs["b"].shape == () and inputs["b"].item() == b"x"


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2],
        lambda: np.arange(24, dtype=np.int64).reshape(4, 6).T,
        lambda: np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
        lambda: np.arange(10, dtype=">f8"),
        lambda: np.arange(12, dtype=">i4").reshape(3, 4)[::-1, 1:],
        lambda: np.arange(8, dtype=np.float32).astype(ml_dtypes.bfloat16)[::2],
    ],
    ids=["strided", "transposed", "fortran", "big-endian", "big-endian-strided", "bf16-strided"],
)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_encode_request_converts_non_contiguous_and_big_endian_inputs(
    make: Callable[[], np.ndarray[Any, Any]], binary: bool, same_tensor: SameTensor
) -> None:
    array = make()
    body, content_type = encode_request({"x": array}, binary=binary)
    same_tensor(decode_request(body, content_type)[0]["x"], array)
    if binary:
        size = int(content_type.rpartition("=")[2])
        wire = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        assert bytes(body[size:]) == wire


def test_encode_request_contiguous_inputs_give_bytes() -> None:
    body, _ = encode_request({"x": np.ones(4, np.float32), "y": np.array([b"a"], dtype=object)})
    assert isinstance(body, bytes)


def test_encode_request_binary_section_is_tensors_in_input_order() -> None:
    x = np.array([1.0, 2.0], dtype=np.float32)
    y = np.array([b"ab", b""], dtype=object)
    body, content_type = encode_request({"x": x, "y": y})
    size = int(content_type.rpartition("=")[2])
    expected = struct.pack("<2f", 1.0, 2.0) + struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0)
    assert bytes(body[size:]) == expected
    header = _header(body, content_type)
    sizes = [entry["parameters"]["binary_data_size"] for entry in header["inputs"]]
    assert sizes == [8, 10]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (np.array(["é", "ab"]), [b"\xc3\xa9", b"ab"]),
        (np.array([b"a", b"bc"]), [b"a", b"bc"]),
        (np.array(["text", b"\x00\xff"], dtype=object), [b"text", b"\x00\xff"]),
        (np.array([bytearray(b"ba"), np.bytes_(b"np")], dtype=object), [b"ba", b"np"]),
        (["list", "of", "str"], [b"list", b"of", b"str"]),
    ],
    ids=["unicode-U", "bytes-S", "object-str-and-bytes", "object-bytearray", "python-list"],
)
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_encode_request_bytes_accepts_str_bytes_and_string_dtypes(
    value: Any, expected: list[bytes], binary: bool, json_backend: str
) -> None:
    body, content_type = encode_request({"s": value}, binary=binary)
    inputs, header = decode_request(body, content_type)
    assert header["inputs"][0]["datatype"] == "BYTES"
    assert inputs["s"].dtype == np.object_
    assert inputs["s"].tolist() == expected


def test_encode_request_json_sends_non_utf8_bytes_in_binary(json_backend: str) -> None:
    text = np.array([b"ok"], dtype=object)
    raw = np.array([b"\xff\xfe"], dtype=object)
    body, content_type = encode_request({"text": text, "raw": raw}, binary=False)
    header = _header(body, content_type)
    entries = {entry["name"]: entry for entry in header["inputs"]}
    assert entries["text"]["data"] == ["ok"]
    assert entries["raw"]["parameters"] == {"binary_data_size": 6}
    assert decode_request(body, content_type)[0]["raw"].tolist() == [b"\xff\xfe"]


def test_encode_request_bytes_rejects_other_element_types() -> None:
    with pytest.raises(TypeError, match=r"BYTES tensor 's' holds a int"):
        encode_request({"s": np.array([b"a", 3], dtype=object)})


def test_decode_response_binary_outputs_are_read_only_views_onto_the_body() -> None:
    y = np.arange(12, dtype=np.float32).reshape(3, 4)
    body, content_type = encode_response({"y": y})
    out = decode_response(body, content_type)["y"]
    assert not out.flags.writeable
    assert np.shares_memory(out, np.frombuffer(body, dtype=np.uint8))
    with pytest.raises(ValueError, match="read-only"):
        out[0, 0] = 1.0


def test_decode_response_bytearray_body_still_gives_read_only_views() -> None:
    body, content_type = encode_response({"y": np.arange(4, dtype=np.int32)})
    out = decode_response(bytearray(body), content_type)["y"]
    assert not out.flags.writeable


def test_decode_response_copy_gives_writable_arrays_that_own_their_data() -> None:
    y = np.arange(6, dtype=np.int64)
    body, content_type = encode_response({"y": y})
    out = decode_response(body, content_type, copy=True)["y"]
    assert out.flags.writeable and out.flags.owndata
    assert not np.shares_memory(out, np.frombuffer(body, dtype=np.uint8))
    out[0] = 42
    assert decode_response(body, content_type)["y"][0] == 0


def test_decode_response_accepts_a_memoryview_body(same_tensor: SameTensor) -> None:
    y = np.arange(6, dtype=np.uint16).reshape(2, 3)
    body, content_type = encode_response({"y": y})
    same_tensor(decode_response(memoryview(body), content_type)["y"], y)


def test_encode_response_mixes_binary_and_json_outputs(json_backend: str, same_tensor: SameTensor) -> None:
    outputs: dict[str, np.ndarray[Any, Any]] = {
        "a": np.arange(4, dtype=np.float32),
        "b": np.array([[1, 2]], dtype=np.int64),
        "c": np.array([b"x", b"yz"], dtype=object),
        "d": np.array([True, False]),
    }
    body, content_type = encode_response(outputs, binary={"a", "c"})
    header = _header(body, content_type)
    assert [("data" in entry) for entry in header["outputs"]] == [False, True, False, True]
    decoded = decode_response(body, content_type)
    for name, array in outputs.items():
        same_tensor(decoded[name], array)


def test_encode_response_json_still_writes_fp16_in_binary(json_backend: str) -> None:
    body, content_type = encode_response(
        {"h": np.ones(2, np.float16), "f": np.ones(2, np.float32)}, binary=False
    )
    header = _header(body, content_type)
    assert "parameters" in header["outputs"][0] and "data" in header["outputs"][1]


@pytest.mark.parametrize(
    "template",
    [
        "application/vnd.sagemaker-triton.binary+json;json-header-size={}",
        "application/vnd.sagemaker-triton.binary+json; json-header-size={}",
        "Application/Vnd.Sagemaker-Triton.Binary+JSON ; JSON-Header-Size = {} ",
        'application/vnd.sagemaker-triton.binary+json;charset=utf-8;json-header-size="{}"',
    ],
    ids=["sagemaker", "space", "case-and-spaces", "quoted-with-other-params"],
)
def test_decode_response_reads_header_size_from_content_type_parameters(template: str) -> None:
    y = np.arange(3, dtype=np.int8)
    body, content_type = encode_response({"y": y})
    size = int(content_type.rpartition("=")[2])
    assert decode_response(body, template.format(size))["y"].tolist() == [0, 1, 2]


def test_decode_response_takes_header_size_from_the_caller_for_octet_stream() -> None:
    body, content_type = encode_response({"y": np.arange(3, dtype=np.int8)})
    size = int(content_type.rpartition("=")[2])
    assert decode_response(body, "application/octet-stream", header_size=size)["y"].tolist() == [0, 1, 2]


def test_decode_response_reads_triton_json_as_written_by_the_server(json_backend: str) -> None:
    # Triton writes FP32 outputs as doubles, BOOL as true/false, BYTES as strings; "data" may be nested.
    body = (
        b'{"id":"42","model_name":"m.tar.gz","model_version":"1","parameters":{"sequence_id":0},'
        b'"outputs":[{"name":"f","datatype":"FP32","shape":[2,2],"data":[[0.10000000149011612,2.0],[3,-0.0]]},'
        b'{"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},'
        b'{"name":"s","datatype":"BYTES","shape":[1,2],"data":["caf\xc3\xa9","raw\xff"]},'
        b'{"name":"u","datatype":"UINT64","shape":[1],"data":[18446744073709551615]}]}'
    )
    response = decode_response_full(body, "application/json")
    assert (response.id, response.model_name, response.model_version) == ("42", "m.tar.gz", "1")
    assert response.parameters == {"sequence_id": 0}
    f = response.outputs["f"]
    assert f.dtype == np.float32 and f.shape == (2, 2)
    assert f.tolist() == [[np.float32(0.1), 2.0], [3.0, 0.0]] and np.signbit(f[1, 1])
    assert response.outputs["b"].tolist() == [True, False]
    # Triton writes BYTES into JSON as they are, even when they are not UTF-8.
    assert response.outputs["s"].tolist() == [["café".encode(), b"raw\xff"]]
    assert response.outputs["u"].tolist() == [2**64 - 1]


def test_decode_response_reads_mixed_binary_and_json_outputs_from_a_hand_built_body() -> None:
    header = json.dumps(
        {
            "model_name": "m",
            "outputs": [
                {"name": "a", "datatype": "INT32", "shape": [2], "parameters": {"binary_data_size": 8}},
                {"name": "j", "datatype": "FP64", "shape": [1], "data": [1.5]},
                {"name": "s", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 7}},
            ],
        }
    ).encode()
    body = header + struct.pack("<2i", -1, 7) + struct.pack("<I", 3) + b"abc"
    outputs = decode_response(body, f"{BINARY_CONTENT_TYPE};json-header-size={len(header)}")
    assert outputs["a"].tolist() == [-1, 7]
    assert outputs["j"].tolist() == [1.5]
    assert outputs["s"].tolist() == [b"abc"]


# --- the request header -------------------------------------------------------------------------------


def test_encode_request_all_outputs_binary_by_default() -> None:
    body, content_type = encode_request({"x": np.ones(1, np.float32)})
    header = _header(body, content_type)
    assert header["parameters"] == {"binary_data_output": True}
    assert "outputs" not in header


def test_encode_request_empty_outputs_means_all_outputs() -> None:
    body, content_type = encode_request({"x": np.ones(1, np.float32)}, [])
    header = _header(body, content_type)
    assert header["parameters"] == {"binary_data_output": True}
    assert "outputs" not in header


def test_encode_request_json_leaves_outputs_to_the_server_default(json_backend: str) -> None:
    body, content_type = encode_request({"x": np.ones(1, np.float32)}, binary=False)
    header = _header(body, content_type)
    assert "parameters" not in header and "outputs" not in header


@pytest.mark.parametrize(
    ("binary", "binary_outputs", "expected"),
    [
        (True, None, {"y": True, "z": True, "c": False}),
        (False, None, {"y": False, "z": False, "c": False}),
        (False, True, {"y": True, "z": True, "c": True}),
        (True, False, {"y": False, "z": False, "c": False}),
        (False, {"z"}, {"y": False, "z": True, "c": False}),
    ],
    ids=["binary", "json", "json-binary-outputs", "binary-json-outputs", "json-one-binary"],
)
def test_encode_request_asks_for_each_output_in_the_chosen_format(
    binary: bool, binary_outputs: Any, expected: dict[str, bool]
) -> None:
    outputs: list[str | InferRequestedOutput] = [
        "y",
        "z",
        InferRequestedOutput("c", binary_data=False, class_count=3),
    ]
    body, content_type = encode_request(
        {"x": np.ones(1, np.float32)}, outputs, binary=binary, binary_outputs=binary_outputs
    )
    header = _header(body, content_type)
    assert {o["name"]: o["parameters"]["binary_data"] for o in header["outputs"]} == expected
    assert header["outputs"][2]["parameters"]["classification"] == 3
    assert "parameters" not in header


def test_encode_request_writes_id_and_parameters() -> None:
    body, content_type = encode_request(
        {"x": np.ones(1, np.float32)}, ["y"], request_id="req-1", parameters={"priority": 2, "tag": "a"}
    )
    header = _header(body, content_type)
    assert header["id"] == "req-1"
    assert header["parameters"] == {"priority": 2, "tag": "a"}


def test_encode_request_binary_output_names_need_outputs() -> None:
    with pytest.raises(ValueError, match="binary_outputs names outputs"):
        encode_request({"x": np.ones(1, np.float32)}, binary=False, binary_outputs=["y"])


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        ({"binary_data_output": True}, ValueError),
        ({"p": [1, 2]}, TypeError),
        ({"p": None}, TypeError),
        ({1: "a"}, TypeError),
    ],
    ids=["reserved", "list-value", "none-value", "non-str-key"],
)
def test_encode_request_rejects_bad_parameters(parameters: dict[Any, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        encode_request({"x": np.ones(1, np.float32)}, parameters=parameters)


@pytest.mark.parametrize(
    ("inputs", "outputs", "error", "match"),
    [
        ({"x": np.ones(2, np.complex64)}, None, TypeError, "no Triton datatype"),
        ("x", None, TypeError, "inputs must be"),
        ([np.ones(2)], None, TypeError, "mme_triton.InferInput objects, got numpy.ndarray"),
        ({"x": np.ones(1)}, "y", TypeError, "not a str"),
        ({"x": np.ones(1)}, [3], TypeError, "names or InferRequestedOutput"),
        ({"x": np.ones(1)}, ["y", "y"], ValueError, "requested twice"),
    ],
    ids=["complex", "str-inputs", "array-list", "str-outputs", "int-output", "duplicate-output"],
)
def test_encode_request_rejects_misuse(inputs: Any, outputs: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        encode_request(inputs, outputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["fp32", "fp64"])
def test_encode_request_writes_nan_and_infinity_in_json_as_tritons_parser_reads_them(
    json_backend: str, same_tensor: SameTensor, dtype: type
) -> None:
    x = np.array([1.5, np.nan, -np.inf, np.inf, -0.0], dtype=dtype)

    body, content_type = encode_request({"x": x}, binary=False)

    assert content_type == "application/json"
    assert b'"data":[1.5,NaN,-Infinity,Infinity,-0.0]' in bytes(body)
    same_tensor(decode_request(body, content_type)[0]["x"], x)


def test_encode_request_sends_nan_in_binary(same_tensor: SameTensor) -> None:
    x = np.array([np.nan, -np.inf, np.inf], dtype=np.float64)
    body, content_type = encode_request({"x": x})
    same_tensor(decode_request(body, content_type)[0]["x"], x)


# --- InferInput / InferRequestedOutput ----------------------------------------------------------------


@pytest.mark.parametrize("binary_data", [True, False], ids=["binary", "json"])
def test_infer_input_keeps_its_own_binary_setting(binary_data: bool, same_tensor: SameTensor) -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    tensor = InferInput("x", [2, 3], "INT32").set_data_from_numpy(x, binary_data=binary_data)
    assert (tensor.name(), tensor.shape(), tensor.datatype()) == ("x", [2, 3], "INT32")
    body, content_type = encode_request([tensor], binary=not binary_data)
    inputs, header = decode_request(body, content_type)
    assert ("data" in header["inputs"][0]) == (not binary_data)
    same_tensor(inputs["x"], x)


def test_infer_input_bytes_accepts_object_arrays() -> None:
    tensor = InferInput("s", [2], "BYTES").set_data_from_numpy(np.array([b"a", "b"], dtype=object))
    body, content_type = encode_request([tensor])
    assert decode_request(body, content_type)[0]["s"].tolist() == [b"a", b"b"]


@pytest.mark.parametrize(
    ("shape", "datatype", "array", "error", "match"),
    [
        ([2], "FP32", np.ones(2, np.float64), ValueError, "is FP32 but"),
        ([2], "FP32", np.ones((2, 1), np.float32), ValueError, "has shape"),
        ([2], "FP32", [1.0, 2.0], TypeError, "numpy array"),
        ([2], "BF16", np.ones(2, np.float32), ValueError, "is BF16 but"),
    ],
    ids=["dtype", "shape-never-reshaped", "list", "bf16-needs-bfloat16"],
)
def test_infer_input_rejects_mismatched_data(
    shape: list[int], datatype: str, array: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        InferInput("x", shape, datatype).set_data_from_numpy(array)


def test_infer_input_without_data_is_refused() -> None:
    with pytest.raises(ValueError, match="no data"):
        encode_request([InferInput("x", [1], "FP32")])


def test_infer_input_rejects_unknown_datatype() -> None:
    with pytest.raises(ValueError, match="unknown Triton datatype"):
        InferInput("x", [1], "FLOAT")


def test_encode_request_rejects_duplicate_inputs() -> None:
    x = np.ones(1, np.float32)
    inputs = [InferInput("x", [1], "FP32").set_data_from_numpy(x) for _ in range(2)]
    with pytest.raises(ValueError, match="given twice"):
        encode_request(inputs)
