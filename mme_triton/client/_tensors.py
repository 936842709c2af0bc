"""One tensor to and from the wire: binary buffers, BYTES serialization, JSON ``data`` values."""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from mme_triton.client._json import NonFinite, NumberArray
from mme_triton.client.datatypes import NUMPY_DTYPE, json_supported
from mme_triton.errors import CodecError

_LENGTH = struct.Struct("<I")
_MAX_ELEMENT = 2**32 - 1


@dataclass
class EncodedTensor:
    """A tensor ready for the request or response header and, when binary, for the binary section."""

    name: str
    datatype: str
    shape: list[int]
    # JSON: the value of "data" (a 1-D native-order array, or a list of str for BYTES).
    json_data: Any = None
    # Binary: bytes-like data in wire order, or ``source`` still to be converted into ``nbytes`` bytes.
    buffer: Any = None
    source: np.ndarray[Any, Any] | None = None
    nbytes: int = 0

    @property
    def binary(self) -> bool:
        return self.json_data is None


def _native(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtype if dtype.byteorder in "=|" else dtype.newbyteorder("=")


def element_count(shape: Sequence[int]) -> int:
    return math.prod(shape)


def bytes_elements(name: str, array: np.ndarray[Any, Any]) -> list[bytes | str]:
    """The elements of a BYTES tensor in C order, each ``bytes`` or ``str``.

    The one rule for what a BYTES element may be (the codec, warm-up samples and perf_analyzer data use
    it): ``bytes``, ``str``, ``bytearray`` or ``memoryview``; anything else is a ``TypeError`` rather than
    a guess (``bytes(2)`` would be two NUL bytes).
    """
    items: list[Any] = array.reshape(-1).tolist()
    if array.dtype.kind in "SU":
        # numpy's fixed-width strings drop trailing NULs on access; tritonclient sends them the same way.
        return items
    elements: list[bytes | str] = []
    for item in items:
        if isinstance(item, (bytes, str)):
            elements.append(item)
        elif isinstance(item, (bytearray, memoryview)):
            elements.append(bytes(item))
        else:
            raise TypeError(
                f"BYTES tensor {name!r} holds a {type(item).__name__}; elements must be bytes or str"
            )
    return elements


def serialize_bytes(elements: Sequence[bytes | str]) -> bytes:
    """Triton's BYTES layout: each element as a 4-byte little-endian length and its bytes (str as UTF-8)."""
    parts: list[bytes] = []
    append = parts.append
    pack = _LENGTH.pack
    for item in elements:
        data = item.encode("utf-8") if isinstance(item, str) else item
        if len(data) > _MAX_ELEMENT:
            raise ValueError(f"a BYTES element of {len(data)} bytes does not fit a 4-byte length")
        append(pack(len(data)))
        append(data)
    return b"".join(parts)


def json_strings(elements: Sequence[bytes | str]) -> list[str] | None:
    """The elements as JSON strings, or None when one of them is not valid UTF-8."""
    out: list[str] = []
    for item in elements:
        if isinstance(item, str):
            out.append(item)
            continue
        try:
            out.append(item.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return out


def encode_tensor(name: str, array: np.ndarray[Any, Any], datatype: str, *, want_json: bool) -> EncodedTensor:
    """Prepare ``array`` as ``datatype``; JSON when wanted and possible, else binary.

    FP16, BF16 and BYTES with non-UTF-8 elements cannot travel as JSON: they go binary whatever
    ``want_json`` says.

    Float tensors holding NaN or infinities are written with the ``NaN``, ``Infinity`` and ``-Infinity``
    literals Triton's JSON parser reads.
    """
    shape = [int(d) for d in array.shape]
    tensor = EncodedTensor(name=name, datatype=datatype, shape=shape)
    if datatype == "BYTES":
        elements = bytes_elements(name, array)
        if want_json:
            strings = json_strings(elements)
            if strings is not None:
                tensor.json_data = strings
                return tensor
        tensor.buffer = serialize_bytes(elements)
        tensor.nbytes = len(tensor.buffer)
        return tensor

    wire = NUMPY_DTYPE[datatype]
    if want_json and json_supported(datatype):
        flat = np.ascontiguousarray(array, dtype=_native(wire)).reshape(-1)
        tensor.json_data = NonFinite(flat) if flat.dtype.kind == "f" and not np.isfinite(flat).all() else flat
        return tensor

    tensor.nbytes = array.size * wire.itemsize
    if array.dtype == wire and array.flags.c_contiguous:
        # A view: the tensor's bytes are copied once, into the body.
        tensor.buffer = array.reshape(-1).view(np.uint8)
    else:
        tensor.source = array
    return tensor


def write_tensor(body: bytearray, offset: int, tensor: EncodedTensor) -> None:
    """Write a binary tensor into ``body`` at ``offset``, converting order and layout in the same pass."""
    if tensor.source is None:
        memoryview(body)[offset : offset + tensor.nbytes] = tensor.buffer
        return
    wire = NUMPY_DTYPE[tensor.datatype]
    count = tensor.source.size
    if count == 0:
        return
    target = np.frombuffer(body, dtype=wire, count=count, offset=offset).reshape(tensor.source.shape)
    np.copyto(target, tensor.source, casting="same_kind")


# --- decoding -----------------------------------------------------------------------------------------


def decode_binary(
    name: str,
    datatype: str,
    shape: list[int],
    data: memoryview,
    *,
    copy: bool,
) -> np.ndarray[Any, Any]:
    """A tensor from its bytes in the binary section (``data`` is exactly its ``binary_data_size``)."""
    count = element_count(shape)
    if datatype == "BYTES":
        return deserialize_bytes(name, data, count).reshape(shape)
    wire = NUMPY_DTYPE[datatype]
    expected = count * wire.itemsize
    if len(data) != expected:
        raise CodecError(
            f"binary_data_size is {len(data)} bytes but shape {shape} of {datatype} needs {expected}",
            tensor=name,
        )
    array = np.frombuffer(data, dtype=wire).reshape(shape)
    if datatype == "BOOL" and bool((array.view(np.uint8) > 1).any()):
        raise CodecError("BOOL tensor holds bytes other than 0 and 1", tensor=name)
    if copy:
        return array.copy()
    if array.flags.writeable:
        array.flags.writeable = False
    return array


def deserialize_bytes(name: str, data: memoryview, count: int) -> np.ndarray[Any, Any]:
    """``count`` BYTES elements (4-byte little-endian length, then the bytes) as a 1-D object array."""
    out = np.empty(count, dtype=np.object_)
    size = len(data)
    unpack = _LENGTH.unpack_from
    pos = 0
    for index in range(count):
        if pos + 4 > size:
            raise CodecError(
                f"BYTES data ends after {index} of {count} elements (element {index} has no length)",
                tensor=name,
            )
        (length,) = unpack(data, pos)
        pos += 4
        end = pos + length
        if end > size:
            raise CodecError(
                f"BYTES element {index} claims {length} bytes but only {size - pos} remain in the tensor",
                tensor=name,
            )
        out[index] = bytes(data[pos:end])
        pos = end
    if pos != size:
        raise CodecError(
            f"BYTES data has {size - pos} bytes left over after its {count} elements", tensor=name
        )
    return out


def _flatten_strings(name: str, data: Any, out: list[bytes]) -> None:
    for item in data:
        if isinstance(item, str):
            out.append(item.encode("utf-8", "surrogateescape"))
        elif isinstance(item, list):
            _flatten_strings(name, item, out)
        else:
            raise CodecError(f"BYTES data holds a JSON {type(item).__name__}, not a string", tensor=name)


def _flatten(data: list[Any], out: list[Any]) -> list[Any]:
    for item in data:
        if isinstance(item, list):
            _flatten(item, out)
        else:
            out.append(item)
    return out


def _exact_integers(name: str, datatype: str, data: list[Any], wire: np.dtype[Any]) -> np.ndarray[Any, Any]:
    flat = _flatten(data, [])
    if not all(type(item) is int for item in flat):
        raise CodecError(f"data holds values that are not integers, which {datatype} needs", tensor=name)
    info = np.iinfo(wire)
    if min(flat) < info.min or max(flat) > info.max:
        raise CodecError(f"data holds values outside the range of {datatype}", tensor=name)
    return np.array(flat, dtype=_native(wire))


_JSON_KINDS = {"b": "b", "i": "iu", "u": "iu", "f": "iuf"}

# Datatypes whose JSON data can go from the parser to numpy without Python numbers (NumberArray), each
# with the numpy kind its numbers are read as.
NUMERIC_DATATYPES: Mapping[str, str] = MappingProxyType(
    {name: dtype.kind for name, dtype in NUMPY_DTYPE.items() if dtype.kind in "iuf"}
)


def _decode_numbers(
    name: str, datatype: str, shape: list[int], data: NumberArray
) -> np.ndarray[Any, Any] | None:
    """A numeric tensor straight from the parser, or None to leave it to the generic path.

    The generic path's rules hold: integer tensors take only integers, in range; the count must match
    the shape. Whatever this path cannot settle exactly (nested data, a float in an integer tensor, a
    bool ...) goes to the generic path, which accepts it or names the problem.
    """
    wire = NUMPY_DTYPE[datatype]
    count = element_count(shape)
    if count == 0:
        return None
    parts = data.numbers(wire.kind)
    if parts is None:
        return None
    size = sum(part.size for part in parts)
    if size != count:
        raise CodecError(f"data has {size} elements but shape {shape} needs {count}", tensor=name)
    if wire.kind in "iu" and wire.itemsize < parts[0].dtype.itemsize:
        info = np.iinfo(wire)
        if any(part.min() < info.min or part.max() > info.max for part in parts):
            raise CodecError(f"data holds values outside the range of {datatype}", tensor=name)
    if len(parts) == 1:
        return parts[0].astype(_native(wire), copy=False).reshape(shape)
    # Pieces of a long array: each converted straight into its place in the tensor.
    out = np.empty(count, dtype=_native(wire))
    position = 0
    for part in parts:
        out[position : position + part.size] = part
        position += part.size
    return out.reshape(shape)


def decode_json_data(name: str, datatype: str, shape: list[int], data: Any) -> np.ndarray[Any, Any]:
    """A tensor from its JSON ``data`` (flat or nested lists, as Triton accepts, or a NumberArray)."""
    if isinstance(data, NumberArray):
        fast = _decode_numbers(name, datatype, shape, data) if datatype in NUMERIC_DATATYPES else None
        if fast is not None:
            return fast
        data = data.to_list()
    count = element_count(shape)
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        elements: list[bytes] = []
        try:
            _flatten_strings(name, data, elements)
        except UnicodeEncodeError:
            raise CodecError("BYTES data holds a string that is not UTF-8", tensor=name) from None
        if len(elements) != count:
            raise CodecError(
                f"data has {len(elements)} elements but shape {shape} needs {count}", tensor=name
            )
        out = np.empty(count, dtype=np.object_)
        out[:] = elements
        return out.reshape(shape)

    wire = NUMPY_DTYPE[datatype]
    try:
        values = np.array(data)
    except (ValueError, TypeError, OverflowError) as exc:
        raise CodecError(f"data is not a regular array of numbers: {exc}", tensor=name) from None
    if values.size != count:
        raise CodecError(f"data has {values.size} elements but shape {shape} needs {count}", tensor=name)
    if count == 0:
        return np.empty(shape, dtype=wire)
    if wire.kind in "iu" and values.dtype.kind in "fO":
        # numpy reads integers beyond int64 (UINT64's upper half) as float64 or object: check them one by one.
        values = _exact_integers(name, datatype, data, wire)
    allowed = _JSON_KINDS["f" if wire.kind == "V" else wire.kind]  # BF16 is a void-kind dtype
    if values.dtype.kind not in allowed:
        raise CodecError(f"data holds {values.dtype} values, which are not {datatype}", tensor=name)
    if wire.kind in "iu" and values.dtype != wire:
        info = np.iinfo(wire)
        if values.min() < info.min or values.max() > info.max:
            raise CodecError(f"data holds values outside the range of {datatype}", tensor=name)
    return values.astype(_native(wire), copy=False).reshape(shape)
