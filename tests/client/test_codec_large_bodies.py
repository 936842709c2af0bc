"""Large request bodies: a bytearray the encoder fills, on huge pages where Linux offers them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mme_triton.client import _memory
from mme_triton.client.codec import decode_request, decode_response, encode_request, encode_response

SameTensor = Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], None]


@pytest.fixture
def every_body_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every binary body, however small, takes the large-body path."""
    monkeypatch.setattr(_memory, "LARGE", 0)


def _small_path_body(monkeypatch: pytest.MonkeyPatch, encode: Callable[[], tuple[Any, str]]) -> bytes:
    with monkeypatch.context() as patch:
        patch.setattr(_memory, "LARGE", 2**62)
        body, _ = encode()
    return bytes(body)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_encode_request_large_body_roundtrips_every_datatype(
    monkeypatch: pytest.MonkeyPatch,
    every_body_large: None,
    sample_datatype: str,
    sample: np.ndarray[Any, Any],
    binary: bool,
    same_tensor: SameTensor,
) -> None:
    body, content_type = encode_request({"t": sample}, binary=binary)
    same_tensor(decode_request(body, content_type)[0]["t"], sample)
    assert bytes(body) == _small_path_body(monkeypatch, lambda: encode_request({"t": sample}, binary=binary))


def test_encode_response_large_body_roundtrips_every_datatype(
    monkeypatch: pytest.MonkeyPatch,
    every_body_large: None,
    samples: dict[str, np.ndarray[Any, Any]],
    same_tensor: SameTensor,
) -> None:
    body, content_type = encode_response(samples)
    assert isinstance(body, bytearray)
    outputs = decode_response(body, content_type)
    for name, array in samples.items():
        same_tensor(outputs[name], array)
    assert bytes(body) == _small_path_body(monkeypatch, lambda: encode_response(samples))


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2],
        lambda: np.arange(10, dtype=">f8"),
        lambda: np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
    ],
    ids=["strided", "big-endian", "fortran"],
)
def test_encode_request_large_body_converts_inputs_in_place(
    monkeypatch: pytest.MonkeyPatch,
    every_body_large: None,
    make: Callable[[], np.ndarray[Any, Any]],
    same_tensor: SameTensor,
) -> None:
    inputs = {"before": np.ones(3, np.uint8), "x": make(), "after": np.array([b"ab"], dtype=object)}
    body, content_type = encode_request(inputs)
    decoded = decode_request(body, content_type)[0]
    for name, array in inputs.items():
        same_tensor(decoded[name], array)
    assert bytes(body) == _small_path_body(monkeypatch, lambda: encode_request(inputs))


def test_encode_request_large_body_is_a_bytearray_advised_for_huge_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The project runs on CPython on Linux, where the C calls are all there.
    assert _memory._API is not None, "no uninitialised bytearray or madvise on this CPython/Linux"
    allocate, address, advise = _memory._API
    advised: list[tuple[int, int]] = []

    def recording_advise(start: int, length: int) -> None:
        advised.append((start, length))
        advise(start, length)

    monkeypatch.setattr(_memory, "_API", (allocate, address, recording_advise))
    # Not a multiple of anything, and a pattern in every byte: any byte left unwritten would show.
    array = (np.arange(_memory.LARGE // 4 + 12_345, dtype=np.uint32) * 2_654_435_761).astype(np.uint32)
    body, content_type = encode_request({"x": array})
    size = int(content_type.rpartition("=")[2])
    assert isinstance(body, bytearray) and len(body) == size + array.nbytes
    assert json.loads(bytes(body[:size]))["inputs"][0]["parameters"]["binary_data_size"] == array.nbytes
    assert bytes(body[size:]) == array.tobytes()
    # The advice covers exactly the whole huge pages inside the body's memory.
    begin = address(body)
    ((start, length),) = advised
    assert start % _memory.HUGE_PAGE == 0 and length % _memory.HUGE_PAGE == 0
    assert begin <= start < begin + _memory.HUGE_PAGE
    assert begin + len(body) - _memory.HUGE_PAGE < start + length <= begin + len(body)


def test_encode_request_small_contiguous_body_stays_bytes() -> None:
    body, _ = encode_request({"x": np.ones(_memory.LARGE // 8, np.float32)})
    assert isinstance(body, bytes)


def test_new_buffer_without_the_c_api_is_a_zeroed_bytearray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_memory, "_API", None)
    buffer = _memory.new_buffer(_memory.LARGE + 1)
    assert isinstance(buffer, bytearray) and len(buffer) == _memory.LARGE + 1
    assert buffer.count(0) == len(buffer)


def test_new_buffer_below_the_threshold_is_a_zeroed_bytearray() -> None:
    buffer = _memory.new_buffer(1000)
    assert isinstance(buffer, bytearray) and buffer == bytearray(1000)


def test_encode_request_large_body_without_the_c_api_gives_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    array = np.linspace(-1, 1, _memory.LARGE // 4 + 3, dtype=np.float32)
    body, _ = encode_request({"x": array})
    monkeypatch.setattr(_memory, "_API", None)
    plain, _ = encode_request({"x": array})
    assert isinstance(plain, bytearray) and plain == body


def test_new_buffer_beyond_memory_raises_memory_error() -> None:
    with pytest.raises(MemoryError):
        _memory.new_buffer(2**62)
