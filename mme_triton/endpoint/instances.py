"""SageMaker instance types a Triton multi-model endpoint can run on.

Multi-model endpoints on GPU take single-GPU instances only; Inferentia and Trainium instances have no
Triton image. moto accepts any instance type, so the library checks against this table itself.
"""

from __future__ import annotations

import difflib

__all__ = ["CPU_INSTANCE_TYPES", "GPU_INSTANCE_TYPES", "check_instance_type"]


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

#: Single-GPU instance types (the ones a GPU multi-model endpoint accepts).
GPU_INSTANCE_TYPES: frozenset[str] = frozenset(
    _family("g4dn", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | _family("g5", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | _family("g6", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | _family("g6e", "xlarge 2xlarge 4xlarge 8xlarge 16xlarge")
    | {"ml.p3.2xlarge"}
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


def check_instance_type(instance_type: str) -> bool:
    """Check ``instance_type`` for a Triton multi-model endpoint; return True for a GPU type.

    Raises:
        ValueError: unknown type (with close matches), a multi-GPU type, or a family without a Triton
            image (Inferentia, Trainium, the K80-based ml.p2).
    """
    if not isinstance(instance_type, str):
        raise TypeError(f"instance_type must be a str, got {type(instance_type).__name__}")
    if instance_type in GPU_INSTANCE_TYPES:
        return True
    if instance_type in CPU_INSTANCE_TYPES:
        return False
    if instance_type in _MULTI_GPU:
        raise ValueError(
            f"{instance_type} has several GPUs; a GPU multi-model endpoint takes single-GPU instances only "
            f"({', '.join(sorted(t for t in GPU_INSTANCE_TYPES if t.endswith('.xlarge')))}, ...)"
        )
    family = instance_type.split(".")[1] if instance_type.count(".") == 2 else ""
    if family in _NO_TRITON_FAMILIES:
        raise ValueError(
            f"{instance_type}: there is no SageMaker Triton image for {_NO_TRITON_FAMILIES[family]}"
        )
    if family == "p2":
        raise ValueError(f"{instance_type}: the K80 GPUs of ml.p2 are not supported by the Triton images")
    close = difflib.get_close_matches(instance_type, sorted(CPU_INSTANCE_TYPES | GPU_INSTANCE_TYPES), n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ValueError(f"unknown instance type {instance_type!r} for a Triton multi-model endpoint{hint}")
