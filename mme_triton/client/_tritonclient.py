"""tritonclient's own ``InferInput`` / ``InferRequestedOutput`` objects, read where ours are accepted.

AWS's sample notebooks build requests with ``tritonclient.http.InferInput`` (or the ``grpc`` flavour);
the codec and :class:`~mme_triton.client.client.MMEClient` take those objects as they come. tritonclient
is never imported here: an object is recognised by the module its class comes from, and read through
its public getters (``name()``, ``shape()``, ``datatype()``) and the attributes tritonclient 2.x keeps
its data in:

- ``tritonclient.http.InferInput``: ``_raw_data`` (the tensor's wire bytes, after
  ``set_data_from_numpy(binary_data=True)``) or ``_data`` (the JSON ``data`` list, after
  ``binary_data=False``), and ``_parameters`` (shared-memory settings);
- ``tritonclient.grpc.InferInput``: ``_raw_content`` (the wire bytes) and ``_input`` (the
  ``InferInputTensor`` message, whose ``parameters`` hold shared-memory settings);
- ``tritonclient.http.InferRequestedOutput``: ``_binary`` and ``_parameters`` (``classification``);
  the ``grpc`` flavour: ``_output.parameters["classification"]``.

Wire bytes are used as they are: a binary input goes into the body with no copy besides the body's own.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from mme_triton.client._tensors import EncodedTensor, deserialize_bytes, element_count, encode_tensor
from mme_triton.client.datatypes import NUMPY_DTYPE

__all__ = [
    "is_tritonclient_input",
    "is_tritonclient_output",
    "tritonclient_array",
    "tritonclient_binary",
    "tritonclient_output",
    "tritonclient_tensor",
]

_SHARED_MEMORY = "shared_memory_region"


def _flavour(obj: object, class_name: str) -> str | None:
    """``"http"`` or ``"grpc"`` when ``obj`` is tritonclient's ``class_name`` (aio flavours included)."""
    cls = type(obj)
    module = cls.__module__ or ""
    if cls.__name__ != class_name or not module.startswith("tritonclient."):
        return None
    flavour = module.split(".")[1]
    return flavour if flavour in ("http", "grpc") else None


def is_tritonclient_input(obj: object) -> TypeGuard[Any]:
    """Whether ``obj`` is a ``tritonclient.http.InferInput`` or ``tritonclient.grpc.InferInput``."""
    return _flavour(obj, "InferInput") is not None


def is_tritonclient_output(obj: object) -> TypeGuard[Any]:
    """Whether ``obj`` is tritonclient's ``InferRequestedOutput`` (http or grpc)."""
    return _flavour(obj, "InferRequestedOutput") is not None


def _describe(item: Any) -> tuple[str, list[int], str]:
    name = str(item.name())
    shape = [int(d) for d in item.shape()]
    datatype = str(item.datatype())
    if datatype not in NUMPY_DTYPE:
        raise ValueError(f"unknown Triton datatype {datatype!r} for input {name!r}")
    return name, shape, datatype


def _raw(item: Any) -> tuple[bytes | None, list[Any] | None]:
    """``(wire bytes, JSON data)`` of a tritonclient input, one of them set.

    Raises:
        ValueError: the input sits in a shared-memory region, or has no data.
    """
    if _flavour(item, "InferInput") == "grpc":
        parameters: Any = item._input.parameters
        raw = item._raw_content
        data = None
    else:
        parameters = item._parameters
        raw = item._raw_data
        data = item._data
    if _SHARED_MEMORY in parameters:
        raise ValueError(
            f"input {item.name()!r} is in a shared-memory region; InvokeEndpoint carries tensors in the "
            "request body only: use set_data_from_numpy()"
        )
    if raw is None and data is None:
        raise ValueError(f"input {item.name()!r} has no data; call set_data_from_numpy() first")
    return (None if raw is None else bytes(raw) if not isinstance(raw, bytes) else raw), data


def tritonclient_binary(item: Any) -> bool:
    """Whether a tritonclient input holds its data for the binary section (the grpc flavour always does)."""
    return _raw(item)[0] is not None


def _check_size(name: str, shape: list[int], datatype: str, raw: bytes) -> None:
    if datatype == "BYTES":
        return
    expected = element_count(shape) * NUMPY_DTYPE[datatype].itemsize
    if len(raw) != expected:
        raise ValueError(
            f"input {name!r}: its data is {len(raw)} bytes but shape {shape} of {datatype} needs {expected} "
            "(was the shape changed after set_data_from_numpy()?)"
        )


def _json_array(name: str, shape: list[int], datatype: str, data: list[Any]) -> np.ndarray[Any, Any]:
    dtype = np.dtype(object) if datatype == "BYTES" else NUMPY_DTYPE[datatype]
    flat = np.array(data, dtype=dtype).reshape(-1)
    if flat.size != element_count(shape):
        raise ValueError(
            f"input {name!r}: its JSON data has {flat.size} elements but shape {shape} needs "
            f"{element_count(shape)}"
        )
    return flat.reshape(shape)


def tritonclient_tensor(item: Any) -> EncodedTensor:
    """A tritonclient input ready for the body: its wire bytes as they are, or its JSON data.

    Raises:
        ValueError: an unknown datatype, a shared-memory input, no data, or data that does not match
            the shape.
        CodecError: JSON data holding NaN or infinity.
    """
    name, shape, datatype = _describe(item)
    raw, data = _raw(item)
    if raw is not None:
        _check_size(name, shape, datatype, raw)
        return EncodedTensor(name=name, datatype=datatype, shape=shape, buffer=raw, nbytes=len(raw))
    assert data is not None
    return encode_tensor(name, _json_array(name, shape, datatype, data), datatype, want_json=True)


def tritonclient_array(item: Any) -> np.ndarray[Any, Any]:
    """A tritonclient input's data as an array (numeric wire bytes are viewed, not copied).

    Raises:
        ValueError: as :func:`tritonclient_tensor`.
    """
    name, shape, datatype = _describe(item)
    raw, data = _raw(item)
    if raw is None:
        assert data is not None
        return _json_array(name, shape, datatype, data)
    _check_size(name, shape, datatype, raw)
    if datatype == "BYTES":
        return deserialize_bytes(name, memoryview(raw), element_count(shape)).reshape(shape)
    return np.frombuffer(raw, dtype=NUMPY_DTYPE[datatype]).reshape(shape)


def tritonclient_output(item: Any) -> tuple[str, bool | None, int]:
    """``(name, binary_data, class_count)`` of tritonclient's ``InferRequestedOutput``.

    ``binary_data`` is ``None`` for the grpc flavour, which has no such setting (the request's applies).

    Raises:
        ValueError: the output is asked for in a shared-memory region.
    """
    name = str(item.name())
    if _flavour(item, "InferRequestedOutput") == "grpc":
        parameters: Any = item._output.parameters
        binary: bool | None = None
        class_count = int(parameters["classification"].int64_param) if "classification" in parameters else 0
    else:
        parameters = item._parameters
        binary = bool(item._binary)
        class_count = int(parameters.get("classification", 0))
    if _SHARED_MEMORY in parameters:
        raise ValueError(
            f"output {name!r} is asked for in a shared-memory region; InvokeEndpoint returns outputs in the "
            "response body only: call unset_shared_memory()"
        )
    return name, binary, class_count
