"""The load generator: closed-loop concurrency or open-loop Poisson arrivals, measured until stable.

Closed loop (``concurrency=N``): N clients, each with its own keep-alive connection, send the next request
as soon as the previous one is answered. Open loop (``request_rate=R``): requests are scheduled at
exponentially distributed intervals (a Poisson process of rate R, seeded) and sent by up to
``max_in_flight`` clients; a request's latency counts from its *scheduled* time, so a server (or a client)
that falls behind shows as latency, not as a quietly lower rate.

Measurement, as perf_analyzer does it: after a warm-up (excluded), consecutive windows of at least
``window`` seconds and ``window_requests`` completed requests (a slow model's window grows, up to ten
times ``window``). After each window the last three are compared: when their throughputs and their mean
latencies are each within ``stability`` of their average, the level is stable and is reported from
those three windows together (throughput over their duration; p50/p90/p95/p99 over their requests). A
level that is not stable after ``max_trials`` windows is reported unstable, without numbers: noise is not
averaged into a result. A window whose every request failed ends the level.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mme_triton.profile.inputs import Request

__all__ = ["Connection", "Level", "Measurement", "ServerSplit", "Window", "measure"]

logger = logging.getLogger(__name__)

_POLL = 0.005


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
    """How far each of the last 3 windows' throughput and mean latency may be from their average."""
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
            raise ValueError(f"stability is a fraction in (0, 1), e.g. 0.1 for 10%; got {self.stability}")


@dataclass(frozen=True)
class Window:
    """One measurement window."""

    seconds: float
    requests: int
    errors: int
    throughput_per_s: float
    mean_ms: float | None


@dataclass(frozen=True)
class ServerSplit:
    """Where a request's time went inside Triton (per request, averaged over the reported windows)."""

    queue_ms: float
    compute_input_ms: float
    compute_infer_ms: float
    compute_output_ms: float
    batch_size: float
    """Inferences per model execution: how many requests' rows dynamic batching merged, on average."""


@dataclass(frozen=True)
class Level:
    """One load level's result: stable numbers, or ``stable=False`` and no numbers."""

    concurrency: int | None
    request_rate: float | None
    stable: bool
    throughput_per_s: float | None
    """Inferences per second: requests answered per second times their batch size."""
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    requests: int
    """Requests completed in the reported windows (all measured windows when unstable)."""
    errors: int
    """Requests that failed in those windows."""
    windows: tuple[Window, ...] = ()
    server: ServerSplit | None = None
    error: str | None = None
    """The first failure seen, as the target worded it."""

    @classmethod
    def unstable(
        cls,
        concurrency: int | None,
        request_rate: float | None,
        *,
        requests: int = 0,
        errors: int = 0,
        windows: tuple[Window, ...] = (),
        error: str | None = None,
    ) -> Level:
        """A level that never met the stability rule: its counts, no numbers."""
        return cls(
            concurrency=concurrency,
            request_rate=request_rate,
            stable=False,
            throughput_per_s=None,
            p50_ms=None,
            p90_ms=None,
            p95_ms=None,
            p99_ms=None,
            mean_ms=None,
            requests=requests,
            errors=errors,
            windows=windows,
            error=error,
        )

    @property
    def load(self) -> str:
        """``c=8`` or ``50/s``: the level as a table shows it."""
        return f"c={self.concurrency}" if self.concurrency is not None else f"{self.request_rate:g}/s"


@dataclass
class _Run:
    records: list[tuple[float, float, str | None]] = field(default_factory=list)
    unconnected: list[str] = field(default_factory=list)
    """Why clients could not connect (they send nothing; counted as errors whatever the window)."""
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_at: float = 0.0


