"""``endpoint_metrics()``: what an endpoint is doing, from the CloudWatch metrics SageMaker publishes.

Per production variant ("per-model metrics aren't supported" on a multi-model endpoint), every minute on
AWS and every ``metrics_period`` on the embedded stack: invocations and errors, the cache-hit ratio, how
long requests waited for model loads, downloads, loads and unloads, latencies and the number of loaded
models. On an endpoint of inference components, each component's own metrics too (dimension
``InferenceComponentName``: invocations, invocations per copy, errors, requests no copy could take,
latencies, utilization of what its copies reserved), and each variant's reservation of its instances. The
same code reads AWS and the stack (docs/metrics.md lists each metric and what it means).
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import (
    COMPONENT_METRICS,
    RESERVATION_METRICS,
    check_component_name,
    hosts_components,
)
from mme_triton._sagemaker import ENDPOINT_METRICS, error_message, make_client
from mme_triton._sdk import boto3_session_of
from mme_triton.endpoint._metric_queries import (
    fetch,
    metric_namespaces,
    plan_component_queries,
    plan_queries,
)
from mme_triton.endpoint._retry import Deadline, control_plane_config, read
from mme_triton.endpoint.handle import control_plane_errors
from mme_triton.errors import EndpointError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

__all__ = ["DEFAULT_WINDOW", "EndpointMetrics", "MetricPoint", "endpoint_metrics"]

DEFAULT_WINDOW = timedelta(hours=1)
"""How far back :func:`endpoint_metrics` reads when no ``start`` is given."""

_SECONDS = 1e-6  # SageMaker publishes durations in microseconds


#: Every metric name a point may carry: the endpoint's, a component's, a component endpoint's reservations.
_ALL_METRICS = {**RESERVATION_METRICS, **COMPONENT_METRICS, **ENDPOINT_METRICS}


@dataclass(frozen=True)
class MetricPoint:
    """One value of one statistic of one metric in one period (a row of the tidy table); ``component`` is
    the inference component a point is of (``variant`` then empty), None for a variant's."""

    metric: str
    variant: str
    statistic: str
    timestamp: datetime
    value: float
    unit: str
    namespace: str
    component: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["timestamp"] = self.timestamp.isoformat()
        return data


def _unit(metric: str, statistic: str) -> str:
    return "Count" if statistic == "SampleCount" else _ALL_METRICS[metric][1]


