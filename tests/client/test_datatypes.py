"""The datatype table: Triton name <-> numpy dtype, element sizes, what JSON can carry."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mme_triton.client.datatypes import (
    DATATYPES,
    ELEMENT_SIZE,
    json_supported,
    numpy_dtype,
    triton_datatype,
)

TABLE = [
    ("BOOL", np.bool_, 1),
    ("UINT8", np.uint8, 1),
    ("UINT16", np.uint16, 2),
    ("UINT32", np.uint32, 4),
    ("UINT64", np.uint64, 8),
    ("INT8", np.int8, 1),
    ("INT16", np.int16, 2),
    ("INT32", np.int32, 4),
    ("INT64", np.int64, 8),
    ("FP16", np.float16, 2),
    ("FP32", np.float32, 4),
    ("FP64", np.float64, 8),
    ("BF16", ml_dtypes.bfloat16, 2),
]


@pytest.mark.parametrize(("datatype", "dtype", "size"), TABLE, ids=[row[0] for row in TABLE])
def test_datatypes_table_maps_both_ways(datatype: str, dtype: type, size: int) -> None:
    assert numpy_dtype(datatype) == np.dtype(dtype)
    assert triton_datatype(np.dtype(dtype)) == datatype
    assert ELEMENT_SIZE[datatype] == size


def test_datatypes_cover_every_triton_datatype() -> None:
    assert sorted(DATATYPES) == sorted([row[0] for row in TABLE] + ["BYTES"])


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(np.object_, "BYTES"), ("S5", "BYTES"), ("U3", "BYTES"), (">i4", "INT32"), ("<f8", "FP64")],
    ids=["object", "bytes", "str", "big-endian", "little"],
)
def test_triton_datatype_accepts_string_kinds_and_any_byte_order(dtype: object, expected: str) -> None:
    assert triton_datatype(dtype) == expected


@pytest.mark.parametrize("dtype", [np.complex64, "M8[s]", "V4", [("a", "i4")]], ids=str)
def test_triton_datatype_rejects_dtypes_triton_lacks(dtype: object) -> None:
    with pytest.raises(TypeError, match="no Triton datatype"):
        triton_datatype(dtype)


def test_numpy_dtype_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown Triton datatype 'FP8'"):
        numpy_dtype("FP8")


def test_numpy_dtype_bytes_is_object_and_has_no_element_size() -> None:
    assert numpy_dtype("BYTES") == np.dtype(object)
    assert ELEMENT_SIZE["BYTES"] is None


@pytest.mark.parametrize("datatype", DATATYPES)
def test_json_supported_only_refuses_fp16_and_bf16(datatype: str) -> None:
    assert json_supported(datatype) == (datatype not in ("FP16", "BF16"))
