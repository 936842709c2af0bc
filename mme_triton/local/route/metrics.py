"""What the InvokeEndpoint route tells CloudWatch: the sink it records into, and how it reads a request.

The route records what happens on each endpoint into a :class:`MetricsSink`, one per endpoint and
production variant. The stack hands the route a factory of them
(:class:`~mme_triton.local.aws.metrics.EndpointMetricsSink`, which publishes SageMaker's metrics to the
stack's CloudWatch); without one the route records into :class:`NullMetricsSink`. The route does not import
the recorder: the two wings meet in :mod:`mme_triton.local.stack`.

- :func:`record_invocation`: one request, hit or miss, its model latency (from sending it to Triton until
  Triton's answer) and the rest as overhead, the wait for a load on a miss, and the status that classes its
  error (:func:`metric_status`);
- :class:`UsageSampler`: each instance's Triton process's CPU and memory and its model volume's use, sampled
  before each window is published.

A variant's instances share its sink; what SageMaker publishes per instance (``LoadedModelCount``,
``CPUUtilization``, ``MemoryUtilization``, ``DiskUtilization``) is recorded with the instance's id, one sample
per instance and window, so CloudWatch's statistics over the variant's series aggregate the instances as
SageMaker's do: Average per instance, Sum over the instances, Maximum the fullest one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from mme_triton.endpoint.instance_specs import INSTANCE_TYPES
from mme_triton.local.route.responses import RuntimeResponse
from mme_triton.local.triton.procfs import process_tree_usage

if TYPE_CHECKING:
    from mme_triton.local.route.endpoint_runtime import EndpointRuntime
    from mme_triton.local.route.instance import InstanceRuntime

__all__ = [
    "MetricsSink",
    "NullMetricsSink",
    "SinkFactory",
    "UsageSampler",
    "instance_memory_bytes",
    "metric_status",
    "record_invocation",
]


class MetricsSink(Protocol):
    """What the route records into, per endpoint and variant (durations in seconds)."""

    def invocation(
        self,
        *,
        status: int | None,
        cache_hit: bool,
        model_seconds: float | None,
        overhead_seconds: float,
        load_wait_seconds: float | None = ...,
        instances: int = ...,
    ) -> None: ...
    def model_downloaded(self, seconds: float) -> None: ...
    def model_loaded(self, seconds: float) -> None: ...
    def model_unloaded(self, seconds: float) -> None: ...
    def loaded_models(self, count: int, *, instance: str = ...) -> None: ...
    def utilization(
        self,
        *,
        cpu_percent: float | None = ...,
        memory_percent: float | None = ...,
        disk_percent: float | None = ...,
        instance: str = ...,
    ) -> None: ...
    def instance_gone(self, instance: str) -> None: ...
    def on_publish(self, hook: Callable[[MetricsSink], None]) -> None: ...
    def close(self) -> None: ...


SinkFactory = Callable[[str, str], MetricsSink]
"""(endpoint name, variant name) -> the sink of that production variant."""


class NullMetricsSink:
    """A sink that records nothing: the route's default when no recorder is given."""

    def invocation(self, **_: object) -> None:
        pass

    def model_downloaded(self, seconds: float) -> None:
        pass

    def model_loaded(self, seconds: float) -> None:
        pass

    def model_unloaded(self, seconds: float) -> None:
        pass

    def loaded_models(self, count: int, *, instance: str = "") -> None:
        pass

    def utilization(self, **_: object) -> None:
        pass

    def instance_gone(self, instance: str) -> None:
        pass

    def on_publish(self, hook: Callable[[MetricsSink], None]) -> None:
        pass

    def close(self) -> None:
        pass


def null_sink_factory(endpoint_name: str, variant_name: str) -> MetricsSink:
    """:class:`NullMetricsSink` for every variant."""
    return NullMetricsSink()


def metric_status(response: RuntimeResponse) -> int | None:
    """The status that classes a request's error in CloudWatch: the container's own status for a
    ``ModelError`` (its ``OriginalStatusCode``), ``None`` when the container gave no answer (a timeout:
    ``OriginalStatusCode`` 0), else the status of the answer the route gave itself (a ``ValidationError``
    400, ``ModelNotReadyException`` 429, ``ServiceUnavailable`` 503 ...).

    Example:
        >>> from mme_triton.local.route.responses import model_error, success
        >>> metric_status(model_error(400, b"bad input", endpoint_name="e", region="us-east-1",
        ...                           account_id="123456789012"))
        400
        >>> metric_status(success(b"{}", "application/json", "AllTraffic"))
        200
    """
    if response.status != 424:
        return response.status
    try:
        original = int(json.loads(response.body).get("OriginalStatusCode", 0))
    except (ValueError, TypeError, AttributeError):
        return response.status
    return original or None


