"""Inference components: SageMaker's rules for them, each defined once, and how copies are placed.

An endpoint whose production variant names no model hosts *inference components* (ICs): each a model with
reserved memory, CPU cores and accelerators per copy and a copy count (``CreateInferenceComponent``,
``UpdateInferenceComponentRuntimeConfig``), invoked with ``InferenceComponentName``. The library's deployer,
its client, its metrics reader and the embedded stack read the names, limits and metrics here.

**Placing a copy** (:func:`place_copy`). AWS documents that SageMaker places each copy on an instance with
room for its ``ComputeResourceRequirements`` ("the compute resources that SageMaker reserves for each copy")
and launches instances for copies that fit no instance when ``ManagedInstanceScaling`` is enabled, within its
``MaxInstanceCount``; it does not document which instance a copy goes to, nor how much of an instance is
reserved for SageMaker's own agents. Decided once here, for the embedded stack and the capacity planner:

- an instance offers its host memory less :func:`~mme_triton.endpoint.instance_specs.default_reserved_bytes`
  of a CPU host (what the operating system and SageMaker's agents keep), its vCPUs as CPU cores, and its
  GPUs as accelerators (:func:`instance_resources`);
- a copy fits an instance whose free resources cover its ``MinMemoryRequiredInMb``,
  ``NumberOfCpuCoresRequired`` (0 when not given) and ``NumberOfAcceleratorDevicesRequired`` (0 when not
  given);
- among the instances it fits, ``SchedulingConfig.PlacementStrategy`` ``SPREAD`` (the stack's default)
  takes the one with the fewest copies of the same component, then the most free memory; ``BINPACK`` the
  one with the least free memory; ties go to the oldest instance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from mme_triton._sagemaker import METRICS_NAMESPACE

if TYPE_CHECKING:
    from mme_triton.endpoint.instance_specs import InstanceType

__all__ = [
    "COMPONENT_METRICS",
    "COMPONENT_METRICS_NAMESPACE",
    "COMPONENT_METRIC_DIMENSIONS",
    "COPY_COUNT_DIMENSION",
    "INFERENCE_COMPONENT_HEADER",
    "INVOCATIONS_PER_COPY",
    "MIN_ACCELERATORS",
    "MIN_CPU_CORES",
    "MIN_MEMORY_MB",
    "NO_CAPACITY_METRIC",
    "RESOURCE_ID_PREFIX",
    "ROUTING_STRATEGIES",
    "Resources",
    "component_of_resource_id",
    "instance_resources",
    "place_copy",
    "required_resources",
    "resource_id",
]

INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
"""The HTTP header that carries InvokeEndpoint's ``InferenceComponentName`` (botocore's service model)."""

MIN_MEMORY_MB = 128
"""``ComputeResourceRequirements.MinMemoryRequiredInMb`` (and ``MaxMemoryRequiredInMb``) are at least 128."""
MIN_CPU_CORES = 0.25
"""``NumberOfCpuCoresRequired`` is at least 0.25."""
MIN_ACCELERATORS = 1.0
"""``NumberOfAcceleratorDevicesRequired`` is at least 1 when given."""

RESOURCE_ID_PREFIX = "inference-component/"
"""Application Auto Scaling's ``ResourceId`` of a component is this prefix and the component's name."""
COPY_COUNT_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
"""Application Auto Scaling's ``ScalableDimension`` of a component's copy count."""
INVOCATIONS_PER_COPY = "SageMakerInferenceComponentInvocationsPerCopy"
"""The predefined metric of a target tracking policy on a component (``InvocationsPerCopy``, Sum per
minute)."""

ROUTING_STRATEGIES = ("LEAST_OUTSTANDING_REQUESTS", "RANDOM")
"""``RoutingConfig.RoutingStrategy`` values that route among copies (the default is
``LEAST_OUTSTANDING_REQUESTS``)."""

COMPONENT_METRICS_NAMESPACE = "/aws/sagemaker/InferenceComponents"
"""CloudWatch namespace of each component's utilization, normalized by what each copy reserved."""
COMPONENT_METRIC_DIMENSIONS = ("InferenceComponentName",)
"""The dimensions of a component's metrics: one series per component."""
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
"""Published when a request reaches a component with no copy to serve it (the scale-from-zero alarm's
metric, AWS's "Scale an endpoint to zero instances")."""

