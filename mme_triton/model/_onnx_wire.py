"""Read the parts of an ONNX file validation needs, without reading its weights.

``onnx.load`` decodes the whole ``ModelProto``: a 1.5 GB model with embedded weights costs seconds and
twice its size in memory. Validation needs only the graph's inputs, outputs and initializer names (plus
where external data lives), and the profile the model's metadata, so this walks the protobuf wire format
and seeks past everything else. The small ``ValueInfoProto`` messages it returns are decoded by the
``onnx`` package.

Field numbers are from onnx.proto: ModelProto.graph = 7, metadata_props = 14; GraphProto.initializer = 5,
input = 11, output = 12, sparse_initializer = 15; TensorProto.name = 8, external_data = 13,
data_location = 14; StringStringEntryProto.key = 1, value = 2; SparseTensorProto.values = 1.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from mme_triton.model._files import open_regular

__all__ = ["GraphParts", "WireFormatError", "read_graph_parts", "read_model_metadata"]

_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL


class WireFormatError(ValueError):
    """The file is not a well-formed protobuf message."""


@dataclass
class GraphParts:
    """Serialized graph inputs/outputs, initializer names, and external-data locations."""

    inputs: list[bytes] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)
    initializers: list[str] = field(default_factory=list)
    external_locations: list[str] = field(default_factory=list)
    has_graph: bool = False


def read_graph_parts(path: str | os.PathLike[str]) -> GraphParts:
    """Scan an ONNX ``ModelProto`` file; raises :class:`WireFormatError` when it is malformed."""
    parts = GraphParts()
    with io.BufferedReader(open_regular(path)) as stream:
        size = os.fstat(stream.fileno()).st_size
        for number, wire, start, length in _fields(stream, 0, size):
            if number == 7 and wire == _LENGTH:
                parts.has_graph = True
                _read_graph(stream, start, start + length, parts)
    return parts


def read_model_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The model's ``metadata_props`` (key -> value), read without its graph; raises
    :class:`WireFormatError` when the file is malformed."""
    metadata: dict[str, str] = {}
    with io.BufferedReader(open_regular(path)) as stream:
        size = os.fstat(stream.fileno()).st_size
        for number, wire, start, length in _fields(stream, 0, size):
            if number == 14 and wire == _LENGTH:
                key, value = _string_entry(stream, start, length)
                metadata[key] = value
    return metadata


def _read_graph(stream: BinaryIO, start: int, end: int, parts: GraphParts) -> None:
    for number, wire, offset, length in _fields(stream, start, end):
        if wire != _LENGTH:
            continue
        if number == 11:
            parts.inputs.append(_read(stream, offset, length))
        elif number == 12:
            parts.outputs.append(_read(stream, offset, length))
        elif number == 5:
            _read_tensor(stream, offset, offset + length, parts)
        elif number == 15:
            for inner, inner_wire, inner_offset, inner_length in _fields(stream, offset, offset + length):
                if inner == 1 and inner_wire == _LENGTH:
                    _read_tensor(stream, inner_offset, inner_offset + inner_length, parts)


def _read_tensor(stream: BinaryIO, start: int, end: int, parts: GraphParts) -> None:
    name = ""
    external = False
    locations: list[str] = []
    for number, wire, offset, length in _fields(stream, start, end):
        if number == 8 and wire == _LENGTH:
            name = _read(stream, offset, length).decode("utf-8", "replace")
        elif number == 14 and wire == _VARINT:
            external = offset == _EXTERNAL
        elif number == 13 and wire == _LENGTH:
            key, value = _string_entry(stream, offset, length)
            if key == "location":
                locations.append(value)
    parts.initializers.append(name)
    if external:
        parts.external_locations.extend(locations)


def _string_entry(stream: BinaryIO, offset: int, length: int) -> tuple[str, str]:
    """A ``StringStringEntryProto``'s key and value."""
    key = value = ""
    for entry, entry_wire, entry_offset, entry_length in _fields(stream, offset, offset + length):
        if entry_wire != _LENGTH:
            continue
        text = _read(stream, entry_offset, entry_length).decode("utf-8", "replace")
        if entry == 1:
            key = text
        elif entry == 2:
            value = text
    return key, value


def _fields(stream: BinaryIO, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(field number, wire type, offset or varint value, length)`` for each field in [start, end).

    For length-delimited fields the third item is the payload's offset; for varints it is the value.
    The stream position is restored before each step, so callers may read or recurse in between.
    """
    position = start
    while position < end:
        stream.seek(position)
        tag, position = _varint(stream, position, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise WireFormatError(f"field number 0 at byte {position}")
        if wire == _VARINT:
            value, position = _varint(stream, position, end)
            yield number, wire, value, 0
        elif wire == _FIXED64:
            position += 8
        elif wire == _FIXED32:
            position += 4
        elif wire == _LENGTH:
            length, position = _varint(stream, position, end)
            if position + length > end:
                raise WireFormatError(f"field {number} runs past its message (byte {position})")
            yield number, wire, position, length
            position += length
        else:
            raise WireFormatError(f"unsupported wire type {wire} at byte {position}")
    if position != end:
        raise WireFormatError("message ends in the middle of a field")


def _varint(stream: BinaryIO, position: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if position >= end or shift > 63:
            raise WireFormatError(f"bad varint at byte {position}")
        byte = stream.read(1)
        if not byte:
            raise WireFormatError("file ends in the middle of a varint")
        position += 1
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result, position
        shift += 7


def _read(stream: BinaryIO, offset: int, length: int) -> bytes:
    stream.seek(offset)
    data = stream.read(length)
    if len(data) != length:
        raise WireFormatError("file ends in the middle of a field")
    return data
