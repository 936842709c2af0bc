"""Bodies of a form the codec has seen: encoded and decoded from the header kept the first time
(``_header_memo``), byte for byte and value for value what the full codec gives, with its checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from mme_triton.client import _header_memo
from mme_triton.client.codec import decode_response, encode_request, encode_response
from mme_triton.errors import CodecError

SameTensor = Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], None]


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    """Every test starts with nothing remembered (and leaves nothing behind)."""
    _header_memo._requests.clear()
    _header_memo._answers.clear()
    yield
    _header_memo._requests.clear()
    _header_memo._answers.clear()


def test_repeated_request_is_the_body_the_codec_writes(samples: dict[str, np.ndarray[Any, Any]]) -> None:
    for datatype, sample in samples.items():
        _header_memo._requests.clear()
        inputs = {f"IN_{datatype}": sample, "scalar": np.array(7, np.int32), "empty": np.zeros((0, 2))}
        first = encode_request(inputs)
        assert (datatype == "BYTES") is not bool(_header_memo._requests)  # BYTES: never remembered
        again = encode_request({name: value.copy() for name, value in inputs.items()})
        _header_memo._requests.clear()
        assert bytes(again[0]) == bytes(first[0]) == bytes(encode_request(inputs)[0])
        assert again[1] == first[1]


@pytest.mark.parametrize(
    "inputs",
    [
        {"x": np.arange(12, dtype=">f4").reshape(3, 4)},  # big-endian: converted
        {"x": np.arange(12, dtype=np.float32).reshape(3, 4).T},  # not C-contiguous: copied in order
        {"x": np.ma.masked_array(np.ones(3, np.float32))},  # a subclass: made an ndarray
        {"x": [1.0, 2.0]},  # a list: numpy's float64
    ],
    ids=["big-endian", "transposed", "subclass", "list"],
)
def test_request_of_inputs_that_need_converting_is_written_whole_each_time(inputs: dict[str, Any]) -> None:
    first = encode_request(inputs)
    assert _header_memo._requests == {}
    assert encode_request(inputs) == first


def test_request_with_settings_is_written_whole_each_time() -> None:
    inputs = {"x": np.ones((1, 4), np.float32)}
    for settings in ({"outputs": ["y"]}, {"binary": False}, {"request_id": "r"}, {"parameters": {"p": 1}}):
        encode_request(inputs, **settings)
        assert _header_memo._requests == {}
    plain = encode_request(inputs)
    assert encode_request(inputs, outputs=["y"]) != plain


def test_request_of_another_shape_is_another_form() -> None:
    shapes = [(1, 4), (2, 4), (1, 4, 1)]
    first = [encode_request({"x": np.ones(shape, np.float32)}) for shape in shapes]
    assert len(_header_memo._requests) == len(shapes)
    assert [encode_request({"x": np.ones(shape, np.float32)}) for shape in shapes] == first
    assert len({body for body, _ in first}) == len(shapes)


def _answers(samples: dict[str, np.ndarray[Any, Any]]) -> Iterator[tuple[str, bytes, str]]:
    for datatype, sample in samples.items():
        body, content_type = encode_response({f"OUT_{datatype}": sample, "n": np.arange(3)}, model_name="m")
        yield datatype, bytes(body), content_type


@pytest.mark.parametrize("copy", [False, True])
def test_repeated_answer_decodes_as_the_codec_decodes_it(
    samples: dict[str, np.ndarray[Any, Any]], same_tensor: SameTensor, copy: bool
) -> None:
    for datatype, body, content_type in _answers(samples):
        _header_memo._answers.clear()
        first = decode_response(body, content_type, copy=copy)
        remembered = content_type in _header_memo._answers
        assert remembered is (datatype not in ("BYTES", "BOOL"))
        again = decode_response(bytes(body), content_type, copy=copy)
        assert list(again) == list(first)
        for name, array in again.items():
            same_tensor(array, first[name])
            assert array.flags.writeable is (copy or array.dtype == object)
            if not copy and array.dtype != object:
                assert array.base is not None  # a view onto the body


def test_repeated_bool_answer_is_checked_each_time() -> None:
    body, content_type = encode_response({"b": np.array([True, False])})
    decode_response(bytes(body), content_type)
    spoiled = bytes(body)[:-1] + b"\x02"
    with pytest.raises(CodecError, match="BOOL"):
        decode_response(spoiled, content_type)


def test_answer_of_the_same_content_type_and_another_header_is_read_whole() -> None:
    one, content_type = encode_response({"a": np.arange(3, dtype=np.int32)})
    other, other_type = encode_response({"b": np.arange(3, dtype=np.int32)})
    assert content_type == other_type  # the same header size
    assert list(decode_response(bytes(one), content_type)) == ["a"]
    assert list(decode_response(bytes(other), other_type)) == ["b"]


def test_truncated_answer_of_a_remembered_form_is_refused() -> None:
    body, content_type = encode_response({"y": np.arange(4, dtype=np.float64)})
    decode_response(bytes(body), content_type)
    with pytest.raises(CodecError, match="truncated"):
        decode_response(bytes(body)[:-8], content_type)
    with pytest.raises(CodecError, match="follow the last binary tensor"):
        decode_response(bytes(body) + b"\x00", content_type)


def test_memos_are_bounded() -> None:
    for length in range(1, _header_memo._LIMIT + 10):
        name = "y" * length  # a header of another size: another Content-Type
        decode_response(*encode_response({name: np.zeros((1, 2), np.float32)}))
        encode_request({name: np.zeros((1, 2), np.float32)})
        assert len(_header_memo._answers) <= _header_memo._LIMIT
        assert len(_header_memo._requests) <= _header_memo._LIMIT
    assert len(_header_memo._answers) == len(_header_memo._requests) == 9
