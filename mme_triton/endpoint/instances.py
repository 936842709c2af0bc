"""SageMaker instance types and GPU AMIs for a Triton multi-model endpoint, and what each can run.

- **Instance types.** SageMaker's multi-model endpoint documentation ("Supported algorithms, frameworks,
  and instances for multi-model endpoints", :data:`MME_GPU_DOCS`) lists the GPU instance types a
  multi-model endpoint supports (:data:`MME_GPU_INSTANCE_TYPES`); every CPU type is supported. A GPU type
  outside that list gets a warning, not a refusal (AWS adds types before the page lists them). Refused:
  names that are not instance types, known multi-GPU types, Inferentia/Trainium (no Triton image) and
  ``ml.p2`` (K80, below the compute capability 6.0 every SageMaker Triton image needs).
- **AMIs.** A GPU instance runs SageMaker's default inference AMI for its family unless the production
  variant names an ``InferenceAmiVersion``; each AMI carries one NVIDIA driver branch
  (:data:`INFERENCE_AMI_DRIVERS`, from the ProductionVariant API reference; :data:`DEFAULT_AMI_DRIVERS`
  from "Best practices to minimize interruptions during GPU driver upgrades"). :func:`gpu_warnings` says
  when the chosen AMI's driver is older than the Triton image needs (see
  :data:`~mme_triton.endpoint.images.TRITON_MIN_DRIVER`).

moto accepts any instance type, so the library checks against these tables itself.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from mme_triton.endpoint.images import (
    TRITON_MIN_COMPUTE_CAPABILITY,
    TRITON_MIN_DRIVER,
    is_gpu_instance_type,
)

__all__ = [
    "CPU_INSTANCE_TYPES",
    "DEFAULT_AMI_DRIVERS",
    "GPU_INSTANCE_TYPES",
    "INFERENCE_AMI_DRIVERS",
    "MME_GPU_DOCS",
    "MME_GPU_INSTANCE_TYPES",
    "InstanceCheck",
    "check_inference_ami_version",
    "check_instance_type",
    "describe_instance_types",
    "gpu_warnings",
]

MME_GPU_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-support.html"
GPU_DRIVER_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html"


def _family(family: str, sizes: str) -> set[str]:
    return {f"ml.{family}.{size}" for size in sizes.split()}


_SMALL = "large xlarge 2xlarge 4xlarge"
CPU_INSTANCE_TYPES: frozenset[str] = frozenset(
    _family("t2", "medium large xlarge 2xlarge")
    | _family("m4", "xlarge 2xlarge 4xlarge 10xlarge 16xlarge")
    | _family("c4", f"{_SMALL} 8xlarge")
    | _family("c5", f"{_SMALL} 9xlarge 18xlarge")
    | _family("c5d", f"{_SMALL} 9xlarge 18xlarge")
    | _family("m5", f"{_SMALL} 12xlarge 24xlarge")
    | _family("m5d", f"{_SMALL} 12xlarge 24xlarge")
    | _family("r5", f"{_SMALL} 12xlarge 24xlarge")
    | _family("r5d", f"{_SMALL} 12xlarge 24xlarge")
    | _family("c6i", f"{_SMALL} 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge")
    | _family("m6i", f"{_SMALL} 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge")
    | _family("r6i", f"{_SMALL} 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge")
    | _family("c7i", f"{_SMALL} 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge")
    | _family("m7i", f"{_SMALL} 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge")
    | _family("r7i", f"{_SMALL} 8xlarge 12xlarge 16xlarge 24xlarge 48xlarge")
)

#: The GPU instance types SageMaker's multi-model endpoint documentation lists (:data:`MME_GPU_DOCS`),
#: less ``ml.p2.xlarge`` (its K80 is below what the Triton images need).
MME_GPU_INSTANCE_TYPES: frozenset[str] = frozenset(
    _family("g4dn", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | _family("g5", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | {"ml.p3.2xlarge"}
)

#: Single-GPU instance types the library knows (the documented ones and newer single-GPU sizes, which
#: get a warning until the documentation lists them).
GPU_INSTANCE_TYPES: frozenset[str] = frozenset(
    MME_GPU_INSTANCE_TYPES
    | _family("g6", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | _family("g6e", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
)

# GPU instance types with several GPUs: refused for a multi-model endpoint.
_MULTI_GPU: frozenset[str] = frozenset(
    _family("g4dn", "12xlarge")
    | _family("g5", "12xlarge 24xlarge 48xlarge")
    | _family("g6", "12xlarge 24xlarge 48xlarge")
    | _family("g6e", "12xlarge 24xlarge 48xlarge")
    | _family("p3", "8xlarge 16xlarge")
    | {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge"}
)
_NO_TRITON_FAMILIES = {"inf1": "Inferentia", "inf2": "Inferentia2", "trn1": "Trainium", "trn2": "Trainium2"}
_INSTANCE_TYPE = re.compile(r"^ml\.(?P<family>[a-z][a-z0-9-]*)\.(?P<size>medium|large|[0-9]*xlarge)$")

#: ``InferenceAmiVersion`` → the NVIDIA driver branch it carries (None: not a GPU AMI). From the
#: ProductionVariant API reference: gpu-2 and gpu-2-1 driver 535 (CUDA 12.2), gpu-3-1 driver 550
#: (CUDA 12.4), al2023 gpu-4-1 driver 580 (CUDA 13.0); the "-1" AMIs disable the NVIDIA Container
#: Toolkit's CUDA-compat mounting.
INFERENCE_AMI_DRIVERS: dict[str, int | None] = {
    "al2-ami-sagemaker-inference-gpu-2": 535,
    "al2-ami-sagemaker-inference-gpu-2-1": 535,
    "al2-ami-sagemaker-inference-gpu-3-1": 550,
    "al2023-ami-sagemaker-inference-gpu-4-1": 580,
    "al2-ami-sagemaker-inference-neuron-2": None,
}

#: The NVIDIA driver branch of SageMaker's default real-time inference AMI, by instance family (no
#: ``InferenceAmiVersion``): 470 (CUDA 11.4) for p2, p3, p4d, p4de, g4dn and g5; 535 (CUDA 12.2) for p5
#: and g6; 550 (CUDA 12.4) for p5e and p5en. Families missing here are not checked.
DEFAULT_AMI_DRIVERS: dict[str, int] = {
    **dict.fromkeys(("p2", "p3", "p4d", "p4de", "g4dn", "g5"), 470),
    **dict.fromkeys(("p5", "g6"), 535),
    **dict.fromkeys(("p5e", "p5en"), 550),
}

# Compute capability of the GPU in each family (V100 7.0, T4 7.5, A10G 8.6, L4 8.9, ...).
_COMPUTE_CAPABILITY: dict[str, float] = {"p3": 7.0, "g4dn": 7.5, "g5": 8.6, "g6": 8.9, "g6e": 8.9}

_AMI_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass(frozen=True)
class InstanceCheck:
    """What :func:`check_instance_type` found: GPU or not, and the warnings to give."""

    is_gpu: bool
    warnings: list[str] = field(default_factory=list)


def _size_order(size: str) -> tuple[int, int]:
    """medium < large < xlarge < 2xlarge < ... (the number before ``xlarge`` counts)."""
    if size.endswith("xlarge"):
        return 2, int(size.removesuffix("xlarge") or 1)
    return (0, 0) if size == "medium" else (1, 0)


def describe_instance_types(types: frozenset[str]) -> str:
    """``types`` grouped by family, sizes in order: ``"ml.g5: xlarge, 2xlarge; ml.p3: 2xlarge"``.

    Example:
        >>> describe_instance_types(frozenset({"ml.g5.2xlarge", "ml.g5.xlarge", "ml.p3.2xlarge"}))
        'ml.g5: xlarge, 2xlarge; ml.p3: 2xlarge'
    """
    sizes: dict[str, list[str]] = {}
    for name in types:
        _, family, size = name.split(".")
        sizes.setdefault(family, []).append(size)
    return "; ".join(
        f"ml.{family}: {', '.join(sorted(sizes[family], key=_size_order))}" for family in sorted(sizes)
    )


def _family_of(instance_type: str) -> str:
    parts = instance_type.split(".")
    return parts[1] if len(parts) == 3 else ""


def check_instance_type(instance_type: str, *, multi_model: bool = True) -> InstanceCheck:
    """Check ``instance_type`` for a Triton multi-model endpoint (or, with ``multi_model=False``, for an
    endpoint of inference components, which takes multi-GPU types too: each component reserves GPUs).

    Returns:
        An :class:`InstanceCheck`; a GPU type that SageMaker's multi-model documentation does not list
        comes with a warning citing that list (multi-model endpoints only).

    Raises:
        TypeError: not a string.
        ValueError: not an instance type name (with close matches), a multi-GPU type for a multi-model
            endpoint, or a family without a Triton image (Inferentia, Trainium, the K80-based ml.p2).

    Example:
        >>> check_instance_type("ml.g5.xlarge")
        InstanceCheck(is_gpu=True, warnings=[])
        >>> check_instance_type("ml.c5.xlarge").is_gpu
        False
    """
    if not isinstance(instance_type, str):
        raise TypeError(f"instance_type must be a str, got {type(instance_type).__name__}")
    if instance_type in MME_GPU_INSTANCE_TYPES:
        return InstanceCheck(is_gpu=True)
    if instance_type in CPU_INSTANCE_TYPES:
        return InstanceCheck(is_gpu=False)
    match = _INSTANCE_TYPE.match(instance_type)
    if match is None:
        close = difflib.get_close_matches(instance_type, sorted(CPU_INSTANCE_TYPES | GPU_INSTANCE_TYPES), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown instance type {instance_type!r} (SageMaker's are ml.<family>.<size>){hint}"
        )
    family = match["family"]
    if instance_type in _MULTI_GPU and not multi_model:
        return InstanceCheck(is_gpu=True)
    if instance_type in _MULTI_GPU:
        raise ValueError(
            f"{instance_type} has several GPUs; a GPU multi-model endpoint takes single-GPU instances only "
            f"({', '.join(sorted(t for t in MME_GPU_INSTANCE_TYPES if t.endswith('.xlarge')))}, ...)"
        )
    if family in _NO_TRITON_FAMILIES:
        raise ValueError(
            f"{instance_type}: there is no SageMaker Triton image for {_NO_TRITON_FAMILIES[family]}"
        )
    if family == "p2":
        raise ValueError(f"{instance_type}: the K80 GPUs of ml.p2 are not supported by the Triton images")
    if not is_gpu_instance_type(instance_type):
        return InstanceCheck(is_gpu=False)  # multi-model endpoints support every CPU instance type
    if not multi_model:
        return InstanceCheck(is_gpu=True)
    listed = describe_instance_types(MME_GPU_INSTANCE_TYPES)
    return InstanceCheck(
        is_gpu=True,
        warnings=[
            f"{instance_type} is not among the GPU instance types SageMaker documents for multi-model "
            f"endpoints ({listed}; {MME_GPU_DOCS}); CreateEndpointConfig or CreateEndpoint may refuse it"
        ],
    )


def check_inference_ami_version(value: str | None) -> str | None:
    """Check the ProductionVariant ``InferenceAmiVersion`` (None: SageMaker's default AMI).

    Names the library does not know are accepted (AWS adds AMIs); :func:`gpu_warnings` says it cannot
    check them.

    Raises:
        TypeError: not a string.
        ValueError: not shaped like an AMI version name.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"inference_ami_version must be a str, got {type(value).__name__}")
    if not _AMI_NAME.match(value):
        raise ValueError(
            f"inference_ami_version {value!r} is not an AMI version name "
            f"(known: {', '.join(sorted(INFERENCE_AMI_DRIVERS))})"
        )
    return value


