"""The memory of SageMaker's instance types, for the embedded stack's memory budget.

An ``ml.<family>.<size>`` instance has the vCPUs and memory of the EC2 instance it runs on
(https://aws.amazon.com/ec2/instance-types/; SageMaker's pricing page lists both per instance type,
https://aws.amazon.com/sagemaker/pricing/). Within most families memory is a fixed number of GiB per vCPU
and a size names its vCPUs (``large`` 2, ``xlarge`` 4, ``<n>xlarge`` 4·n); the exceptions are listed
whole.

This small table stands in for a fuller one of instance types (vCPUs, memory, GPUs, prices) until that
one exists; it covers the types :mod:`mme_triton.endpoint.instances` knows.
"""

from __future__ import annotations

import re

__all__ = ["instance_memory_bytes"]

_GiB = 1024**3

# GiB per vCPU, by family.
_PER_VCPU: dict[str, float] = {
    **dict.fromkeys(("c5", "c5d", "c6i", "c7i"), 2.0),
    "c4": 1.875,
    **dict.fromkeys(("m4", "m5", "m5d", "m6i", "m7i", "g4dn", "g5", "g6"), 4.0),
    **dict.fromkeys(("r5", "r5d", "r6i", "r7i", "g6e"), 8.0),
}

# Sizes that do not follow their family's ratio, in GiB.
_EXCEPTIONS: dict[str, float] = {
    "ml.t2.medium": 4,
    "ml.t2.large": 8,
    "ml.t2.xlarge": 16,
    "ml.t2.2xlarge": 32,
    "ml.c4.8xlarge": 60,
    "ml.p3.2xlarge": 61,
    "ml.p3.8xlarge": 244,
    "ml.p3.16xlarge": 488,
}

_TYPE = re.compile(r"^ml\.(?P<family>[a-z0-9]+)\.(?P<size>large|(?P<n>[0-9]*)xlarge)$")


def instance_memory_bytes(instance_type: str) -> int | None:
    """The memory of ``instance_type`` in bytes, ``None`` for a type this table does not know.

    Example:
        >>> instance_memory_bytes("ml.m5.xlarge") == 16 * 1024**3
        True
        >>> instance_memory_bytes("ml.r5.large") // 1024**3, instance_memory_bytes("ml.x9.large")
        (16, None)
    """
    if instance_type in _EXCEPTIONS:
        return int(_EXCEPTIONS[instance_type] * _GiB)
    match = _TYPE.match(instance_type)
    if match is None or match["family"] not in _PER_VCPU:
        return None
    vcpus = 2 if match["size"] == "large" else 4 * int(match["n"] or 1)
    return int(vcpus * _PER_VCPU[match["family"]] * _GiB)
