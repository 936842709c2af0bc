"""Bad bodies raise CodecError naming the tensor; never a numpy traceback nor garbage arrays."""

from __future__ import annotations

import json
import re
import struct
from typing import Any

import pytest

from mme_triton.client.codec import BINARY_CONTENT_TYPE, decode_request, decode_response
from mme_triton.errors import CodecError, MMETritonError


def _binary_body(outputs: list[dict[str, Any]], data: bytes) -> tuple[bytes, str]:
    header = json.dumps({"model_name": "m", "outputs": outputs}).encode()
    return header + data, f"{BINARY_CONTENT_TYPE};json-header-size={len(header)}"


def _json_body(outputs: list[dict[str, Any]]) -> tuple[bytes, str]:
    return json.dumps({"outputs": outputs}).encode(), "application/json"


def _binary_output(name: str, datatype: str, shape: list[int], size: Any) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "parameters": {"binary_data_size": size}}


BAD_BODIES: list[tuple[str, tuple[bytes, str], str | None, str]] = [
    (
        "truncated-binary-section",
        _binary_body([_binary_output("y", "FP32", [4], 16)], b"\x00" * 12),
        "y",
        "binary section is truncated",
    ),
    (
        "size-not-shape-times-datatype",
        _binary_body([_binary_output("y", "FP32", [2, 2], 12)], b"\x00" * 12),
        "y",
        "needs 16",
    ),
    (
        "unknown-datatype",
        _binary_body([_binary_output("y", "FP8", [2], 2)], b"\x00" * 2),
        "y",
        "unknown datatype 'FP8'",
    ),
    (
        "bytes-element-past-tensor",
        _binary_body([_binary_output("s", "BYTES", [1], 6)], struct.pack("<I", 5) + b"ab"),
        "s",
        "claims 5 bytes",
    ),
    (
        "bytes-missing-length",
        _binary_body([_binary_output("s", "BYTES", [2], 6)], struct.pack("<I", 1) + b"ab"),
        "s",
        "ends after 1 of 2",
    ),
    (
        "bytes-left-over",
        _binary_body([_binary_output("s", "BYTES", [1], 7)], struct.pack("<I", 1) + b"abc"),
        "s",
        "left over",
    ),
    (
        "trailing-bytes-after-tensors",
        _binary_body([_binary_output("y", "INT8", [2], 2)], b"\x01\x02\x03"),
        None,
        "1 bytes follow the last binary tensor",
    ),
    (
        "negative-binary-size",
        _binary_body([_binary_output("y", "INT8", [0], -1)], b""),
        "y",
        "not a non-negative integer",
    ),
    (
        "bool-bytes-not-0-or-1",
        _binary_body([_binary_output("b", "BOOL", [2], 2)], b"\x01\x07"),
        "b",
        "other than 0 and 1",
    ),
    (
        "json-count-too-small",
        _json_body([{"name": "y", "datatype": "INT32", "shape": [2, 2], "data": [1, 2, 3]}]),
        "y",
        r"3 elements but shape \[2, 2\] needs 4",
    ),
    (
        "json-count-too-large",
        _json_body([{"name": "s", "datatype": "BYTES", "shape": [1], "data": ["a", "b"]}]),
        "s",
        "2 elements",
    ),
    (
        "json-strings-in-fp32",
        _json_body([{"name": "y", "datatype": "FP32", "shape": [2], "data": ["1", "2"]}]),
        "y",
        "not FP32",
    ),
    (
        "json-floats-in-int32",
        _json_body([{"name": "y", "datatype": "INT32", "shape": [2], "data": [1.5, 2]}]),
        "y",
        "not (INT32|integers)",
    ),
    (
        "json-out-of-range",
        _json_body([{"name": "y", "datatype": "UINT8", "shape": [2], "data": [1, 256]}]),
        "y",
        "outside the range of UINT8",
    ),
    (
        "json-huge-int-out-of-range",
        _json_body([{"name": "y", "datatype": "INT64", "shape": [2], "data": [1, 2**64]}]),
        "y",
        # orjson reads 2**64 as a float, json as an int: an error either way.
        "(outside the range of|not integers, which) INT64",
    ),
    (
        "json-ragged",
        _json_body([{"name": "y", "datatype": "FP64", "shape": [3], "data": [[1.0, 2.0], [3.0]]}]),
        "y",
        "not a regular array",
    ),
    (
        "json-numbers-in-bytes",
        _json_body([{"name": "s", "datatype": "BYTES", "shape": [1], "data": [3]}]),
        "s",
        "not a string",
    ),
    (
        "json-bool-as-number",
        _json_body([{"name": "b", "datatype": "BOOL", "shape": [1], "data": [2]}]),
        "b",
        "not BOOL",
    ),
    (
        "negative-dimension",
        _json_body([{"name": "y", "datatype": "FP32", "shape": [-1], "data": []}]),
        "y",
        "not a list of non-negative integers",
    ),
    (
        "shape-not-a-list",
        _json_body([{"name": "y", "datatype": "FP32", "shape": "2", "data": [1.0, 2.0]}]),
        "y",
        "not a list",
    ),
    (
        "neither-data-nor-binary",
        _json_body([{"name": "y", "datatype": "FP32", "shape": [1]}]),
        "y",
        "neither 'data' nor a binary_data_size",
    ),
    (
        "shared-memory",
        _json_body(
            [{"name": "y", "datatype": "FP32", "shape": [1], "parameters": {"shared_memory_region": "r"}}]
        ),
        "y",
        "shared-memory region",
    ),
    (
        "duplicate-name",
        _json_body([{"name": "y", "datatype": "INT8", "shape": [0], "data": []}] * 2),
        "y",
        "twice",
    ),
    ("entry-without-name", _json_body([{"datatype": "INT8", "shape": [0], "data": []}]), None, "no name"),
    ("outputs-not-a-list", (b'{"outputs": {"y": 1}}', "application/json"), None, "not a list"),
    ("not-json", (b"<html>502 Bad Gateway</html>", "text/html"), None, "not JSON"),
    ("header-not-an-object", (b"[1, 2]", "application/json"), None, "not an object"),
    (
        "header-size-beyond-body",
        (b'{"outputs": []}', f"{BINARY_CONTENT_TYPE};json-header-size=99"),
        None,
        "outside the body of 15 bytes",
    ),
    (
        "header-size-not-a-number",
        (b'{"outputs": []}', f"{BINARY_CONTENT_TYPE};json-header-size=abc"),
        None,
        "not a number",
    ),
    ("header-size-missing", (b'{"outputs": []}', BINARY_CONTENT_TYPE), None, "no json-header-size"),
    (
        "header-cut-by-header-size",
        (b'{"outputs": []}', f"{BINARY_CONTENT_TYPE};json-header-size=5"),
        None,
        "not JSON",
    ),
]


