"""JSON decoding through pysimdjson: numeric data straight to numpy, with the generic path's rules."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

from mme_triton.client import _json
from mme_triton.client._tensors import NUMERIC_DATATYPES
from mme_triton.client.codec import (
    decode_request,
    decode_response,
    decode_response_full,
    encode_request,
    encode_response,
)
from mme_triton.errors import CodecError

pytest.importorskip("simdjson")

# A piece size that cuts every numeric array of four bytes of text or more out of the test bodies and
# reads it in several pieces, so that small bodies run the path large bodies take.
SMALL_PIECE = 4


@pytest.fixture(params=[None, SMALL_PIECE], ids=["whole", "pieces"])
def piece(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int | None:
    """Run the test with the default piece size and with long numeric arrays read in tiny pieces."""
    if request.param is not None:
        monkeypatch.setattr(_json, "_PIECE", request.param)
    value: int | None = request.param
    return value


def _body(*outputs: dict[str, Any]) -> bytes:
    return json.dumps({"model_name": "m", "outputs": list(outputs)}).encode()


def _decode_with(
    monkeypatch: pytest.MonkeyPatch, simdjson: bool, body: bytes, content_type: str = "application/json"
) -> Any:
    """The decoded outputs, or the CodecError's message, with pysimdjson on or off."""
    with monkeypatch.context() as patch:
        patch.setattr(_json, "use_simdjson", simdjson)
        try:
            return decode_response(body, content_type)
        except CodecError as exc:
            return f"CodecError: {exc}"


def _same_outcome(fast: Any, generic: Any) -> None:
    if isinstance(generic, str) or isinstance(fast, str):
        assert fast == generic
        return
    assert fast.keys() == generic.keys()
    for name, array in generic.items():
        assert fast[name].dtype == array.dtype and fast[name].shape == array.shape
        if array.dtype == np.object_:
            assert fast[name].tolist() == array.tolist()
        else:
            assert fast[name].tobytes() == array.tobytes()


# (datatype, shape, data as JSON text, expected values or the error's words)
CASES = [
    (
        "FP32",
        [3],
        "[0.10000000149011612,-0.0,3.4028234663852886e38]",
        [np.float32(0.1), -0.0, np.float32(3.4028235e38)],
    ),
    ("FP32", [2], "[1, 2.5]", [1.0, 2.5]),
    ("FP64", [2], "[5e-324, 1.7976931348623157e308]", [5e-324, 1.7976931348623157e308]),
    ("FP16", [2], "[1.5, 65504.0]", [1.5, 65504.0]),
    ("INT8", [2], "[-128, 127]", [-128, 127]),
    ("INT8", [1], "[128]", "outside the range of INT8"),
    ("UINT8", [1], "[-1]", "outside the range of UINT8"),
    ("UINT8", [1], "[256]", "outside the range of UINT8"),
    ("UINT32", [2], "[0, 4294967295]", [0, 2**32 - 1]),
    ("INT32", [1], "[2147483648]", "outside the range of INT32"),
    ("INT64", [2], "[-9223372036854775808, 9223372036854775807]", [-(2**63), 2**63 - 1]),
    ("INT64", [1], "[9223372036854775808]", "outside the range of INT64"),
    ("UINT64", [2], "[0, 18446744073709551615]", [0, 2**64 - 1]),
    ("UINT64", [1], "[-1]", "outside the range of UINT64"),
    ("UINT64", [1], "[18446744073709551616]", "UINT64"),
    ("INT32", [1], "[1.0]", "not integers"),
    ("INT64", [1], "[1e3]", "not integers"),
    ("INT32", [2], "[true, 2]", [1, 2]),
    ("FP32", [2], "[true, 1.5]", [1.0, 1.5]),
    ("FP32", [1], '["1.5"]', "are not FP32"),
    ("FP32", [1], "[null]", "are not FP32"),
    ("FP32", [3], "[1, 2]", "has 2 elements but shape [3] needs 3"),
    ("FP32", [2, 2], "[[1, 2], [3, 4]]", [[1.0, 2.0], [3.0, 4.0]]),
    ("FP32", [4], "[[1, 2], [3, 4]]", [1.0, 2.0, 3.0, 4.0]),
    ("INT32", [3], "[[1], [2, 3]]", "not a regular array"),
    ("INT32", [3], "[1, [2, 3], []]", "not a regular array"),
    ("INT32", [0, 3], "[]", []),
    ("FP32", [], "[2.5]", 2.5),
    ("FP32", [], "2.5", 2.5),
]
CASE_IDS = [f"{datatype}-{data}" for datatype, _, data, _ in CASES]


