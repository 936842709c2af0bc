"""The stack's metrics recorder: what happens on the stack, published to its CloudWatch as SageMaker does.

:class:`MetricsRecorder` collects raw samples per namespace, metric, dimensions and unit, in windows of
``period`` seconds aligned to the clock (60 by default, SageMaker's one-minute frequency), and publishes each
window when it ends with PutMetricData: ``Values``/``Counts`` (raw values, so percentiles work), the window's
start as ``Timestamp``, ``StorageResolution`` 1 for periods under a minute. Gauges (a value that holds until
it changes, such as the number of loaded models) give one sample per window. :meth:`~MetricsRecorder.stop`
publishes what is left, the current window included.

:class:`EndpointMetricsSink` is what the InvokeEndpoint route calls: one per endpoint and production variant,
its methods named after what happened, each publishing SageMaker's metrics
(:data:`mme_triton._sagemaker.ENDPOINT_METRICS`) with the dimensions ``EndpointName`` and ``VariantName``.

Memory is bounded: a series keeps at most 1,500 distinct values per window (beyond that neighbours merge,
sums and counts stay exact), and at most :data:`MAX_PENDING` series-windows wait to be published (the oldest
go first, with a warning) while CloudWatch cannot be reached.

Example::

    recorder = MetricsRecorder(plane.client("cloudwatch"), period=1).start()
    sink = recorder.endpoint("my-endpoint")
    sink.invocation(status=200, cache_hit=False, model_seconds=0.004, overhead_seconds=0.35,
                    load_wait_seconds=0.34)
    recorder.stop()  # published
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mme_triton._sagemaker import ENDPOINT_METRICS, METRIC_DIMENSIONS, error_code, is_transient
from mme_triton.local.aws._metric_cells import MAX_CELL_VALUES, coarsen
from mme_triton.local.aws._sink_hooks import PublishHooks

__all__ = [
    "DEFAULT_METRICS_PERIOD",
    "MAX_PENDING",
    "EndpointMetricsSink",
    "MetricsRecorder",
    "check_metrics_period",
]

logger = logging.getLogger(__name__)

DEFAULT_METRICS_PERIOD = 60
"""Seconds between two publications: SageMaker publishes endpoint metrics every minute."""

MAX_PENDING = 20_000
"""Series-windows (one metric, dimensions and unit in one window) waiting to be published, at most."""

_MAX_VALUES = 150  # PutMetricData: values per datum
_MAX_DATA = 1000  # PutMetricData: data per request
_MAX_REQUEST_BYTES = 512 * 1024  # well under PutMetricData's 1 MB
_MAX_AGE = 14 * 86400 - 3600  # CloudWatch refuses time stamps more than two weeks old

Series = tuple[str, str, tuple[tuple[str, str], ...], str]  # namespace, metric, dimensions, unit
Hook = Callable[[], None]


def check_metrics_period(seconds: float) -> int:
    """``seconds`` as a metrics period: 1, 5, 10, 20, 30 or a multiple of 60 (the periods CloudWatch reads).

    Raises:
        ValueError: another value.
    """
    if isinstance(seconds, bool) or not float(seconds).is_integer():
        raise ValueError(
            f"metrics_period must be 1, 5, 10, 20, 30 or a multiple of 60 seconds, got {seconds!r}"
        )
    period = int(seconds)
    if period not in (1, 5, 10, 20, 30) and not (period >= 60 and period % 60 == 0):
        raise ValueError(
            f"metrics_period must be 1, 5, 10, 20, 30 or a multiple of 60 seconds, got {seconds!r}"
        )
    return period


class MetricsRecorder:
    """Samples in, PutMetricData out, every ``period`` seconds (thread-safe).

    Parameters:
        client: a boto3 CloudWatch client (the stack's), or anything with its ``put_metric_data``.
        period: seconds per window (:func:`check_metrics_period`); 60 by default.
        clock: the time in epoch seconds (``time.time``); windows are aligned to it.

    Example::

        recorder = MetricsRecorder(client, period=60).start()
        recorder.record("Custom/Namespace", "RequestSize", 1250.0, unit="Bytes",
                        dimensions={"Service": "search"})
    """

    def __init__(
        self, client: Any, *, period: float = DEFAULT_METRICS_PERIOD, clock: Callable[[], float] = time.time
    ):
        self.client = client
        self.period = check_metrics_period(period)
        self.storage_resolution = 1 if self.period < 60 else 60
        self.clock = clock
        self._lock = threading.RLock()
        self._windows: dict[int, dict[Series, dict[float, float]]] = {}
        self._pending = 0
        self._gauges: dict[tuple[Series, str], float] = {}  # (series, instance) -> value
        self._hooks: list[Hook] = []
        self._stamped = self._window(clock())  # windows before this one have had their gauges
        self._sinks: dict[tuple[str, str], EndpointMetricsSink] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- recording -----------------------------------------------------------------------------------

    def _window(self, moment: float) -> int:
        return int(moment // self.period * self.period)

    def record(
        self,
        namespace: str,
        metric_name: str,
        value: float,
        *,
        unit: str,
        dimensions: Mapping[str, str],
        count: float = 1.0,
        timestamp: float | None = None,
    ) -> None:
        """One sample (``count`` times the same value) of a metric, in the window of ``timestamp`` (now)."""
        series: Series = (namespace, metric_name, tuple(dimensions.items()), unit)
        self.record_many([(series, value)], count=count, timestamp=timestamp)

    def record_many(
        self, samples: Iterable[tuple[Series, float]], *, count: float = 1.0, timestamp: float | None = None
    ) -> None:
        """Samples of several series at once (one lock, one clock reading): ``((namespace, metric,
        ((dimension, value), ...), unit), value)`` pairs."""
        if not count > 0:
            return
        with self._lock:
            window = self._window(self.clock() if timestamp is None else timestamp)
            table = self._windows.setdefault(window, {})
            for series, value in samples:
                if not math.isfinite(value):
                    logger.debug("metric %s: %r is not a value CloudWatch takes; dropped", series[1], value)
                    continue
                values = table.get(series)
                if values is None:
                    values = table[series] = {}
                    self._pending += 1
                values[value] = values.get(value, 0.0) + count
                if len(values) > MAX_CELL_VALUES:
                    table[series] = coarsen(values, MAX_CELL_VALUES)
            if self._pending > MAX_PENDING:
                self._drop_oldest()

    def set_gauge(
        self,
        namespace: str,
        metric_name: str,
        value: float | None,
        *,
        unit: str,
        dimensions: Mapping[str, str],
        instance: str = "",
    ) -> None:
        """A value that holds until set again: one sample of it in every window (``None`` stops it).

        ``instance``: whose value it is; the gauges of several instances in one series give one sample
        each per window (what each instance of a variant publishes, aggregated by CloudWatch's
        statistics)."""
        series: Series = (namespace, metric_name, tuple(dimensions.items()), unit)
        with self._lock:
            if value is None:
                self._gauges.pop((series, instance), None)
            else:
                self._gauges[(series, instance)] = float(value)

    def add_hook(self, hook: Hook) -> None:
        """Call ``hook()`` before each window is published (to sample something into a gauge)."""
        with self._lock:
            self._hooks.append(hook)

    def remove_hook(self, hook: Hook) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)

    def endpoint(self, endpoint_name: str, variant_name: str = "AllTraffic") -> EndpointMetricsSink:
        """The sink of one endpoint's production variant (the same object for the same names)."""
        with self._lock:
            sink = self._sinks.get((endpoint_name, variant_name))
            if sink is None:
                sink = self._sinks[(endpoint_name, variant_name)] = EndpointMetricsSink(
                    self, endpoint_name, variant_name
                )
            return sink

    def _forget(self, sink: EndpointMetricsSink) -> None:
        with self._lock:
            if self._sinks.get((sink.endpoint_name, sink.variant_name)) is sink:
                del self._sinks[(sink.endpoint_name, sink.variant_name)]

    def _drop_oldest(self) -> None:
        oldest = min(self._windows)
        self._pending -= len(self._windows.pop(oldest))
        logger.warning(
            "more than %d metric series wait to be published: dropped the window of %s",
            MAX_PENDING,
            time.strftime("%H:%M:%S", time.gmtime(oldest)),
        )

    # -- publishing ----------------------------------------------------------------------------------

    @staticmethod
    def _run_hooks(hooks: list[Hook]) -> None:
        for hook in hooks:
            try:
                hook()
            except Exception:
                logger.exception("a metrics hook failed")

    def _stamp_gauges(self, window: int) -> None:
        for ((namespace, name, dimensions, unit), _), value in self._gauges.items():
            self.record(namespace, name, value, unit=unit, dimensions=dict(dimensions), timestamp=window)

    def publish_due(self) -> int:
        """Publish the windows that have ended (hooks run and gauges sampled into the last of them); returns
        the number of data published. What the background thread runs after each window."""
        current = self._window(self.clock())
        with self._lock:
            hooks = list(self._hooks) if current > self._stamped else []
        self._run_hooks(hooks)
        with self._lock:
            if current > self._stamped:
                self._stamp_gauges(current - self.period)
                self._stamped = current
            due = {w: self._windows.pop(w) for w in sorted(self._windows) if w < current}
            self._pending -= sum(len(table) for table in due.values())
        return self._publish(due)

    def flush(self) -> int:
        """Publish everything recorded, the current window included (hooks run and gauges sampled into it
        once); returns the number of data published."""
        current = self._window(self.clock())
        with self._lock:
            hooks = list(self._hooks) if current >= self._stamped else []
        self._run_hooks(hooks)
        with self._lock:
            if current > self._stamped:
                self._stamp_gauges(current - self.period)
                self._stamped = current
            if current == self._stamped:
                self._stamp_gauges(current)
                self._stamped = current + self.period
            due, self._windows, self._pending = self._windows, {}, 0
        return self._publish(due)

    def _publish(self, windows: dict[int, dict[Series, dict[float, float]]]) -> int:
        oldest = self.clock() - _MAX_AGE
        requests: dict[str, list[dict[str, Any]]] = {}
        for window, table in sorted(windows.items()):
            if window < oldest:
                logger.warning(
                    "metrics of a window more than two weeks old dropped (CloudWatch refuses them)"
                )
                continue
            for (namespace, name, dimensions, unit), values in table.items():
                pairs = sorted(values.items())
                for start in range(0, len(pairs), _MAX_VALUES):
                    chunk = pairs[start : start + _MAX_VALUES]
                    requests.setdefault(namespace, []).append(
                        {
                            "MetricName": name,
                            "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions],
                            "Timestamp": window,
                            "Values": [v for v, _ in chunk],
                            "Counts": [c for _, c in chunk],
                            "Unit": unit,
                            "StorageResolution": self.storage_resolution,
                        }
                    )
        published = 0
        for namespace, data in requests.items():
            batch: list[dict[str, Any]] = []
            size = 0
            for datum in data:
                weight = 256 + 48 * len(datum["Values"])
                if batch and (len(batch) == _MAX_DATA or size + weight > _MAX_REQUEST_BYTES):
                    published += self._put(namespace, batch)
                    batch, size = [], 0
                batch.append(datum)
                size += weight
            if batch:
                published += self._put(namespace, batch)
        return published

    def _put(self, namespace: str, data: list[dict[str, Any]]) -> int:
        try:
            self.client.put_metric_data(Namespace=namespace, MetricData=data)
            return len(data)
        except Exception as exc:
            if is_transient(exc):
                logger.warning("PutMetricData failed (%s); %d data kept for the next try", exc, len(data))
                with self._lock:
                    for datum in data:
                        for value, count in zip(datum["Values"], datum["Counts"], strict=True):
                            self.record(
                                namespace,
                                datum["MetricName"],
                                value,
                                unit=datum["Unit"],
                                dimensions={d["Name"]: d["Value"] for d in datum["Dimensions"]},
                                count=count,
                                timestamp=datum["Timestamp"],
                            )
            else:
                logger.warning("PutMetricData refused %d data (%s): %s", len(data), error_code(exc), exc)
            return 0

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> MetricsRecorder:
        """Publish in a background thread after every window; returns the recorder."""
        with self._lock:
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="mme-triton-metrics", daemon=True)
                self._thread.start()
        return self

    def _run(self) -> None:
        grace = min(0.05 * self.period, 1.0)
        while True:
            now = self.clock()
            wait = self._window(now) + self.period - now + grace
            if self._stop.wait(max(wait, 0.01)):
                return
            try:
                self.publish_due()
            except Exception:
                logger.exception("publishing the stack's metrics failed")

    def stop(self) -> int:
        """Stop the thread and publish what is left (the current window too); returns the data published."""
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=30)
        return self.flush()


