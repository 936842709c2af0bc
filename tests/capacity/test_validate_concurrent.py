"""A plan validated on the stack with many requests in flight, at three utilizations of its processors.

Four copies of a model that spins ``CPU_S`` of CPU per request (tests/capacity/spin.py), planned on an
:class:`InstanceType` that describes this machine (its CPUs, as the stack's Triton uses them), are sent
open-loop Poisson traffic at about 30 %, 60 % and 85 % of those CPUs, warm (every model loaded first). The
prediction follows the requests as they were sent, through the planner's processor model: the executions
share the CPUs. Asserted: the replays ran with requests in flight together, every request answered, the
hit ratio as predicted, and the prediction's utilizations and p99s ordered as the load. How close the
predicted p99 comes to the measured one is a timing on a shared machine: benchmarks/capacity.py reports
it (goal: within 30 %).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mme_triton as mt

from .spin import write_spin_model

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

CPU_S = 0.04
COPIES = 4
DURATION_S = 5.0
UTILIZATIONS = (0.3, 0.6, 0.85)


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from mme_triton.local import LocalStack

    with LocalStack(metrics_period=1) as running:
        yield running


@pytest.fixture(scope="module")
def validations(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[float, tuple[Any, Any]]:
    """Each utilization's plan and validation (one after the other: they share the CPUs they measure)."""
    spin = write_spin_model(tmp_path_factory.mktemp("repository"), CPU_S)
    kind = mt.InstanceType.this_machine()
    profile = mt.ModelProfile(
        "spin.tar.gz", memory_bytes=64 * 2**20, cold_start_s=2.0, reload_s=1.8, unload_s=1.5,
        service_time_s=CPU_S, copies=COPIES,
    )  # fmt: skip
    found = {}
    for utilization in UTILIZATIONS:
        rate = utilization * kind.processors / CPU_S
        traffic = mt.Traffic.uniform([profile], rate=rate, duration=DURATION_S, seed=11)
        plan = mt.plan_capacity([profile], traffic, instance_types=[kind], instance_counts=[1])
        validation = plan.validate(
            {profile.name: spin}, stack=stack, concurrency=64, warm=True,
            endpoint_instance_type="ml.m5.xlarge", endpoint_name=f"concurrent-{round(utilization * 100)}",
        )  # fmt: skip
        found[utilization] = (plan, validation)
    return found


@pytest.mark.parametrize("utilization", UTILIZATIONS)
def test_concurrent_validation_replays_open_loop_with_requests_in_flight(
    validations: dict[float, tuple[Any, Any]], utilization: float
) -> None:
    plan, validation = validations[utilization]
    row = plan.rows[0]
    assert row.instance_type == "this-machine" and row.processors == mt.InstanceType.this_machine().processors
    assert row.processor_utilization == pytest.approx(utilization, abs=0.1)
    assert validation.failed == 0 and validation.requests == row.requests
    assert validation.measured["invocations"] == validation.requests  # the warm-up is not counted
    assert validation.in_flight_max >= 2
    hit = validation["cache_hit_ratio"]
    assert hit.measured == pytest.approx(hit.predicted, abs=0.05), str(validation)
    assert (validation.measured["loads"], validation.predicted["loads"]) == (0, 0)  # warm: all loaded


def test_concurrent_validation_predicts_more_waiting_as_the_processors_fill(
    validations: dict[float, tuple[Any, Any]],
) -> None:
    rows = [validations[u][0].rows[0] for u in UTILIZATIONS]
    assert [row.processor_utilization for row in rows] == sorted(row.processor_utilization for row in rows)
    assert rows[0].p99_s < rows[-1].p99_s and rows[-1].p99_s > 1.5 * CPU_S  # the CPUs are shared: queues
    for utilization in UTILIZATIONS:
        validation = validations[utilization][1]
        p99 = validation["p99_s"]
        assert p99.predicted is not None and p99.predicted >= CPU_S
        assert p99.measured is not None and p99.measured >= CPU_S  # no request is faster than its spin
        assert any("requests in flight together" in note for note in validation.notes)


def test_validation_of_a_plan_for_a_type_of_its_own_needs_the_type_to_deploy(tmp_path: Path) -> None:
    profile = mt.ModelProfile("spin.tar.gz", memory_bytes=2**20, cold_start_s=1.0, service_time_s=CPU_S)
    traffic = mt.Traffic.uniform([profile], rate=1, duration=10, seed=0)
    plan = mt.plan_capacity(
        [profile], traffic, instance_types=[mt.InstanceType.this_machine()], instance_counts=[1]
    )
    assert mt.CapacityPlan.from_json(plan.to_json()).instance_type("this-machine").processors >= 1
    with pytest.raises(ValueError, match="endpoint_instance_type="):
        plan.validate({"spin.tar.gz": tmp_path}, boto3_session=object(), role="r", model_data_url="s3://b/p/")
