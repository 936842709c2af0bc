"""One plan comparison, validated on the stack for each hosting: the multi-model endpoint's row replayed on
an MME, the inference components' row on an endpoint of components deployed with the copies the plan
planned, each compared with its own prediction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import mme_triton as mt

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

MiB = 2**20
PROFILE = mt.ModelProfile(
    "tiny.tar.gz", memory_bytes=64 * MiB, cold_start_s=2.0, reload_s=1.8, unload_s=1.5,
    service_time_s=0.005, copies=3, component_cpus=0.25,
)  # fmt: skip


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from mme_triton.local import LocalStack

    with LocalStack(metrics_period=1) as running:
        yield running


@pytest.fixture(scope="module")
def checked(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    tiny = mt.new_python_model(
        tmp_path_factory.mktemp("repository"), "tiny", inputs={"INPUT0": ("FP32", [4])},
        outputs={"OUTPUT0": ("FP32", [4])},
    )  # fmt: skip
    traffic = mt.Traffic.uniform([PROFILE], rate=4, duration=8, seed=2)
    plan = mt.plan_capacity(
        [PROFILE], traffic, instance_types=["ml.m5.xlarge"], instance_counts=[1],
        hosting=("mme", "inference-components"), p99="5s",
    )  # fmt: skip
    found = {
        row.hosting: plan.validate(
            {PROFILE.name: tiny}, stack=stack, row=index, concurrency=8, warm=True,
            endpoint_name=f"hostings-{'ic' if row.hosting == 'inference-components' else 'mme'}",
        )
        for index, row in enumerate(plan.rows)
    }  # fmt: skip
    return plan, found


def test_both_hostings_are_planned_and_replayed(checked: tuple[Any, dict[str, Any]]) -> None:
    plan, found = checked
    assert [row.hosting for row in plan.rows] == ["mme", "inference-components"]
    assert plan.rows[1].copies == 3 and plan.rows[1].meets_targets
    for hosting, validation in found.items():
        assert validation.hosting == hosting
        assert validation.failed == 0 and validation.requests == plan.rows[0].requests, str(validation)
        assert validation.measured["invocations"] == validation.requests
        p99 = validation["p99_s"]
        assert p99.predicted is not None and p99.measured is not None and p99.measured > 0


def test_components_are_validated_as_components(stack: Any, checked: tuple[Any, dict[str, Any]]) -> None:
    _, found = checked
    components = found["inference-components"]
    assert "as inference components" in str(components)
    assert any("hosted as inference components: 3 copies" in note for note in components.notes)
    assert components.predicted["loads"] == 0 and components.predicted["cache_hit_ratio"] == 1.0
    assert found["mme"].measured["loads"] == 0  # warm: every model loaded before the replay
    assert stack.runtime.endpoints() == []  # both torn down
