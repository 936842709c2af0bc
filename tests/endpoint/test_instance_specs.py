"""The instance-type table: every type the library knows, its hardware, the memory left for models."""

from __future__ import annotations

import dataclasses

import pytest

from mme_triton.endpoint.images import is_gpu_instance_type
from mme_triton.endpoint.instance_specs import (
    INSTANCE_TYPES,
    InstanceType,
    default_reserved_bytes,
    instance_type,
)
from mme_triton.endpoint.instances import CPU_INSTANCE_TYPES, GPU_INSTANCE_TYPES

GiB = 1024**3
MiB = 1024**2


def test_instance_types_cover_every_type_the_library_knows() -> None:
    assert set(INSTANCE_TYPES) == CPU_INSTANCE_TYPES | GPU_INSTANCE_TYPES


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_instance_types_agree_with_the_gpu_rule_and_leave_memory_for_models(name: str) -> None:
    kind = INSTANCE_TYPES[name]
    assert kind.name == name
    assert kind.is_gpu == is_gpu_instance_type(name)
    assert kind.gpus == (1 if kind.is_gpu else 0)  # multi-model endpoints take single-GPU types
    assert 0 < kind.memory_budget_bytes < kind.model_memory_bytes


@pytest.mark.parametrize(
    ("name", "vcpus", "memory_gib", "gpu_gib"),
    [
        ("ml.t2.medium", 2, 4, 0),
        ("ml.c4.large", 2, 3.75, 0),
        ("ml.c4.8xlarge", 36, 60, 0),
        ("ml.c5.9xlarge", 36, 72, 0),
        ("ml.m5.xlarge", 4, 16, 0),
        ("ml.r5.24xlarge", 96, 768, 0),
        ("ml.m7i.48xlarge", 192, 768, 0),
        ("ml.g4dn.xlarge", 4, 16, 16),
        ("ml.g5.2xlarge", 8, 32, 24),
        ("ml.g6.xlarge", 4, 16, 24),
        ("ml.g6e.xlarge", 4, 32, 48),
        ("ml.p3.2xlarge", 8, 61, 16),
    ],
)
def test_instance_types_have_the_ec2_hardware(name: str, vcpus: int, memory_gib: float, gpu_gib: int) -> None:
    kind = INSTANCE_TYPES[name]
    assert (kind.vcpus, kind.memory_bytes, kind.gpu_memory_bytes) == (vcpus, memory_gib * GiB, gpu_gib * GiB)


def test_instance_type_budget_is_gpu_memory_less_the_reserve_on_gpu_types() -> None:
    g5 = INSTANCE_TYPES["ml.g5.xlarge"]
    # what nvidia-smi shows of an A10G (23028 MiB), less the CUDA context and Triton's 64 MiB pool
    assert g5.memory_budget_bytes == (23028 - 512 - 64) * MiB
    assert g5.memory_kind == "GPU"


def test_instance_type_budget_is_host_memory_less_the_reserve_on_cpu_types() -> None:
    m5 = INSTANCE_TYPES["ml.m5.xlarge"]
    assert m5.memory_budget_bytes == 16 * GiB - 1 * GiB - 16 * GiB // 64
    assert m5.memory_kind == "host"


def test_instance_type_reserved_bytes_overrides_the_default() -> None:
    kind = dataclasses.replace(INSTANCE_TYPES["ml.g5.xlarge"], reserved_bytes=4 * GiB)
    assert kind.memory_budget_bytes == 20 * GiB
    assert default_reserved_bytes(memory_bytes=8 * GiB, gpus=1, gpu_memory_bytes=8 * GiB) == 576 * MiB


def test_instance_types_prices_are_cited_or_none() -> None:
    priced = {name: kind.price_per_hour for name, kind in INSTANCE_TYPES.items() if kind.price_per_hour}
    assert priced["ml.g5.xlarge"] == 1.4084
    assert INSTANCE_TYPES["ml.g6e.xlarge"].price_per_hour is None


def test_instance_type_looks_up_names_and_suggests_close_ones() -> None:
    assert instance_type("ml.g5.xlarge") is INSTANCE_TYPES["ml.g5.xlarge"]
    custom = InstanceType("ml.x.y", memory_bytes=GiB * 4, vcpus=2)
    assert instance_type(custom) is custom
    with pytest.raises(ValueError, match=r"did you mean ml\.g5\.xlarge"):
        instance_type("ml.g5.xlarg")
    with pytest.raises(TypeError, match="a name or an InstanceType"):
        instance_type(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"memory_bytes": 0, "vcpus": 2}, "memory_bytes must be a positive integer"),
        ({"memory_bytes": GiB, "vcpus": 2.5}, "vcpus must be a positive integer"),
        ({"memory_bytes": GiB, "vcpus": 2, "gpus": 1}, "give gpus and gpu_memory_bytes together"),
        ({"memory_bytes": GiB, "vcpus": 2, "price_per_hour": -1.0}, "price_per_hour must be a number >= 0"),
        ({"memory_bytes": GiB, "vcpus": 2, "reserved_bytes": GiB}, "leaves no memory for models"),
        ({"memory_bytes": GiB, "vcpus": 2, "reserved_bytes": -1}, "reserved_bytes must be an integer >= 0"),
    ],
    ids=[
        "no-memory",
        "fractional-vcpus",
        "gpus-without-memory",
        "negative-price",
        "all-reserved",
        "negative",
    ],
)
def test_instance_type_refuses_impossible_hardware(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InstanceType("ml.custom.xlarge", **fields)  # type: ignore[arg-type]


def test_instance_types_table_in_the_capacity_docs_matches_the_data() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"
    rows = [
        line.strip("| ").split(" | ") for line in docs.read_text().splitlines() if line.startswith("| ml.")
    ]
    assert len(rows) >= 5
    for name, vcpus, memory, gpu_memory, budget, price in rows:
        kind = INSTANCE_TYPES[name]
        gib = kind.memory_budget_bytes / GiB
        assert (int(vcpus), memory, gpu_memory) == (
            kind.vcpus,
            f"{kind.memory_bytes // GiB} GiB",
            f"{kind.gpu_memory_bytes // GiB} GiB" if kind.is_gpu else "-",
        ), name
        assert budget == f"{gib:.1f} GiB", name
        assert price == ("-" if kind.price_per_hour is None else f"{kind.price_per_hour:g}"), name


def test_instance_specs_import_needs_neither_numpy_nor_the_planner() -> None:
    import subprocess
    import sys

    code = (
        "import sys, mme_triton.endpoint.instance_specs; "
        "print(','.join(m for m in ('numpy', 'boto3', 'mme_triton.capacity') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
