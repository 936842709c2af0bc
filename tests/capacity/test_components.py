"""Hosting as inference components: copy counts, placement, routing among copies, and the plan that
compares it with a multi-model endpoint — answers known by construction."""

from __future__ import annotations

import pytest

from mme_triton import CapacityPlan, InstanceType, ModelProfile, Traffic, plan_capacity
from mme_triton.capacity import simulate

GiB = 1024**3
MiB = 1024**2


def _cpu(vcpus: int, memory_gib: int) -> InstanceType:
    return InstanceType("ml.test.cpu", memory_bytes=memory_gib * GiB, vcpus=vcpus, reserved_bytes=GiB)


def _model(name: str = "m", **changes: object) -> ModelProfile:
    fields: dict[str, object] = {"memory_bytes": 512 * MiB, "cold_start_s": 5.0, "service_time_s": 0.1}
    fields.update(changes)
    return ModelProfile(name, **fields)  # type: ignore[arg-type]


def test_components_get_the_copies_that_keep_each_at_the_utilization_asked() -> None:
    """20 requests/s of 0.1 s on copies of one reserved core each, kept at most 70 % busy: 2 CPU-seconds a
    second need 3 copies (2 would be 100 % busy)."""
    model = _model()
    traffic = Traffic.uniform([model], rate=20, duration=300, seed=0)
    result = simulate([model], traffic, _cpu(8, 32), 1, hosting="inference-components")
    assert result.copies == {"m": 3}
    assert result.placement_failure is None and result.errors == {name: 0 for name in result.errors}
    assert result.loads == 0 and result.hit_ratio == 1.0  # copies stay loaded: no cold start ever
    assert 0.6 < result.processor_utilization <= 0.7  # the busiest copy, near the target
    assert result.latency_percentile(50) == pytest.approx(0.1)  # alone on its core: the service time
    more = simulate([model], traffic, _cpu(8, 32), 1, hosting="inference-components", copy_utilization=0.45)
    assert more.copies == {"m": 5}  # 2 CPU-seconds a second (and Poisson's few more) at 0.45 a copy


def test_components_that_fit_no_instance_fail_the_plan_and_their_requests() -> None:
    """Ten models of one core each on 4-vCPU instances: two instances place 8 copies, three place all."""
    model = _model(copies=10, service_time_s=0.01)
    traffic = Traffic.uniform([model], rate=20, duration=120, seed=0)
    two = simulate([model], traffic, _cpu(4, 32), 2, hosting="inference-components")
    assert two.placement_failure is not None and two.placement_failure.startswith("2 of 10 component copies")
    assert "4 vCPUs" in two.placement_failure
    assert 0 < two.errors["no_capacity"] < len(traffic)
    three = simulate([model], traffic, _cpu(4, 32), 3, hosting="inference-components")
    assert three.placement_failure is None and three.failed == 0
    assert sorted(three.peak_models) == [3, 3, 4]  # spread: the most room left first


def test_components_reserve_memory_per_copy() -> None:
    """Copies reserve the model's memory and its container's: 3 GiB copies, 8 GiB of room on an instance
    with 9 GiB (1 GiB kept): two fit per instance."""
    model = _model(memory_bytes=3 * GiB - 256 * MiB, copies=4, component_cpus=0.25)
    assert model.component_memory == 3 * GiB
    traffic = Traffic.uniform([model], rate=1, duration=60, seed=0)
    one = simulate([model], traffic, _cpu(16, 9), 1, hosting="inference-components")
    assert one.placement_failure is not None and one.placement_failure.startswith("2 of 4")
    assert (
        simulate([model], traffic, _cpu(16, 9), 2, hosting="inference-components").placement_failure is None
    )


def test_a_copys_executions_share_only_its_reserved_cores() -> None:
    """Half a core per copy: one execution alone runs at half speed (0.2 s for 0.1 s of work), though the
    instance has cores to spare: the reservation is the limit."""
    model = _model(component_cpus=0.5, service_time_s=0.1)
    traffic = Traffic.trace([(0.0, "m"), (10.0, "m")])
    result = simulate([model], traffic, _cpu(8, 32), 1, hosting="inference-components")
    assert result.latency_s.tolist() == pytest.approx([0.2, 0.2])


