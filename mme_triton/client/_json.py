"""JSON text for the codec: orjson and pysimdjson, with the standard library as a fallback.

Writing: orjson when it is installed (numpy arrays straight to text), else ``json``. Both write the
same values; they differ only in speed and in float formatting (orjson writes the shortest text that
reads back as the same float32, ``json`` the shortest for the float64 value).

Reading: :func:`loads` gives plain Python objects (orjson, else ``json``). :func:`loads_tensors`, for
inference bodies, uses pysimdjson when it is installed: the ``data`` arrays of numeric tensors stay
in the parser's form (:class:`NumberArray`) and become numpy arrays in C, with no Python number per
element; everything else is read as :func:`loads` reads it. Long numeric ``data`` arrays are cut out of
the document and read piece by piece (see :func:`_read_cut`), so that no parser ever holds buffers
sized to a whole large body.

orjson and pysimdjson are dependencies of the package; the standard-library paths are there for
platforms without their wheels.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# Dependencies of the package, imported softly so that the codec still works (slowly, on ``json``) where
# their wheels cannot be installed: numeric tensors to and from JSON many times faster than tolist() + json.
_orjson = _optional("orjson")
_simdjson = _optional("simdjson")

# Tests and the benchmark switch these off to exercise the other paths.
use_orjson: bool = _orjson is not None
use_simdjson: bool = _simdjson is not None


class NonFinite:
    """A 1-D float array holding NaN or infinities, written as ``NaN``, ``Infinity`` and ``-Infinity``.

    Those literals are not JSON, but Triton's JSON parser (RapidJSON with ``kParseNanAndInfFlag``) reads
    them, as the decoder here does; orjson would write ``null`` for them, so such arrays are wrapped.
    """

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray[Any, Any]) -> None:
        self.array = array

    def text(self) -> bytes:
        """The array as JSON text with the non-finite literals."""
        return json.dumps(self.array.tolist(), separators=(",", ":"), allow_nan=True).encode()


def _default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, NonFinite):
        return value.array.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _orjson_default(value: Any) -> Any:
    if isinstance(value, NonFinite):
        return _orjson.Fragment(value.text())  # type: ignore[union-attr]
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes; numpy arrays inside ``obj`` (1-D, C-contiguous, native order) become lists, and
    :class:`NonFinite` arrays lists with ``NaN``/``Infinity``/``-Infinity``."""
    if use_orjson and _orjson is not None and hasattr(_orjson, "Fragment"):
        text: bytes = _orjson.dumps(obj, option=_orjson.OPT_SERIALIZE_NUMPY, default=_orjson_default)
        return text
    return json.dumps(obj, default=_default, separators=(",", ":"), allow_nan=True).encode()


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

# Parsers are reused per thread: a parser keeps the buffers of the largest document it has read (about
# twice the text for float data, up to ~13x for one-digit numbers), and reuse spares allocating and
# page-faulting them on every call, which is half the time of a large parse. Two per thread:
# - "pieces" reads the long numeric arrays cut out of a document, _PIECE bytes of text at a time, so
#   its buffers stay at a few MB (~14 MB at worst) however large the body is;
# - "parser" reads the rest of the document (with long numeric arrays cut out, usually a few hundred
#   bytes). What it reads above _REUSE_LIMIT (a large body of BYTES or BOOL data, say) gets a parser
#   of its own, freed with the result.
_REUSE_LIMIT = 16 * 2**20
_PIECE = 2**20
_local = threading.local()


class NumberArray:
    """A tensor's JSON ``data`` array, still in the parser's form (or already read, when cut out)."""

    __slots__ = ("_array", "_parts", "flat")

    def __init__(self, array: Any, parts: list[np.ndarray[Any, Any]] | None = None) -> None:
        self._array = array
        self._parts = parts
        # True once the whole document shows this array holds no nested array (see _mark_flat); a cut
        # array (see _read_cut) was proven flat when it was read.
        self.flat = parts is not None

    def numbers(self, kind: str) -> list[np.ndarray[Any, Any]] | None:
        """The numbers as consecutive 1-D float64 (``kind`` "f"), int64 ("i") or uint64 ("u") arrays.

        One array, or the pieces of an array cut out of a long document, so that the caller converts
        them straight into the tensor without joining them first. None when the array is nested or
        holds anything the type cannot represent exactly: a float or a value out of range for the
        integer kinds, a bool, a string, a null. The caller then reads :meth:`to_list` and applies
        its own checks.
        """
        if self._parts is not None:
            return self._parts  # read with the kind of its tensor's datatype
        if not self.flat:
            return None
        numbers = _numbers(self._array, kind)
        return None if numbers is None else [numbers]

    def to_list(self) -> list[Any]:
        """The array as Python lists, as :func:`loads` would give it."""
        if self._parts is None:
            values: list[Any] = self._array.as_list()
            return values
        return [value for part in self._parts for value in part.tolist()]


