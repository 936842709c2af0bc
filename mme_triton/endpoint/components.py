"""``InferenceComponent``: one model of an endpoint of inference components, with what its copies reserve.

An inference component is SageMaker's other way to host several models on one endpoint: the endpoint's
variant names no model; each component names one (a single-model Triton container serving one archive)
and reserves, per copy, memory, CPU cores and accelerators on an instance; SageMaker places its copies
and scales them per component. The same model directories that go to a multi-model endpoint go to
components: :func:`~mme_triton.endpoint.deploy_components.deploy_inference_components` takes a list of
these.

Every value is checked here against the limits of CreateInferenceComponent (botocore's ``sagemaker``
model; :mod:`mme_triton._inference_components`), so a wrong one fails before anything is created.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import (
    MIN_ACCELERATORS,
    MIN_COPY_COUNT,
    MIN_CPU_CORES,
    MIN_MEMORY_MB,
    check_component_name,
)
from mme_triton._sagemaker import parse_s3_url
from mme_triton._units import parse_size
from mme_triton.endpoint.component_scaling import ComponentAutoScaling
from mme_triton.endpoint.environment import TritonEnvironment

if TYPE_CHECKING:
    from mme_triton.artifact.package import Artifact

__all__ = ["InferenceComponent", "artifact_url_parts", "is_artifact_url"]

_MiB = 1 << 20


def is_artifact_url(model: object) -> bool:
    """Whether ``model`` is given as the URL of an uploaded archive (``s3://bucket/prefix/name.tar.gz``)
    rather than a directory: a local path never holds ``://``."""
    return isinstance(model, str) and "://" in model


def artifact_url_parts(url: str) -> tuple[str, str]:
    """``(prefix URL, archive name)`` of an uploaded archive's URL.

    Raises:
        ValueError: not an ``s3://`` URL of a ``.tar.gz`` object directly under a prefix.

    Example:
        >>> artifact_url_parts("s3://models/ic/linear-0123456789ab.tar.gz")
        ('s3://models/ic/', 'linear-0123456789ab.tar.gz')
    """
    from mme_triton.artifact.package import check_artifact_name

    prefix, _, name = url.rpartition("/")
    try:
        bucket, key_prefix = parse_s3_url(prefix + "/")
        check_artifact_name(name)
    except ValueError as exc:
        raise ValueError(
            f"{url!r} is not the URL of an uploaded model archive (s3://bucket/prefix/<name>.tar.gz): {exc}"
        ) from None
    return f"s3://{bucket}/{key_prefix}", name


def _memory_mb(memory: str | int) -> int:
    if isinstance(memory, float) and not float(memory).is_integer():
        raise ValueError(f"memory must be whole bytes or a size such as '2GiB', got {memory!r}")
    size = parse_size(memory, "memory")
    mb = math.ceil(size / _MiB)
    if mb < MIN_MEMORY_MB:
        bare = " (a bare number is bytes: write '2GiB' or '512MiB')" if not isinstance(memory, str) else ""
        raise ValueError(
            f"memory {memory!r} is {size:,} bytes; an inference component reserves at least "
            f"{MIN_MEMORY_MB} MiB per copy (MinMemoryRequiredInMb >= {MIN_MEMORY_MB}){bare}"
        )
    return mb


@dataclass(frozen=True)
class InferenceComponent:
    """One model of an endpoint of inference components, and what each of its copies reserves.

    Attributes:
        name: the component's name, which requests name (``client.infer(name, ...)``, InvokeEndpoint's
            ``InferenceComponentName``): 1-63 letters, digits and hyphens, unique in the account and
            region.
        model: a model directory (validated, packaged as ``<directory>-<content hash>.tar.gz`` and
            uploaded under the deployment's ``model_data_url``, so that changed content is a new archive
            and a new component model), an :class:`~mme_triton.artifact.package.Artifact` (uploaded
            there under its own name), an :class:`~mme_triton.artifact.s3.UploadedArtifact`, or the
            ``s3://.../<name>.tar.gz`` URL of an archive already uploaded (used where it is).
        memory: memory reserved per copy (``MinMemoryRequiredInMb``): ``"1GiB"``, ``"512MiB"``; a bare
            number is bytes. At least 128 MiB; rounded up to whole MiB.
        cpus: CPU cores reserved per copy (``NumberOfCpuCoresRequired``), at least 0.25.
        accelerators: GPUs per copy (``NumberOfAcceleratorDevicesRequired``), None for none (a CPU
            instance); at least 1.
        copies: the copy count to create the component with (``RuntimeConfig.CopyCount``), and to set on
            a re-run when it has no ``autoscaling``. SageMaker creates a component with at least one copy;
            0 parks an existing component (no copy, no request served).
        environment: the container's Environment for this component (a :class:`TritonEnvironment` or a
            mapping, None removing a variable), over the deployment's ``environment`` and the shared-memory
            defaults; validated as for a single-model Triton container.
        autoscaling: the component's :class:`~mme_triton.endpoint.component_scaling.ComponentAutoScaling`
            (None: none, and a re-run removes one this library made). With it, ``copies`` is only the
            count a new component starts with: autoscaling owns the count afterwards.

    Raises:
        ValueError, TypeError: a value SageMaker would refuse, with the rule it breaks.

    Example::

        InferenceComponent("resnet", "model_repository/resnet", memory="4GiB", cpus=2, accelerators=1)
    """

    name: str
    model: str | os.PathLike[str] | Artifact
    _: KW_ONLY
    memory: str | int = "1GiB"
    cpus: float = 1
    accelerators: int | None = None
    copies: int = 1
    environment: TritonEnvironment | Mapping[str, str | None] | None = None
    autoscaling: ComponentAutoScaling | None = None

    def __post_init__(self) -> None:
        from mme_triton.artifact.package import Artifact

        check_component_name(self.name)
        model = self.model
        if not isinstance(model, str | os.PathLike | Artifact):
            raise TypeError(
                f"InferenceComponent {self.name!r}: model must be a model directory, an Artifact or an "
                f"s3:// URL of an uploaded archive, got {type(model).__name__}"
            )
        if is_artifact_url(model):
            artifact_url_parts(str(model))
        _memory_mb(self.memory)
        cpus = self.cpus
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not math.isfinite(cpus):
            raise TypeError(f"InferenceComponent {self.name!r}: cpus must be a number, got {cpus!r}")
        if cpus < MIN_CPU_CORES:
            raise ValueError(
                f"InferenceComponent {self.name!r}: cpus must be >= {MIN_CPU_CORES} "
                f"(NumberOfCpuCoresRequired), got {cpus}"
            )
        accelerators = self.accelerators
        if accelerators is not None:
            if isinstance(accelerators, bool) or not isinstance(accelerators, int):
                raise TypeError(
                    f"InferenceComponent {self.name!r}: accelerators must be an int or None, "
                    f"got {accelerators!r}"
                )
            if accelerators < MIN_ACCELERATORS:
                raise ValueError(
                    f"InferenceComponent {self.name!r}: accelerators must be >= {MIN_ACCELERATORS:g} "
                    f"(NumberOfAcceleratorDevicesRequired) or None for none, got {accelerators}"
                )
        copies = self.copies
        if isinstance(copies, bool) or not isinstance(copies, int):
            raise TypeError(f"InferenceComponent {self.name!r}: copies must be an int, got {copies!r}")
        if copies < MIN_COPY_COUNT:
            raise ValueError(
                f"InferenceComponent {self.name!r}: copies must be >= {MIN_COPY_COUNT}, got {copies}"
            )
        environment = self.environment
        if environment is not None and not isinstance(environment, TritonEnvironment | Mapping):
            raise TypeError(
                f"InferenceComponent {self.name!r}: environment must be a TritonEnvironment or a mapping, "
                f"got {type(environment).__name__}"
            )
        scaling = self.autoscaling
        if scaling is not None:
            if not isinstance(scaling, ComponentAutoScaling):
                raise TypeError(
                    f"InferenceComponent {self.name!r}: autoscaling must be a ComponentAutoScaling, "
                    f"got {type(scaling).__name__}"
                )
            if not scaling.min_copies <= copies <= scaling.max_copies:
                raise ValueError(
                    f"InferenceComponent {self.name!r}: copies {copies} is outside its autoscaling's "
                    f"[{scaling.min_copies}, {scaling.max_copies}]"
                )

    @property
    def memory_mb(self) -> int:
        """The memory reserved per copy in MiB, as CreateInferenceComponent takes it."""
        return _memory_mb(self.memory)

    def compute_resource_requirements(self) -> dict[str, Any]:
        """``ComputeResourceRequirements`` as CreateInferenceComponent takes them.

        Example:
            >>> linear = InferenceComponent("linear", "repo/linear", memory="512MiB", cpus=0.5)
            >>> linear.compute_resource_requirements()
            {'MinMemoryRequiredInMb': 512, 'NumberOfCpuCoresRequired': 0.5}
        """
        requirements: dict[str, Any] = {
            "MinMemoryRequiredInMb": self.memory_mb,
            "NumberOfCpuCoresRequired": float(self.cpus),
        }
        if self.accelerators is not None:
            requirements["NumberOfAcceleratorDevicesRequired"] = float(self.accelerators)
        return requirements
