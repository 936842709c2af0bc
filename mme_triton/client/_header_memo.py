"""JSON headers seen before, so that bodies of the same form are encoded and decoded without them.

A client sends the same form of request again and again (the same input names, datatypes and shapes) and
gets the same form of answer back (the same header, byte for byte: model, version, outputs, shapes and
sizes). The codec writes and reads the first one of each form in full, with every check; this module
keeps its header, and for the next ones of that form only joins or cuts the tensors' bytes:

- a request whose inputs are a ``dict`` of plain numeric ``numpy.ndarray`` (native byte order,
  C-contiguous; no BYTES), sent in binary with no other setting, is the remembered header followed by
  the arrays' bytes;
- an answer whose header (``Content-Type`` and the header's bytes) is the remembered one, all of whose
  outputs are binary, numeric (not BYTES, not BOOL, whose bytes are checked) and not empty, is cut into
  read-only views at the remembered offsets.

Both memos are bounded (:data:`_LIMIT` forms each) and thread-safe (single dict operations).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mme_triton.client._json import loads
from mme_triton.client._memory import LARGE
from mme_triton.client.datatypes import NUMPY_DTYPE

__all__ = ["cut_answer", "join_request", "remember_answer", "remember_request", "request_form"]

_LIMIT = 256
# numpy dtype -> the datatype it travels as, for the dtypes that travel as their own bytes
_PLAIN = {dtype: name for name, dtype in NUMPY_DTYPE.items() if name != "BYTES"}
_ANSWER_PLAIN = {name: dtype for name, dtype in NUMPY_DTYPE.items() if name not in ("BYTES", "BOOL")}

RequestForm = tuple[tuple[str, np.dtype[Any], tuple[int, ...]], ...]
_requests: dict[RequestForm, tuple[bytes, str]] = {}
# Content-Type -> (the header's bytes, the whole body's size, (name, dtype, shape, offset, count) ...)
_answers: dict[str, tuple[bytes, int, tuple[tuple[str, np.dtype[Any], tuple[int, ...], int, int], ...]]] = {}


def _store(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _LIMIT:
        memo.clear()
    memo[key] = value


def request_form(inputs: dict[str, Any]) -> RequestForm | None:
    """The form of ``inputs`` (names, dtypes, shapes), or ``None`` when they do not travel as they are."""
    form = []
    size = 0
    for name, value in inputs.items():
        if type(value) is not np.ndarray or type(name) is not str:
            return None
        dtype = value.dtype
        if dtype not in _PLAIN or not value.flags.c_contiguous:
            return None
        size += value.nbytes
        form.append((name, dtype, value.shape))
    if size >= LARGE:  # the codec writes those into a buffer of its own (see _memory)
        return None
    return tuple(form)


def join_request(form: RequestForm, inputs: dict[str, Any]) -> tuple[bytes, str] | None:
    """The body of ``inputs`` of a remembered ``form``, or ``None``."""
    known = _requests.get(form)
    if known is None:
        return None
    header, content_type = known
    return b"".join([header, *inputs.values()]), content_type


def remember_request(form: RequestForm, body: bytes | bytearray, content_type: str) -> None:
    """Keep the header of ``body``, the codec's encoding of inputs of ``form``."""
    size = _header_size(content_type)
    if size is not None:
        _store(_requests, form, (bytes(body[:size]), content_type))


def cut_answer(body: bytes, content_type: str, copy: bool) -> dict[str, np.ndarray[Any, Any]] | None:
    """The outputs of an answer whose header is remembered, or ``None``."""
    known = _answers.get(content_type)
    if known is None:
        return None
    header, total, outputs = known
    if len(body) != total or not body.startswith(header):
        return None
    arrays = {}
    for name, dtype, shape, offset, count in outputs:
        array = np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape)
        arrays[name] = array.copy() if copy else array
    return arrays


def remember_answer(body: bytes, content_type: str) -> None:
    """Keep the header of ``body`` (an answer the codec decoded) when its outputs can be cut from it."""
    size = _header_size(content_type)
    if size is None:
        return
    header = loads(body[:size])
    offset = size
    outputs = []
    for entry in header.get("outputs") or ():
        datatype = entry.get("datatype")
        parameters = entry.get("parameters") or {}
        nbytes = parameters.get("binary_data_size")
        if datatype not in _ANSWER_PLAIN or "data" in entry or not isinstance(nbytes, int) or nbytes <= 0:
            return
        dtype = _ANSWER_PLAIN[datatype]
        outputs.append((entry["name"], dtype, tuple(entry["shape"]), offset, nbytes // dtype.itemsize))
        offset += nbytes
    if outputs and offset == len(body):
        _store(_answers, content_type, (body[:size], len(body), tuple(outputs)))


def _header_size(content_type: str) -> int | None:
    """``N`` of ``...;json-header-size=N`` as the codec writes it, else ``None``."""
    _, found, size = content_type.rpartition(";json-header-size=")
    return int(size) if found and size.isdigit() else None
