"""SageMaker's rules for inference components, each defined once: the library's stages (and the embedded
stack) import them from here, as they import an MME's rules from :mod:`mme_triton._sagemaker`.

An inference component (IC) is one model hosted on an endpoint whose production variant names no model:
SageMaker places *copies* of it on the variant's instances, each copy reserving the memory, CPU cores and
accelerators the component asks for, and routes ``InvokeEndpoint`` calls that name the component
(``InferenceComponentName``) to one of its copies. What is written here comes from botocore's service
models (``sagemaker``, ``sagemaker-runtime``, ``application-autoscaling``) and AWS's documentation; where
only a field report exists, the constant says so.

- the component name (:func:`component_name_problem`, :func:`check_component_name`) and the header that
  carries it (:data:`INFERENCE_COMPONENT_HEADER`);
- ``ComputeResourceRequirements``' lower bounds (:data:`MIN_MEMORY_MB`, :data:`MIN_CPU_CORES`,
  :data:`MIN_ACCELERATORS`) and the copy count's (:data:`MIN_COPY_COUNT`, :data:`MIN_CREATE_COPY_COUNT`);
- the component's statuses (:data:`COMPONENT_STATUSES`, :data:`COMPONENT_IN_PROGRESS`);
- an endpoint config made for components (:func:`hosts_components`);
- Application Auto Scaling's view of a component (:func:`scaling_resource_id`,
  :data:`SCALABLE_DIMENSION`, :data:`SCALING_METRIC`) and the alarm that brings one back from zero copies
  (:data:`NO_CAPACITY_METRIC`);
- the CloudWatch metrics SageMaker publishes per component (:data:`COMPONENT_METRICS`,
  :data:`COMPONENT_DIMENSION`) and per variant of a component endpoint (:data:`RESERVATION_METRICS`).

Only the standard library is imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from mme_triton._sagemaker import INSTANCE_METRICS_NAMESPACE, METRICS_NAMESPACE

__all__ = [
    "COMPONENT_DIMENSION",
    "COMPONENT_IN_PROGRESS",
    "COMPONENT_METRICS",
    "COMPONENT_METRICS_NAMESPACE",
    "COMPONENT_NAME_MAX",
    "COMPONENT_NAME_PATTERN",
    "COMPONENT_STATUSES",
    "INFERENCE_COMPONENT_HEADER",
    "MIN_ACCELERATORS",
    "MIN_COPY_COUNT",
    "MIN_CPU_CORES",
    "MIN_CREATE_COPY_COUNT",
    "MIN_MEMORY_MB",
    "NO_CAPACITY_METRIC",
    "RESERVATION_METRICS",
    "SCALABLE_DIMENSION",
    "SCALING_METRIC",
    "check_component_name",
    "component_name_problem",
    "hosts_components",
    "scaling_resource_id",
]

INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
"""The HTTP header that carries InvokeEndpoint's ``InferenceComponentName`` (botocore's
``sagemaker-runtime`` model)."""

COMPONENT_NAME_MAX = 63
"""An inference component's name has at most 63 characters."""

COMPONENT_NAME_PATTERN = r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$"
"""The pattern InvokeEndpoint and CreateInferenceComponent give the name (letters, digits and hyphens, a
letter or digit at both ends)."""

MIN_MEMORY_MB = 128
"""``MinMemoryRequiredInMb`` (required) is at least 128 (MiB)."""

MIN_CPU_CORES = 0.25
"""``NumberOfCpuCoresRequired`` is at least 0.25 cores."""

MIN_ACCELERATORS = 1
"""``NumberOfAcceleratorDevicesRequired``, when given, is at least 1."""

MIN_COPY_COUNT = 0
"""``RuntimeConfig.CopyCount`` is at least 0 in the API (UpdateInferenceComponentRuntimeConfig parks a
component at zero copies; Application Auto Scaling takes it there with ``MinCapacity`` 0)."""

MIN_CREATE_COPY_COUNT = 1
"""CreateInferenceComponent refuses a ``CopyCount`` of 0 ("Inference components copy count an integer larger
than 0", reported from AWS in github.com/stdapi-ai/stdapi.ai issue 43, where botocore's model allows 0): a
component is created with at least one copy and scaled to zero afterwards."""

COMPONENT_STATUSES = ("InService", "Creating", "Updating", "Failed", "Deleting")
"""``InferenceComponentStatus`` values."""

COMPONENT_IN_PROGRESS = frozenset({"Creating", "Updating", "Deleting"})
"""Statuses a component leaves by itself."""

SCALABLE_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
"""Application Auto Scaling's dimension of a component's copy count."""

SCALING_METRIC = "SageMakerInferenceComponentInvocationsPerCopy"
"""The predefined metric of target tracking on a component: invocations per copy per minute."""

NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
"""The ``AWS/SageMaker`` metric SageMaker emits, per component (:data:`COMPONENT_DIMENSION`), for a request
no copy could serve: the alarm on it is what brings a component back from zero copies
(docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html)."""

