"""JSON text for the codec, with optional accelerators.

Writing: orjson when it is installed (numpy arrays straight to text), else ``json``. Both write the
same values; they differ only in speed and in float formatting (orjson writes the shortest text that
reads back as the same float32, ``json`` the shortest for the float64 value).

Reading: :func:`loads` gives plain Python objects (orjson, else ``json``). :func:`loads_tensors`, for
inference bodies, uses pysimdjson when it is installed: the ``data`` arrays of numeric tensors stay
in the parser's form (:class:`NumberArray`) and become numpy arrays in C, with no Python number per
element; everything else is read as :func:`loads` reads it.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Collection
from types import ModuleType
from typing import Any

import numpy as np


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# Optional accelerators: numeric tensors to and from JSON many times faster than tolist() + json.
_orjson = _optional("orjson")
_simdjson = _optional("simdjson")

# Tests and the benchmark switch these off to exercise the other paths.
use_orjson: bool = _orjson is not None
use_simdjson: bool = _simdjson is not None


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes; numpy arrays inside ``obj`` (1-D, C-contiguous, native order) become lists."""
    if use_orjson and _orjson is not None:
        text: bytes = _orjson.dumps(obj, option=_orjson.OPT_SERIALIZE_NUMPY)
        return text
    return json.dumps(obj, default=_default, separators=(",", ":"), allow_nan=False).encode()


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Parse JSON bytes.

    Strings that are not valid UTF-8 (Triton writes BYTES outputs into JSON as they are) are read with
    ``surrogateescape`` so that encoding them back with the same handler gives the original bytes.

    Raises:
        ValueError: not JSON.
    """
    if use_orjson and _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # invalid UTF-8 or NaN/Infinity literals: the standard library reads both
    text = bytes(data).decode("utf-8", "surrogateescape")
    return json.loads(text)


# --- numeric tensor data without Python numbers (pysimdjson) ------------------------------------------

# numpy dtype kind -> pysimdjson's as_buffer type code and the dtype of the buffer it fills.
_BUFFER_TYPES = {
    "f": ("d", np.dtype(np.float64)),
    "i": ("i", np.dtype(np.int64)),
    "u": ("u", np.dtype(np.uint64)),
}

# One parser per thread, reused: a parser keeps the buffers of the largest document it has read (about
# twice the text for float data, more for very short numbers), and reuse spares allocating and
# page-faulting them on every call. Documents above the limit get a parser of their own, freed with the
# result; InvokeEndpoint bodies (at most 6 MB) are all below it.
_REUSE_LIMIT = 16 * 2**20
_local = threading.local()


class NumberArray:
    """A tensor's JSON ``data`` array, still in the parser's form."""

    __slots__ = ("_array", "flat")

    def __init__(self, array: Any) -> None:
        self._array = array
        # True once the whole document shows this array holds no nested array (see _mark_flat).
        self.flat = False

    def numbers(self, kind: str) -> np.ndarray[Any, Any] | None:
        """The numbers as a 1-D float64 (``kind`` "f"), int64 ("i") or uint64 ("u") array.

        None when the array is nested or holds anything the type cannot represent exactly: a float or
        a value out of range for the integer kinds, a bool, a string, a null. The caller then reads
        :meth:`to_list` and applies its own checks.
        """
        if not self.flat:
            return None
        of_type, dtype = _BUFFER_TYPES[kind]
        try:
            buffer = self._array.as_buffer(of_type=of_type)
        except (TypeError, ValueError):  # simdjson's INCORRECT_TYPE and NUMBER_OUT_OF_RANGE
            return None
        return np.frombuffer(buffer, dtype=dtype)

    def to_list(self) -> list[Any]:
        """The array as Python lists, as :func:`loads` would give it."""
        values: list[Any] = self._array.as_list()
        return values


class _DuplicateKeys(Exception):
    """An object repeats a key: left to loads(), whose rule (the last one wins) the codec has always had."""


def _parse(text: bytes) -> Any:
    assert _simdjson is not None
    if len(text) > _REUSE_LIMIT:
        return _simdjson.Parser().parse(text)
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = _simdjson.Parser()
    try:
        return parser.parse(text)
    except RuntimeError:
        # Objects of the previous document are still alive (an exception's traceback can hold them):
        # this thread takes a new parser. A second RuntimeError is a real parse error.
        parser = _local.parser = _simdjson.Parser()
        return parser.parse(text)


def _plain(value: Any) -> Any:
    assert _simdjson is not None
    if isinstance(value, _simdjson.Object):
        return value.as_dict()
    if isinstance(value, _simdjson.Array):
        return value.as_list()
    return value


def _keys(obj: Any) -> list[str]:
    keys = list(obj)
    if len(set(keys)) != len(keys):
        raise _DuplicateKeys
    return keys


def _tensor_entry(entry: Any, numeric: Collection[str]) -> Any:
    assert _simdjson is not None
    if not isinstance(entry, _simdjson.Object):
        return _plain(entry)
    out: dict[str, Any] = {}
    lazy = entry.get("datatype") in numeric
    for key in _keys(entry):
        value = entry[key]
        if lazy and key == "data" and isinstance(value, _simdjson.Array):
            out[key] = NumberArray(value)
        else:
            out[key] = _plain(value)
    return out


def _header(document: Any, numeric: Collection[str]) -> Any:
    assert _simdjson is not None
    if not isinstance(document, _simdjson.Object):
        return _plain(document)
    header: dict[str, Any] = {}
    for key in _keys(document):
        value = document[key]
        if key in ("inputs", "outputs") and isinstance(value, _simdjson.Array):
            header[key] = [_tensor_entry(entry, numeric) for entry in value]
        else:
            header[key] = _plain(value)
    return header


def _count_structure(value: Any, found: list[Any]) -> tuple[int, int]:
    """(arrays, '[' inside strings and keys) in ``value``; each NumberArray counts as one array."""
    if isinstance(value, NumberArray):
        found.append(value)
        return 1, 0
    if isinstance(value, str):
        return 0, value.count("[")
    arrays = brackets = 0
    if isinstance(value, list):
        arrays = 1
        items: Any = value
    elif isinstance(value, dict):
        brackets = sum(key.count("[") for key in value)
        items = value.values()
    else:
        return 0, 0
    for item in items:
        more_arrays, more_brackets = _count_structure(item, found)
        arrays += more_arrays
        brackets += more_brackets
    return arrays, brackets


def _count_byte(text: bytes, byte: bytes, limit: int) -> int:
    """How many times ``byte`` occurs in ``text``, counting no further than ``limit`` + 1 (memchr speed)."""
    count = 0
    position = text.find(byte)
    while position >= 0 and count <= limit:
        count += 1
        position = text.find(byte, position + 1)
    return count


def _mark_flat(header: Any, text: bytes) -> None:
    """Mark the NumberArrays flat when the text has no '[' beyond those the header accounts for.

    pysimdjson flattens nested arrays silently, while the codec accepts only regular nesting (and
    checks it on the generic path). Every '[' in the text opens an array or sits in a string, and the
    header shows all of them except those nested inside a NumberArray: if the counts agree (and no
    string spells '[' as an escape), no NumberArray holds a nested array.
    """
    found: list[NumberArray] = []
    arrays, brackets = _count_structure(header, found)
    if not found:
        return
    expected = arrays + brackets
    if _count_byte(text, b"[", expected) != expected:
        return
    if brackets and (b"\\u005b" in text or b"\\u005B" in text):
        return
    for array in found:
        array.flat = True


def loads_tensors(data: bytes | bytearray | memoryview, numeric: Collection[str]) -> Any:
    """Parse an inference body's JSON header, leaving numeric tensor data for numpy.

    With pysimdjson installed (and ``use_simdjson``), the ``data`` array of every entry of ``inputs``
    or ``outputs`` whose ``datatype`` is in ``numeric`` is a :class:`NumberArray`; the rest is what
    :func:`loads` gives. Documents pysimdjson refuses (invalid UTF-8 strings, NaN literals, integers
    beyond 64 bits, repeated keys, not JSON) are read by :func:`loads`, which decides.

    Raises:
        ValueError: not JSON.
    """
    if use_simdjson and _simdjson is not None:
        text = data if isinstance(data, bytes) else bytes(data)
        try:
            header = _header(_parse(text), numeric)
        except (ValueError, RuntimeError, _DuplicateKeys):
            pass
        else:
            _mark_flat(header, text)
            return header
    return loads(data)
