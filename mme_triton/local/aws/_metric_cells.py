"""What the stack's CloudWatch keeps of a metric, and the statistics it computes from it.

A metric's data points are kept in *cells*: one per unit and time slot (a second for high-resolution data,
``StorageResolution`` 1; a minute otherwise). A cell holds the figures every statistic needs: the sample
count, sum, minimum and maximum, and the raw values with their counts for percentiles. CloudWatch computes
percentiles only from raw values: a statistic set counts as raw values only when it describes copies of one
value (``Minimum == Maximum`` and ``Sum == Minimum * SampleCount``); any other makes the cell's
percentiles unavailable, and so does a negative value ("Percentile statistics are not available for
metrics when any of the metric values are negative numbers", GetMetricStatistics in the CloudWatch API
Reference).

The raw values of a cell are bounded (:data:`MAX_CELL_VALUES` distinct values): beyond that, neighbouring
values are merged into their count-weighted mean, which keeps the sample count, the sum, the minimum and the
maximum exact and makes percentiles approximate (CloudWatch's own are approximations too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "MAX_CELL_VALUES",
    "STATISTICS",
    "Cell",
    "coarsen",
    "parse_percentile",
    "percentile",
]

MAX_CELL_VALUES = 1500
"""Distinct raw values one cell keeps before neighbours are merged (ten full ``Values`` arrays)."""

STATISTICS = ("SampleCount", "Average", "Sum", "Minimum", "Maximum")
"""CloudWatch's statistics other than percentiles, as ``Statistics`` and ``Stat`` name them."""

_PERCENTILE = re.compile(r"[pP](\d{1,3}(?:\.\d{1,2})?)")


def parse_percentile(stat: str) -> float | None:
    """``"p99"`` -> 99.0, ``"p99.9"`` -> 99.9; ``None`` for anything that is not ``p0`` to ``p100`` with up to
    two decimals (CloudWatch's ``pNN.NN``)."""
    match = _PERCENTILE.fullmatch(stat)
    if match is None:
        return None
    value = float(match.group(1))
    return value if value <= 100 else None


def percentile(values: Mapping[float, float], rank: float) -> float | None:
    """The ``rank``-th percentile (0-100) of raw values given as value -> count: the smallest value with at
    least ``rank`` percent of the samples at or below it (the nearest-rank definition: ``p50`` of 1, 2, 3,
    4 is 2; ``p0`` is the minimum, ``p100`` the maximum). ``None`` without samples."""
    total = math.fsum(values.values())
    if total <= 0:
        return None
    ordered = sorted(values.items())
    if rank <= 0:
        return ordered[0][0]
    target = rank / 100.0 * total
    tolerance = 1e-9 * total
    seen = 0.0
    for value, count in ordered:
        seen += count
        if seen >= target - tolerance:
            return value
    return ordered[-1][0]


def coarsen(values: dict[float, float], limit: int) -> dict[float, float]:
    """``values`` (value -> count) in at most about ``limit // 2`` entries: sorted neighbours merged into
    their count-weighted mean, each merged entry holding at most ``4 / limit`` of all samples (so a
    percentile moves by at most that share of the ranks). The smallest and the largest value stay as they
    are: the minimum, maximum, sample count and sum of the result equal those of ``values``."""
    if len(values) <= limit:
        return values
    ordered = sorted(values.items())
    first, last = ordered[0], ordered[-1]
    target = math.fsum(values.values()) / max(1, limit // 4)
    merged: dict[float, float] = {first[0]: first[1]}
    weight = count = 0.0
    low = high = 0.0

    def close() -> None:
        if count > 0:
            mean = min(max(weight / count, low), high)
            merged[mean] = merged.get(mean, 0.0) + count

    for value, how_many in ordered[1:-1]:
        if count > 0 and count + how_many > target:
            close()
            weight = count = 0.0
        if count == 0:
            low = value
        weight += value * how_many
        count += how_many
        high = value
    close()
    merged[last[0]] = merged.get(last[0], 0.0) + last[1]
    return merged


@dataclass
class Cell:
    """The data points of one metric, unit and time slot, as the statistics need them."""

    count: float = 0.0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    values: dict[float, float] = field(default_factory=dict)
    percentiles: bool = True  # False: a statistic set percentiles cannot use, or a negative value

    def add_values(self, pairs: Iterable[tuple[float, float]]) -> None:
        """Raw values with their counts (``Value``, or ``Values`` and ``Counts``)."""
        for value, count in pairs:
            if count <= 0:
                continue
            self.count += count
            self.total += value * count
            self.low = min(self.low, value)
            self.high = max(self.high, value)
            self.values[value] = self.values.get(value, 0.0) + count
            if value < 0:
                self.percentiles = False
        if len(self.values) > MAX_CELL_VALUES:
            self.values = coarsen(self.values, MAX_CELL_VALUES)

    def add_statistics(self, count: float, total: float, low: float, high: float) -> None:
        """A statistic set (``StatisticValues``)."""
        if low == high and math.isclose(total, low * count, rel_tol=1e-12, abs_tol=1e-12):
            self.add_values([(low, count)])
            return
        self.count += count
        self.total += total
        self.low = min(self.low, low)
        self.high = max(self.high, high)
        self.percentiles = False

    def merge(self, other: Cell, *, with_values: bool = True) -> None:
        """Add ``other``'s data points to this cell (``with_values=False``: leave the raw values out)."""
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)
        self.percentiles = self.percentiles and other.percentiles
        if with_values:
            for value, count in other.values.items():
                self.values[value] = self.values.get(value, 0.0) + count
            if len(self.values) > MAX_CELL_VALUES:
                self.values = coarsen(self.values, MAX_CELL_VALUES)

    def statistic(self, name: str) -> float | None:
        """``SampleCount``, ``Average``, ``Sum``, ``Minimum``, ``Maximum`` or ``pNN.NN``; ``None`` when the
        cell has no samples or the percentile is not available."""
        if self.count <= 0:
            return None
        if name == "SampleCount":
            return self.count
        if name == "Sum":
            return self.total
        if name == "Average":
            return self.total / self.count
        if name == "Minimum":
            return self.low
        if name == "Maximum":
            return self.high
        rank = parse_percentile(name)
        if rank is None or not self.percentiles:
            return None
        return percentile(self.values, rank)