def _numbers(array: Any, kind: str) -> np.ndarray[Any, Any] | None:
    """A pysimdjson array of numbers as a 1-D array of ``kind``, or None when it holds anything else."""
    of_type, dtype = _BUFFER_TYPES[kind]
    try:
        buffer = array.as_buffer(of_type=of_type)
    except (TypeError, ValueError):  # simdjson's INCORRECT_TYPE and NUMBER_OUT_OF_RANGE
        return None
    return np.frombuffer(buffer, dtype=dtype)


class _OddKeys(Exception):
    """An object's keys that pysimdjson's look-ups cannot serve: the document is left to loads().

    A repeated key (loads() keeps the last one, the rule the codec has always had), or a key holding
    NUL (pysimdjson lists it but does not find it).
    """


def _parse(text: bytes | bytearray, slot: str = "parser") -> Any:
    """Parse with this thread's parser in ``slot`` (a parser of its own above ``_REUSE_LIMIT``)."""
    assert _simdjson is not None
    if len(text) > _REUSE_LIMIT:
        return _simdjson.Parser().parse(text)
    parser = getattr(_local, slot, None)
    if parser is None:
        parser = _simdjson.Parser()
        setattr(_local, slot, parser)
    try:
        return parser.parse(text)
    except RuntimeError:
        # Objects of the previous document are still alive (an exception's traceback can hold them):
        # this thread takes a new parser. A second RuntimeError is a real parse error.
        parser = _simdjson.Parser()
        setattr(_local, slot, parser)
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
    if len(set(keys)) != len(keys) or any("\x00" in key for key in keys):
        raise _OddKeys
    return keys


def _tensor_entry(entry: Any, numeric: Mapping[str, str], cut: _Cut | None) -> Any:
    assert _simdjson is not None
    if not isinstance(entry, _simdjson.Object):
        return _plain(entry)
    out: dict[str, Any] = {}
    datatype = entry.get("datatype")
    kind = numeric.get(datatype) if isinstance(datatype, str) else None
    for key in _keys(entry):
        value = entry[key]
        if kind is None or key != "data":
            out[key] = _plain(value)
        elif isinstance(value, _simdjson.Array):
            out[key] = NumberArray(value)
        elif cut is not None and isinstance(value, str) and value in cut.spans:
            out[key] = NumberArray(None, cut.read(value, kind))
        else:
            out[key] = _plain(value)
    return out


def _header(document: Any, numeric: Mapping[str, str], cut: _Cut | None = None) -> Any:
    assert _simdjson is not None
    if not isinstance(document, _simdjson.Object):
        return _plain(document)
    header: dict[str, Any] = {}
    for key in _keys(document):
        value = document[key]
        if key in ("inputs", "outputs") and isinstance(value, _simdjson.Array):
            header[key] = [_tensor_entry(entry, numeric, cut) for entry in value]
        else:
            header[key] = _plain(value)
    return header


def _count_structure(value: Any, found: list[Any]) -> tuple[int, int]:
    """(arrays, '[' inside strings and keys) in ``value``; each NumberArray not yet flat counts as one."""
    if isinstance(value, NumberArray):
        if value.flat:  # cut out of the text: none of its brackets are left there
            return 0, 0
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


# --- long numeric arrays, cut out and read in pieces -------------------------------------------------

_DATA_KEY = b'"data"'
# ': [' before a number (BOOL and BYTES data, which start otherwise, are never cut).
_TO_ARRAY = re.compile(rb"[ \t\n\r]*:[ \t\n\r]*\[(?=[ \t\n\r]*[-0-9])")
# A cut array's place holder: a JSON string of NUL and the cut's number. No cut is made when the text
# around the cut arrays (which hold only numbers) has a NUL, escaped or not, so no string of the
# document can be taken for a place holder.
_MARKER = "\x00"
_MARKER_JSON = b"\\u0000"


class _CutFailed(Exception):
    """A cut-out array is not a flat list of numbers of its tensor's kind: the document is read whole."""


