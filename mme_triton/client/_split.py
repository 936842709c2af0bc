"""Splitting a batch along dimension 0 into requests that fit, and joining the answers again.

Pure numpy helpers for :class:`~mme_triton.client.client.MMEClient` when ``split_batches`` is on. Every
input must carry the batch on its first dimension (the same length for all inputs); every output is joined
with :func:`numpy.concatenate` along dimension 0, in request order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["batch_rows", "chunk_bounds", "join_outputs", "take_rows"]


def batch_rows(inputs: Mapping[str, np.ndarray[Any, Any]]) -> int:
    """Return the shared length of dimension 0 of every input; ``ValueError`` when they disagree."""
    if not inputs:
        raise ValueError("split_batches needs at least one input tensor")
    rows: dict[str, int] = {}
    for name, array in inputs.items():
        if array.ndim == 0:
            raise ValueError(f"split_batches: input {name!r} is a scalar; it has no dimension 0 to split")
        rows[name] = int(array.shape[0])
    if len(set(rows.values())) != 1:
        listing = ", ".join(f"{name}: {n}" for name, n in rows.items())
        raise ValueError(f"split_batches: all inputs must share dimension 0 (the batch), got {listing}")
    return next(iter(rows.values()))


def chunk_bounds(n_rows: int, rows_per_chunk: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n_rows)`` in order, each at most ``rows_per_chunk`` long."""
    if rows_per_chunk < 1:
        raise ValueError(f"rows_per_chunk must be >= 1, got {rows_per_chunk}")
    return [(start, min(start + rows_per_chunk, n_rows)) for start in range(0, n_rows, rows_per_chunk)]


def take_rows(
    inputs: Mapping[str, np.ndarray[Any, Any]], start: int, stop: int
) -> dict[str, np.ndarray[Any, Any]]:
    """Rows ``start:stop`` of every input (views, no copy)."""
    return {name: array[start:stop] for name, array in inputs.items()}


def join_outputs(parts: Sequence[Mapping[str, np.ndarray[Any, Any]]]) -> dict[str, np.ndarray[Any, Any]]:
    """Concatenate each output of the partial answers along dimension 0, keeping the order of ``parts``.

    Raises ``ValueError`` when the answers name different outputs or an output cannot be joined (a
    scalar, or trailing dimensions that differ between requests), since then the model's outputs do not
    carry the batch on dimension 0.
    """
    if not parts:
        return {}
    names = list(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if set(part) != set(names):
            raise ValueError(
                f"split_batches: request {index} returned outputs {sorted(part)}, request 0 returned "
                f"{sorted(names)}"
            )
    joined: dict[str, np.ndarray[Any, Any]] = {}
    for name in names:
        pieces = [part[name] for part in parts]
        if any(piece.ndim == 0 for piece in pieces):
            raise ValueError(
                f"split_batches: output {name!r} is a scalar, so the answers of the split requests cannot "
                "be joined along dimension 0"
            )
        trailing = {piece.shape[1:] for piece in pieces}
        if len(trailing) != 1:
            raise ValueError(
                f"split_batches: output {name!r} has shapes {[piece.shape for piece in pieces]} across the "
                "split requests; only dimension 0 may differ"
            )
        joined[name] = np.concatenate(pieces, axis=0)
    return joined
