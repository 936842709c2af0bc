"""What one load level's measurement is: its windows, Triton's split of a request's time, the level's
numbers, and perf_analyzer's stability rule (:mod:`mme_triton.profile.load` measures them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Level", "ServerSplit", "Window", "is_stable", "server_split"]


@dataclass(frozen=True)
class Window:
    """One measurement window."""

    seconds: float
    requests: int
    errors: int
    throughput_per_s: float
    """Rows (inferences) of the answered requests per second."""
    mean_ms: float | None
    offered: int | None = None
    """Open loop: arrivals scheduled in the window."""
    backlog: int | None = None
    """Open loop: arrivals scheduled by the window's end and not answered yet (waiting or in flight)."""


@dataclass(frozen=True)
class ServerSplit:
    """Where a request's time went inside Triton (per request, averaged over the reported windows)."""

    queue_ms: float
    compute_input_ms: float
    compute_infer_ms: float
    compute_output_ms: float
    batch_size: float
    """Inferences per model execution: how many requests' rows dynamic batching merged, on average."""

    @property
    def compute_ms(self) -> float:
        """One execution without its queueing: compute input, infer and output (Triton counts an execution's
        whole duration for each request it carried)."""
        return self.compute_input_ms + self.compute_infer_ms + self.compute_output_ms


@dataclass(frozen=True)
class Level:
    """One load level's result: stable numbers, or ``stable=False`` and no latencies."""

    concurrency: int | None
    request_rate: float | None
    stable: bool
    throughput_per_s: float | None
    """Inferences per second: the rows of the answered requests per second (an overloaded level: what it
    did answer; an unstable one: ``None``)."""
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
    """The first failure seen, as the target worded it; why an overloaded level is."""
    overloaded: bool = False
    """Open loop: more arrived than the target answered, and the backlog grew (see the module)."""
    offered_per_s: float | None = None
    """Open loop: arrivals per second over the reported windows."""
    backlog: int | None = None
    """Open loop: requests scheduled and not answered at the end of the last window."""

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

    @property
    def state(self) -> str:
        """``stable``, ``overloaded`` or ``unstable``."""
        return "stable" if self.stable else "overloaded" if self.overloaded else "unstable"


def is_stable(windows: Sequence[Window], tolerance: float) -> bool:
    """perf_analyzer's rule: every window answered something, and max/min of the throughputs and of the
    mean latencies are each at most ``1 + tolerance``."""
    throughputs = [w.throughput_per_s for w in windows]
    latencies = [w.mean_ms for w in windows]
    if min(throughputs) <= 0 or any(latency is None or latency <= 0 for latency in latencies):
        return False
    measured = [float(latency) for latency in latencies if latency is not None]
    return max(throughputs) / min(throughputs) <= 1 + tolerance and max(measured) / min(measured) <= (
        1 + tolerance
    )


def server_split(before: Mapping[str, int] | None, after: Mapping[str, int] | None) -> ServerSplit | None:
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
