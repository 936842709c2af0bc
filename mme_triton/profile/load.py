"""The load generator: closed-loop concurrency or open-loop Poisson arrivals, measured until stable.

Closed loop (``concurrency=N``): N clients, each with its own keep-alive connection, send the next request
as soon as the previous one is answered. Open loop (``request_rate=R``): arrivals follow a Poisson process
of rate R (seeded), drawn ahead of time, and are sent by up to ``max_in_flight`` clients; a request's
latency counts from its *scheduled* time, so a server (or a client) that falls behind shows as latency,
not as a quietly lower rate.

Measurement, as perf_analyzer does it: after a warm-up (excluded), consecutive windows of at least
``window`` seconds and ``window_requests`` completed requests (a slow model's window grows, up to ten
times ``window``). After each window the last three are compared with perf_analyzer's rule
(``inference_profiler.cc``, ``IsInferWindowStable`` / ``IsLatencyWindowStable``): each window answered
something, and the largest throughput over the smallest, and the largest mean latency over the smallest,
are each at most ``1 + stability``. A stable level is reported from those three windows together
(throughput over their duration; p50/p90/p95/p99 over their requests, perf_analyzer's nearest-rank
percentile, :mod:`mme_triton._stats`). A level that is not stable after ``max_trials`` windows is
reported unstable, without latencies: noise is not averaged into a result. A window whose every request
failed ends the level.

Throughput counts what was sent: each request carries its rows (the leading dimension of a batching
model's inputs, 1 for a model that does not batch), and a window's throughput is the rows of its answered
requests per second.

**Overload (open loop).** At each window's end the generator counts the arrivals scheduled so far that
have no answer yet (waiting for a client, or in flight): the backlog. When, over the last three windows,
the backlog grew by more than a tenth of the arrivals (:data:`OVERLOAD_GROWTH`) and by more than twice
their Poisson noise (``2 * sqrt(arrivals)``), requests arrive faster than the target answers them: the
level is ``overloaded`` — not stable, its latencies not reported (they only grow with the length of the
test), its throughput the rate it did answer, which is what it can serve. The check runs before the
stability rule at each window, so a level stops as soon as its overload is plain. perf_analyzer only
warns in that case (more than 1 % of its requests sent late).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mme_triton._stats import percentiles
from mme_triton.profile.inputs import Request
from mme_triton.profile.levels import Level, ServerSplit, Window, server_split
from mme_triton.profile.levels import is_stable as _stable

__all__ = ["OVERLOAD_GROWTH", "Connection", "Level", "Measurement", "ServerSplit", "Window", "measure"]

logger = logging.getLogger(__name__)

_POLL = 0.005
OVERLOAD_GROWTH = 0.1
"""Open loop: the share of the arrivals of the last three windows the backlog must grow by for the level to
be overloaded (and by more than twice the arrivals' Poisson noise, ``2 * sqrt(n)``)."""


class Connection(Protocol):
    """One client's connection to the target: ``send`` answers ``None`` on success, else why it failed."""

    def send(self, request: Request) -> str | None: ...
    def close(self) -> None: ...


Stats = Callable[[], "Mapping[str, int] | None"]
"""Triton's cumulative statistics of the model (see :func:`~mme_triton.profile.targets.triton_statistics`)."""


@dataclass(frozen=True)
class Measurement:
    """How each load level is measured (perf_analyzer's settings, with shorter defaults)."""

    window: float = 1.0
    """Seconds a measurement window lasts at least (perf_analyzer's ``--measurement-interval``)."""
    window_requests: int = 20
    """Requests a window holds at least (perf_analyzer's count windows); it grows up to 10x ``window``."""
    stability: float = 0.1
    """perf_analyzer's ``--stability-percentage`` as a fraction: the last 3 windows' largest throughput over
    their smallest, and largest mean latency over their smallest, at most ``1 + stability``."""
    max_trials: int = 10
    """Windows measured at most before the level is reported unstable."""
    warmup: float = 1.0
    """Seconds of load sent and not counted before the first window."""
    max_in_flight: int = 64
    """Open loop: clients sending at once (a request scheduled while all are busy waits, and counts it)."""
    seed: int = 0
    """Open loop: the seed of the arrival times."""

    def __post_init__(self) -> None:
        if self.window <= 0 or self.warmup < 0:
            raise ValueError("window must be > 0 seconds and warmup >= 0")
        if self.window_requests < 1 or self.max_trials < 3 or self.max_in_flight < 1:
            raise ValueError("window_requests and max_in_flight must be >= 1, max_trials >= 3")
        if not 0 < self.stability < 1:
            raise ValueError(
                f"stability is a fraction in (0, 1): 0.1 (or '10%') for 10%; got {self.stability!r}"
            )


# (end time, latency, error, rows) of one answered request
_Record = tuple[float, float, "str | None", int]


class _Arrivals:
    """The open loop's Poisson arrival times, drawn ahead of the clients so that the ones no client has
    taken yet (all are busy) still count as arrived."""

    def __init__(self, rate: float, seed: int, start: float) -> None:
        import numpy as np

        self._rng = np.random.default_rng(seed)
        self._mean_gap = 1.0 / rate
        self._lock = threading.Lock()
        self._drawn: list[float] = []  # every arrival time drawn so far, in order
        self._next = start + float(self._rng.exponential(self._mean_gap))
        self._taken = 0

    def _draw_through(self, moment: float) -> None:
        while self._next <= moment:
            self._drawn.append(self._next)
            self._next += float(self._rng.exponential(self._mean_gap))

    def take(self) -> float:
        """The next arrival no client has taken yet."""
        with self._lock:
            if self._taken == len(self._drawn):
                self._drawn.append(self._next)
                self._next += float(self._rng.exponential(self._mean_gap))
            moment = self._drawn[self._taken]
            self._taken += 1
            return moment

    def arrived_by(self, moment: float) -> int:
        """Arrivals scheduled at or before ``moment``."""
        with self._lock:
            self._draw_through(moment)
            return bisect.bisect_right(self._drawn, moment)


@dataclass
class _Run:
    records: list[_Record] = field(default_factory=list)
    unconnected: list[str] = field(default_factory=list)
    """Why clients could not connect (they send nothing; counted as errors whatever the window)."""
    stop: threading.Event = field(default_factory=threading.Event)
    arrivals: _Arrivals | None = None


def measure(
    connect: Callable[[], Connection],
    requests: Sequence[Request],
    *,
    concurrency: int | None = None,
    request_rate: float | None = None,
    settings: Measurement = Measurement(),
    stats: Stats | None = None,
    on_window: Callable[[Window], None] | None = None,
) -> Level:
    """Measure one load level: ``concurrency`` clients in a closed loop, or ``request_rate`` per second.

    Raises:
        ValueError: neither or both of ``concurrency`` and ``request_rate``, or no requests.
    """
    if (concurrency is None) == (request_rate is None):
        raise ValueError("give concurrency or request_rate, not both")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if request_rate is not None and request_rate <= 0:
        raise ValueError(f"request_rate must be > 0 per second, got {request_rate}")
    if not requests:
        raise ValueError("no requests to send")
    run = _Run()
    counter = itertools.count()
    if concurrency is not None:
        clients = concurrency

        def target(conn: Connection) -> None:
            _closed_loop(run, conn, requests, counter)

    else:
        assert request_rate is not None
        clients = settings.max_in_flight
        run.arrivals = arrivals = _Arrivals(request_rate, settings.seed, time.perf_counter())

        def target(conn: Connection) -> None:
            _open_loop(run, conn, requests, counter, arrivals)

    threads = [
        threading.Thread(target=_client, args=(run, connect, target), name=f"profile-client-{i}", daemon=True)
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        return _Levels(run, clients, settings, concurrency, request_rate, stats, on_window).measure()
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(timeout=75)


def _client(run: _Run, connect: Callable[[], Connection], loop: Callable[[Connection], None]) -> None:
    try:
        connection = connect()
    except Exception as exc:  # the failure is what this client measures
        run.unconnected.append(f"cannot connect: {exc}")
        return
    try:
        loop(connection)
    finally:
        connection.close()


def _closed_loop(run: _Run, connection: Connection, requests: Sequence[Request], counter: Any) -> None:
    count = len(requests)
    append = run.records.append
    clock = time.perf_counter
    while not run.stop.is_set():
        request = requests[next(counter) % count]
        started = clock()
        error = connection.send(request)
        ended = clock()
        append((ended, ended - started, error, request.rows))


def _open_loop(
    run: _Run, connection: Connection, requests: Sequence[Request], counter: Any, arrivals: _Arrivals
) -> None:
    count = len(requests)
    clock = time.perf_counter
    while True:
        scheduled = arrivals.take()
        delay = scheduled - clock()
        if (delay > 0 and run.stop.wait(delay)) or run.stop.is_set():
            return
        request = requests[next(counter) % count]
        error = connection.send(request)
        ended = clock()
        run.records.append((ended, ended - scheduled, error, request.rows))


class _Levels:
    """The windows of one level, and the level they make."""

    def __init__(
        self,
        run: _Run,
        clients: int,
        settings: Measurement,
        concurrency: int | None,
        request_rate: float | None,
        stats: Stats | None,
        on_window: Callable[[Window], None] | None,
    ) -> None:
        self.run = run
        self.clients = clients
        self.settings = settings
        self.concurrency = concurrency
        self.request_rate = request_rate
        self.stats = stats
        self.on_window = on_window
        self.windows: list[Window] = []
        self.chunks: list[list[_Record]] = []
        self.snapshots: list[Mapping[str, int] | None] = []
        self.backlog_at_start = 0

    def measure(self) -> Level:
        run, settings = self.run, self.settings
        run.stop.wait(settings.warmup)
        records = run.records
        base = len(records)
        started = time.perf_counter()
        if run.arrivals is not None:
            self.backlog_at_start = run.arrivals.arrived_by(started) - base
        self.snapshots.append(_snapshot(self.stats))
        first_error: str | None = None
        outcome = "unstable"
        while len(self.windows) < settings.max_trials:
            shortest, longest = started + settings.window, started + 10 * settings.window
            while True:
                now = time.perf_counter()
                if now >= longest or (now >= shortest and len(records) - base >= settings.window_requests):
                    break
                if len(run.unconnected) >= self.clients:
                    break  # no client is left to send anything
                time.sleep(shortest - now if now < shortest else _POLL)
            end = len(records)
            chunk = records[base:end]
            window = self._window(chunk, started, now, base)
            base, started = end, now
            self.snapshots.append(_snapshot(self.stats))
            self.windows.append(window)
            self.chunks.append(chunk)
            if self.on_window is not None:
                self.on_window(window)
            first_error = first_error or next((error for _, _, error, _ in chunk if error), None)
            if (window.errors and window.errors == window.requests) or len(run.unconnected) >= self.clients:
                break  # nothing succeeds: measuring longer says nothing more
            if len(self.windows) >= 3:
                if self._overloaded():
                    outcome = "overloaded"
                    break
                if _stable(self.windows[-3:], settings.stability):
                    outcome = "stable"
                    break
        first_error = first_error or next(iter(run.unconnected), None)
        if outcome == "stable":
            return self._stable_level(first_error)
        if outcome == "overloaded":
            return self._overloaded_level()
        counted = [item for chunk in self.chunks for item in chunk]
        logger.info(
            "%s: not stable after %d windows (%s)",
            self._name(),
            len(self.windows),
            ", ".join(f"{w.throughput_per_s:.1f}/s {w.mean_ms or 0:.1f} ms" for w in self.windows[-3:]),
        )
        return Level.unstable(
            self.concurrency,
            self.request_rate,
            requests=len(counted),
            errors=_errors(counted) + len(run.unconnected),
            windows=tuple(self.windows),
            error=first_error,
        )

    def _name(self) -> str:
        return (
            f"concurrency {self.concurrency}"
            if self.concurrency is not None
            else f"rate {self.request_rate}/s"
        )

    def _window(self, chunk: list[_Record], started: float, now: float, answered_before: int) -> Window:
        seconds = now - started
        ok = [(latency, rows) for _, latency, error, rows in chunk if error is None]
        offered = backlog = None
        if self.run.arrivals is not None:
            arrived_then = self.run.arrivals.arrived_by(started)
            arrived_now = self.run.arrivals.arrived_by(now)
            offered = arrived_now - arrived_then
            backlog = arrived_now - answered_before - len(chunk)
        return Window(
            seconds=seconds,
            requests=len(chunk),
            errors=len(chunk) - len(ok),
            throughput_per_s=sum(rows for _, rows in ok) / seconds if seconds > 0 else 0.0,
            mean_ms=1000.0 * sum(latency for latency, _ in ok) / len(ok) if ok else None,
            offered=offered,
            backlog=backlog,
        )

    def _overloaded(self) -> bool:
        """Open loop: over the last three windows the backlog grew by more than :data:`OVERLOAD_GROWTH` of
        the arrivals and by more than twice their Poisson noise (``2 * sqrt(arrivals)``)."""
        if self.run.arrivals is None:
            return False
        last = self.windows[-3:]
        before = self.windows[-4].backlog if len(self.windows) > 3 else self.backlog_at_start
        offered = sum(w.offered or 0 for w in last)
        growth = (last[-1].backlog or 0) - (before or 0)
        return offered > 0 and growth > max(OVERLOAD_GROWTH * offered, 2 * math.sqrt(offered))

    def _overloaded_level(self) -> Level:
        last = self.windows[-3:]
        seconds = sum(w.seconds for w in last)
        counted = [item for chunk in self.chunks[-3:] for item in chunk]
        answered_rows = sum(rows for _, _, error, rows in counted if error is None)
        offered = sum(w.offered or 0 for w in last)
        backlog = last[-1].backlog or 0
        message = (
            f"overloaded: {offered / seconds:.1f} requests/s arrived, {len(counted) / seconds:.1f}/s were "
            f"answered; {backlog} were still waiting or in flight at the end"
        )
        logger.info("%s: %s", self._name(), message)
        return Level(
            concurrency=self.concurrency,
            request_rate=self.request_rate,
            stable=False,
            throughput_per_s=answered_rows / seconds if seconds > 0 else None,
            p50_ms=None,
            p90_ms=None,
            p95_ms=None,
            p99_ms=None,
            mean_ms=None,
            requests=len(counted),
            errors=_errors(counted),
            windows=tuple(self.windows),
            server=server_split(self.snapshots[-4], self.snapshots[-1]),
            error=message,
            overloaded=True,
            offered_per_s=offered / seconds if seconds > 0 else None,
            backlog=backlog,
        )

    def _stable_level(self, first_error: str | None) -> Level:
        last = self.windows[-3:]
        seconds = sum(w.seconds for w in last)
        counted = [item for chunk in self.chunks[-3:] for item in chunk]
        answered = [(latency, rows) for _, latency, error, rows in counted if error is None]
        latencies = [latency * 1000.0 for latency, _ in answered]
        p50, p90, p95, p99 = percentiles(latencies, [50, 90, 95, 99])
        offered = None if self.run.arrivals is None else sum(w.offered or 0 for w in last) / seconds
        return Level(
            concurrency=self.concurrency,
            request_rate=self.request_rate,
            stable=True,
            throughput_per_s=sum(rows for _, rows in answered) / seconds,
            p50_ms=p50,
            p90_ms=p90,
            p95_ms=p95,
            p99_ms=p99,
            mean_ms=sum(latencies) / len(latencies),
            requests=len(counted),
            errors=_errors(counted) + len(self.run.unconnected),
            windows=tuple(self.windows),
            server=server_split(self.snapshots[-4], self.snapshots[-1]),
            error=first_error,
            offered_per_s=offered,
            backlog=last[-1].backlog,
        )


def _errors(records: Sequence[_Record]) -> int:
    return sum(1 for item in records if item[2] is not None)


def _snapshot(stats: Stats | None) -> Mapping[str, int] | None:
    if stats is None:
        return None
    try:
        return stats()
    except Exception as exc:  # statistics are extra: a failed read leaves them out, nothing else
        logger.debug("reading Triton's statistics failed: %s", exc)
        return None
