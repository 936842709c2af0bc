"""Agreement with tritonclient's own HTTP encoder and decoder, in both directions.

Binary sections must be byte-identical and JSON headers equal as parsed objects; JSON ``data`` must hold
the same values (float formatting may differ).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mme_triton.client.codec import (
    InferRequestedOutput,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from mme_triton.client.datatypes import numpy_dtype

SameTensor = Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], None]


def _split(body: bytes | bytearray, header_size: int | None) -> tuple[dict[str, Any], bytes]:
    size = len(body) if header_size is None else header_size
    return json.loads(bytes(body[:size])), bytes(body[size:])


def _our_header_size(content_type: str) -> int | None:
    return int(content_type.rpartition("=")[2]) if "json-header-size" in content_type else None


@pytest.fixture(scope="module")
def httpclient() -> Any:
    """``tritonclient.http``, imported only where the tests run (it needs the http extra)."""
    import tritonclient.http

    return tritonclient.http


@pytest.fixture(scope="module")
def client(httpclient: Any) -> Any:
    """tritonclient's ``InferenceServerClient`` class: its body helpers are static methods."""
    return httpclient.InferenceServerClient


def _their_input(httpclient: Any, name: str, array: np.ndarray[Any, Any], datatype: str, binary: bool) -> Any:
    tensor = httpclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def test_encode_request_binary_matches_generate_request_body(
    httpclient: Any, client: Any, sample_datatype: str, sample: np.ndarray[Any, Any]
) -> None:
    their_body, their_size = client.generate_request_body(
        [_their_input(httpclient, "t", sample, sample_datatype, True)],
        request_id="r-1",
        parameters={"priority_hint": 3},
    )
    our_body, content_type = encode_request({"t": sample}, request_id="r-1", parameters={"priority_hint": 3})
    assert _split(our_body, _our_header_size(content_type)) == _split(their_body, their_size)


@pytest.mark.parametrize(
    "outputs",
    [[("y", True, 0)], [("y", False, 0), ("z", True, 0)], [("c", True, 5)]],
    ids=["binary", "mixed", "classification"],
)
def test_encode_request_requested_outputs_match_generate_request_body(
    httpclient: Any,
    client: Any,
    outputs: list[tuple[str, bool, int]],
) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    theirs = [httpclient.InferRequestedOutput(n, binary_data=b, class_count=c) for n, b, c in outputs]
    ours = [InferRequestedOutput(n, binary_data=b, class_count=c) for n, b, c in outputs]
    their_body, their_size = client.generate_request_body(
        [_their_input(httpclient, "x", x, "FP32", True)], outputs=theirs
    )
    our_body, content_type = encode_request({"x": x}, ours)
    assert _split(our_body, _our_header_size(content_type)) == _split(their_body, their_size)


def test_encode_request_json_matches_generate_request_body_values(
    httpclient: Any, client: Any, json_datatype: str, json_sample: np.ndarray[Any, Any]
) -> None:
    sample_datatype, sample = json_datatype, json_sample
    outputs = [httpclient.InferRequestedOutput("y", binary_data=False)]
    their_body, their_size = client.generate_request_body(
        [_their_input(httpclient, "t", sample, sample_datatype, False)], outputs=outputs
    )
    our_body, content_type = encode_request({"t": sample}, ["y"], binary=False)
    assert content_type == "application/json" and their_size is None
    theirs, _ = _split(their_body, None)
    ours, _ = _split(our_body, None)
    their_data = theirs["inputs"][0].pop("data")
    our_data = ours["inputs"][0].pop("data")
    assert ours == theirs
    dtype = numpy_dtype(sample_datatype)
    if sample_datatype == "BYTES":
        assert our_data == their_data
    else:
        assert np.array(our_data, dtype=dtype).tobytes() == np.array(their_data, dtype=dtype).tobytes()


def test_decode_request_reads_binary_generate_request_body(
    httpclient: Any, client: Any, sample_datatype: str, sample: np.ndarray[Any, Any], same_tensor: SameTensor
) -> None:
    body, header_size = client.generate_request_body(
        [_their_input(httpclient, "t", sample, sample_datatype, True)]
    )
    content_type = f"application/vnd.sagemaker-triton.binary+json;json-header-size={header_size}"
    inputs, _ = decode_request(body, content_type)
    same_tensor(inputs["t"], sample)


def test_decode_request_reads_json_generate_request_body(
    httpclient: Any,
    client: Any,
    json_datatype: str,
    json_sample: np.ndarray[Any, Any],
    same_tensor: SameTensor,
) -> None:
    body, header_size = client.generate_request_body(
        [_their_input(httpclient, "t", json_sample, json_datatype, False)]
    )
    assert header_size is None
    inputs, _ = decode_request(body, "application/json")
    same_tensor(inputs["t"], json_sample)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_parse_response_body_reads_encode_response(
    httpclient: Any,
    client: Any,
    sample_datatype: str,
    sample: np.ndarray[Any, Any],
    binary: bool,
    same_tensor: SameTensor,
) -> None:
    body, content_type = encode_response(
        {"out": sample, "extra": np.arange(3, dtype=np.int32)}, binary=binary
    )
    result = client.parse_response_body(bytes(body), header_length=_our_header_size(content_type))
    theirs = result.as_numpy("out")
    if sample_datatype == "BYTES" and not binary:
        # tritonclient hands JSON BYTES back as str (binary ones as bytes); the codec always gives bytes.
        theirs = np.array([item.encode() for item in theirs.reshape(-1)], dtype=object).reshape(theirs.shape)
    same_tensor(theirs, sample)
    same_tensor(result.as_numpy("extra"), np.arange(3, dtype=np.int32))


def test_decode_response_agrees_with_parse_response_body_on_mixed_outputs(
    httpclient: Any, client: Any, same_tensor: SameTensor
) -> None:
    outputs = {
        "a": np.linspace(0, 1, 7, dtype=np.float32),
        "b": np.array([[b"x"], [b"\xff"]], dtype=object),
        "c": np.array([[1, -2]], dtype=np.int64),
    }
    body, content_type = encode_response(outputs, binary={"a", "b"})
    theirs = client.parse_response_body(body, header_length=_our_header_size(content_type))
    ours = decode_response(body, content_type)
    for name in outputs:
        same_tensor(ours[name], theirs.as_numpy(name))