@pytest.mark.parametrize(("datatype", "shape", "data", "expected"), CASES, ids=CASE_IDS)
def test_decode_response_simdjson_keeps_the_strict_rules(
    monkeypatch: pytest.MonkeyPatch,
    piece: int | None,
    datatype: str,
    shape: list[int],
    data: str,
    expected: Any,
) -> None:
    entry = f'{{"name":"x","datatype":"{datatype}","shape":{shape},"data":{data}}}'
    body = f'{{"outputs":[{entry}]}}'.encode()
    fast = _decode_with(monkeypatch, True, body)
    if isinstance(expected, str):
        assert isinstance(fast, str) and expected in fast and "'x'" in fast
    else:
        assert fast["x"].shape == tuple(shape)
        assert fast["x"].tolist() == expected
    _same_outcome(fast, _decode_with(monkeypatch, False, body))


def test_decode_response_simdjson_agrees_on_every_json_datatype(
    monkeypatch: pytest.MonkeyPatch, piece: int | None, samples: dict[str, np.ndarray[Any, Any]]
) -> None:
    for writer in (True, False):  # orjson's float text and the standard library's
        with monkeypatch.context() as patch:
            patch.setattr(_json, "use_orjson", writer and _json.use_orjson)
            body, content_type = encode_response(samples, binary=False)
        body = bytes(body)
        fast = _decode_with(monkeypatch, True, body, content_type)
        for datatype, array in samples.items():
            assert fast[datatype].dtype == array.dtype
            if array.dtype == np.object_:
                assert fast[datatype].tolist() == array.tolist()
            else:
                assert fast[datatype].tobytes() == array.tobytes()
        _same_outcome(fast, _decode_with(monkeypatch, False, body, content_type))


@pytest.mark.parametrize(
    "strings",
    [["[CLS]", "a [b"], ["\\u005b"], ["\\u005b\\u005b"], ["]]"]],
    ids=["brackets", "escaped-bracket", "escaped-brackets", "closing"],
)
@pytest.mark.parametrize(
    ("data", "expected"),
    [("[1,2,3]", [1, 2, 3]), ("[1,[2,3],[]]", "not a regular array"), ("[[1],[2],[3]]", [1, 2, 3])],
    ids=["flat", "ragged", "nested"],
)
def test_decode_response_simdjson_sees_nesting_beside_strings_with_brackets(
    monkeypatch: pytest.MonkeyPatch, piece: int | None, strings: list[str], data: str, expected: Any
) -> None:
    # A '[' inside a string must neither hide a nested array nor be taken for one.
    texts = ",".join(f'"{s}"' for s in strings)
    strings_entry = f'{{"name":"s","datatype":"BYTES","shape":[{len(strings)}],"data":[{texts}]}}'
    numbers_entry = f'{{"name":"x","datatype":"INT32","shape":[3],"data":{data}}}'
    body = f'{{"outputs":[{strings_entry},{numbers_entry}],"parameters":{{"k[":"v["}}}}'.encode()
    fast = _decode_with(monkeypatch, True, body)
    if isinstance(expected, str):
        assert isinstance(fast, str) and expected in fast
    else:
        assert fast["x"].tolist() == expected
        assert isinstance(fast, dict)
        assert fast["s"].tolist() == [s.replace("\\u005b", "[").encode() for s in strings]
    _same_outcome(fast, _decode_with(monkeypatch, False, body))