class _Cut:
    """A document whose long ``"data": [...]`` arrays are replaced by marker strings.

    An array is cut when it starts with a number and its text, up to the first ``]``, is at least
    ``_PIECE`` bytes (one holding a ``[`` cannot be read, see :meth:`read`). ``reduced`` is the
    document with each cut array replaced by its marker; :meth:`read` reads a cut array in pieces of
    about ``_PIECE`` bytes, split at commas.
    """

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.spans: dict[str, tuple[int, int]] = {}  # marker -> (after '[', at ']')
        self.read_markers: set[str] = set()
        kept: list[bytes] = []  # the text around the cut arrays
        done = 0
        position = text.find(_DATA_KEY)
        while position >= 0:
            match = _TO_ARRAY.match(text, position + len(_DATA_KEY))
            if match is None:
                position = text.find(_DATA_KEY, position + len(_DATA_KEY))
                continue
            start = match.end()
            end = text.find(b"]", start)
            if end < 0:
                break
            # No need to look for a '[' in the array: end is the first ']', so a nested array would
            # leave a piece with a '[' never closed, which is not JSON (see read).
            if end - start >= _PIECE:
                kept.append(text[done : start - 1])
                self.spans[f"{_MARKER}{len(self.spans)}"] = (start, end)
                done = end + 1
                position = text.find(_DATA_KEY, done)
            else:
                position = text.find(_DATA_KEY, start)
        kept.append(text[done:])
        if any(_MARKER_JSON in part or b"\x00" in part for part in kept):
            self.spans.clear()
        parts = kept[:1]
        for number, part in enumerate(kept[1:]):
            parts += (b'"', _MARKER_JSON, str(number).encode(), b'"', part)
        self.reduced = b"".join(parts)

    def read(self, marker: str, kind: str) -> list[np.ndarray[Any, Any]]:
        """The cut array ``marker`` as consecutive 1-D arrays of ``kind``, one per piece (see
        :meth:`NumberArray.numbers`).

        Raises:
            _CutFailed: a piece is not a flat list of numbers that ``kind`` holds exactly.
            ValueError: a piece is not JSON (a '[' in a cut array is never closed inside it).
        """
        assert _simdjson is not None
        self.read_markers.add(marker)
        start, end = self.spans[marker]
        view = memoryview(self.text)
        parts: list[np.ndarray[Any, Any]] = []
        while True:
            stop = self.text.find(b",", start + _PIECE, end) if start + _PIECE < end else -1
            if stop < 0:
                stop = end
            piece = _parse(b"".join((b"[", view[start:stop], b"]")), "pieces")
            numbers, elements = None, 0
            if isinstance(piece, _simdjson.Array):
                numbers, elements = _numbers(piece, kind), len(piece)
            del piece  # frees the parser for the next piece
            # as_buffer flattens nested arrays: as many numbers as elements shows there were none.
            if numbers is None or numbers.size == 0 or numbers.size != elements:
                raise _CutFailed  # ('[ ]' is a comma with no number after it)
            parts.append(numbers)
            if stop == end:
                return parts
            start = stop + 1


def _read_cut(text: bytes, numeric: Mapping[str, str]) -> Any:
    """The header of a document with long numeric arrays, those read in pieces; None to read it whole.

    Parsing a large body in one go needs parser buffers of two or more times its size, allocated
    afresh (or kept per thread); cutting bounds them by ``_PIECE``. The cut is right when the result
    shows it is: the text before each cut is unchanged, so a marker read as the ``data`` of a numeric
    tensor stood where the original text had a value, and the pieces, each a list of numbers, show
    that the original array was exactly those numbers and ended where the cut ended. Anything else (a
    marker left unread, a piece that is not numbers, a reduced document that is not JSON) gives None.
    """
    if len(text) < _PIECE:
        return None
    cut = _Cut(text)
    if not cut.spans:
        return None
    try:
        header = _header(_parse(cut.reduced), numeric, cut)
    except (ValueError, RuntimeError, _OddKeys, _CutFailed):
        return None
    if len(cut.read_markers) != len(cut.spans):
        return None
    _mark_flat(header, cut.reduced)
    return header


def loads_tensors(data: bytes | bytearray | memoryview, numeric: Mapping[str, str]) -> Any:
    """Parse an inference body's JSON header, leaving numeric tensor data for numpy.

    With pysimdjson installed (and ``use_simdjson``), the ``data`` array of every entry of ``inputs``
    or ``outputs`` whose ``datatype`` is a key of ``numeric`` (datatype -> numpy kind "f", "i" or
    "u") is a :class:`NumberArray`; the rest is what :func:`loads` gives. Long flat arrays are cut
    out and read in pieces (:func:`_read_cut`). A document without a ``"data"`` key (the header of a
    binary body) is read by :func:`loads`: it has no tensor data to leave. Documents pysimdjson refuses
    (invalid UTF-8 strings, NaN literals, integers beyond 64 bits, repeated keys, not JSON) are read by
    :func:`loads`, which decides.

    Raises:
        ValueError: not JSON.
    """
    if use_simdjson and _simdjson is not None:
        text = data if isinstance(data, bytes) else bytes(data)
        if _DATA_KEY not in text:  # no tensor data in JSON (a binary answer's header): nothing to leave
            return loads(text)
        cut_header = _read_cut(text, numeric)
        if cut_header is not None:
            return cut_header
        try:
            header = _header(_parse(text), numeric)
        except (ValueError, RuntimeError, _OddKeys):
            pass
        else:
            _mark_flat(header, text)
            return header
    return loads(data)