def measure(
    connect: Callable[[], Connection],
    requests: Sequence[Request],
    *,
    concurrency: int | None = None,
    request_rate: float | None = None,
    settings: Measurement = Measurement(),
    batch_size: int = 1,
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
        import numpy as np

        assert request_rate is not None
        clients = settings.max_in_flight
        gaps = np.random.default_rng(settings.seed)
        run.next_at = time.perf_counter()
        mean_gap = 1.0 / request_rate

        def target(conn: Connection) -> None:
            _open_loop(run, conn, requests, counter, lambda: float(gaps.exponential(mean_gap)))

    threads = [
        threading.Thread(target=_client, args=(run, connect, target), name=f"profile-client-{i}", daemon=True)
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        return _windows(run, clients, settings, concurrency, request_rate, batch_size, stats, on_window)
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
        append((ended, ended - started, error))


def _open_loop(
    run: _Run, connection: Connection, requests: Sequence[Request], counter: Any, gap: Callable[[], float]
) -> None:
    count = len(requests)
    clock = time.perf_counter
    while True:
        with run.lock:
            scheduled = run.next_at
            run.next_at += gap()
        delay = scheduled - clock()
        if (delay > 0 and run.stop.wait(delay)) or run.stop.is_set():
            return
        error = connection.send(requests[next(counter) % count])
        ended = clock()
        run.records.append((ended, ended - scheduled, error))


def _windows(
    run: _Run,
    clients: int,
    settings: Measurement,
    concurrency: int | None,
    request_rate: float | None,
    batch_size: int,
    stats: Stats | None,
    on_window: Callable[[Window], None] | None,
) -> Level:
    run.stop.wait(settings.warmup)
    records = run.records
    base = len(records)
    started = time.perf_counter()
    snapshots = [_snapshot(stats)]
    windows: list[Window] = []
    chunks: list[list[tuple[float, float, str | None]]] = []
    first_error: str | None = None
    stable = False
    while len(windows) < settings.max_trials:
        shortest, longest = started + settings.window, started + 10 * settings.window
        while True:
            now = time.perf_counter()
            if now >= longest or (now >= shortest and len(records) - base >= settings.window_requests):
                break
            if len(run.unconnected) >= clients:
                break  # no client is left to send anything
            time.sleep(shortest - now if now < shortest else _POLL)
        end = len(records)
        chunk = records[base:end]
        base = end
        window = _window(chunk, now - started, batch_size)
        started = now
        snapshots.append(_snapshot(stats))
        windows.append(window)
        chunks.append(chunk)
        if on_window is not None:
            on_window(window)
        first_error = first_error or next((error for _, _, error in chunk if error), None)
        if (window.errors and window.errors == window.requests) or len(run.unconnected) >= clients:
            break  # nothing succeeds: measuring longer says nothing more
        if len(windows) >= 3 and _stable(windows[-3:], settings.stability):
            stable = True
            break
    counted = [item for chunk in (chunks[-3:] if stable else chunks) for item in chunk]
    errors = sum(1 for item in counted if item[2] is not None) + len(run.unconnected)
    first_error = first_error or next(iter(run.unconnected), None)
    if not stable:
        logger.info(
            "%s: not stable after %d windows (%s)",
            f"concurrency {concurrency}" if concurrency is not None else f"rate {request_rate}/s",
            len(windows),
            ", ".join(f"{w.throughput_per_s:.1f}/s {w.mean_ms or 0:.1f} ms" for w in windows[-3:]),
        )
        return Level.unstable(
            concurrency,
            request_rate,
            requests=len(counted),
            errors=errors,
            windows=tuple(windows),
            error=first_error,
        )
    import numpy as np

    seconds = sum(w.seconds for w in windows[-3:])
    latencies = np.array([latency for _, latency, error in counted if error is None]) * 1000.0
    p50, p90, p95, p99 = (float(v) for v in np.percentile(latencies, [50, 90, 95, 99]))
    return Level(
        concurrency=concurrency,
        request_rate=request_rate,
        stable=True,
        throughput_per_s=(len(latencies) * batch_size) / seconds,
        p50_ms=p50,
        p90_ms=p90,
        p95_ms=p95,
        p99_ms=p99,
        mean_ms=float(latencies.mean()),
        requests=len(counted),
        errors=errors,
        windows=tuple(windows),
        server=_split(snapshots[-4], snapshots[-1]),
        error=first_error,
    )


def _window(chunk: list[tuple[float, float, str | None]], seconds: float, batch_size: int) -> Window:
    ok = [latency for _, latency, error in chunk if error is None]
    return Window(
        seconds=seconds,
        requests=len(chunk),
        errors=len(chunk) - len(ok),
        throughput_per_s=len(ok) * batch_size / seconds if seconds > 0 else 0.0,
        mean_ms=1000.0 * sum(ok) / len(ok) if ok else None,
    )


def _stable(windows: Sequence[Window], tolerance: float) -> bool:
    """perf_analyzer's rule: each window's throughput and mean latency within ``tolerance`` of the average."""
    throughputs = [w.throughput_per_s for w in windows]
    latencies = [w.mean_ms for w in windows]
    if any(latency is None for latency in latencies) or min(throughputs) <= 0:
        return False
    for values in (throughputs, [float(v) for v in latencies if v is not None]):
        average = sum(values) / len(values)
        if any(abs(value - average) > tolerance * average for value in values):
            return False
    return True


def _snapshot(stats: Stats | None) -> Mapping[str, int] | None:
    if stats is None:
        return None
    try:
        return stats()
    except Exception as exc:  # statistics are extra: a failed read leaves them out, nothing else
        logger.debug("reading Triton's statistics failed: %s", exc)
        return None


def _split(before: Mapping[str, int] | None, after: Mapping[str, int] | None) -> ServerSplit | None:
    if before is None or after is None:
        return None
    count = after["success_count"] - before["success_count"]
    executions = after["execution_count"] - before["execution_count"]
    if count <= 0 or executions <= 0:
        return None

    def per_request(key: str) -> float:
        return (after[key] - before[key]) / count / 1e6

    return ServerSplit(
        queue_ms=per_request("queue_ns"),
        compute_input_ms=per_request("compute_input_ns"),
        compute_infer_ms=per_request("compute_infer_ns"),
        compute_output_ms=per_request("compute_output_ns"),
        batch_size=(after["inference_count"] - before["inference_count"]) / executions,
    )
