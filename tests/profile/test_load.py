"""The load generator's rules: perf_analyzer's stability rule, and what happens when nothing succeeds.

The physics of the generator (latency, throughput, batching) is checked against a real Triton in
test_profile_stack.py; here the connection is a small object of the test's own (the seam the generator
takes), so no timing is asserted.
"""

from __future__ import annotations

import threading
import time

import pytest

from mme_triton.profile.inputs import Request
from mme_triton.profile.load import Level, Measurement, Window, _Levels, _Run, _stable, measure

REQUESTS = [Request(b"{}", "application/json", {})]
QUICK = Measurement(window=0.05, window_requests=1, warmup=0.0, max_trials=5)


def _windows(*pairs: tuple[float, float | None]) -> list[Window]:
    return [Window(1.0, 10, 0, throughput, latency) for throughput, latency in pairs]


@pytest.mark.parametrize(
    ("pairs", "tolerance", "stable"),
    [
        ([(100, 10), (100, 10), (100, 10)], 0.1, True),
        ([(96, 10), (100, 10.5), (105, 9.6)], 0.1, True),  # 105/96 = 1.094, 10.5/9.6 = 1.094
        ([(90, 10), (100, 10), (110, 10)], 0.1, False),  # each within 10 % of the mean, but 110/90 = 1.22
        ([(100, 9), (100, 10), (100, 11)], 0.1, False),  # 11/9 = 1.22
        ([(90, 10), (100, 10), (110, 10)], 0.25, True),  # 1.22 <= 1.25
        ([(80, 10), (100, 10), (120, 10)], 0.25, False),  # 1.5 > 1.25, though within 25 % of the mean
        ([(0, None), (0, None), (0, None)], 0.1, False),  # nothing answered
        ([(100, 10), (100, None), (100, 10)], 0.1, False),
    ],
    ids=[
        "equal",
        "within",
        "throughput-max-over-min",
        "latency-max-over-min",
        "wider-tolerance",
        "mean-band-is-not-the-rule",
        "nothing",
        "a-gap",
    ],
)
def test_stability_rule_is_perf_analyzers_max_over_min(
    pairs: list[tuple[float, float | None]], tolerance: float, stable: bool
) -> None:
    assert _stable(_windows(*pairs), tolerance) is stable


class Refusing:
    """A target that answers every request with the same error."""

    sent = 0

    def send(self, request: Request) -> str | None:
        Refusing.sent += 1
        return "HTTP 400: unexpected inference input 'X'"

    def close(self) -> None:
        pass


def test_measure_stops_when_every_request_fails_and_reports_no_numbers() -> None:
    level = measure(Refusing, REQUESTS, concurrency=2, settings=QUICK)
    assert level.stable is False
    assert len(level.windows) == 1  # measuring longer would say nothing more
    assert level.requests == level.errors > 0
    assert level.error == "HTTP 400: unexpected inference input 'X'"
    assert (level.throughput_per_s, level.p50_ms, level.p99_ms, level.mean_ms) == (None,) * 4


def test_measure_counts_clients_that_cannot_connect() -> None:
    def unreachable() -> Refusing:
        raise ConnectionRefusedError("nothing listens there")

    level = measure(unreachable, REQUESTS, concurrency=3, settings=QUICK)
    assert level.stable is False and level.errors == 3
    assert level.error == "cannot connect: nothing listens there"