@dataclass(frozen=True)
class EndpointMetrics:
    """An endpoint's CloudWatch metrics over a window, as :func:`endpoint_metrics` read them.

    Attributes:
        endpoint_name: the endpoint.
        variants: the production variants read.
        start, end: the window (UTC); ``end`` is exclusive.
        period: seconds per data point.
        points: every value read, one :class:`MetricPoint` each (metric, variant, statistic, timestamp,
            value, unit, namespace), oldest first.
        window: whole-window percentiles, ``(variant, metric, statistic) -> value``.
        components: the inference components read (none for a multi-model endpoint).
        component_window: the components' whole-window percentiles, ``(component, metric, statistic) ->
            value``.
    """

    endpoint_name: str
    variants: tuple[str, ...]
    start: datetime
    end: datetime
    period: int
    points: tuple[MetricPoint, ...] = ()
    window: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    components: tuple[str, ...] = ()
    component_window: Mapping[tuple[str, str, str], float] = field(default_factory=dict)

    def series(
        self,
        metric_name: str,
        statistic: str | None = None,
        *,
        variant: str | None = None,
        component: str | None = None,
    ) -> list[MetricPoint]:
        """The points of one metric (of one statistic, of one variant when given), oldest first; with
        ``component``, that inference component's own points of the metric.

        Raises:
            ValueError: ``metric_name`` is not one of SageMaker's endpoint or inference component metrics.

        Example::

            [(p.timestamp, p.value) for p in metrics.series("ModelCacheHit", "Average")]
            metrics.series("InvocationsPerCopy", "Sum", component="linear")
        """
        if metric_name not in _ALL_METRICS:
            raise ValueError(
                f"unknown metric {metric_name!r}; the endpoint and inference component metrics are: "
                f"{', '.join(_ALL_METRICS)}"
            )
        return [
            point
            for point in self.points
            if point.metric == metric_name
            and (statistic is None or point.statistic == statistic)
            and (variant is None or point.variant == variant)
            and point.component == component
        ]

    def _values(self, metric: str, statistic: str, component: str | None = None) -> list[float]:
        return [point.value for point in self.series(metric, statistic, component=component)]

    def _total(self, metric: str, statistic: str, component: str | None = None) -> float:
        return math.fsum(self._values(metric, statistic, component))

    def _mean_seconds(self, metric: str, component: str | None = None) -> float | None:
        count = self._total(metric, "SampleCount", component)
        return self._total(metric, "Sum", component) / count * _SECONDS if count else None

    def _maximum(self, metric: str, scale: float = 1.0, component: str | None = None) -> float | None:
        values = self._values(metric, "Maximum", component)
        return max(values) * scale if values else None

    def _window_value(self, metric: str, statistic: str, scale: float) -> float | None:
        values = [v for (_, m, s), v in self.window.items() if m == metric and s == statistic]
        return max(values) * scale if values else None

    def summary(self) -> dict[str, Any]:
        """The figures operators read first, over the whole window and all variants.

        Keys: ``invocations``, ``cache_hits``, ``cache_misses``, ``cache_hit_ratio`` (``None`` without
        requests), ``loads``, ``unloads``, ``downloads``, ``load_wait_mean_s``, ``load_wait_max_s``,
        ``download_mean_s``, ``load_mean_s``, ``unload_mean_s``, ``errors_4xx``, ``errors_5xx``,
        ``model_errors``, ``model_latency_mean_ms``, ``model_latency_p50_ms``, ``model_latency_p99_ms``,
        ``overhead_latency_mean_ms``, ``overhead_latency_p99_ms``, ``loaded_models_max``,
        ``cpu_utilization_max``, ``memory_utilization_max``. Counts are ints; a figure with no data is
        ``None``. With several variants, a percentile is the highest variant's. ``load_wait_mean_s`` is
        over the requests that waited for a model to serve them (``ModelLoadingWaitTime``'s samples):
        ``cache_misses`` also counts requests whose model never came (a TargetModel not in S3: a 4xx),
        which have no wait (see docs/metrics.md).
        """
        samples = self._total("ModelCacheHit", "SampleCount")
        hits = self._total("ModelCacheHit", "Sum")
        latency = self._mean_seconds("ModelLatency")
        overhead = self._mean_seconds("OverheadLatency")
        return {
            "invocations": round(self._total("Invocations", "Sum")),
            "cache_hits": round(hits),
            "cache_misses": round(samples - hits),
            "cache_hit_ratio": hits / samples if samples else None,
            "loads": round(self._total("ModelLoadingTime", "SampleCount")),
            "unloads": round(self._total("ModelUnloadingTime", "SampleCount")),
            "downloads": round(self._total("ModelDownloadingTime", "SampleCount")),
            "load_wait_mean_s": self._mean_seconds("ModelLoadingWaitTime"),
            "load_wait_max_s": self._maximum("ModelLoadingWaitTime", _SECONDS),
            "download_mean_s": self._mean_seconds("ModelDownloadingTime"),
            "load_mean_s": self._mean_seconds("ModelLoadingTime"),
            "unload_mean_s": self._mean_seconds("ModelUnloadingTime"),
            "errors_4xx": round(self._total("Invocation4XXErrors", "Sum")),
            "errors_5xx": round(self._total("Invocation5XXErrors", "Sum")),
            "model_errors": round(self._total("InvocationModelErrors", "Sum")),
            "model_latency_mean_ms": latency * 1000 if latency is not None else None,
            "model_latency_p50_ms": self._window_value("ModelLatency", "p50", _SECONDS * 1000),
            "model_latency_p99_ms": self._window_value("ModelLatency", "p99", _SECONDS * 1000),
            "overhead_latency_mean_ms": overhead * 1000 if overhead is not None else None,
            "overhead_latency_p99_ms": self._window_value("OverheadLatency", "p99", _SECONDS * 1000),
            "loaded_models_max": self._maximum("LoadedModelCount"),
            "cpu_utilization_max": self._maximum("CPUUtilization"),
            "memory_utilization_max": self._maximum("MemoryUtilization"),
        }

    def component_summary(self, component: str) -> dict[str, Any]:
        """The figures of one inference component over the whole window.

        Keys: ``invocations``, ``invocations_per_copy_max`` (the highest per-period sum of
        ``InvocationsPerCopy``: what target tracking on it compares with its target, per minute at a
        60 s period), ``no_capacity_failures`` (requests no copy could take,
        ``NoCapacityInvocationFailures``),
        ``errors_4xx``, ``errors_5xx``, ``model_errors``, ``model_latency_mean_ms``,
        ``model_latency_p50_ms``, ``model_latency_p99_ms``, ``overhead_latency_mean_ms``,
        ``cpu_utilization_max``, ``memory_utilization_max``, ``gpu_utilization_max``,
        ``gpu_memory_utilization_max`` (percent of what its copies reserved). A figure with no data is
        ``None``.

        Raises:
            ValueError: ``component`` was not read.

        Example::

            metrics.component_summary("linear")["invocations_per_copy_max"]
        """
        if component not in self.components:
            read_ = ", ".join(self.components) or "none"
            raise ValueError(f"no inference component {component!r} was read (read: {read_})")
        latency = self._mean_seconds("ModelLatency", component)
        overhead = self._mean_seconds("OverheadLatency", component)
        per_copy = self._values("InvocationsPerCopy", "Sum", component)

        def window(metric: str, statistic: str) -> float | None:
            value = self.component_window.get((component, metric, statistic))
            return value * _SECONDS * 1000 if value is not None else None

        def maximum(metric: str) -> float | None:
            return self._maximum(metric, component=component)

        return {
            "invocations": round(self._total("Invocations", "Sum", component)),
            "invocations_per_copy_max": max(per_copy) if per_copy else None,
            "no_capacity_failures": round(self._total("NoCapacityInvocationFailures", "Sum", component)),
            "errors_4xx": round(self._total("Invocation4XXErrors", "Sum", component)),
            "errors_5xx": round(self._total("Invocation5XXErrors", "Sum", component)),
            "model_errors": round(self._total("InvocationModelErrors", "Sum", component)),
            "model_latency_mean_ms": latency * 1000 if latency is not None else None,
            "model_latency_p50_ms": window("ModelLatency", "p50"),
            "model_latency_p99_ms": window("ModelLatency", "p99"),
            "overhead_latency_mean_ms": overhead * 1000 if overhead is not None else None,
            "cpu_utilization_max": maximum("CPUUtilizationNormalized"),
            "memory_utilization_max": maximum("MemoryUtilizationNormalized"),
            "gpu_utilization_max": maximum("GPUUtilizationNormalized"),
            "gpu_memory_utilization_max": maximum("GPUMemoryUtilizationNormalized"),
        }

    @property
    def has_data(self) -> bool:
        """Whether CloudWatch had any data point for the endpoint in the window."""
        return bool(self.points)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the window, the summary, each component's summary and every point."""
        return {
            "endpoint_name": self.endpoint_name,
            "variants": list(self.variants),
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "period": self.period,
            "summary": self.summary(),
            "components": {name: self.component_summary(name) for name in self.components},
            "points": [point.to_dict() for point in self.points],
        }

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` to ``path`` as JSON; returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return target

    def to_csv(self, path: str | Path) -> Path:
        """Write the points to ``path`` as CSV (one row per point: endpoint, variant, namespace, metric,
        statistic, timestamp, value, unit, component); returns the path."""
        target = Path(path)
        columns = ["endpoint", "variant", "namespace", "metric", "statistic", "timestamp", "value", "unit"]
        columns.append("component")
        with target.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(columns)
            for p in self.points:
                when, value = p.timestamp.isoformat(), repr(p.value)
                row = [self.endpoint_name, p.variant, p.namespace, p.metric, p.statistic, when, value, p.unit]
                writer.writerow([*row, p.component or ""])
        return target

    def plot(self, path: str | Path | None = None) -> Any:
        """A matplotlib figure: invocations and the cache-hit ratio over time, the wait for model loads,
        the loaded models. Saved to ``path`` when given. Needs matplotlib (``pip install matplotlib``).

        Raises:
            ImportError: matplotlib is not installed.
        """
        from mme_triton.endpoint._metrics_plot import plot_metrics

        return plot_metrics(self, path)

    def __str__(self) -> str:
        summary = self.summary()
        head = (
            f"{self.endpoint_name} ({', '.join(self.variants) or 'no variant'}): "
            f"{self.start:%Y-%m-%d %H:%M:%S} to {self.end:%H:%M:%S} UTC, {self.period}s periods"
        )
        if not self.has_data:
            return head + "\n  no data points in CloudWatch for this window"
        text = head + "".join(f"\n  {key:<26} {_show(value)}" for key, value in summary.items())
        for name in self.components:
            figures = self.component_summary(name)
            text += f"\n  component {name}" + "".join(
                f"\n    {key:<26} {_show(value)}" for key, value in figures.items()
            )
        return text


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _seconds(period: int | float | timedelta) -> int:
    seconds = period.total_seconds() if isinstance(period, timedelta) else float(period)
    if not seconds.is_integer() or not (
        seconds in (1, 5, 10, 20, 30) or (seconds >= 60 and seconds % 60 == 0)
    ):
        raise ValueError(f"period must be 1, 5, 10, 20, 30 or a multiple of 60 seconds, got {period!r}")
    return int(seconds)


def _window(
    start: datetime | timedelta | None, end: datetime | None, period: int
) -> tuple[datetime, datetime, int]:
    """The window (UTC), and the period of one data point covering it all (CloudWatch rounds the start down
    to the minute for periods of a minute or more)."""
    finish = _utc(end) if end is not None else datetime.now(timezone.utc)
    if start is None:
        begin = finish - DEFAULT_WINDOW
    elif isinstance(start, timedelta):
        begin = finish - start
    else:
        begin = _utc(start)
    if begin >= finish:
        raise ValueError(f"start ({begin.isoformat()}) must be before end ({finish.isoformat()})")
    rounded = begin.replace(second=0, microsecond=0)
    whole = max(60, math.ceil((finish - rounded).total_seconds() / 60) * 60)
    return begin, finish, whole


def endpoint_metrics(
    endpoint_name: str,
    *,
    start: datetime | timedelta | None = None,
    end: datetime | None = None,
    period: int | timedelta = 60,
    variant: str | None = None,
    region: str | None = None,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    cloudwatch_client: Any = None,
    sagemaker_client: Any = None,
    timeout: float = 120.0,
    components: Sequence[str] | None = None,
) -> EndpointMetrics:
    """Read an endpoint's CloudWatch metrics: one series per metric and statistic, and a summary.

    Parameters:
        endpoint_name: the endpoint (it may be deleted already when ``variant`` is given).
        start: the window's start (a datetime, naive meaning UTC, or how long before ``end``); default:
            an hour before ``end``.
        end: the window's end (exclusive); default: now.
        period: seconds per data point (1, 5, 10, 20, 30 or a multiple of 60; or a timedelta). SageMaker
            publishes every minute; the embedded stack every ``metrics_period``.
        variant: the production variant; default: every variant DescribeEndpoint lists.
        components: the inference components to read as well (dimension ``InferenceComponentName``);
            default: every component of an endpoint of components, when ``variant`` is not given (a
            deleted endpoint's components must be named).
        region, boto3_session, sagemaker_session, boto_config: how the clients are made.
        cloudwatch_client, sagemaker_client: ready clients that win over the session.
        timeout: seconds the reads are retried for while AWS throttles or cannot be reached.

    Raises:
        EndpointNotFoundError: ``variant`` not given and the endpoint does not exist.
        EndpointError: CloudWatch refused a read (the botocore error is chained).
        ValueError: a period CloudWatch cannot read, or ``start`` not before ``end``.

    Example::

        metrics = endpoint_metrics("my-mme", start=timedelta(hours=3), period=300)
        metrics.summary()["cache_hit_ratio"]  # 0.93
        endpoint_metrics("my-components").component_summary("linear")["invocations"]
    """
    seconds = _seconds(period)
    begin, finish, whole = _window(start, end, seconds)
    if components is not None:
        components = tuple(check_component_name(name) for name in components)
    session = boto3_session_of(boto3_session, sagemaker_session)
    clients: dict[str, Any] = {"boto3_session": session, "boto_config": boto_config, "region": region}
    deadline = Deadline(timeout)
    if variant is None:
        sagemaker: Any = make_client(
            "sagemaker", client=sagemaker_client, default_config=control_plane_config(), **clients
        )
        with control_plane_errors(endpoint_name, "describe"):
            described = read(
                sagemaker.describe_endpoint,
                deadline=deadline,
                what="DescribeEndpoint",
                EndpointName=endpoint_name,
            )
        variants = tuple(str(v["VariantName"]) for v in described.get("ProductionVariants", []))
        if components is None:
            components = _components_of(sagemaker, endpoint_name, described, deadline)
    else:
        variants = (variant,)
    cloudwatch: Any = make_client(
        "cloudwatch", client=cloudwatch_client, default_config=control_plane_config(), **clients
    )
    found = tuple(components or ())
    with _cloudwatch_errors(endpoint_name):
        namespaces = metric_namespaces(cloudwatch, endpoint_name, deadline=deadline)
        queries = plan_queries(
            variants, namespaces, period=seconds, window_period=whole, reservations=bool(found)
        )
        queries += plan_component_queries(found, period=seconds, window_period=whole, first=len(queries))
        values = fetch(cloudwatch, endpoint_name, queries, start=begin, end=finish, deadline=deadline)
    points: list[MetricPoint] = []
    window: dict[tuple[str, str, str], float] = {}
    component_window: dict[tuple[str, str, str], float] = {}
    for query in queries:
        pairs = values.get(query.id, [])
        if query.whole_window:
            at = (query.variant, query.metric, query.statistic)
            if pairs and query.component is not None:
                component_window[(query.component, *at[1:])] = pairs[0][1]
            elif pairs:
                window[at] = pairs[0][1]
            continue
        unit, where = _unit(query.metric, query.statistic), (query.namespace, query.component)
        points.extend(
            MetricPoint(query.metric, query.variant, query.statistic, _utc(t), v, unit, *where)
            for t, v in pairs
        )
    points.sort(key=lambda p: (p.timestamp, p.variant, p.component or "", p.metric, p.statistic))
    return EndpointMetrics(
        endpoint_name, variants, begin, finish, seconds, tuple(points), window, found, component_window
    )


def _components_of(sagemaker: Any, endpoint_name: str, described: Any, deadline: Deadline) -> tuple[str, ...]:
    """The inference components of an endpoint whose config hosts them (none for a multi-model endpoint,
    whose metrics need no inference component permission)."""
    from mme_triton.endpoint.models import endpoint_components

    with control_plane_errors(endpoint_name, "read the config of", missing_is_endpoint=False):
        config = read(
            sagemaker.describe_endpoint_config,
            deadline=deadline,
            what="DescribeEndpointConfig",
            EndpointConfigName=described["EndpointConfigName"],
        )
    if not hosts_components(config):
        return ()
    return tuple(endpoint_components(endpoint_name, sagemaker_client=sagemaker))


@contextlib.contextmanager
def _cloudwatch_errors(endpoint_name: str) -> Iterator[None]:
    """botocore's errors inside the block as :class:`~mme_triton.errors.EndpointError` (the cause chained)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        detail = error_message(exc) if isinstance(exc, ClientError) else str(exc)
        raise EndpointError(
            f"cannot read the CloudWatch metrics of endpoint {endpoint_name!r}: {detail}",
            endpoint_name=endpoint_name,
        ) from exc
