"""What the route tells CloudWatch about an inference component: the sink it records into, one per
component.

The stack hands the route a factory of :class:`ComponentSink` (the stack's
:class:`~mme_triton.local.aws.component_metrics.ComponentMetricsSink` publishes the metrics of
:data:`mme_triton._inference_components.COMPONENT_METRICS`, and the endpoint's variant-level invocation
metrics, to its CloudWatch); without one the route records into :class:`NullComponentSink`.
:class:`CopyUsageSampler` samples each copy's Triton process before each window is published: CPU and memory
in percent of what the copy reserved.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from mme_triton.local.route.metrics import metric_status
from mme_triton.local.route.responses import RuntimeResponse
from mme_triton.local.triton.procfs import process_tree_usage
from mme_triton.local.triton.protocol import TritonLike

__all__ = [
    "ComponentSink",
    "ComponentSinkFactory",
    "CopyUsageSampler",
    "NullComponentSink",
    "null_component_sink",
    "record_component_call",
]


class ComponentSink(Protocol):
    """What the route records into for one inference component (durations in seconds)."""

    def invocation(
        self,
        *,
        status: int | None,
        model_seconds: float | None,
        overhead_seconds: float,
        copies: int,
        instances: int,
    ) -> None: ...
    def no_capacity(self) -> None: ...
    def utilization(
        self, *, cpu_percent: float | None = ..., memory_percent: float | None = ..., copy: str = ...
    ) -> None: ...
    def copy_gone(self, copy: str) -> None: ...
    def on_publish(self, hook: Callable[[ComponentSink], None]) -> None: ...
    def close(self) -> None: ...


ComponentSinkFactory = Callable[[str, str, str], ComponentSink]
"""(component name, endpoint name, variant name) -> the component's sink."""


class NullComponentSink:
    """A sink that records nothing."""

    def invocation(self, **_: object) -> None:
        pass

    def no_capacity(self) -> None:
        pass

    def utilization(self, **_: object) -> None:
        pass

    def copy_gone(self, copy: str) -> None:
        pass

    def on_publish(self, hook: Callable[[ComponentSink], None]) -> None:
        pass

    def close(self) -> None:
        pass


def null_component_sink(component_name: str, endpoint_name: str, variant_name: str) -> ComponentSink:
    """:class:`NullComponentSink` for every component."""
    return NullComponentSink()


def record_component_call(
    sink: ComponentSink, response: RuntimeResponse, call: Mapping[str, float], *, copies: int, instances: int
) -> None:
    """Record one request a copy served (or tried to), from ``call``'s ``time.monotonic()`` readings:
    ``started``, and ``sent`` to and ``answered`` by the copy's Triton (the model latency; the overhead is the
    rest). ``copies``: the component's copies when it came (``InvocationsPerCopy`` is 1 / copies)."""
    total = max(0.0, time.monotonic() - call["started"])
    sent, answered = call.get("sent"), call.get("answered")
    model = None if sent is None or answered is None else max(0.0, answered - sent)
    sink.invocation(
        status=metric_status(response),
        model_seconds=model,
        overhead_seconds=max(0.0, total - (model or 0.0)),
        copies=max(1, copies),
        instances=max(1, instances),
    )


class CopyUsageSampler:
    """A hook for :meth:`ComponentSink.on_publish`: each copy's Triton process (``tritonserver`` and its
    model stubs) as the component's normalized utilization, one sample per copy: ``CPUUtilizationNormalized``
    is the CPU seconds used per second of wall time over the cores the copy reserved
    (``NumberOfCpuCoresRequired``, else every core of this machine), ``MemoryUtilizationNormalized`` its
    resident memory over the memory it reserved (``MinMemoryRequiredInMb``), both in percent.

    Parameters:
        copies: the component's serving copies now: ``(copy id, its Triton)`` pairs.
        cores: the cores each copy reserved (``None``: not set).
        memory_bytes: the memory each copy reserved.
    """

    def __init__(
        self,
        copies: Callable[[], list[tuple[str, TritonLike]]],
        *,
        cores: float | None,
        memory_bytes: float,
    ) -> None:
        self._copies = copies
        self._cores = cores or float(os.cpu_count() or 1)
        self._memory = memory_bytes
        self._last: dict[str, tuple[int, float, float]] = {}  # copy -> pid, CPU seconds, wall clock

    def __call__(self, sink: ComponentSink) -> None:
        seen = set()
        for copy_id, triton in self._copies():
            seen.add(copy_id)
            pid = triton.pid
            if pid is None:
                self._last.pop(copy_id, None)
                continue
            cpu_seconds, memory = process_tree_usage(pid)
            now = time.monotonic()
            cpu = None
            last = self._last.get(copy_id)
            if last is not None and last[0] == pid and now > last[2]:
                cpu = max(0.0, (cpu_seconds - last[1]) / (now - last[2]) * 100.0 / self._cores)
            self._last[copy_id] = (pid, cpu_seconds, now)
            sink.utilization(
                cpu_percent=cpu,
                memory_percent=100.0 * memory / self._memory if self._memory > 0 else None,
                copy=copy_id,
            )
        for gone in set(self._last) - seen:
            del self._last[gone]
