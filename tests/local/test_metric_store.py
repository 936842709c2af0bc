"""The stack's metric store on its own: percentiles, bounded memory and CloudWatch's retention, on a clock the
tests move (no server: the requests are the dicts moto hands over)."""

from __future__ import annotations

import logging
import math
import random

import pytest

from mme_triton.local.aws._cloudwatch_reads import get_metric_statistics, list_metrics, round_start
from mme_triton.local.aws._metric_cells import MAX_CELL_VALUES, Cell, coarsen, parse_percentile, percentile
from mme_triton.local.aws.cloudwatch import MetricStore

T0 = 1_800_000_000.0  # a minute boundary (divisible by 60)
DIMS = [{"Name": "EndpointName", "Value": "ep"}]


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _put(store: MetricStore, name: str, **datum: object) -> None:
    store.put_metric_data(
        {"Namespace": "T", "MetricData": [{"MetricName": name, "Dimensions": DIMS, **datum}]}
    )


def _statistics(
    store: MetricStore, name: str, start: float, end: float, period: int, *stats: str
) -> list[dict]:
    request = {"Namespace": "T", "MetricName": name, "Dimensions": DIMS, "StartTime": start, "EndTime": end,
               "Period": period}  # fmt: skip
    if stats and stats[0].startswith("p"):
        request["ExtendedStatistics"] = list(stats)
    else:
        request["Statistics"] = list(stats)
    return list(get_metric_statistics(store, request)["Datapoints"])


@pytest.mark.parametrize(
    ("values", "rank", "expected"),
    [
        ({1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1}, 50, 2.0),
        ({1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1}, 50.01, 3.0),
        ({1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1}, 0, 1.0),
        ({1.0: 1, 2.0: 1, 3.0: 1, 4.0: 1}, 100, 4.0),
        ({7.0: 3}, 99.99, 7.0),
        ({0.1: 1, 0.2: 1, 0.3: 1}, 100 / 3 * 2, 0.2),
    ],
    ids=["median-of-four", "just-above", "p0", "p100", "one-value", "float-rank"],
)
def test_percentile_is_the_nearest_rank(values: dict[float, float], rank: float, expected: float) -> None:
    assert percentile(values, rank) == expected


@pytest.mark.parametrize(
    ("text", "rank"),
    [("p99", 99.0), ("p99.9", 99.9), ("p0", 0.0), ("p100", 100.0), ("p100.01", None), ("p99.999", None),
     ("99", None), ("tm90", None)],
)  # fmt: skip
def test_parse_percentile_reads_pnn_nn(text: str, rank: float | None) -> None:
    assert parse_percentile(text) == rank


def test_coarsen_keeps_count_sum_minimum_and_maximum() -> None:
    rng = random.Random(7)
    values = {rng.uniform(1, 1000): float(rng.randint(1, 5)) for _ in range(5000)}

    merged = coarsen(values, 1000)

    assert len(merged) <= 1000
    assert math.isclose(math.fsum(merged.values()), math.fsum(values.values()))
    assert math.isclose(
        math.fsum(v * c for v, c in merged.items()),
        math.fsum(v * c for v, c in values.items()),
        rel_tol=1e-12,
    )
    assert (min(merged), max(merged)) == (min(values), max(values))


def test_cell_keeps_a_bounded_number_of_values_and_exact_figures() -> None:
    cell = Cell()
    for value in range(10 * MAX_CELL_VALUES):
        cell.add_values([(float(value), 1.0)])

    assert len(cell.values) <= MAX_CELL_VALUES
    assert (cell.count, cell.total) == (10.0 * MAX_CELL_VALUES, math.fsum(range(10 * MAX_CELL_VALUES)))
    assert (cell.statistic("Minimum"), cell.statistic("Maximum")) == (0.0, 10 * MAX_CELL_VALUES - 1.0)
    p50 = cell.statistic("p50")
    assert p50 is not None and abs(p50 - 5 * MAX_CELL_VALUES) < 0.01 * 10 * MAX_CELL_VALUES  # approximate now


def test_round_start_follows_cloudwatch() -> None:
    now = T0 + 3600
    assert round_start(T0 + 754, 60, now) == T0 + 720  # 12:32:34 -> 12:32:00
    assert round_start(T0 + 754, 300, now) == T0 + 720  # to the minute while less than 15 days old
    assert round_start(T0 + 754, 10, now) == T0 + 750  # 10 s periods: even 10 s of the minute
    assert round_start(T0 + 754, 1, now) == T0 + 754
    assert round_start(T0 + 754, 60, now + 20 * 86400) == T0 + 600  # 15-63 days old: five minutes
    assert round_start(T0 + 754, 60, now + 70 * 86400) == T0  # older: the hour


def test_store_turns_high_resolution_data_into_minutes_after_three_hours() -> None:
    clock = Clock()
    store = MetricStore(clock=clock)
    for second in (1, 2, 2, 59, 61):
        _put(store, "Fine", Value=float(second), StorageResolution=1, Timestamp=T0 + second)

    clock.now = T0 + 3 * 3600 + 120  # the next put expires what CloudWatch no longer keeps by the second
    _put(store, "Other", Value=1.0)

    assert _statistics(store, "Fine", T0, T0 + 120, 60, "Sum", "SampleCount") == [
        {"Timestamp": _when(T0), "Unit": "None", "Sum": 64.0, "SampleCount": 4.0},
        {"Timestamp": _when(T0 + 60), "Unit": "None", "Sum": 61.0, "SampleCount": 1.0},
    ]
    # and a sub-minute period no longer reaches them
    assert _statistics(store, "Fine", T0, T0 + 120, 1, "Sum") == []


def test_store_forgets_data_after_fifteen_days_and_metrics_after_two_weeks_quiet() -> None:
    clock = Clock()
    store = MetricStore(clock=clock)
    _put(store, "Old", Value=1.0)

    clock.now = T0 + 15 * 86400 + 120
    _put(store, "New", Value=1.0)

    assert _statistics(store, "Old", T0 - 60, T0 + 120, 60, "Sum") == []
    assert [m["MetricName"] for m in list_metrics(store, {"Namespace": "T"})["Metrics"]] == ["New"]


def test_store_drops_the_oldest_data_beyond_its_bounds(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock(T0 + 3600)
    store = MetricStore(clock=clock, max_cells=100, max_values=10_000)
    for minute in range(150):
        _put(store, "Many", Value=1.0, Timestamp=T0 + 60 * minute - 7200)

    with caplog.at_level(logging.WARNING, logger="mme_triton.local.aws.cloudwatch"):
        _put(store, "Many", Value=1.0, Timestamp=T0 + 3600)

    points = _statistics(store, "Many", T0 - 7200, T0 + 3660, 60, "SampleCount")
    assert len(points) <= 100
    assert points[-1]["Timestamp"] == _when(T0 + 3600)  # the newest stays
    assert points[0]["Timestamp"] > _when(T0 - 7200)  # the oldest went
    assert "dropped the" in caplog.text


def _when(seconds: float) -> object:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(seconds, tz=timezone.utc)
