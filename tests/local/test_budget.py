"""An endpoint's memory budget from its instance type, and the volume of extracted models."""

from __future__ import annotations

from pathlib import Path

import pytest

from mme_triton.endpoint.instance_specs import INSTANCE_TYPES
from mme_triton.local.route.budget import endpoint_budget
from mme_triton.local.route.volume import ModelCopy, ModelVolume

GiB = 1024**3
MiB = 1024**2


@pytest.mark.parametrize(
    ("setting", "instance_type", "reserved", "machine", "expected", "source"),
    [
        ("instance", "ml.m5.xlarge", None, None, 15 * GiB - 256 * MiB, "16.0 GiB of host memory less"),
        ("instance", "ml.m5.xlarge", GiB, None, 15 * GiB, "m5.xlarge's 16.0 GiB of host memory less the 1.0"),
        ("instance", "ml.m5.xlarge", GiB, 4 * GiB, 4 * GiB, "half of this machine's memory"),
        ("instance", "ml.g5.xlarge", None, None, 24 * GiB - 2124 * MiB, "24.0 GiB of GPU memory"),
        ("instance", "ml.t2.medium", 2 * GiB, None, 2 * GiB, "less the 2.0 GiB"),
        ("instance", "ml.t2.medium", 8 * GiB, None, GiB, "less the 3.0 GiB"),  # a quarter stays
        ("instance", "ml.x99.large", GiB, None, 2 * GiB, "does not know the memory of instance type"),
        (512 * MiB, "ml.m5.xlarge", GiB, None, 512 * MiB, "memory_budget (512.0 MiB)"),
        (None, "ml.m5.xlarge", GiB, None, None, "no byte limit"),
    ],
    ids=[
        "instance",
        "reserved",
        "machine-cap",
        "gpu-type",
        "reserved-small",
        "reserve-over-instance",
        "unknown-type",
        "bytes",
        "none",
    ],
)
def test_endpoint_budget_is_the_instance_memory_less_what_it_keeps(
    setting: object,
    instance_type: str,
    reserved: int | None,
    machine: int | None,
    expected: int | None,
    source: str,
) -> None:
    budget = endpoint_budget(setting, instance_type, reserved_memory=reserved, machine_limit=machine)  # type: ignore[arg-type]

    assert budget.bytes == expected
    assert source in budget.source


def test_endpoint_budget_is_the_instance_table_s_memory_for_models() -> None:
    for name, spec in INSTANCE_TYPES.items():
        assert endpoint_budget("instance", name).bytes == spec.memory_budget_bytes, name


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
