"""Cutting a batch along dimension 0 and joining the partial answers (pure numpy, no server)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mme_triton.client._split import batch_rows, chunk_bounds, join_outputs, take_rows


@pytest.mark.parametrize(
    ("n_rows", "rows_per_chunk", "expected"),
    [
        (10, 4, [(0, 4), (4, 8), (8, 10)]),
        (8, 4, [(0, 4), (4, 8)]),
        (3, 10, [(0, 3)]),
        (1, 1, [(0, 1)]),
        (0, 5, []),
    ],
    ids=["remainder", "exact", "one-chunk", "single-row", "empty"],
)
def test_chunk_bounds_cover_rows_in_order(
    n_rows: int, rows_per_chunk: int, expected: list[tuple[int, int]]
) -> None:
    assert chunk_bounds(n_rows, rows_per_chunk) == expected


def test_chunk_bounds_rejects_zero_rows_per_chunk() -> None:
    with pytest.raises(ValueError, match="rows_per_chunk"):
        chunk_bounds(4, 0)


def test_batch_rows_returns_shared_dimension_zero() -> None:
    inputs = {"A": np.zeros((5, 2)), "B": np.zeros((5,), dtype=object)}
    assert batch_rows(inputs) == 5


@pytest.mark.parametrize(
    ("inputs", "match"),
    [
        ({"A": np.zeros((5, 2)), "B": np.zeros((4, 2))}, "share dimension 0"),
        ({"A": np.float32(1.0) * np.ones(())}, "scalar"),
        ({}, "at least one input"),
    ],
    ids=["mismatched-rows", "scalar", "no-inputs"],
)
def test_batch_rows_rejects_unsplittable_inputs(inputs: dict[str, np.ndarray[Any, Any]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        batch_rows(inputs)


def test_take_rows_returns_views_of_the_rows() -> None:
    array = np.arange(12).reshape(6, 2)
    part = take_rows({"A": array}, 2, 4)["A"]
    np.testing.assert_array_equal(part, [[4, 5], [6, 7]])
    assert np.shares_memory(part, array)


def test_join_outputs_concatenates_in_order() -> None:
    parts = [
        {"OUT": np.array([[1, 2]]), "TXT": np.array([b"a"], dtype=object)},
        {"OUT": np.array([[3, 4], [5, 6]]), "TXT": np.array([b"b", b"c"], dtype=object)},
    ]
    joined = join_outputs(parts)
    np.testing.assert_array_equal(joined["OUT"], [[1, 2], [3, 4], [5, 6]])
    assert joined["TXT"].tolist() == [b"a", b"b", b"c"]


@pytest.mark.parametrize(
    ("parts", "match"),
    [
        ([{"OUT": np.array(1.0)}, {"OUT": np.array(2.0)}], "scalar"),
        ([{"OUT": np.zeros((1, 2))}, {"OUT": np.zeros((1, 3))}], "only dimension 0 may differ"),
        ([{"OUT": np.zeros((1,))}, {"OTHER": np.zeros((1,))}], "returned outputs"),
    ],
    ids=["scalar-output", "trailing-dims-differ", "different-names"],
)
def test_join_outputs_rejects_outputs_without_a_batch_dimension(
    parts: list[dict[str, np.ndarray[Any, Any]]], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        join_outputs(parts)
