"""One definition of a percentile for every latency the library reports: perf_analyzer's.

perf_analyzer (``inference_profiler.cc``, ``SummarizeLatency``) sorts the window's latencies and takes the
element at index ``int(q / 100 * (n - 1) + 0.5)``: the nearest rank of the interpolating definition, always
a latency that was measured (never a value between two). The profile's built-in engine, the capacity
planner's predictions and a plan's validation use it too, so a p99 from either engine, a predicted p99 and
a replayed one are the same statistic. Only the standard library is imported; numpy arrays work as inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["percentile", "percentile_index", "percentiles"]


def percentile_index(count: int, q: float) -> int:
    """The index of the ``q``-th percentile (0-100) in ``count`` sorted values.

    Raises:
        ValueError: no values, or ``q`` outside 0-100.

    Example:
        >>> percentile_index(100, 99), percentile_index(100, 50), percentile_index(1, 99)
        (98, 50, 0)
    """
    if count < 1:
        raise ValueError("a percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"a percentile is between 0 and 100, got {q!r}")
    return int(q / 100.0 * (count - 1) + 0.5)


def percentile(values: Sequence[float] | Any, q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values`` (sorted here), perf_analyzer's way.

    Example:
        >>> percentile([4.0, 1.0, 3.0, 2.0], 50)
        3.0
    """
    ordered = sorted(values) if not hasattr(values, "dtype") else _sorted_array(values)
    return float(ordered[percentile_index(len(ordered), q)])


def percentiles(values: Iterable[float] | Any, qs: Sequence[float]) -> list[float]:
    """Several percentiles of ``values``, sorting once.

    Example:
        >>> percentiles(range(1, 101), [50, 90, 99])
        [51.0, 90.0, 99.0]
    """
    ordered = _sorted_array(values) if hasattr(values, "dtype") else sorted(values)
    return [float(ordered[percentile_index(len(ordered), q)]) for q in qs]


def _sorted_array(values: Any) -> Any:
    import numpy as np

    return np.sort(np.asarray(values), kind="stable")
