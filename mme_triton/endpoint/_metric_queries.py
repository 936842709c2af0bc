"""Reading an endpoint's metrics from CloudWatch: which queries, sent in GetMetricData batches.

Every metric of :data:`~mme_triton._sagemaker.ENDPOINT_METRICS` is read per production variant with the
statistics :data:`SERIES_STATISTICS` names, at the caller's period; the latency percentiles also over the
whole window (one period as long as the window), since percentiles of periods cannot be combined. Up to 500
queries go in one GetMetricData call, and its pages are followed with ``NextToken``; every call is a read
retried while it is throttled or fails transiently (:func:`~mme_triton.endpoint._retry.read`).

An endpoint of inference components is read per component too: every metric of
:data:`~mme_triton._inference_components.COMPONENT_METRICS` with the dimension ``InferenceComponentName``
(:func:`plan_component_queries`), and per variant the reservation metrics SageMaker publishes only for such
endpoints (:data:`~mme_triton._inference_components.RESERVATION_METRICS`).

Where a metric is published is looked up rather than assumed: one ListMetrics pass over the endpoint's
metrics (``EndpointName`` filter) finds each metric's namespaces, and a metric is read from its documented
namespace and from any other ListMetrics shows it in (AWS's documentation lists ``LoadedModelCount`` under
``/aws/sagemaker/Endpoints``; ListMetrics says where an endpoint really has it).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from mme_triton._inference_components import (
    COMPONENT_METRIC_DIMENSIONS,
    COMPONENT_METRICS,
    RESERVATION_METRICS,
)
from mme_triton._sagemaker import ENDPOINT_METRICS, METRIC_DIMENSIONS
from mme_triton.endpoint._retry import Deadline, read

__all__ = [
    "COMPONENT_STATISTICS",
    "MAX_QUERIES",
    "SERIES_STATISTICS",
    "WINDOW_STATISTICS",
    "MetricQuery",
    "fetch",
    "metric_namespaces",
    "plan_component_queries",
    "plan_queries",
]

logger = logging.getLogger(__name__)

MAX_QUERIES = 500
"""GetMetricData takes at most 500 queries per call."""

_TIMES = ("Average", "Maximum", "Sum", "SampleCount")
_PERCENT = ("Average", "Maximum")
SERIES_STATISTICS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Invocations": ("Sum",),
        "InvocationsPerInstance": ("Sum",),
        "Invocation4XXErrors": ("Sum",),
        "Invocation5XXErrors": ("Sum",),
        "InvocationModelErrors": ("Sum",),
        "ModelCacheHit": ("Average", "Sum", "SampleCount"),
        "ModelLoadingWaitTime": _TIMES,
        "ModelDownloadingTime": _TIMES,
        "ModelLoadingTime": _TIMES,
        "ModelUnloadingTime": _TIMES,
        "ModelLatency": (*_TIMES, "p50", "p99"),
        "OverheadLatency": (*_TIMES, "p50", "p99"),
        "LoadedModelCount": _PERCENT,
        "CPUUtilization": _PERCENT,
        "MemoryUtilization": _PERCENT,
        "DiskUtilization": _PERCENT,
        "GPUUtilization": _PERCENT,
        "GPUMemoryUtilization": _PERCENT,
    }
)
"""The statistics read for each metric, per period."""

COMPONENT_STATISTICS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Invocations": ("Sum",),
        "InvocationsPerCopy": ("Sum",),
        "Invocation4XXErrors": ("Sum",),
        "Invocation5XXErrors": ("Sum",),
        "InvocationModelErrors": ("Sum",),
        "NoCapacityInvocationFailures": ("Sum",),
        "ModelLatency": (*_TIMES, "p50", "p99"),
        "OverheadLatency": (*_TIMES, "p50", "p99"),
        "CPUUtilizationNormalized": _PERCENT,
        "MemoryUtilizationNormalized": _PERCENT,
        "GPUUtilizationNormalized": _PERCENT,
        "GPUMemoryUtilizationNormalized": _PERCENT,
    }
)
"""The statistics read for each metric of an inference component, per period."""

WINDOW_STATISTICS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"ModelLatency": ("p50", "p99"), "OverheadLatency": ("p50", "p99")}
)
"""The statistics read over the whole window as well (percentiles do not add up across periods)."""


@dataclass(frozen=True)
class MetricQuery:
    """One GetMetricData query: a metric of a variant, a statistic, a period."""

    id: str
    variant: str
    metric: str
    namespace: str
    statistic: str
    period: int
    whole_window: bool = False
    component: str | None = None
    """The inference component the query reads (dimension ``InferenceComponentName``); None: the variant."""

    def request(self, endpoint_name: str) -> dict[str, Any]:
        if self.component is not None:
            dimensions = zip(COMPONENT_METRIC_DIMENSIONS, (self.component,), strict=True)
        else:
            dimensions = zip(METRIC_DIMENSIONS, (endpoint_name, self.variant), strict=True)
        metric = {
            "Namespace": self.namespace,
            "MetricName": self.metric,
            "Dimensions": [{"Name": name, "Value": value} for name, value in dimensions],
        }
        return {
            "Id": self.id,
            "MetricStat": {"Metric": metric, "Period": self.period, "Stat": self.statistic},
            "ReturnData": True,
        }


def metric_namespaces(
    cloudwatch: Any, endpoint_name: str, *, deadline: Deadline
) -> dict[tuple[str, str], set[str]]:
    """``(metric, variant) -> namespaces`` ListMetrics shows the endpoint's metrics in."""
    found: dict[tuple[str, str], set[str]] = {}
    kwargs: dict[str, Any] = {"Dimensions": [{"Name": METRIC_DIMENSIONS[0], "Value": endpoint_name}]}
    while True:
        answer = read(cloudwatch.list_metrics, deadline=deadline, what="ListMetrics", **kwargs)
        for metric in answer.get("Metrics", []):
            dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            if set(dimensions) != set(METRIC_DIMENSIONS) or metric.get("MetricName") not in ENDPOINT_METRICS:
                continue
            key = (str(metric["MetricName"]), dimensions[METRIC_DIMENSIONS[1]])
            found.setdefault(key, set()).add(str(metric["Namespace"]))
        token = answer.get("NextToken")
        if not token:
            return found
        kwargs["NextToken"] = token