# The AMIs to suggest, oldest driver first: the "-1" ones, which follow the NVIDIA Container Toolkit's
# current behaviour (SageMaker's "Updating inference containers to comply with the NVIDIA Container
# Toolkit" recommends them).
_SUGGESTED_AMIS = (
    "al2-ami-sagemaker-inference-gpu-2-1",
    "al2-ami-sagemaker-inference-gpu-3-1",
    "al2023-ami-sagemaker-inference-gpu-4-1",
)


def _ami_for(driver: int) -> str:
    for name in _SUGGESTED_AMIS:
        if (INFERENCE_AMI_DRIVERS[name] or 0) >= driver:
            return name
    return "an AMI with a newer driver"


def gpu_warnings(
    instance_type: str, triton_version: str | None, inference_ami_version: str | None
) -> list[str]:
    """Why ``instance_type`` with this AMI may not run Triton ``triton_version`` (empty: no reason known).

    ``triton_version`` None (a custom image whose release cannot be told) skips the image checks.

    Example:
        >>> gpu_warnings("ml.g5.xlarge", "24.09", None)
        []
        >>> gpu_warnings("ml.g5.xlarge", "25.09", None)[0][:60]
        'Triton 25.09 needs NVIDIA driver 580 or newer; ml.g5.xlarge '
    """
    family = _family_of(instance_type)
    gpu = is_gpu_instance_type(instance_type)
    found: list[str] = []
    if inference_ami_version is not None:
        if inference_ami_version not in INFERENCE_AMI_DRIVERS:
            found.append(
                f"inference_ami_version {inference_ami_version!r} is not one the library knows "
                f"({', '.join(sorted(INFERENCE_AMI_DRIVERS))}); its driver cannot be checked"
            )
            return found
        if not gpu or INFERENCE_AMI_DRIVERS[inference_ami_version] is None:
            kind = "an NVIDIA GPU" if INFERENCE_AMI_DRIVERS[inference_ami_version] else "a Neuron"
            found.append(
                f"inference_ami_version {inference_ami_version!r} is {kind} AMI, and {instance_type} "
                f"{'has no NVIDIA GPU' if not gpu else 'is an NVIDIA GPU instance'}; SageMaker may refuse it"
            )
            return found
    if not gpu or triton_version is None:
        return found
    if inference_ami_version is not None:
        driver: int | None = INFERENCE_AMI_DRIVERS[inference_ami_version]
        where = f"{inference_ami_version} carries driver {driver}"
    else:
        driver = DEFAULT_AMI_DRIVERS.get(family)
        where = f"{instance_type} runs driver {driver} with SageMaker's default AMI ({GPU_DRIVER_DOCS})"
    needed = TRITON_MIN_DRIVER.get(triton_version)
    if driver is not None and needed is not None and driver < needed:
        found.append(
            f"Triton {triton_version} needs NVIDIA driver {needed} or newer; {where}: pass "
            f"inference_ami_version={_ami_for(needed)!r} (or choose an older triton_version)"
        )
    capability = _COMPUTE_CAPABILITY.get(family)
    minimum = TRITON_MIN_COMPUTE_CAPABILITY.get(triton_version)
    if capability is not None and minimum is not None and capability < minimum:
        found.append(
            f"Triton {triton_version} needs a GPU of compute capability {minimum} or newer; the GPU of "
            f"{instance_type} has {capability}: choose another instance type or an older triton_version"
        )
    return found
