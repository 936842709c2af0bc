"""What ``endpoint_status()`` reads of an endpoint of inference components: each component's state, copies,
reservation, model and autoscaling (ListInferenceComponents → DescribeInferenceComponent → DescribeModel,
Application Auto Scaling's copy-count target and policies)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import COPY_COUNT_DIMENSION, resource_id
from mme_triton._sagemaker import model_data_url_of
from mme_triton.endpoint._component_recovery import endpoint_components_described
from mme_triton.endpoint._resources import describe_or_none

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.endpoint._retry import Deadline
    from mme_triton.endpoint.status import ScalingStatus

__all__ = ["ComponentStatus", "read_components"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ComponentStatus:
    """One inference component of the endpoint.

    Attributes:
        name, status: the component's name and ``InferenceComponentStatus``.
        failure_reason: SageMaker's ``FailureReason``, if any.
        model_name: the SageMaker model it serves; artifact_url: that model's archive.
        memory_mb, cpus, accelerators: what each copy reserves.
        current_copy_count, desired_copy_count: SageMaker's counts.
        scaling: its autoscaling registration (``target_invocations_per_instance`` is then the target
            invocations per copy), ``None`` without one; scaling_error: why it could not be read.
    """

    name: str
    status: str
    failure_reason: str | None
    model_name: str | None
    artifact_url: str | None
    memory_mb: int | None
    cpus: float | None
    accelerators: float | None
    current_copy_count: int | None
    desired_copy_count: int | None
    scaling: ScalingStatus | None = None
    scaling_error: str | None = None

    def __str__(self) -> str:
        copies = f"{_count(self.current_copy_count)}/{_count(self.desired_copy_count)}"
        reserved = f"{_count(self.memory_mb)} MiB, {_count(self.cpus)} cores"
        if self.accelerators:
            reserved += f", {self.accelerators:g} accelerators"
        reason = f" ({self.failure_reason})" if self.failure_reason else ""
        lines = [
            f"  component {self.name}: {self.status}{reason}, {copies} copies (current/desired), {reserved} "
            f"a copy, model {self.model_name or '?'}"
        ]
        if self.artifact_url:
            lines.append(f"    archive        {self.artifact_url}")
        if self.scaling_error is not None:
            lines.append(f"    autoscaling    unknown (cannot be read: {self.scaling_error})")
        elif self.scaling is None:
            lines.append("    autoscaling    none")
        else:
            target = self.scaling.target_invocations_per_instance
            tracking = f", target {target:g} invocations/copy/min" if target is not None else ""
            lines.append(
                f"    autoscaling    {self.scaling.min_capacity}-{self.scaling.max_capacity} copies{tracking}"
            )
        return "\n".join(lines)


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def read_components(
    sagemaker: SageMakerClient, scaling_client: Any, endpoint_name: str, deadline: Deadline
) -> tuple[ComponentStatus, ...]:
    """The endpoint's components, by name. An autoscaling registration that cannot be read is reported as
    unknown (``scaling_error``) rather than failing the whole look."""
    from mme_triton.endpoint.status import read_scaling

    found = []
    for described in endpoint_components_described(sagemaker, endpoint_name, deadline):
        name = str(described["InferenceComponentName"])
        specification: Any = described.get("Specification", {})
        requirements = specification.get("ComputeResourceRequirements", {})
        runtime: Any = described.get("RuntimeConfig", {})
        model_name = specification.get("ModelName")
        model = (
            describe_or_none(sagemaker.describe_model, deadline=deadline, ModelName=model_name)
            if model_name
            else None
        )
        rid = resource_id(name)
        scaling, scaling_error = read_scaling(scaling_client, rid, deadline, dimension=COPY_COUNT_DIMENSION)
        accelerators = requirements.get("NumberOfAcceleratorDevicesRequired")
        found.append(
            ComponentStatus(
                name=name,
                status=str(described.get("InferenceComponentStatus")),
                failure_reason=described.get("FailureReason"),
                model_name=model_name,
                artifact_url=model_data_url_of(model) if model is not None else None,
                memory_mb=requirements.get("MinMemoryRequiredInMb"),
                cpus=requirements.get("NumberOfCpuCoresRequired"),
                accelerators=float(accelerators) if accelerators is not None else None,
                current_copy_count=runtime.get("CurrentCopyCount"),
                desired_copy_count=runtime.get("DesiredCopyCount"),
                scaling=scaling,
                scaling_error=scaling_error,
            )
        )
    return tuple(sorted(found, key=lambda c: c.name))