def record_invocation(
    sink: MetricsSink, response: RuntimeResponse, call: Mapping[str, float], *, instances: int = 1
) -> None:
    """Record one request that reached an endpoint, from ``call``'s ``time.monotonic()`` readings:
    ``started``; ``hit`` when its model was loaded on the instance it reached when it came; when its model
    was ``acquired`` (the load wait of a miss ends there, or when it is answered ``ModelNotReadyException``:
    it gave up on a load still under way); when it was ``sent`` to Triton and ``answered`` (the model
    latency; the overhead is the rest of its time). ``instances``: the variant's instance count
    (``InvocationsPerInstance``).

    A miss whose model never came — not in S3, an archive that does not extract, a load that failed, a
    container being replaced — waited for nothing that could serve it: it has no load wait
    (``ModelLoadingWaitTime`` is "the interval of time that an invocation request has waited for the
    target model to be downloaded, or loaded, or both in order to perform inference"), and it still
    counts as a miss and by its error."""
    now = time.monotonic()
    started = call["started"]
    total = max(0.0, now - started)
    sent, answered = call.get("sent"), call.get("answered")
    model = None if sent is None or answered is None else max(0.0, answered - sent)
    hit = "hit" in call
    gave_up = ("x-amzn-ErrorType", "ModelNotReadyException") in response.headers
    waited_until = call.get("acquired", now if gave_up else None)
    sink.invocation(
        status=metric_status(response),
        cache_hit=hit,
        model_seconds=model,
        overhead_seconds=max(0.0, total - (model or 0.0)),
        load_wait_seconds=None if hit or waited_until is None else max(0.0, waited_until - started),
        instances=instances,
    )


def instance_memory_bytes(instance_type: str | None) -> int | None:
    """The host memory of ``instance_type`` (the table of instance types), else this machine's
    (``MemTotal``); ``None`` when neither is known."""
    spec = INSTANCE_TYPES.get(instance_type or "")
    if spec is not None:
        return spec.memory_bytes
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class UsageSampler:
    """A hook for :meth:`MetricsSink.on_publish`: each instance's Triton process (``tritonserver`` and its
    model stubs) and model volume as SageMaker's instance metrics, one sample per instance.

    ``CPUUtilization``: CPU seconds used since the previous sample per second of wall time, times 100 (100
    per core, as on SageMaker); ``MemoryUtilization``: resident memory (``tritonserver``'s, and what each
    stub holds with its shared memory) as a percentage of the host memory of the variant's instance type
    (:func:`instance_memory_bytes`); ``DiskUtilization``: the models extracted on the instance's volume as a
    percentage of its size.

    Parameters:
        current: the endpoint's runtime now (``None`` while it has none).
    """

    def __init__(self, current: Callable[[], EndpointRuntime | None]) -> None:
        self._current = current
        self._last: dict[str, tuple[int, float, float]] = {}  # instance -> pid, CPU seconds, wall clock

    def __call__(self, sink: MetricsSink) -> None:
        runtime = self._current()
        instances = runtime.instances if runtime is not None else []
        seen = set()
        for instance in instances:
            seen.add(instance.instance_id)
            self._sample(sink, instance)
        for gone in set(self._last) - seen:
            del self._last[gone]

    def _sample(self, sink: MetricsSink, instance: InstanceRuntime) -> None:
        pid = instance.triton.pid
        name = instance.instance_id
        if pid is None:
            self._last.pop(name, None)
            return
        cpu_seconds, memory = process_tree_usage(pid)
        now = time.monotonic()
        cpu_percent = None
        last = self._last.get(name)
        if last is not None and last[0] == pid and now > last[2]:
            cpu_percent = max(0.0, (cpu_seconds - last[1]) / (now - last[2]) * 100)
            cpu_percent = min(cpu_percent, 100.0 * (os.cpu_count() or 1))
        self._last[name] = (pid, cpu_seconds, now)
        total = instance_memory_bytes(instance.models.instance_type)
        used, capacity = instance.volume_usage()
        sink.utilization(
            cpu_percent=cpu_percent,
            memory_percent=100.0 * memory / total if total else None,
            disk_percent=100.0 * used / capacity if capacity > 0 else None,
            instance=name,
        )