@pytest.mark.parametrize(
    "body",
    [
        b'{"outputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[NaN,1.0]}]}',
        b'{"outputs":[{"name":"s","datatype":"BYTES","shape":[1],"data":["\xff"]},'
        b'{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}]}',
        b'{"outputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5],"data":[2.5]}]}',
        b'{"outputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1]}],"outputs":[]}',
        b'{"outputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}',
        b'{"outputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1e400]}]}',
        b'{"outputs":[{"name":"x","datatype":"FP32","sh\\u0000ape":[1],"data":[1.5]}],"p\\u0000":1}',
        b'{"outputs\\u0000":[],"outputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}]}',
        b'{"outputs":[{"name":"x","datatype":"FP32","shape":[2],"d\\u0061ta":[1.5,2]}]}',
        b'{"outputs":[{"name":"x","datatype":"FP32","shape":[2],"d\\u0061ta":[1.5,2]}],"outputs":[]}',
    ],
    ids=[
        "nan-literal",
        "non-utf8-bytes",
        "repeated-key",
        "repeated-outputs",
        "truncated",
        "overflow",
        "nul-in-entry-key",
        "nul-in-header-key",
        "escaped-data-key",
        "escaped-data-key-repeated-outputs",
    ],
)
def test_decode_response_simdjson_leaves_what_it_refuses_to_the_generic_path(
    monkeypatch: pytest.MonkeyPatch, piece: int | None, body: bytes
) -> None:
    _same_outcome(_decode_with(monkeypatch, True, body), _decode_with(monkeypatch, False, body))


def test_decode_response_simdjson_reads_the_header_of_a_binary_body(monkeypatch: pytest.MonkeyPatch) -> None:
    arrays: dict[str, np.ndarray[Any, Any]] = {
        "b": np.arange(4, dtype=np.int16),
        "j": np.linspace(0, 1, 5).astype(np.float32),
    }
    body, content_type = encode_response(arrays, binary={"b"}, model_name="m", parameters={"p": [1]})
    outputs = decode_response(bytearray(body), content_type)
    assert outputs["b"].tolist() == [0, 1, 2, 3]
    assert outputs["j"].dtype == np.float32 and outputs["j"].tolist() == arrays["j"].tolist()


def test_decode_response_json_outputs_are_writable(monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = {"f": np.ones(3, np.float64), "i": np.arange(3, dtype=np.int64), "u": np.ones(2, np.uint8)}
    body, content_type = encode_response(arrays, binary=False)
    outputs = decode_response(body, content_type)
    for array in outputs.values():
        array[0] = 7
        assert array[0] == 7


def test_decode_response_simdjson_recovers_after_an_error_kept_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = b'{"outputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]}'
    good = b'{"outputs":[{"name":"x","datatype":"INT8","shape":[2],"data":[3,4]}]}'
    with pytest.raises(CodecError) as caught:
        decode_response(bad, "application/json")
    # The traceback still holds the first document's objects while the next body is read.
    assert caught.value.__traceback__ is not None
    assert decode_response(good, "application/json")["x"].tolist() == [3, 4]


def test_decode_response_simdjson_large_documents_get_their_own_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_json, "_REUSE_LIMIT", 64)
    array = np.arange(100, dtype=np.float32) / 7
    body, content_type = encode_response({"y": array}, binary=False)
    assert len(body) > 64
    assert decode_response(body, content_type)["y"].tobytes() == array.tobytes()