@pytest.mark.parametrize(
    ("body", "content_type", "tensor", "match"),
    [case[1] + case[2:] for case in BAD_BODIES],
    ids=[case[0] for case in BAD_BODIES],
)
def test_decode_response_bad_body_raises_codec_error(
    body: bytes, content_type: str, tensor: str | None, match: str, json_backend: str
) -> None:
    with pytest.raises(CodecError, match=match) as info:
        decode_response(body, content_type)
    assert info.value.tensor == tensor
    assert isinstance(info.value, MMETritonError)


def test_decode_response_error_body_raises_with_the_server_message() -> None:
    body = b"{\"error\":\"unexpected inference input 'BAD' for model 'linear.tar.gz'\"}"
    message = "unexpected inference input 'BAD' for model 'linear.tar.gz'"
    with pytest.raises(CodecError, match=re.escape(message)):
        decode_response(body, "application/json")


def test_decode_request_bad_body_names_the_input() -> None:
    header = json.dumps(
        {"inputs": [{"name": "x", "datatype": "INT64", "shape": [3], "parameters": {"binary_data_size": 24}}]}
    ).encode()
    with pytest.raises(CodecError, match="truncated") as info:
        decode_request(header + b"\x00" * 8, f"{BINARY_CONTENT_TYPE};json-header-size={len(header)}")
    assert info.value.tensor == "x"
