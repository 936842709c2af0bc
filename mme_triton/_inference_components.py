"""Inference components: SageMaker's rules for them, each defined once, and how copies are placed.

An endpoint whose production variant names no model hosts *inference components* (ICs): each a model with
reserved memory, CPU cores and accelerators per copy and a copy count (``CreateInferenceComponent``,
``UpdateInferenceComponentRuntimeConfig``), invoked with ``InferenceComponentName``. The library's deployer,
its client, its metrics reader and the embedded stack read the names, limits and metrics here: the
component's name (:func:`check_component_name`) and header, the resource minimums, the copy count
(:data:`MIN_CREATE_COPY_COUNT`), the statuses, an endpoint config made for components
(:func:`hosts_components`), Application Auto Scaling's view of a component, the metrics, and the library's
two words for how an endpoint hosts its models (:data:`HOSTINGS`).

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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from mme_triton._sagemaker import INSTANCE_METRICS_NAMESPACE, METRICS_NAMESPACE

if TYPE_CHECKING:
    from mme_triton.endpoint.instance_specs import InstanceType

__all__ = [
    "COMPONENT_IN_PROGRESS",
    "COMPONENT_METRICS",
    "COMPONENT_METRICS_NAMESPACE",
    "COMPONENT_METRIC_DIMENSIONS",
    "COMPONENT_NAME_MAX",
    "COMPONENT_NAME_PATTERN",
    "COMPONENT_STATUSES",
    "COPY_COUNT_DIMENSION",
    "HOSTINGS",
    "INFERENCE_COMPONENT_HEADER",
    "INVOCATIONS_PER_COPY",
    "MIN_ACCELERATORS",
    "MIN_COPY_COUNT",
    "MIN_CPU_CORES",
    "MIN_CREATE_COPY_COUNT",
    "MIN_MEMORY_MB",
    "NO_CAPACITY_METRIC",
    "RESERVATION_METRICS",
    "RESOURCE_ID_PREFIX",
    "ROUTING_STRATEGIES",
    "Hosting",
    "Resources",
    "check_component_name",
    "component_name_problem",
    "component_of_resource_id",
    "hosts_components",
    "instance_resources",
    "place_copy",
    "required_resources",
    "resource_id",
]

Hosting = Literal["mme", "inference-components"]
HOSTINGS: tuple[Hosting, ...] = ("mme", "inference-components")
"""How an endpoint hosts its models, in the library's words: ``"mme"``, a multi-model endpoint (one model,
``Mode=MultiModel``, requests name a ``TargetModel``), or ``"inference-components"`` (a variant with no
model, one inference component per model, requests name an ``InferenceComponentName``)."""

INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
"""The HTTP header that carries InvokeEndpoint's ``InferenceComponentName`` (botocore's service model)."""

COMPONENT_NAME_MAX = 63
"""An inference component's name has at most 63 characters."""

COMPONENT_NAME_PATTERN = r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$"
"""The pattern InvokeEndpoint and CreateInferenceComponent give the name (letters, digits and hyphens, a
letter or digit at both ends)."""

MIN_MEMORY_MB = 128
"""``ComputeResourceRequirements.MinMemoryRequiredInMb`` (and ``MaxMemoryRequiredInMb``) are at least 128."""
MIN_CPU_CORES = 0.25
"""``NumberOfCpuCoresRequired`` is at least 0.25."""
MIN_ACCELERATORS = 1.0
"""``NumberOfAcceleratorDevicesRequired`` is at least 1 when given."""

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

RESOURCE_ID_PREFIX = "inference-component/"
"""Application Auto Scaling's ``ResourceId`` of a component is this prefix and the component's name."""
COPY_COUNT_DIMENSION: Final = "sagemaker:inference-component:DesiredCopyCount"
"""Application Auto Scaling's ``ScalableDimension`` of a component's copy count."""
INVOCATIONS_PER_COPY: Final = "SageMakerInferenceComponentInvocationsPerCopy"
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
"""The ``/aws/sagemaker/Endpoints`` metrics SageMaker publishes only for endpoints that host components
("SageMaker AI endpoint metrics"): how much of each instance the copies reserved, and its utilization
normalized to 0-100 %."""

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