@pytest.mark.parametrize(("routing", "busiest"), [("LEAST_OUTSTANDING_REQUESTS", 1), ("RANDOM", 2)])
def test_routing_among_copies_follows_the_routing_config(routing: str, busiest: int) -> None:
    """Two copies (forced by 1 s of work at 1.5 requests/s), requests at once in pairs: least outstanding
    sends each pair's second to the idle copy; random sends some to the busy one."""
    model = _model(service_time_s=1.0)
    rows = [(float(t), "m") for t in range(0, 60, 2) for _ in range(2)]
    traffic = Traffic.trace(rows, duration=60)
    result = simulate([model], traffic, _cpu(8, 32), 1, hosting="inference-components", routing=routing)
    assert result.copies == {"m": 2}
    waited = int((result.latency_s > 1.5).sum())
    assert (waited == 0) if busiest == 1 else (waited > 0)


def test_gpu_copies_reserve_whole_gpus() -> None:
    """On a one-GPU type each copy needs a GPU: five models need five instances as components, where a
    multi-model endpoint shares one GPU among them."""
    gpu = InstanceType("ml.test.gpu", memory_bytes=64 * GiB, vcpus=8, gpus=1, gpu_memory_bytes=24 * GiB)
    model = _model(copies=5, service_time_s=0.01, cold_start_s=1.5)
    traffic = Traffic.uniform([model], rate=5, duration=300, seed=0)
    plan = plan_capacity(
        [model], traffic, instance_types=[gpu], instance_counts=[1, 5], p99="2s",
        hosting=("mme", "inference-components"),
    )  # fmt: skip
    by = {(row.hosting, row.instance_count): row for row in plan.rows}
    assert by[("inference-components", 1)].meets_targets is False
    assert "4 of 5 component copies fit no instance" in by[("inference-components", 1)].reason
    assert by[("inference-components", 5)].meets_targets
    assert by[("mme", 1)].meets_targets
    assert plan.best is not None and (plan.best.hosting, plan.best.instance_count) == ("mme", 1)


def test_plan_compares_both_hostings_and_keeps_them_in_json_and_csv() -> None:
    model = _model(copies=3, service_time_s=0.02)
    traffic = Traffic.uniform([model], rate=6, duration=300, seed=0)
    plan = plan_capacity(
        [model], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[1, 2],
        hosting=("mme", "inference-components"), p99="1s",
    )  # fmt: skip
    assert [(row.hosting, row.instance_count) for row in plan.rows] == [
        ("mme", 1), ("mme", 2), ("inference-components", 1), ("inference-components", 2),
    ]  # fmt: skip
    assert [row.copies for row in plan.rows] == [None, None, 3, 3]
    again = CapacityPlan.from_json(plan.to_json())
    assert [(row.hosting, row.copies) for row in again.rows] == [
        (row.hosting, row.copies) for row in plan.rows
    ]
    text = str(plan)
    assert "1 x ml.c5.xlarge, ICs (3 copies)" in text


def test_multi_model_endpoints_take_single_gpu_types() -> None:
    four = InstanceType("ml.test.4gpu", memory_bytes=192 * GiB, vcpus=48, gpus=4, gpu_memory_bytes=24 * GiB)
    model = _model(copies=4)
    traffic = Traffic.uniform([model], rate=1, duration=60, seed=0)
    plan = plan_capacity(
        [model], traffic, instance_types=[four], instance_counts=[1], hosting=("mme", "inference-components")
    )
    mme, components = plan.rows
    assert not mme.meets_targets and "single-GPU" in mme.reason
    assert components.meets_targets and components.copies == 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hosting": "serverless"}, "hosting is one or more of"),
        ({"hosting": ()}, "hosting is empty"),
        ({"hosting": "inference-components", "routing": "ROUND_ROBIN"}, "routing is one of"),
        ({"hosting": "inference-components", "copy_utilization": 1.5}, "copy_utilization is a fraction"),
    ],
    ids=["hosting", "no-hosting", "routing", "utilization"],
)
def test_plan_capacity_refuses_bad_hosting_options(options: dict[str, object], message: str) -> None:
    model = _model()
    traffic = Traffic.uniform([model], rate=1, duration=60, seed=0)
    with pytest.raises(ValueError, match=message):
        plan_capacity([model], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[1], **options)  # type: ignore[arg-type]


def test_component_profile_fields_are_checked_and_read_from_files() -> None:
    with pytest.raises(ValueError, match=r"component_cpus is at least 0\.25"):
        _model(component_cpus=0.1)
    with pytest.raises(ValueError, match="component_memory_bytes is at least 128 MiB"):
        _model(component_memory_bytes=64 * MiB)
    read = ModelProfile.from_dict(
        {"name": "m", "memory_bytes": "1GiB", "cold_start_s": 2, "service_time_s": "10ms",
         "component_memory_bytes": "2GiB", "component_cpus": "0.5", "component_accelerators": 2}
    )  # fmt: skip
    assert (read.component_memory, read.component_cpus, read.component_accelerators) == (2 * GiB, 0.5, 2)