COMPONENT_METRICS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        # name: (namespace, unit), as "SageMaker AI inference component metrics" (Amazon SageMaker AI
        # metrics in Amazon CloudWatch) and the scale-to-zero guide list them. One value per request:
        "Invocations": (METRICS_NAMESPACE, "None"),
        "InvocationsPerCopy": (METRICS_NAMESPACE, "None"),  # 1 / copies when the request came
        "Invocation4XXErrors": (METRICS_NAMESPACE, "None"),
        "Invocation5XXErrors": (METRICS_NAMESPACE, "None"),
        "InvocationModelErrors": (METRICS_NAMESPACE, "None"),
        "ModelLatency": (METRICS_NAMESPACE, "Microseconds"),
        "OverheadLatency": (METRICS_NAMESPACE, "Microseconds"),
        NO_CAPACITY_METRIC: (METRICS_NAMESPACE, "None"),  # 1 per request no copy could serve
        # One value per copy and minute, in percent of what the copy reserved:
        "CPUUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),
        "MemoryUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),
        "GPUUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),
        "GPUMemoryUtilizationNormalized": (COMPONENT_METRICS_NAMESPACE, "Percent"),
    }
)
"""A component's CloudWatch metrics: name -> (namespace, unit); dimensions
:data:`COMPONENT_METRIC_DIMENSIONS`."""


def resource_id(component_name: str) -> str:
    """Application Auto Scaling's ``ResourceId`` of a component.

    Example:
        >>> resource_id("linear-ic")
        'inference-component/linear-ic'
    """
    return RESOURCE_ID_PREFIX + component_name


def component_of_resource_id(value: str) -> str | None:
    """The component a ``ResourceId`` names, ``None`` when it names none.

    Example:
        >>> component_of_resource_id("inference-component/linear-ic"), component_of_resource_id("endpoint/e")
        ('linear-ic', None)
    """
    if not value.startswith(RESOURCE_ID_PREFIX):
        return None
    name = value[len(RESOURCE_ID_PREFIX) :]
    return name if name and "/" not in name else None


@dataclass(frozen=True)
class Resources:
    """Memory (MiB, as the API counts it), CPU cores and accelerators: what an instance offers or a copy
    reserves."""

    memory_mb: float
    cores: float = 0.0
    accelerators: float = 0.0

    def covers(self, need: Resources) -> bool:
        """Whether ``need`` fits in these resources."""
        return (
            need.memory_mb <= self.memory_mb + 1e-9
            and need.cores <= self.cores + 1e-9
            and need.accelerators <= self.accelerators + 1e-9
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.memory_mb - other.memory_mb, self.cores - other.cores, self.accelerators - other.accelerators
        )

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.memory_mb + other.memory_mb, self.cores + other.cores, self.accelerators + other.accelerators
        )


def instance_resources(instance_type: str | InstanceType) -> Resources:
    """What one instance of ``instance_type`` (a name, or an
    :class:`~mme_triton.endpoint.instance_specs.InstanceType`) offers its components' copies.

    Raises:
        ValueError: an instance type the table of :mod:`mme_triton.endpoint.instance_specs` lacks.

    Example:
        >>> offered = instance_resources("ml.m5.xlarge")  # 16 GiB, 4 vCPUs
        >>> round(offered.memory_mb), offered.cores, offered.accelerators
        (15104, 4.0, 0.0)
    """
    from mme_triton.endpoint.instance_specs import MiB, default_reserved_bytes
    from mme_triton.endpoint.instance_specs import instance_type as spec_of

    spec = spec_of(instance_type)
    reserved = default_reserved_bytes(memory_bytes=spec.memory_bytes, gpus=0, gpu_memory_bytes=0)
    return Resources((spec.memory_bytes - reserved) / MiB, float(spec.vcpus), float(spec.gpus))


def required_resources(requirements: Mapping[str, object]) -> Resources:
    """What one copy reserves, from ``ComputeResourceRequirements``.

    Example:
        >>> required_resources({"MinMemoryRequiredInMb": 1024, "NumberOfCpuCoresRequired": 0.5})
        Resources(memory_mb=1024.0, cores=0.5, accelerators=0.0)
    """

    def number(key: str) -> float:
        value = requirements.get(key)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0

    return Resources(
        number("MinMemoryRequiredInMb"),
        number("NumberOfCpuCoresRequired"),
        number("NumberOfAcceleratorDevicesRequired"),
    )


def place_copy(
    free: Sequence[Resources], same_copies: Sequence[int], need: Resources, *, strategy: str = "SPREAD"
) -> int | None:
    """The index of the instance a copy goes to, ``None`` when it fits none.

    Parameters:
        free: each instance's free resources (oldest instance first).
        same_copies: how many copies of the same component each instance holds.
        need: what the copy reserves.
        strategy: ``SchedulingConfig.PlacementStrategy``: ``SPREAD`` or ``BINPACK``.

    Example:
        >>> free = [Resources(4096, 4), Resources(8192, 4)]
        >>> place_copy(free, [0, 0], Resources(1024, 1)), place_copy(free, [0, 1], Resources(1024, 1))
        (1, 0)
        >>> place_copy(free, [0, 0], Resources(1024, 1), strategy="BINPACK")
        0
        >>> place_copy(free, [0, 0], Resources(10_000, 1)) is None
        True
    """
    fitting = [index for index, room in enumerate(free) if room.covers(need)]
    if not fitting:
        return None
    if strategy == "BINPACK":
        return min(fitting, key=lambda index: (free[index].memory_mb, index))
    return min(fitting, key=lambda index: (same_copies[index], -free[index].memory_mb, index))