class EndpointMetricsSink(PublishHooks):
    """What one production variant of an endpoint publishes, under SageMaker's metric names.

    Obtained from :meth:`MetricsRecorder.endpoint`; every method records at once and never raises for
    a value CloudWatch would refuse (a NaN is dropped). Durations are given in seconds and published in
    microseconds, as SageMaker publishes them.
    """

    def __init__(self, recorder: MetricsRecorder, endpoint_name: str, variant_name: str) -> None:
        self.recorder = recorder
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.dimensions = dict(zip(METRIC_DIMENSIONS, (endpoint_name, variant_name), strict=True))
        dimensions = tuple(self.dimensions.items())
        self._series: dict[str, Series] = {
            metric: (namespace, metric, dimensions, unit)
            for metric, (namespace, unit) in ENDPOINT_METRICS.items()
        }
        self._hooks: list[Hook] = []
        self._instances: dict[str, set[str]] = {}  # instance -> the gauges it set

    def _record(self, metric: str, value: float) -> None:
        self.recorder.record_many([(self._series[metric], value)])

    def _gauge(self, metric: str, value: float | None, instance: str = "") -> None:
        namespace, unit = ENDPOINT_METRICS[metric]
        self.recorder.set_gauge(
            namespace, metric, value, unit=unit, dimensions=self.dimensions, instance=instance
        )
        if value is None:
            self._instances.get(instance, set()).discard(metric)
        else:
            self._instances.setdefault(instance, set()).add(metric)

    def invocation(
        self,
        *,
        status: int | None,
        cache_hit: bool,
        model_seconds: float | None,
        overhead_seconds: float,
        load_wait_seconds: float | None = None,
        instances: int = 1,
    ) -> None:
        """One InvokeEndpoint request the variant served (or tried to).

        Parameters:
            status: the HTTP status the model's container answered with; ``None`` when it gave no answer
                (a timeout, a dropped connection, a malformed response).
            cache_hit: the target model was loaded when the request came.
            model_seconds: from sending the request to the container to its answer (``None``: never sent).
            overhead_seconds: the rest of the request's time on the stack, the wait for a load included.
            load_wait_seconds: how long the request waited for its model's download and load: a miss
                whose model came, or that gave up on a load still under way; ``None`` for a hit and for a
                miss whose model never came (not in S3, a failed load).
            instances: the variant's instance count (``InvocationsPerInstance`` is 1 / instances).

        Publishes ``Invocations`` 1, ``InvocationsPerInstance`` 1/instances, ``Invocation4XXErrors``,
        ``Invocation5XXErrors`` and ``InvocationModelErrors`` 1 or 0, ``ModelCacheHit`` 1 or 0,
        ``OverheadLatency``, and ``ModelLatency`` and ``ModelLoadingWaitTime`` when given.
        """
        series = self._series
        samples = [
            (series["Invocations"], 1.0),
            (series["InvocationsPerInstance"], 1.0 / max(1, instances)),
            (series["Invocation4XXErrors"], 1.0 if status is not None and 400 <= status < 500 else 0.0),
            (series["Invocation5XXErrors"], 1.0 if status is not None and 500 <= status < 600 else 0.0),
            (series["InvocationModelErrors"], 0.0 if status is not None and 200 <= status < 300 else 1.0),
            (series["ModelCacheHit"], 1.0 if cache_hit else 0.0),
            (series["OverheadLatency"], overhead_seconds * 1e6),
        ]
        if model_seconds is not None:
            samples.append((series["ModelLatency"], model_seconds * 1e6))
        if load_wait_seconds is not None:
            samples.append((series["ModelLoadingWaitTime"], load_wait_seconds * 1e6))
        self.recorder.record_many(samples)

    def model_downloaded(self, seconds: float) -> None:
        """A model's archive was fetched from S3 (``ModelDownloadingTime``)."""
        self._record("ModelDownloadingTime", seconds * 1e6)

    def model_loaded(self, seconds: float) -> None:
        """A model was loaded into the container (``ModelLoadingTime``)."""
        self._record("ModelLoadingTime", seconds * 1e6)

    def model_unloaded(self, seconds: float) -> None:
        """A model was unloaded from the container (``ModelUnloadingTime``: its SampleCount counts
        unloads)."""
        self._record("ModelUnloadingTime", seconds * 1e6)

    def loaded_models(self, count: int, *, instance: str = "") -> None:
        """The number of models loaded now on ``instance`` (``LoadedModelCount``, one sample per instance
        and window while set)."""
        self._gauge("LoadedModelCount", float(count), instance)

    def utilization(
        self,
        *,
        cpu_percent: float | None = None,
        memory_percent: float | None = None,
        disk_percent: float | None = None,
        gpu_percent: float | None = None,
        gpu_memory_percent: float | None = None,
        instance: str = "",
    ) -> None:
        """``instance``'s utilization now (one sample per instance and window of each figure given):
        ``CPUUtilization`` (100 per core), ``MemoryUtilization``, ``DiskUtilization``, ``GPUUtilization``,
        ``GPUMemoryUtilization``."""
        figures = {
            "CPUUtilization": cpu_percent,
            "MemoryUtilization": memory_percent,
            "DiskUtilization": disk_percent,
            "GPUUtilization": gpu_percent,
            "GPUMemoryUtilization": gpu_memory_percent,
        }
        for metric, value in figures.items():
            if value is not None:
                self._gauge(metric, value, instance)

    def instance_gone(self, instance: str) -> None:
        """``instance`` left the variant: its gauges stop."""
        for metric in list(self._instances.pop(instance, ())):
            namespace, unit = ENDPOINT_METRICS[metric]
            self.recorder.set_gauge(
                namespace, metric, None, unit=unit, dimensions=self.dimensions, instance=instance
            )

    def close(self) -> None:
        """The variant is gone: its gauges and hooks stop (what it recorded is still published)."""
        self._stop_hooks()
        for instance in list(self._instances):
            self.instance_gone(instance)
        self.recorder._forget(self)