def test_decode_response_simdjson_is_thread_safe(piece: int | None) -> None:
    arrays = [np.arange(n * 1000, dtype=np.int32) - n for n in range(1, 5)]
    bodies = [encode_response({"y": a}, binary=False)[0] for a in arrays]
    failures: list[str] = []

    def work(index: int) -> None:
        for _ in range(20):
            got = decode_response(bodies[index], "application/json")["y"]
            if got.tobytes() != arrays[index].tobytes():
                failures.append(f"thread {index}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(arrays))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_decode_request_header_keeps_its_data_lists() -> None:
    body, content_type = encode_request({"x": np.array([1.5, 2.5], np.float32)}, binary=False)
    inputs, header = decode_request(body, content_type)
    assert inputs["x"].tolist() == [1.5, 2.5]
    assert header["inputs"][0]["data"] == [1.5, 2.5]


def test_loads_tensors_marks_only_flat_numeric_data() -> None:
    body = _body(
        {"name": "a", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0]},
        {"name": "b", "datatype": "INT32", "shape": [1, 2], "data": [[1, 2]]},
        {"name": "c", "datatype": "BOOL", "shape": [1], "data": [True]},
    )
    header = _json.loads_tensors(body, NUMERIC_DATATYPES)
    a, b, c = (entry["data"] for entry in header["outputs"])
    assert isinstance(a, _json.NumberArray) and isinstance(b, _json.NumberArray)
    # One nested array in the document: no array can be proven flat, so both take the generic path.
    assert not a.flat and not b.flat
    assert c == [True]
    flat = _json.loads_tensors(
        _body(
            {"name": "s", "datatype": "BYTES", "shape": [1], "data": ["[CLS]"]},
            {"name": "a", "datatype": "FP32", "shape": [1], "data": [1.0]},
        ),
        NUMERIC_DATATYPES,
    )
    assert flat["outputs"][1]["data"].flat


def test_decode_response_simdjson_reads_long_arrays_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    # No parser may see more than a piece of a long array, whatever the body's size.
    monkeypatch.setattr(_json, "_PIECE", 64)
    parsed: list[tuple[str, int]] = []
    parse = _json._parse

    def recording_parse(text: bytes | bytearray, slot: str = "parser") -> Any:
        parsed.append((slot, len(text)))
        return parse(text, slot)

    monkeypatch.setattr(_json, "_parse", recording_parse)
    arrays: dict[str, np.ndarray[Any, Any]] = {
        "f": np.linspace(-1, 1, 200).astype(np.float32),
        "i": np.arange(-300, 300, dtype=np.int64) * (2**53 + 1),
        "u": np.array([2**64 - 1, 0, 2**63] * 50, dtype=np.uint64),
        "short": np.arange(3, dtype=np.int32),
    }
    body, content_type = encode_response(arrays, binary=False)
    outputs = decode_response(body, content_type)
    for name, array in arrays.items():
        assert outputs[name].dtype == array.dtype and outputs[name].tobytes() == array.tobytes()
    longest_number = len(str(-300 * (2**53 + 1)))
    pieces = [size for slot, size in parsed if slot == "pieces"]
    rest = [size for slot, size in parsed if slot != "pieces"]
    assert len(pieces) > len(body) // (64 + longest_number)
    assert max(pieces) <= 1 + 64 + longest_number + 1  # '[', a piece up to the next comma, ']'
    assert len(rest) == 1 and rest[0] < len(body) // 20  # the header around the cut arrays


