"""JSON text for the codec: orjson when it is installed (numpy arrays straight to text), else ``json``.

Both backends write the same values; they differ only in speed and in float formatting (orjson writes
the shortest text that reads back as the same float32, ``json`` the shortest for the float64 value).
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

import numpy as np


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# An optional accelerator: numeric tensors to and from JSON many times faster than tolist() + json.
_orjson = _optional("orjson")

# Tests switch this off to exercise the standard-library path.
use_orjson: bool = _orjson is not None


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
