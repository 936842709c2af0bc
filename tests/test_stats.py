"""One percentile for every latency the library reports: perf_analyzer's nearest rank."""

from __future__ import annotations

import numpy as np
import pytest

from mme_triton._stats import percentile, percentile_index, percentiles


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 3.0),  # index int(1.5 + 0.5) = 2; numpy's linear: 2.5
        ([1.0, 2.0, 3.0, 4.0], 25, 2.0),  # index int(0.75 + 0.5) = 1; linear: 1.75
        (list(range(1, 101)), 99, 99.0),  # index int(98.01 + 0.5) = 98
        ([7.0], 99, 7.0),
        ([3.0, 1.0, 2.0], 100, 3.0),
        ([3.0, 1.0, 2.0], 0, 1.0),
    ],
    ids=["median-of-four", "p25", "p99-of-100", "one-value", "max", "min"],
)
def test_percentile_is_perf_analyzers_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected
    assert percentile(np.array(values), q) == expected
    assert percentiles(values, [q]) == [expected]


def test_percentile_is_always_a_value_that_was_measured() -> None:
    values = np.random.default_rng(0).exponential(size=101)
    for q in (50, 90, 95, 99):
        assert percentile(values, q) in set(values.tolist())


@pytest.mark.parametrize(("count", "q"), [(0, 50), (3, -1), (3, 101)], ids=["empty", "below", "above"])
def test_percentile_index_refuses_what_has_no_percentile(count: int, q: float) -> None:
    with pytest.raises(ValueError):
        percentile_index(count, q)