def test_measure_open_loop_stops_when_every_request_fails() -> None:
    level = measure(Refusing, REQUESTS, request_rate=200.0, settings=QUICK)
    assert level.request_rate == 200.0 and level.concurrency is None
    assert level.stable is False and level.errors == level.requests > 0
    assert level.load == "200/s"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, "concurrency or request_rate"),
        ({"concurrency": 1, "request_rate": 1.0}, "concurrency or request_rate"),
        ({"concurrency": 0}, "concurrency must be >= 1"),
        ({"request_rate": 0.0}, "request_rate must be > 0"),
    ],
    ids=["neither", "both", "zero-clients", "zero-rate"],
)
def test_measure_refuses_bad_levels(arguments: dict[str, float], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        measure(Refusing, REQUESTS, **arguments)  # type: ignore[arg-type]


def test_measure_refuses_an_empty_request_list() -> None:
    with pytest.raises(ValueError, match="no requests"):
        measure(Refusing, [], concurrency=1)


@pytest.mark.parametrize(
    "settings",
    [
        {"window": 0},
        {"warmup": -1},
        {"window_requests": 0},
        {"max_trials": 2},
        {"stability": 10},
        {"max_in_flight": 0},
    ],
    ids=["window", "warmup", "window-requests", "trials", "stability-percent", "in-flight"],
)
def test_measurement_settings_are_checked(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Measurement(**settings)  # type: ignore[arg-type]


def test_level_load_reads_as_the_table_shows_it() -> None:
    closed = Level(4, None, False, None, None, None, None, None, None, 0, 0)
    opened = Level(None, 12.5, False, None, None, None, None, None, None, 0, 0)
    assert (closed.load, opened.load) == ("c=4", "12.5/s")


# -- against a server whose capacity is known by construction -------------------------------------------


class OneAtATime:
    """A server with one model instance that takes SERVICE_S per request, whatever it carries: it answers
    at most 1 / SERVICE_S requests per second, and a request queues while another is served."""

    SERVICE_S = 0.02
    lock = threading.Lock()

    def send(self, request: Request) -> str | None:
        with OneAtATime.lock:
            time.sleep(self.SERVICE_S)
        return None

    def close(self) -> None:
        pass


CAPACITY = 1 / OneAtATime.SERVICE_S
STEADY = Measurement(window=0.5, window_requests=10, warmup=0.2, stability=0.5, max_trials=12)


@pytest.mark.parametrize("rows", [1, 4], ids=["one-row", "four-rows"])
def test_measure_throughput_counts_the_rows_each_request_carries(rows: int) -> None:
    requests = [Request(b"{}", "application/json", {}, rows=rows)]
    level = measure(OneAtATime, requests, concurrency=2, settings=STEADY)
    assert level.stable and level.throughput_per_s is not None
    # the server answers at most CAPACITY requests per second: throughput is their rows
    assert level.throughput_per_s <= 1.1 * rows * CAPACITY
    assert level.throughput_per_s >= 0.5 * rows * CAPACITY


def test_measure_open_loop_past_capacity_is_overloaded_without_latencies() -> None:
    level = measure(OneAtATime, REQUESTS, request_rate=2 * CAPACITY, settings=STEADY)
    assert level.overloaded and not level.stable and level.state == "overloaded"
    assert (level.p50_ms, level.p99_ms, level.mean_ms) == (None, None, None)
    assert level.throughput_per_s is not None and level.throughput_per_s <= 1.1 * CAPACITY
    assert level.offered_per_s is not None and level.offered_per_s > 1.4 * CAPACITY
    assert level.backlog is not None and level.backlog > 0
    assert level.error is not None and level.error.startswith("overloaded")
    assert level.windows[-1].backlog is not None and level.windows[-1].backlog > level.windows[-3].backlog


def test_measure_open_loop_within_capacity_is_stable_and_serves_the_rate() -> None:
    rate = 0.3 * CAPACITY
    level = measure(OneAtATime, REQUESTS, request_rate=rate, settings=STEADY)
    assert level.stable and not level.overloaded, level
    assert level.throughput_per_s == pytest.approx(rate, rel=0.5)
    assert level.p50_ms is not None and level.p50_ms >= 0.9 * OneAtATime.SERVICE_S * 1000
    assert level.offered_per_s is not None and level.backlog is not None


def test_measure_percentiles_are_perf_analyzers_nearest_rank() -> None:
    """A stable level's p50/p90/p99 over 3 windows of known latencies: perf_analyzer's nearest rank (the
    element at int(q/100 * (n-1) + 0.5)), never an interpolation between two measured latencies."""
    latencies = [0.010, 0.020, 0.030, 0.040] * 3  # 12 requests, 3 windows of 4
    run = _Run(records=[(float(i), latency, None, 1) for i, latency in enumerate(latencies)])
    levels = _Levels(run, 1, QUICK, 1, None, None, None)
    levels.chunks = [run.records[0:4], run.records[4:8], run.records[8:12]]
    levels.windows = [Window(1.0, 4, 0, 4.0, 25.0)] * 3
    levels.snapshots = [None] * 4
    level = levels._stable_level(None)
    ordered = sorted(latency * 1000 for latency in latencies)
    assert level.p50_ms == pytest.approx(ordered[int(0.5 * 11 + 0.5)])  # 30 ms; interpolating: 25 ms
    assert level.p90_ms == pytest.approx(ordered[int(0.9 * 11 + 0.5)])  # 40 ms; interpolating: 40 ms
    assert level.p95_ms == pytest.approx(40.0)
    assert level.mean_ms == pytest.approx(25.0)
