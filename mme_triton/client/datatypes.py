"""Triton datatypes and their numpy dtypes: one table and its inverse.

Triton's wire format is little-endian. ``BF16`` is ``ml_dtypes.bfloat16`` (what tritonclient uses too);
``BYTES`` tensors are numpy object arrays holding ``bytes``.

>>> numpy_dtype("FP32")
dtype('float32')
>>> triton_datatype(np.dtype("int64"))
'INT64'
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

__all__ = [
    "DATATYPES",
    "ELEMENT_SIZE",
    "NUMPY_DTYPE",
    "json_supported",
    "numpy_dtype",
    "triton_datatype",
]

# Triton datatype -> numpy dtype of one element on the wire (little-endian).
NUMPY_DTYPE: Mapping[str, np.dtype[Any]] = MappingProxyType(
    {
        "BOOL": np.dtype(np.bool_),
        "UINT8": np.dtype("<u1"),
        "UINT16": np.dtype("<u2"),
        "UINT32": np.dtype("<u4"),
        "UINT64": np.dtype("<u8"),
        "INT8": np.dtype("<i1"),
        "INT16": np.dtype("<i2"),
        "INT32": np.dtype("<i4"),
        "INT64": np.dtype("<i8"),
        "FP16": np.dtype("<f2"),
        "FP32": np.dtype("<f4"),
        "FP64": np.dtype("<f8"),
        "BF16": np.dtype(ml_dtypes.bfloat16),
        "BYTES": np.dtype(np.object_),
    }
)

DATATYPES: tuple[str, ...] = tuple(NUMPY_DTYPE)

# Bytes per element on the wire; BYTES elements have a 4-byte length prefix and a variable size.
ELEMENT_SIZE: Mapping[str, int | None] = MappingProxyType(
    {name: (None if name == "BYTES" else dtype.itemsize) for name, dtype in NUMPY_DTYPE.items()}
)

# The inverse table, keyed by (kind, itemsize) so that byte order does not matter.
_BY_KIND_SIZE: dict[tuple[str, int], str] = {
    (dtype.kind, dtype.itemsize): name for name, dtype in NUMPY_DTYPE.items() if name not in ("BF16", "BYTES")
}
_BF16 = np.dtype(ml_dtypes.bfloat16)

# Triton refuses FP16 and BF16 in JSON, both for inputs and for outputs.
_NOT_IN_JSON = frozenset({"FP16", "BF16"})


def numpy_dtype(datatype: str) -> np.dtype[Any]:
    """The numpy dtype of a Triton datatype.

    Args:
        datatype: a Triton datatype name such as ``"FP32"`` or ``"BYTES"``.

    Raises:
        ValueError: ``datatype`` is not a Triton datatype.

    Example:
        >>> numpy_dtype("BF16")
        dtype(bfloat16)
    """
    try:
        return NUMPY_DTYPE[datatype]
    except KeyError:
        raise ValueError(
            f"unknown Triton datatype {datatype!r}; expected one of {', '.join(DATATYPES)}"
        ) from None


def triton_datatype(dtype: Any) -> str:
    """The Triton datatype for a numpy dtype (any byte order).

    ``bool`` is ``BOOL``; ``object``, ``S`` (bytes) and ``U`` (str) dtypes are ``BYTES``;
    ``ml_dtypes.bfloat16`` is ``BF16``.

    Args:
        dtype: a numpy dtype or anything ``numpy.dtype()`` accepts.

    Raises:
        TypeError: Triton has no datatype for it (complex, datetime, structured ...).

    Example:
        >>> triton_datatype(np.float16)
        'FP16'
    """
    dt = np.dtype(dtype)
    if dt == _BF16:
        return "BF16"
    if dt.kind in "OSU":
        return "BYTES"
    name = _BY_KIND_SIZE.get((dt.kind, dt.itemsize)) if dt.fields is None else None
    if name is None:
        raise TypeError(f"numpy dtype {dt} has no Triton datatype")
    return name


def json_supported(datatype: str) -> bool:
    """Whether Triton accepts tensors of this datatype as JSON ``data`` (not FP16 nor BF16).

    Example:
        >>> json_supported("FP16")
        False
    """
    return datatype not in _NOT_IN_JSON
