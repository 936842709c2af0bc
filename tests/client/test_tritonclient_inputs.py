"""tritonclient's own ``InferInput`` / ``InferRequestedOutput`` (http and grpc), accepted where ours are.

AWS's sample notebooks build requests with ``tritonclient.http.InferInput``; the body encoded from them
must be the one encoded from ``mme_triton.InferInput`` with the same data and settings, and their wire
bytes must go into the body without another copy.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import numpy as np
import pytest

from mme_triton.client._request import input_arrays, input_rows
from mme_triton.client.codec import (
    InferInput,
    InferRequestedOutput,
    decode_request,
    encode_request,
)

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")

FLAVOURS = ["http", "grpc"]


def _header(body: bytes | bytearray, content_type: str) -> dict[str, Any]:
    size = int(content_type.rpartition("=")[2]) if "json-header-size" in content_type else len(body)
    header: dict[str, Any] = json.loads(bytes(body[:size]))
    return header


def _theirs(flavour: str, name: str, array: np.ndarray[Any, Any], datatype: str, binary: bool = True) -> Any:
    if flavour == "http":
        tensor = httpclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array, binary_data=binary)
    else:
        tensor = grpcclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
    return tensor


def _ours(name: str, array: np.ndarray[Any, Any], datatype: str, binary: bool = True) -> InferInput:
    return InferInput(name, list(array.shape), datatype).set_data_from_numpy(array, binary_data=binary)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_binary_input_encodes_like_ours(
    flavour: str, sample_datatype: str, sample: np.ndarray[Any, Any]
) -> None:
    theirs = encode_request([_theirs(flavour, "x", sample, sample_datatype)])
    ours = encode_request([_ours("x", sample, sample_datatype)])
    assert theirs[1] == ours[1]
    assert bytes(theirs[0]) == bytes(ours[0])


def test_tritonclient_json_input_encodes_like_ours(
    json_datatype: str, json_sample: np.ndarray[Any, Any]
) -> None:
    theirs = encode_request([_theirs("http", "x", json_sample, json_datatype, binary=False)])
    ours = encode_request([_ours("x", json_sample, json_datatype, binary=False)])
    assert theirs[1] == ours[1] == "application/json"
    assert json.loads(bytes(theirs[0])) == json.loads(bytes(ours[0]))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_inputs_decode_back_to_the_arrays(
    flavour: str, samples: dict[str, np.ndarray[Any, Any]]
) -> None:
    inputs = [_theirs(flavour, f"IN_{dt}", array, dt) for dt, array in samples.items()]
    body, content_type = encode_request(inputs)
    decoded, _ = decode_request(body, content_type)
    for datatype, array in samples.items():
        got = decoded[f"IN_{datatype}"]
        if datatype == "BYTES":
            assert (
                got.tolist()
                == np.vectorize(lambda v: v if isinstance(v, bytes) else v.encode())(array).tolist()
            )
        else:
            np.testing.assert_array_equal(got.view(np.uint8), array.view(np.uint8))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_binary_input_is_not_copied_before_the_body(flavour: str) -> None:
    array = np.ones((1024, 1024), dtype=np.float32)  # 4 MiB
    tensor = _theirs(flavour, "x", array, "FP32")
    tracemalloc.start()
    try:
        body, _ = encode_request([tensor])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(body) > array.nbytes
    # the body itself, and no second copy of the tensor on the way
    assert peak < array.nbytes * 1.5, peak


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_numeric_input_array_is_a_view(flavour: str) -> None:
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    tensor = _theirs(flavour, "x", array, "INT32")
    got = input_arrays([tensor])["x"]
    np.testing.assert_array_equal(got, array)
    assert not got.flags.owndata


@pytest.mark.parametrize(
    ("flavour", "binary", "expected_binary"),
    [("http", True, True), ("http", False, False), ("grpc", True, True)],
    ids=["http-binary", "http-json", "grpc"],
)
def test_tritonclient_input_rows_keep_datatype_and_encoding(
    flavour: str, binary: bool, expected_binary: bool
) -> None:
    array = np.arange(20, dtype=np.float64).reshape(5, 4)
    tensor = _theirs(flavour, "x", array, "FP64", binary=binary)
    rows = input_rows([tensor], 1, 3)
    assert isinstance(rows, list)
    (part,) = rows
    assert isinstance(part, InferInput)
    assert (part.name(), part.shape(), part.datatype()) == ("x", [2, 4], "FP64")
    assert part.binary_data() is expected_binary
    np.testing.assert_array_equal(part.data(), array[1:3])


def test_tritonclient_bytes_input_rows_are_deserialised() -> None:
    array = np.array([[b"a", b"bc"], [b"", b"def"]], dtype=np.object_)
    tensor = _theirs("http", "s", array, "BYTES")
    (part,) = input_rows([tensor], 1, 2)  # type: ignore[misc]
    assert part.data().tolist() == [[b"", b"def"]]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: httpclient.InferRequestedOutput("y"), {"binary_data": True}),
        (lambda: httpclient.InferRequestedOutput("y", binary_data=False), {"binary_data": False}),
        (
            lambda: httpclient.InferRequestedOutput("y", class_count=3),
            {"classification": 3, "binary_data": True},
        ),
        (lambda: grpcclient.InferRequestedOutput("y"), {"binary_data": True}),
        (
            lambda: grpcclient.InferRequestedOutput("y", class_count=2),
            {"classification": 2, "binary_data": True},
        ),
    ],
    ids=["http", "http-json", "http-classes", "grpc", "grpc-classes"],
)
def test_tritonclient_requested_output_is_read(make: Any, expected: dict[str, Any]) -> None:
    body, content_type = encode_request({"x": np.ones(2, np.float32)}, [make()])
    assert _header(body, content_type)["outputs"] == [{"name": "y", "parameters": expected}]


def test_tritonclient_requested_output_matches_ours() -> None:
    inputs = {"x": np.ones(2, np.float32)}
    theirs = encode_request(inputs, [httpclient.InferRequestedOutput("y", binary_data=False, class_count=1)])
    ours = encode_request(inputs, [InferRequestedOutput("y", binary_data=False, class_count=1)])
    assert bytes(theirs[0]) == bytes(ours[0])


def test_tritonclient_grpc_output_follows_the_request_binary_setting() -> None:
    body, content_type = encode_request(
        {"x": np.ones(2, np.float32)}, [grpcclient.InferRequestedOutput("y")], binary=False
    )
    assert _header(body, content_type)["outputs"][0]["parameters"] == {"binary_data": False}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_input_without_data_is_refused(flavour: str) -> None:
    module = httpclient if flavour == "http" else grpcclient
    with pytest.raises(ValueError, match="has no data; call set_data_from_numpy"):
        encode_request([module.InferInput("x", [2], "FP32")])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_shared_memory_input_is_refused(flavour: str) -> None:
    module = httpclient if flavour == "http" else grpcclient
    tensor = module.InferInput("x", [2], "FP32")
    tensor.set_shared_memory("region", 8)
    with pytest.raises(ValueError, match="shared-memory region"):
        encode_request([tensor])


def test_tritonclient_shared_memory_output_is_refused() -> None:
    output = httpclient.InferRequestedOutput("y")
    output.set_shared_memory("region", 8)
    with pytest.raises(ValueError, match="shared-memory region"):
        encode_request({"x": np.ones(2, np.float32)}, [output])


def test_tritonclient_shape_changed_after_data_is_refused() -> None:
    tensor = _theirs("http", "x", np.ones((2, 2), np.float32), "FP32")
    tensor.set_shape([2, 3])
    with pytest.raises(ValueError, match="was the shape changed"):
        encode_request([tensor])


def test_tritonclient_and_our_inputs_mix_and_names_stay_unique() -> None:
    a = _theirs("http", "a", np.ones(2, np.float32), "FP32")
    b = _ours("b", np.zeros(3, np.int8), "INT8")
    body, content_type = encode_request([a, b])
    decoded, _ = decode_request(body, content_type)
    assert sorted(decoded) == ["a", "b"]
    with pytest.raises(ValueError, match="given twice"):
        encode_request([a, _ours("a", np.ones(2, np.float32), "FP32")])


def test_tritonclient_other_objects_are_still_refused() -> None:
    result = httpclient.InferResult  # a tritonclient class, but not an input
    with pytest.raises(TypeError, match=r"tritonclient or mme_triton\.InferInput objects"):
        encode_request([result])


# -- through MMEClient, to a real Triton ---------------------------------------------------------------


@pytest.mark.triton
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tritonclient_inputs_infer_on_triton(flavour: str, front: Any, runtime_factory: Any) -> None:
    from mme_triton.client.client import MMEClient

    client = MMEClient(front.endpoint, runtime_client=runtime_factory(front.url))
    data = np.arange(8, dtype=np.int16).reshape(2, 4)
    module = httpclient if flavour == "http" else grpcclient
    out = client.infer(
        "echo.tar.gz",
        [_theirs(flavour, "IN_INT16", data, "INT16")],
        [module.InferRequestedOutput("OUT_INT16")],
    )
    np.testing.assert_array_equal(out["OUT_INT16"], data)


@pytest.mark.triton
def test_tritonclient_inputs_split_batches_on_triton(front: Any, runtime_factory: Any) -> None:
    from mme_triton.client.client import MMEClient

    client = MMEClient(front.endpoint, runtime_client=runtime_factory(front.url))
    data = (np.arange(1700, dtype=np.float32)[:, None] * 1000 + np.arange(1024, dtype=np.float32)).astype(
        np.float32
    )  # 7 MiB: over the limit, sent in several requests
    out = client.infer("echo.tar.gz", [_theirs("http", "IN_FP32", data, "FP32")], split_batches=True)
    np.testing.assert_array_equal(out["OUT_FP32"], data)
    assert len(front.seen()) >= 2