LONG = ",".join(["1"] * 20)
PIECES_CASES = [
    # Cut arrays that are not what they seem: each must decode exactly as the generic path decodes it.
    (
        "parameters-data",
        f'{{"parameters":{{"data":[{LONG}]}},"outputs":[{{"name":"x","datatype":"INT32","shape":[20],'
        f'"data":[{LONG}]}}]}}',
    ),
    (
        "string-with-bracket",
        f'{{"outputs":[{{"name":"x","datatype":"FP32","shape":[22],"data":[{LONG},"a]b",2]}}]}}',
    ),
    (
        "object-inside",
        f'{{"outputs":[{{"name":"x","datatype":"FP32","shape":[21],"data":[{LONG},{{"a":1}}]}}]}}',
    ),
    ("float-in-int", f'{{"outputs":[{{"name":"x","datatype":"INT32","shape":[21],"data":[{LONG},1.5]}}]}}'),
    ("int8-range", f'{{"outputs":[{{"name":"x","datatype":"INT8","shape":[21],"data":[{LONG},300]}}]}}'),
    ("count", f'{{"outputs":[{{"name":"x","datatype":"FP64","shape":[21],"data":[{LONG}]}}]}}'),
    ("empty-shape", f'{{"outputs":[{{"name":"x","datatype":"FP64","shape":[0],"data":[{LONG}]}}]}}'),
    # With pieces of 4 bytes, "1.5,2.5" is a piece and the comma after it leaves an empty one.
    ("trailing-comma", '{"outputs":[{"name":"x","datatype":"FP64","shape":[2],"data":[1.5,2.5,]}]}'),
    ("trailing-comma-space", '{"outputs":[{"name":"x","datatype":"FP64","shape":[2],"data":[1.5,2.5, ]}]}'),
    ("double-comma", f'{{"outputs":[{{"name":"x","datatype":"FP64","shape":[21],"data":[1,,{LONG}]}}]}}'),
    (
        "spaces",
        f'{{ "outputs" : [ {{ "name" : "x", "datatype" : "UINT8", "shape" : [20], '
        f'"data" : [ {LONG} ] }} ] }}',
    ),
    (
        "nested",
        f'{{"outputs":[{{"name":"x","datatype":"INT16","shape":[2,20],"data":[[{LONG}],[{LONG}]]}}]}}',
    ),
    # A long array that turns nested: the cut ends at the first ']', leaving a '[' no piece closes.
    (
        "nested-after-numbers",
        f'{{"outputs":[{{"name":"x","datatype":"INT32","shape":[21],"data":[{LONG},[1]]}}]}}',
    ),
    (
        "nested-pair-after-numbers",
        f'{{"outputs":[{{"name":"x","datatype":"INT32","shape":[22],"data":[{LONG},[1,2]]}}]}}',
    ),
    (
        "bytes-and-bool",
        f'{{"outputs":[{{"name":"s","datatype":"BYTES","shape":[2],"data":["{LONG}","1"]}},'
        f'{{"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]}},'
        f'{{"name":"x","datatype":"INT64","shape":[20],"data":[{LONG}]}}]}}',
    ),
    (
        "marker-in-text",
        f'{{"parameters":{{"p":"\\u00000"}},"outputs":[{{"name":"x","datatype":"FP32","shape":[20],'
        f'"data":[{LONG}]}}]}}',
    ),
    (
        "marker-as-data",
        f'{{"outputs":[{{"name":"a","datatype":"FP32","shape":[20],"data":"\\u00000"}},'
        f'{{"name":"x","datatype":"FP32","shape":[20],"data":[{LONG}]}}]}}',
    ),
    (
        "escaped-marker-as-data",
        f'{{"parameters":{{"data":[{LONG}]}},"outputs":[{{"name":"a","datatype":"FP32","shape":[20],'
        f'"data":"\\u0000\\u0030"}},{{"name":"x","datatype":"FP32","shape":[20],"data":[{LONG}]}}]}}',
    ),
    (
        "data-twice",
        f'{{"outputs":[{{"name":"x","datatype":"FP32","shape":[20],"data":[{LONG}],"data":[{LONG}]}}]}}',
    ),
    ("truncated", f'{{"outputs":[{{"name":"x","datatype":"FP32","shape":[20],"data":[{LONG}]}}'),
]


@pytest.mark.parametrize(
    "body", [case[1].encode() for case in PIECES_CASES], ids=[c[0] for c in PIECES_CASES]
)
def test_decode_response_simdjson_pieces_agree_with_the_generic_path(
    monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    monkeypatch.setattr(_json, "_PIECE", SMALL_PIECE)
    with monkeypatch.context() as patch:
        patch.setattr(_json, "use_simdjson", False)
        try:
            generic: Any = decode_response_full(body, "application/json")
        except CodecError as exc:
            generic = f"CodecError: {exc}"
    try:
        fast: Any = decode_response_full(body, "application/json")
    except CodecError as exc:
        fast = f"CodecError: {exc}"
    if isinstance(generic, str):
        assert fast == generic
    else:
        assert not isinstance(fast, str)
        assert fast.parameters == generic.parameters
        _same_outcome(fast.outputs, generic.outputs)
