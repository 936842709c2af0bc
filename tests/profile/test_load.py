"""The load generator's rules: perf_analyzer's stability rule, and what happens when nothing succeeds.

The physics of the generator (latency, throughput, batching) is checked against a real Triton in
test_profile_stack.py; here the connection is a small object of the test's own (the seam the generator
takes), so no timing is asserted.
"""

from __future__ import annotations

import pytest

from mme_triton.profile.inputs import Request
from mme_triton.profile.load import Level, Measurement, Window, _stable, measure

REQUESTS = [Request(b"{}", "application/json", {})]
QUICK = Measurement(window=0.05, window_requests=1, warmup=0.0, max_trials=5)


def _windows(*pairs: tuple[float, float | None]) -> list[Window]:
    return [Window(1.0, 10, 0, throughput, latency) for throughput, latency in pairs]


@pytest.mark.parametrize(
    ("pairs", "tolerance", "stable"),
    [
        ([(100, 10), (100, 10), (100, 10)], 0.1, True),
        ([(95, 10), (100, 10.5), (105, 9.6)], 0.1, True),
        ([(80, 10), (100, 10), (120, 10)], 0.1, False),  # throughput 20 % from the average
        ([(100, 8), (100, 10), (100, 12)], 0.1, False),  # latency 20 % from the average
        ([(80, 10), (100, 10), (120, 10)], 0.25, True),
        ([(0, None), (0, None), (0, None)], 0.1, False),  # nothing answered
        ([(100, 10), (100, None), (100, 10)], 0.1, False),
    ],
    ids=["equal", "within", "throughput-off", "latency-off", "wider-tolerance", "nothing", "a-gap"],
)
def test_stability_rule_is_perf_analyzers(
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
