"""What each SageMaker instance type has: vCPUs, memory, GPUs, GPU memory, an on-demand price, and what
the container and Triton keep for themselves — the memory a multi-model endpoint's models may hold.

One home for these facts: the capacity planner (:mod:`mme_triton.capacity`) and the embedded stack read
them here. Only the standard library is imported.

**Hardware.** An ``ml.<family>.<size>`` instance has the hardware of the EC2 type ``<family>.<size>``
("Amazon EC2 instance type specifications", :data:`EC2_SPECS_DOCS`): the vCPUs of its size, a fixed
amount of memory per vCPU in each family (2 GiB for c5/c5d/c6i/c7i, 4 GiB for m4/m5/m5d/m6i/m7i and
g4dn/g5/g6, 8 GiB for r5/r5d/r6i/r7i and g6e; t2, c4 and p3 as listed), and for GPU types one GPU: an
NVIDIA T4 with 16 GiB (g4dn), A10G 24 GiB (g5), L4 24 GiB (g6), L40S 48 GiB (g6e), V100 16 GiB
(p3.2xlarge). The table covers every type :mod:`mme_triton.endpoint.instances` knows.

**Prices** (:data:`PRICES_REGION`, on-demand, USD per instance-hour of real-time inference) are those of
:data:`PRICES_SOURCE`, recorded on :data:`PRICES_DATE`: a type missing there has ``price_per_hour=None``
(plans are then compared without a price). Prices change: check https://aws.amazon.com/sagemaker/pricing/
and pass ``InstanceType(..., price_per_hour=...)`` (or ``dataclasses.replace``) for your region.

**What models may hold** (:attr:`InstanceType.memory_budget_bytes`). SageMaker caches an MME's models "in
memory (CPU or GPU, depending on whether you have CPU or GPU backed instances)" (:data:`MME_CACHING_DOCS`):
host memory on CPU types, GPU memory on GPU types, less :attr:`InstanceType.reserved` — what the
instance keeps for itself. AWS does not publish that figure; the default is reasoned, and overridable with
``reserved_bytes=``:

- host memory (CPU types): 1 GiB for the operating system, SageMaker's agents, the container's serve
  script and ``tritonserver`` (an idle ``tritonserver`` 2.51 holds 29 MiB resident on the embedded stack),
  plus 1/64 of the memory for the kernel's page descriptors (64 bytes per 4 KiB page);
- GPU memory (GPU types): what the driver does not hand out (``nvidia-smi`` shows 15360 MiB of a T4's 16
  GiB, 16160 MiB of a V100's, 23028 MiB of an A10G's 24 GiB, 23034 MiB of an L4's, 46068 MiB of an
  L40S's 48 GiB), plus 512 MiB for ``tritonserver``'s CUDA context and Triton's default 64 MiB CUDA
  memory pool (``--cuda-memory-pool-byte-size``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from types import MappingProxyType

from mme_triton.endpoint.instances import CPU_INSTANCE_TYPES, GPU_INSTANCE_TYPES

__all__ = [
    "CUDA_CONTEXT_BYTES",
    "EC2_SPECS_DOCS",
    "HOST_RESERVED_BYTES",
    "INSTANCE_TYPES",
    "MME_CACHING_DOCS",
    "PRICES_DATE",
    "PRICES_REGION",
    "PRICES_SOURCE",
    "TRITON_CUDA_POOL_BYTES",
    "InstanceType",
    "default_reserved_bytes",
    "instance_type",
]

GiB = 1024**3
MiB = 1024**2

EC2_SPECS_DOCS = "https://docs.aws.amazon.com/ec2/latest/instancetypes/"
MME_CACHING_DOCS = "https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-caching.html"
PRICES_REGION = "us-east-1"
PRICES_SOURCE = (
    "aws-samples/foundation-model-benchmarking-tool, fmbench/configs/pricing_fallback.yml "
    "(SageMaker hourly instance pricing), commit 77ece06"
)
PRICES_DATE = "2025-01-26"

HOST_RESERVED_BYTES = 1 * GiB
"""Host memory kept by the operating system, SageMaker's agents, the serve script and ``tritonserver``."""
CUDA_CONTEXT_BYTES = 512 * MiB
"""GPU memory of ``tritonserver``'s CUDA context (300-800 MiB depending on GPU, driver and CUDA)."""
TRITON_CUDA_POOL_BYTES = 64 * MiB
"""Triton's CUDA memory pool per GPU (``--cuda-memory-pool-byte-size``, 64 MB by default)."""

