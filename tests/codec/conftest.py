"""Fixtures for the codec tests: sample tensors of every Triton datatype and both JSON backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from mme_triton.client import _json

# One sample per Triton datatype, with the values most likely to break an encoder: extremes of each
# integer range, float subnormals and huge values, negative zero, empty and non-ASCII strings.
SAMPLES: dict[str, np.ndarray[Any, Any]] = {
    "BOOL": np.array([[True, False, True], [False, False, True]]),
    "UINT8": np.array([0, 1, 255], dtype=np.uint8),
    "UINT16": np.array([0, 1, 65535], dtype=np.uint16),
    "UINT32": np.array([0, 1, 2**32 - 1], dtype=np.uint32),
    "UINT64": np.array([0, 1, 2**64 - 1], dtype=np.uint64),
    "INT8": np.array([-128, 0, 127], dtype=np.int8),
    "INT16": np.array([-(2**15), 0, 2**15 - 1], dtype=np.int16),
    "INT32": np.array([[-(2**31), 0], [7, 2**31 - 1]], dtype=np.int32),
    "INT64": np.array([-(2**63), -1, 2**63 - 1], dtype=np.int64),
    "FP16": np.array([-0.0, 1.5, 65504.0, 6e-8], dtype=np.float16),
    "FP32": np.array([[0.1, -0.0, 3.4028235e38], [1e-45, -2.5, 16777217.0]], dtype=np.float32),
    "FP64": np.array([0.1, -0.0, 1.7976931348623157e308, 5e-324, 1 / 3], dtype=np.float64),
    "BF16": np.array([1.0, -2.5, 3.0e38, 0.1], dtype=ml_dtypes.bfloat16),
    "BYTES": np.array([[b"", b"abc"], [b"\xc3\xa9t\xc3\xa9", b"with\x00nul"]], dtype=np.object_),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``sample_datatype`` runs the test once per Triton datatype, ``json_datatype`` once per JSON one."""
    if "sample_datatype" in metafunc.fixturenames:
        metafunc.parametrize("sample_datatype", list(SAMPLES), ids=list(SAMPLES))
    if "json_datatype" in metafunc.fixturenames:
        names = [name for name in SAMPLES if name not in ("FP16", "BF16")]
        metafunc.parametrize("json_datatype", names, ids=names)


@pytest.fixture
def sample(sample_datatype: str) -> np.ndarray[Any, Any]:
    """The sample tensor of ``sample_datatype`` (a fresh copy)."""
    return SAMPLES[sample_datatype].copy()


@pytest.fixture
def json_sample(json_datatype: str) -> np.ndarray[Any, Any]:
    """The sample tensor of ``json_datatype``: every datatype Triton accepts as JSON (not FP16, BF16)."""
    return SAMPLES[json_datatype].copy()


@pytest.fixture
def samples() -> dict[str, np.ndarray[Any, Any]]:
    """Every sample tensor, keyed by datatype."""
    return {name: array.copy() for name, array in SAMPLES.items()}


@pytest.fixture(params=["simdjson", "orjson", "json"])
def json_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with each JSON path: pysimdjson reading (orjson writing), orjson, the standard library."""
    if request.param in ("simdjson", "orjson"):
        pytest.importorskip("orjson")
    if request.param == "simdjson":
        pytest.importorskip("simdjson")
    monkeypatch.setattr(_json, "use_orjson", request.param in ("simdjson", "orjson"))
    monkeypatch.setattr(_json, "use_simdjson", request.param == "simdjson")
    yield request.param


@pytest.fixture
def same_tensor() -> Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], None]:
    """An assertion: same shape, same dtype and the same bits."""
    return _assert_same_tensor


def _assert_same_tensor(actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> None:
    """Same shape, same dtype (native order) and the same values bit for bit (NaN and -0.0 included)."""
    assert actual.shape == expected.shape
    if expected.dtype == np.object_:
        assert actual.dtype == np.object_
        assert actual.tolist() == expected.tolist()
        return
    assert actual.dtype == expected.dtype.newbyteorder("=")
    native = np.ascontiguousarray(expected, dtype=actual.dtype)
    assert np.ascontiguousarray(actual).tobytes() == native.tobytes()