def plan_queries(
    variants: Sequence[str],
    namespaces: Mapping[tuple[str, str], set[str]],
    *,
    period: int,
    window_period: int,
    reservations: bool = False,
) -> list[MetricQuery]:
    """Every query :func:`fetch` sends for the variants, with ids ``m0``, ``m1`` ...; with
    ``reservations``, the reservation metrics of an endpoint of inference components too."""
    queries: list[MetricQuery] = []
    for variant in variants:
        for metric in RESERVATION_METRICS if reservations else ():
            for statistic in _PERCENT:
                namespace = RESERVATION_METRICS[metric][0]
                queries.append(MetricQuery(f"m{len(queries)}", variant, metric, namespace, statistic, period))
        for metric, statistics in SERIES_STATISTICS.items():
            documented = ENDPOINT_METRICS[metric][0]
            for namespace in sorted({documented} | namespaces.get((metric, variant), set())):
                for statistic in statistics:
                    queries.append(
                        MetricQuery(f"m{len(queries)}", variant, metric, namespace, statistic, period)
                    )
                for statistic in WINDOW_STATISTICS.get(metric, ()):
                    queries.append(
                        MetricQuery(
                            f"m{len(queries)}", variant, metric, namespace, statistic, window_period, True
                        )
                    )
    return queries


def plan_component_queries(
    components: Sequence[str], *, period: int, window_period: int, first: int = 0
) -> list[MetricQuery]:
    """Every query of the components' own metrics (dimension ``InferenceComponentName``), ids from
    ``m<first>`` on; ``variant`` is empty in them."""
    queries: list[MetricQuery] = []

    def add(component: str, metric: str, statistic: str, seconds: int, whole: bool) -> None:
        namespace = COMPONENT_METRICS[metric][0]
        ident = f"m{first + len(queries)}"
        queries.append(MetricQuery(ident, "", metric, namespace, statistic, seconds, whole, component))

    for component in components:
        for metric, statistics in COMPONENT_STATISTICS.items():
            for statistic in statistics:
                add(component, metric, statistic, period, False)
            for statistic in WINDOW_STATISTICS.get(metric, ()):
                add(component, metric, statistic, window_period, True)
    return queries


def _batches(queries: Sequence[MetricQuery]) -> Iterator[Sequence[MetricQuery]]:
    for start in range(0, len(queries), MAX_QUERIES):
        yield queries[start : start + MAX_QUERIES]


def fetch(
    cloudwatch: Any,
    endpoint_name: str,
    queries: Sequence[MetricQuery],
    *,
    start: datetime,
    end: datetime,
    deadline: Deadline,
) -> dict[str, list[tuple[datetime, float]]]:
    """Query id -> ``(timestamp, value)`` pairs, oldest first: GetMetricData in batches of
    :data:`MAX_QUERIES`, every page followed."""
    values: dict[str, list[tuple[datetime, float]]] = {query.id: [] for query in queries}
    calls = 0
    for batch in _batches(queries):
        kwargs: dict[str, Any] = {
            "MetricDataQueries": [query.request(endpoint_name) for query in batch],
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampAscending",
        }
        while True:
            answer = read(cloudwatch.get_metric_data, deadline=deadline, what="GetMetricData", **kwargs)
            calls += 1
            for result in answer.get("MetricDataResults", []):
                pairs = zip(result.get("Timestamps", []), result.get("Values", []), strict=True)
                values.setdefault(result["Id"], []).extend(
                    (t, float(v)) for t, v in pairs if math.isfinite(v)
                )
            for message in answer.get("Messages", []):
                logger.warning("GetMetricData said: %s", message)
            token = answer.get("NextToken")
            if not token:
                break
            kwargs["NextToken"] = token
    logger.info(
        "read %d metric queries of endpoint %s in %d GetMetricData calls", len(queries), endpoint_name, calls
    )
    for found in values.values():
        found.sort(key=lambda pair: pair[0])
    return values