# vCPUs of each size; the exceptions are in _SPECIAL.
_VCPUS = {
    "large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "9xlarge": 36, "10xlarge": 40,
    "12xlarge": 48, "16xlarge": 64, "18xlarge": 72, "24xlarge": 96, "32xlarge": 128, "48xlarge": 192,
}  # fmt: skip
# family -> (GiB of memory per vCPU, GPU model) ; GPU model -> (GiB on the spec sheet, MiB nvidia-smi shows)
_FAMILIES: dict[str, tuple[int, str | None]] = {
    **dict.fromkeys(("c5", "c5d", "c6i", "c7i"), (2, None)),
    **dict.fromkeys(("m4", "m5", "m5d", "m6i", "m7i"), (4, None)),
    **dict.fromkeys(("r5", "r5d", "r6i", "r7i"), (8, None)),
    "g4dn": (4, "T4"),
    "g5": (4, "A10G"),
    "g6": (4, "L4"),
    "g6e": (8, "L40S"),
}
_GPUS: dict[str, tuple[int, int]] = {
    "T4": (16, 15360),
    "V100": (16, 16160),
    "A10G": (24, 23028),
    "L4": (24, 23034),
    "L40S": (48, 46068),
}
# name -> (vCPUs, memory in MiB, GPU model): the types whose memory is not a multiple of their vCPUs.
_SPECIAL: dict[str, tuple[int, int, str | None]] = {
    "ml.t2.medium": (2, 4 * 1024, None),
    "ml.t2.large": (2, 8 * 1024, None),
    "ml.t2.xlarge": (4, 16 * 1024, None),
    "ml.t2.2xlarge": (8, 32 * 1024, None),
    "ml.c4.large": (2, 3840, None),
    "ml.c4.xlarge": (4, 7680, None),
    "ml.c4.2xlarge": (8, 15 * 1024, None),
    "ml.c4.4xlarge": (16, 30 * 1024, None),
    "ml.c4.8xlarge": (36, 60 * 1024, None),
    "ml.p3.2xlarge": (8, 61 * 1024, "V100"),
}
# On-demand real-time inference, USD per hour, PRICES_REGION, from PRICES_SOURCE.
_PRICES: dict[str, float] = {
    "ml.c5.xlarge": 0.204,
    "ml.c5.2xlarge": 0.408,
    "ml.c5.4xlarge": 0.816,
    "ml.c7i.xlarge": 0.214,
    "ml.m5.xlarge": 0.23,
    "ml.g4dn.xlarge": 0.7364,
    "ml.g4dn.2xlarge": 0.94,
    "ml.g4dn.4xlarge": 1.505,
    "ml.g4dn.8xlarge": 2.72,
    "ml.g4dn.16xlarge": 5.44,
    "ml.g5.xlarge": 1.4084,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06,
    "ml.g6.2xlarge": 1.222,
    "ml.g6.16xlarge": 4.246,
    "ml.p3.2xlarge": 3.825,
}


def default_reserved_bytes(
    *, memory_bytes: int, gpus: int, gpu_memory_bytes: int, gpu: str | None = None
) -> int:
    """What the container and Triton keep for themselves by default, in bytes (see the module's notes).

    For a GPU type, of the GPU memory: the driver's share (known for the GPUs in the table, ``gpu``; else
    none), the CUDA context and Triton's CUDA pool. For a CPU type, of the host memory: 1 GiB plus 1/64.

    Example:
        >>> default_reserved_bytes(memory_bytes=16 * GiB, gpus=0, gpu_memory_bytes=0) // MiB
        1280
        >>> a10g = default_reserved_bytes(memory_bytes=16 * GiB, gpus=1, gpu_memory_bytes=24 * GiB,
        ...                               gpu="A10G")
        >>> a10g // MiB
        2124
    """
    if gpus:
        driver = 0
        if gpu is not None:
            spec_gib, visible_mib = _GPUS[gpu]
            driver = (spec_gib * 1024 - visible_mib) * MiB
        return driver + CUDA_CONTEXT_BYTES + TRITON_CUDA_POOL_BYTES
    return HOST_RESERVED_BYTES + memory_bytes // 64


