"""An endpoint's memory budget from its instance type, and the volume of extracted models."""

from __future__ import annotations

from pathlib import Path

import pytest

from mme_triton.endpoint.instance_memory import instance_memory_bytes
from mme_triton.endpoint.instances import CPU_INSTANCE_TYPES, MME_GPU_INSTANCE_TYPES
from mme_triton.local.route.budget import endpoint_budget
from mme_triton.local.route.volume import ModelCopy, ModelVolume

GiB = 1024**3


@pytest.mark.parametrize(
    ("instance_type", "gib"),
    [
        ("ml.t2.medium", 4),
        ("ml.c5.large", 4),
        ("ml.c4.8xlarge", 60),
        ("ml.m5.xlarge", 16),
        ("ml.m5.24xlarge", 384),
        ("ml.r5.large", 16),
        ("ml.c5.9xlarge", 72),
        ("ml.g4dn.xlarge", 16),
        ("ml.g5.2xlarge", 32),
        ("ml.g6e.xlarge", 32),
        ("ml.p3.2xlarge", 61),
        ("ml.r7i.48xlarge", 1536),
    ],
)
def test_instance_memory_follows_the_ec2_instance_types(instance_type: str, gib: int) -> None:
    assert instance_memory_bytes(instance_type) == gib * GiB


def test_instance_memory_knows_every_instance_type_the_library_deploys_to() -> None:
    unknown = sorted(
        t for t in CPU_INSTANCE_TYPES | MME_GPU_INSTANCE_TYPES if instance_memory_bytes(t) is None
    )

    assert unknown == []
    assert instance_memory_bytes("ml.inf2.xlarge") is None
    assert instance_memory_bytes("m5.xlarge") is None


@pytest.mark.parametrize(
    ("setting", "instance_type", "reserved", "machine", "expected", "source"),
    [
        ("instance", "ml.m5.xlarge", GiB, None, 15 * GiB, "ml.m5.xlarge's 16.0 GiB less the 1.0 GiB"),
        ("instance", "ml.m5.xlarge", GiB, 4 * GiB, 4 * GiB, "half of this machine's memory"),
        ("instance", "ml.t2.medium", 2 * GiB, None, 2 * GiB, "less the 2.0 GiB"),
        ("instance", "ml.t2.medium", 8 * GiB, None, GiB, "less the 3.0 GiB"),  # a quarter stays
        ("instance", "ml.x99.large", GiB, None, 2 * GiB, "does not know the memory of instance type"),
        (512 * 1024**2, "ml.m5.xlarge", GiB, None, 512 * 1024**2, "memory_budget (512.0 MiB)"),
        (None, "ml.m5.xlarge", GiB, None, None, "no byte limit"),
    ],
    ids=["instance", "machine-cap", "reserved", "reserve-over-instance", "unknown-type", "bytes", "none"],
)
def test_endpoint_budget_is_the_instance_memory_less_what_it_keeps(
    setting: object, instance_type: str, reserved: int, machine: int | None, expected: int | None, source: str
) -> None:
    budget = endpoint_budget(setting, instance_type, reserved_memory=reserved, machine_limit=machine)  # type: ignore[arg-type]

    assert budget.bytes == expected
    assert source in budget.source


@pytest.mark.parametrize("setting", [0, -1, "half", True, 1.5])
def test_endpoint_budget_refuses_a_setting_it_cannot_use(setting: object) -> None:
    with pytest.raises(ValueError, match="memory_budget must be"):
        endpoint_budget(setting, "ml.m5.xlarge")  # type: ignore[arg-type]


def test_model_volume_deletes_unused_copies_least_recently_used_first() -> None:
    volume = ModelVolume(capacity=100)
    for name in ("a", "b", "c"):
        volume.add(name, ModelCopy(40, f"etag-{name}", 0.0, Path(name)))
    volume.touch("a")  # order: b, c, a

    assert volume.total_bytes == 120
    assert volume.over_capacity(keep=lambda name: False) == ["b"]
    assert volume.over_capacity(keep=lambda name: name == "b") == ["c"]
    assert volume.over_capacity(keep=lambda name: True) == []
    assert volume.remove("b") is not None and volume.remove("b") is None
    assert volume.names() == ["c", "a"] and volume.over_capacity(keep=lambda name: False) == []
