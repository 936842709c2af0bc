"""What one inference component publishes, under SageMaker's metric names, through the stack's recorder.

:class:`ComponentMetricsSink` is what the InvokeEndpoint route calls for a component (one per component):
each request a copy served publishes the component's invocation metrics (dimension ``InferenceComponentName``,
:data:`mme_triton._inference_components.COMPONENT_METRICS`) and the endpoint's variant-level ones
(``EndpointName``, ``VariantName``: ``Invocations``, ``InvocationsPerInstance``, the error counts and the
latencies, as for any endpoint); a request no copy could serve publishes ``NoCapacityInvocationFailures``;
each copy's utilization is a gauge per copy in ``/aws/sagemaker/InferenceComponents``.

Example::

    sink = ComponentMetricsSink(recorder, "linear-ic", "ic-endpoint", "AllTraffic")
    sink.invocation(status=200, model_seconds=0.004, overhead_seconds=0.001, copies=2, instances=1)
    sink.no_capacity()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mme_triton._inference_components import (
    COMPONENT_METRIC_DIMENSIONS,
    COMPONENT_METRICS,
    NO_CAPACITY_METRIC,
)
from mme_triton._sagemaker import ENDPOINT_METRICS, METRIC_DIMENSIONS
from mme_triton.local.aws._sink_hooks import PublishHooks
from mme_triton.local.aws.metrics import MetricsRecorder, Series

__all__ = ["ComponentMetricsSink", "component_sinks"]

_VARIANT_METRICS = (
    "Invocations",
    "Invocation4XXErrors",
    "Invocation5XXErrors",
    "InvocationModelErrors",
    "ModelLatency",
    "OverheadLatency",
)


class ComponentMetricsSink(PublishHooks):
    """The metrics of one inference component (see the module's docstring); durations in seconds, published
    in microseconds as SageMaker publishes them."""

    def __init__(
        self, recorder: MetricsRecorder, component_name: str, endpoint_name: str, variant_name: str
    ) -> None:
        self.recorder = recorder
        self.component_name = component_name
        self.dimensions = dict(zip(COMPONENT_METRIC_DIMENSIONS, (component_name,), strict=True))
        own = tuple(self.dimensions.items())
        variant = tuple(zip(METRIC_DIMENSIONS, (endpoint_name, variant_name), strict=True))
        self._series: dict[str, Series] = {
            metric: (namespace, metric, own, unit) for metric, (namespace, unit) in COMPONENT_METRICS.items()
        }
        self._variant: dict[str, Series] = {
            metric: (ENDPOINT_METRICS[metric][0], metric, variant, ENDPOINT_METRICS[metric][1])
            for metric in (*_VARIANT_METRICS, "InvocationsPerInstance")
        }
        self._copies: dict[str, set[str]] = {}  # copy -> the gauges it set
        self._hooks: list[Callable[[], None]] = []

    def invocation(
        self,
        *,
        status: int | None,
        model_seconds: float | None,
        overhead_seconds: float,
        copies: int,
        instances: int,
    ) -> None:
        """One request a copy served (or tried to): ``status`` is the container's (``None``: no answer);
        ``copies``, ``instances``: the component's copies and the endpoint's instances when it came
        (``InvocationsPerCopy`` 1 / copies, ``InvocationsPerInstance`` 1 / instances)."""
        errors = {
            "Invocations": 1.0,
            "Invocation4XXErrors": 1.0 if status is not None and 400 <= status < 500 else 0.0,
            "Invocation5XXErrors": 1.0 if status is not None and 500 <= status < 600 else 0.0,
            "InvocationModelErrors": 0.0 if status is not None and 200 <= status < 300 else 1.0,
            "OverheadLatency": overhead_seconds * 1e6,
        }
        if model_seconds is not None:
            errors["ModelLatency"] = model_seconds * 1e6
        samples = [(self._series[name], value) for name, value in errors.items()]
        samples += [(self._variant[name], value) for name, value in errors.items()]
        samples.append((self._series["InvocationsPerCopy"], 1.0 / max(1, copies)))
        samples.append((self._variant["InvocationsPerInstance"], 1.0 / max(1, instances)))
        self.recorder.record_many(samples)

    def no_capacity(self) -> None:
        """A request the component had no copy to serve (``NoCapacityInvocationFailures``)."""
        self.recorder.record_many([(self._series[NO_CAPACITY_METRIC], 1.0)])

    def utilization(
        self, *, cpu_percent: float | None = None, memory_percent: float | None = None, copy: str = ""
    ) -> None:
        """``copy``'s utilization now, in percent of what it reserved (one sample per copy and window)."""
        for metric, value in (
            ("CPUUtilizationNormalized", cpu_percent),
            ("MemoryUtilizationNormalized", memory_percent),
        ):
            if value is None:
                continue
            namespace, unit = COMPONENT_METRICS[metric]
            self.recorder.set_gauge(
                namespace, metric, value, unit=unit, dimensions=self.dimensions, instance=copy
            )
            self._copies.setdefault(copy, set()).add(metric)

    def copy_gone(self, copy: str) -> None:
        """``copy`` stopped: its gauges stop."""
        for metric in self._copies.pop(copy, set()):
            namespace, unit = COMPONENT_METRICS[metric]
            self.recorder.set_gauge(
                namespace, metric, None, unit=unit, dimensions=self.dimensions, instance=copy
            )

    def close(self) -> None:
        """The component left: its gauges and hooks stop (what it recorded is still published)."""
        self._stop_hooks()
        for copy in list(self._copies):
            self.copy_gone(copy)


def component_sinks(recorder: MetricsRecorder) -> Callable[[str, str, str], Any]:
    """``(component, endpoint, variant) -> ComponentMetricsSink``: the factory the route is given."""

    def make(component_name: str, endpoint_name: str, variant_name: str) -> ComponentMetricsSink:
        return ComponentMetricsSink(recorder, component_name, endpoint_name, variant_name)

    return make