@dataclass(frozen=True)
class InstanceType:
    """A SageMaker instance type as the capacity planner sees it.

    Parameters:
        name: the instance type, e.g. ``"ml.g5.xlarge"``.
        memory_bytes: host memory.
        vcpus: virtual CPUs.
        gpus: NVIDIA GPUs (0 for a CPU type).
        gpu_memory_bytes: memory of each GPU (0 for a CPU type).
        price_per_hour: on-demand USD per instance-hour; ``None`` when not known (plans are then compared
            without a price).
        reserved_bytes: what the container and Triton keep for themselves, of GPU memory on a GPU type and
            of host memory on a CPU type; ``None``: the documented default (:func:`default_reserved_bytes`).
        gpu_model: the GPU (``"T4"``, ``"V100"``, ``"A10G"``, ``"L4"``, ``"L40S"``), which tells the
            default reserve how much memory the driver keeps; ``None`` for a CPU type or another GPU.

    Raises:
        ValueError: a non-positive size or count, GPU memory without GPUs, a negative price, or a reserve
            that leaves no memory for models.

    Example:
        >>> small = InstanceType("ml.custom.small", memory_bytes=8 * GiB, vcpus=2, reserved_bytes=2 * GiB)
        >>> small.memory_budget_bytes // GiB, small.is_gpu
        (6, False)
    """

    name: str
    _: KW_ONLY
    memory_bytes: int
    vcpus: int
    gpus: int = 0
    gpu_memory_bytes: int = 0
    price_per_hour: float | None = None
    reserved_bytes: int | None = None
    gpu_model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("an instance type needs a name, e.g. 'ml.g5.xlarge'")
        for field in ("memory_bytes", "vcpus"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{self.name}: {field} must be a positive integer, got {value!r}")
        for field in ("gpus", "gpu_memory_bytes"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{self.name}: {field} must be an integer >= 0, got {value!r}")
        if bool(self.gpus) != bool(self.gpu_memory_bytes):
            raise ValueError(f"{self.name}: give gpus and gpu_memory_bytes together (both 0 for a CPU type)")
        if self.price_per_hour is not None and (
            not isinstance(self.price_per_hour, (int, float))
            or not math.isfinite(self.price_per_hour)
            or self.price_per_hour < 0
        ):
            raise ValueError(
                f"{self.name}: price_per_hour must be a number >= 0, got {self.price_per_hour!r}"
            )
        if self.gpu_model is not None and self.gpu_model not in _GPUS:
            raise ValueError(f"{self.name}: unknown gpu_model {self.gpu_model!r} (known: {', '.join(_GPUS)})")
        if self.reserved_bytes is not None:
            value = self.reserved_bytes
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{self.name}: reserved_bytes must be an integer >= 0, got {value!r}")
        if self.memory_budget_bytes <= 0:
            raise ValueError(
                f"{self.name}: reserved_bytes ({self.reserved}) leaves no memory for models "
                f"(the instance has {self.model_memory_bytes} bytes of {self.memory_kind} memory)"
            )

    @property
    def is_gpu(self) -> bool:
        """True for a type with NVIDIA GPUs: its models live in GPU memory."""
        return self.gpus > 0

    @property
    def processors(self) -> int:
        """What the executions of its models share: its GPUs on a GPU type, its vCPUs on a CPU type (the
        capacity planner's processor model, docs/capacity.md)."""
        return self.gpus if self.is_gpu else self.vcpus

    @classmethod
    def this_machine(cls, name: str = "this-machine", **fields: object) -> InstanceType:
        """The machine this runs on as an instance type: the CPUs this process may use and the physical
        memory, no GPU, no price (``fields`` override them): what the embedded stack's endpoints run on.

        Example:
            >>> InstanceType.this_machine().processors >= 1
            True
        """
        import os

        try:
            vcpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            vcpus = os.cpu_count() or 1
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        values: dict[str, object] = {"memory_bytes": memory, "vcpus": vcpus, **fields}
        return cls(name, **values)  # type: ignore[arg-type]

    @property
    def memory_kind(self) -> str:
        """``"GPU"`` or ``"host"``: the memory an MME caches models in on this type."""
        return "GPU" if self.is_gpu else "host"

    @property
    def model_memory_bytes(self) -> int:
        """The memory models are cached in: one GPU's memory on a GPU type (multi-model endpoints take
        single-GPU types), host memory on a CPU type."""
        return self.gpu_memory_bytes if self.is_gpu else self.memory_bytes

    @property
    def reserved(self) -> int:
        """What the container and Triton keep: ``reserved_bytes``, or the documented default."""
        if self.reserved_bytes is not None:
            return self.reserved_bytes
        return default_reserved_bytes(
            memory_bytes=self.memory_bytes,
            gpus=self.gpus,
            gpu_memory_bytes=self.gpu_memory_bytes,
            gpu=self.gpu_model,
        )

    @property
    def memory_budget_bytes(self) -> int:
        """What one instance's models may hold: :attr:`model_memory_bytes` less :attr:`reserved`."""
        return self.model_memory_bytes - self.reserved

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> InstanceType:
        """An instance type from :meth:`to_dict`'s output (the derived figures are left out and derived
        again).

        Example:
            >>> kind = instance_type("ml.g5.xlarge")
            >>> again = InstanceType.from_dict(kind.to_dict())
            >>> (again.name, again.memory_budget_bytes == kind.memory_budget_bytes, again.processors)
            ('ml.g5.xlarge', True, 1)
        """
        fields = ("memory_bytes", "vcpus", "gpus", "gpu_memory_bytes", "price_per_hour", "reserved_bytes")
        values: dict[str, object] = {key: data[key] for key in fields if key in data}
        if data.get("gpu_model") is not None:
            values["gpu_model"] = data["gpu_model"]
        return cls(str(data["name"]), **values)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        """The fields and the derived budget, as JSON values."""
        return {
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "vcpus": self.vcpus,
            "gpus": self.gpus,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "gpu_model": self.gpu_model,
            "processors": self.processors,
            "price_per_hour": self.price_per_hour,
            "reserved_bytes": self.reserved,
            "memory_budget_bytes": self.memory_budget_bytes,
        }


def _spec(name: str) -> InstanceType:
    if name in _SPECIAL:
        vcpus, memory_mib, gpu = _SPECIAL[name]
        memory = memory_mib * MiB
    else:
        _, family, size = name.split(".")
        per_vcpu, gpu = _FAMILIES[family]
        vcpus = _VCPUS[size]
        memory = vcpus * per_vcpu * GiB
    gpu_memory = _GPUS[gpu][0] * GiB if gpu is not None else 0
    return InstanceType(
        name,
        memory_bytes=memory,
        vcpus=vcpus,
        gpus=1 if gpu is not None else 0,
        gpu_memory_bytes=gpu_memory,
        price_per_hour=_PRICES.get(name),
        gpu_model=gpu,
    )


def _size_order(name: str) -> tuple[str, int]:
    _, family, size = name.split(".")
    return family, _VCPUS.get(size, 1)


INSTANCE_TYPES: Mapping[str, InstanceType] = MappingProxyType(
    {name: _spec(name) for name in sorted(CPU_INSTANCE_TYPES | GPU_INSTANCE_TYPES, key=_size_order)}
)
"""name → :class:`InstanceType` for every type :mod:`mme_triton.endpoint.instances` knows (read-only)."""


def instance_type(value: str | InstanceType) -> InstanceType:
    """``value`` as an :class:`InstanceType`: a name is looked up in :data:`INSTANCE_TYPES`.

    Raises:
        ValueError: a name the table does not have (with close matches).
        TypeError: neither a name nor an InstanceType.

    Example:
        >>> instance_type("ml.g5.xlarge").gpu_memory_bytes // GiB
        24
    """
    if isinstance(value, InstanceType):
        return value
    if not isinstance(value, str):
        raise TypeError(f"an instance type is a name or an InstanceType, got {type(value).__name__}")
    found = INSTANCE_TYPES.get(value)
    if found is None:
        close = difflib.get_close_matches(value, list(INSTANCE_TYPES), n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(
            f"no hardware figures for instance type {value!r}{hint} (describe it with "
            f"mme_triton.InstanceType({value!r}, memory_bytes=..., vcpus=..., ...))"
        )
    return found