COMPONENT_METRICS_NAMESPACE = "/aws/sagemaker/InferenceComponents"
"""CloudWatch namespace of each component's utilization over what it reserved."""

COMPONENT_DIMENSION = "InferenceComponentName"
"""The one dimension of a component's metrics."""

COMPONENT_METRICS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        # name: (namespace, unit), as "Amazon SageMaker AI metrics in Amazon CloudWatch" lists them for the
        # InferenceComponentName dimension. One value per InvokeEndpoint request naming the component:
        "Invocations": (METRICS_NAMESPACE, "None"),
        "InvocationsPerCopy": (METRICS_NAMESPACE, "None"),  # 1 / copies of the component
        "Invocation4XXErrors": (METRICS_NAMESPACE, "None"),
        "Invocation5XXErrors": (METRICS_NAMESPACE, "None"),
        "InvocationModelErrors": (METRICS_NAMESPACE, "None"),
        "ModelLatency": (METRICS_NAMESPACE, "Microseconds"),
        "OverheadLatency": (METRICS_NAMESPACE, "Microseconds"),
        "NoCapacityInvocationFailures": (METRICS_NAMESPACE, "None"),  # a request no copy could take
        # Sampled:
        "ConcurrentRequestsPerCopy": (METRICS_NAMESPACE, "None"),
        "CPUUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),  # of its reserved cores
        "MemoryUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),  # of its reserved memory
        "GPUUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),
        "GPUMemoryUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),
    }
)
"""SageMaker's metrics of one inference component: name -> (CloudWatch namespace, unit); dimension
:data:`COMPONENT_DIMENSION`, published every minute."""

RESERVATION_METRICS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        # Per instance of a variant that hosts components (EndpointName, VariantName), 0-100 %:
        "CPUReservation": (INSTANCE_METRICS_NAMESPACE, "Percent"),  # cores the copies reserved
        "MemoryReservation": (INSTANCE_METRICS_NAMESPACE, "Percent"),
        "GPUReservation": (INSTANCE_METRICS_NAMESPACE, "Percent"),
        "CPUUtilizationNormalized": (INSTANCE_METRICS_NAMESPACE, "Percent"),
        "GPUUtilizationNormalized": (INSTANCE_METRICS_NAMESPACE, "Percent"),
        "GPUMemoryUtilizationNormalized": (INSTANCE_METRICS_NAMESPACE, "Percent"),
    }
)
"""The ``/aws/sagemaker/Endpoints`` metrics SageMaker publishes only for endpoints that host components:
how much of each instance the copies reserved, and its utilization normalized to 0-100 %."""

_NAME = re.compile(COMPONENT_NAME_PATTERN)


def component_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name an inference component, or ``None`` when SageMaker accepts it.

    Example:
        >>> component_name_problem("resnet-v2") is None
        True
        >>> component_name_problem("resnet.tar.gz")
        "an inference component's name is letters, digits and hyphens, a letter or digit at both ends"
    """
    if not isinstance(name, str):
        return f"an inference component's name must be a str, not {type(name).__name__}"
    if not name:
        return "an inference component's name must not be empty"
    if len(name) > COMPONENT_NAME_MAX:
        return f"an inference component's name has at most {COMPONENT_NAME_MAX} characters, not {len(name)}"
    if _NAME.match(name) is None:
        return "an inference component's name is letters, digits and hyphens, a letter or digit at both ends"
    return None


def check_component_name(name: str) -> str:
    """Return ``name`` if SageMaker accepts it as an inference component's name.

    Raises:
        TypeError: not a string.
        ValueError: it breaks the rule; the message says how.

    Example:
        >>> check_component_name("linear")
        'linear'
    """
    problem = component_name_problem(name)
    if problem is None:
        return name
    if not isinstance(name, str):
        raise TypeError(problem)
    shown = name if len(name) <= 80 else name[:77] + "..."
    raise ValueError(f"{shown!r} cannot name an inference component: {problem} ({COMPONENT_NAME_PATTERN})")


def hosts_components(endpoint_config: Mapping[str, Any]) -> bool:
    """Whether a DescribeEndpointConfig answer is a config for inference components: variants that name
    no model (SageMaker refuses components on an endpoint whose variant serves a model, "Inference
    Components are not supported in this Endpoint").

    Example:
        >>> hosts_components({"ProductionVariants": [{"VariantName": "AllTraffic"}]})
        True
        >>> hosts_components({"ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": "m"}]})
        False
    """
    variants = [v for v in endpoint_config.get("ProductionVariants") or () if isinstance(v, Mapping)]
    return bool(variants) and not any(v.get("ModelName") for v in variants)


def scaling_resource_id(component_name: str) -> str:
    """Application Auto Scaling's ResourceId of an inference component.

    Example:
        >>> scaling_resource_id("linear")
        'inference-component/linear'
    """
    return f"inference-component/{component_name}"
