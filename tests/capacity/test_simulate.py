"""The simulation gives the answers known by construction: cache behaviour, queueing, SageMaker's limits."""

from __future__ import annotations

import numpy as np
import pytest

from mme_triton._multimodel import IDLE_AFTER_S
from mme_triton.capacity.profile import ModelProfile
from mme_triton.capacity.simulate import simulate
from mme_triton.capacity.traffic import Traffic
from mme_triton.endpoint.instance_specs import InstanceType

GiB = 1024**3


def _instance(models_that_fit: int) -> InstanceType:
    """An instance whose memory for models holds exactly ``models_that_fit`` 1 GiB models."""
    return InstanceType(
        "ml.test.xlarge", memory_bytes=(models_that_fit + 1) * GiB, vcpus=4, reserved_bytes=GiB
    )


def _model(name: str = "m", **changes: object) -> ModelProfile:
    fields: dict[str, object] = {"memory_bytes": GiB, "cold_start_s": 0.0, "service_time_s": 0.01}
    fields.update(changes)
    return ModelProfile(name, **fields)  # type: ignore[arg-type]


def test_simulate_one_model_hits_every_request_after_the_first() -> None:
    model = _model()
    traffic = Traffic.uniform([model], rate=20, duration=600, seed=0)
    result = simulate([model], traffic, _instance(1))
    assert (result.misses, result.hits, result.loads, result.unloads) == (1, len(traffic) - 1, 1, 0)
    assert result.hit_ratio == (len(traffic) - 1) / len(traffic)


def test_simulate_one_model_requests_during_its_load_are_misses_that_wait() -> None:
    model = _model(cold_start_s=5.0)
    traffic = Traffic.trace([(0.0, "m"), (2.0, "m"), (6.0, "m"), (7.0, "m")])
    result = simulate([model], traffic, _instance(1))
    assert result.hit.tolist() == [False, False, True, True]
    assert result.load_wait_s.tolist() == [5.0, 3.0, 0.0, 0.0]
    assert result.load_wait_stats()["max"] == 5.0


def test_simulate_budget_for_every_model_misses_once_per_model() -> None:
    models = [_model(f"m{k}") for k in range(20)]
    traffic = Traffic.zipf(models, s=1.1, rate=50, duration=600, seed=0)
    result = simulate(models, traffic, _instance(20))
    assert result.misses == len(set(traffic.targets.tolist())) == 20
    assert (result.loads, result.unloads) == (20, 0)


def test_simulate_cyclic_scan_of_one_more_model_than_fits_misses_every_request() -> None:
    models = [_model(f"m{k}", cold_start_s=0.1) for k in range(5)]
    rows = [(float(i), f"m{i % 5}") for i in range(200)]
    result = simulate(models, Traffic.trace(rows), _instance(4))
    assert (result.hits, result.loads, result.unloads) == (0, 200, 196)
    assert max(result.peak_models) == 4
    assert max(result.peak_bytes) == 4 * GiB


def test_simulate_queue_of_one_server_gives_the_known_waits() -> None:
    model = _model(cold_start_s=2.0, service_time_s=1.0)
    traffic = Traffic.trace([(0.0, "m"), (0.5, "m"), (1.0, "m"), (10.0, "m")])
    result = simulate([model], traffic, _instance(1))
    # loaded at 2 s, then served one after another: ends at 3, 4, 5; the last alone
    assert result.latency_s.tolist() == [3.0, 3.5, 4.0, 1.0]
    assert result.load_wait_s.tolist() == [2.0, 1.5, 1.0, 0.0]


def test_simulate_model_instances_serve_in_parallel() -> None:
    model = _model(service_time_s=1.0, instances=2)
    traffic = Traffic.trace([(0.0, "m"), (0.0, "m"), (0.0, "m"), (0.0, "m"), (0.0, "m")])
    assert simulate([model], traffic, _instance(1)).latency_s.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0]


def test_simulate_dynamic_batching_runs_waiting_requests_together() -> None:
    model = _model(cold_start_s=2.0, service_time_s=1.0, max_batch_size=4, batch_item_s=0.1)
    traffic = Traffic.trace([(0.0, "m"), (0.5, "m"), (1.0, "m"), (1.5, "m"), (1.9, "m")])
    result = simulate([model], traffic, _instance(1))
    # the first four run as one execution from 2.0 to 3.3, the fifth after them, alone: 3.3 to 4.3
    assert result.latency_s == pytest.approx([3.3, 2.8, 2.3, 1.8, 2.4])


def test_simulate_never_unloads_a_model_in_use() -> None:
    models = [_model("a", service_time_s=10.0), _model("b", service_time_s=1.0)]
    result = simulate(models, Traffic.trace([(0.0, "a"), (1.0, "b")]), _instance(1))
    # b waits until a's request ends at 10 s and a stays unused IDLE_AFTER_S, a is unloaded, b loads at
    # once and runs 1 s
    assert result.latency_s.tolist() == pytest.approx([10.0, 10.0 + IDLE_AFTER_S])
    assert result.load_wait_s.tolist() == pytest.approx([0.0, 9.0 + IDLE_AFTER_S])
    assert (result.loads, result.unloads) == (2, 1)


def test_simulate_never_unloads_a_model_called_in_a_loop_while_two_others_take_turns() -> None:
    """A hot model called every 0.3 s (its requests never overlap, so it has moments with none in flight)
    with room for two: the two other models requested at once take turns in the second slot, each
    evicting the other once it is unused; the hot model is never a victim."""
    hot = _model("hot", service_time_s=0.01)
    slow = [_model(name, cold_start_s=4.0, unload_s=2.0, service_time_s=0.01) for name in ("a", "b")]
    calls = [(0.3 * k, "hot") for k in range(100)] + [(3.0, "a"), (3.0, "b")]
    result = simulate([hot, *slow], Traffic.trace(sorted(calls)), _instance(2))
    hot_requests = [i for i, (_, name) in enumerate(sorted(calls)) if name == "hot"]
    assert result.hit[hot_requests[1:]].all()  # only its first request missed
    assert (result.loads, result.unloads) == (3, 1)  # hot, a, then b in a's place


def test_simulate_load_waits_only_for_the_unloads_that_free_its_memory() -> None:
    """Room for two, both held by unused models that unload in 5 s and 1 s; two loads asked at once each
    unload one: the memory the 1 s unload frees is used at once (by the first load in line), not after
    the 5 s unload the first load chose (before, the second load waited behind it: 7 s and 8 s)."""
    models = [
        _model("a_slow_unload", unload_s=5.0),
        _model("b_quick_unload", unload_s=1.0),
        _model("c", cold_start_s=2.0),
        _model("d", cold_start_s=2.0),
    ]
    traffic = Traffic.trace([(0.0, "a_slow_unload"), (0.0, "b_quick_unload"), (10.0, "c"), (10.0, "d")])
    result = simulate(models, traffic, _instance(2))
    # one load starts when the 1 s unload ends (3 s with its 2 s load), the other after the 5 s one
    assert sorted(result.load_wait_s.tolist()[2:]) == pytest.approx([3.0, 7.0])
    assert (result.loads, result.unloads) == (4, 2)


def test_simulate_runs_loads_that_fit_side_by_side() -> None:
    models = [_model("a", cold_start_s=4.0), _model("b", cold_start_s=4.0)]
    result = simulate(models, Traffic.trace([(0.0, "a"), (0.0, "b")]), _instance(2))
    assert result.load_wait_s.tolist() == [4.0, 4.0]


def test_simulate_unload_time_holds_the_memory() -> None:
    models = [_model("a", unload_s=5.0), _model("b", cold_start_s=2.0, service_time_s=1.0)]
    result = simulate(models, Traffic.trace([(0.0, "a"), (1.0, "b")]), _instance(1))
    assert result.load_wait_s[1] == pytest.approx(7.0)  # 5 s unload, then the 2 s load
    assert result.latency_s[1] == pytest.approx(8.0)


def test_simulate_reload_from_the_volume_takes_reload_s() -> None:
    models = [_model("a", cold_start_s=10.0, reload_s=1.0), _model("b")]
    traffic = Traffic.trace([(0.0, "a"), (20.0, "b"), (40.0, "a")])
    result = simulate(models, traffic, _instance(1))
    assert result.load_wait_s.tolist() == [10.0, 0.0, 1.0]


def test_simulate_download_holds_no_memory_the_load_after_it_does() -> None:
    busy = _model("a", service_time_s=10.0)
    split = _model("b", cold_start_s=8.0, reload_s=2.0)
    result = simulate([busy, split], Traffic.trace([(0.0, "a"), (1.0, "b")]), _instance(1))
    # b downloads from 1 to 7, then waits for a to be unused (its request ends at 10), then loads for 2 s
    assert result.load_wait_s[1] == pytest.approx(11.0 + IDLE_AFTER_S)
    assert (result.downloads, result.loads) == (1, 2)
    whole = _model("b", cold_start_s=8.0)
    result = simulate([busy, whole], Traffic.trace([(0.0, "a"), (1.0, "b")]), _instance(1))
    # without reload_s the 8 s cold start is all load: it starts when a's memory comes free
    assert result.load_wait_s[1] == pytest.approx(17.0 + IDLE_AFTER_S)
    assert result.downloads == 0


def test_simulate_load_past_60_s_answers_model_not_ready_and_goes_on() -> None:
    model = _model(cold_start_s=70.0)
    result = simulate([model], Traffic.trace([(0.0, "m"), (100.0, "m")]), _instance(1))
    assert result.errors == {"not_ready": 1, "timed_out": 0, "too_large": 0, "no_capacity": 0}
    assert result.latency_s[0] == 60.0
    assert result.hit.tolist() == [False, True]


def test_simulate_load_past_360_s_fails_and_is_tried_again() -> None:
    model = _model(cold_start_s=400.0)
    result = simulate([model], Traffic.trace([(0.0, "m"), (500.0, "m")]), _instance(1))
    assert (result.failed_loads, result.loads, result.errors["not_ready"]) == (2, 2, 2)


def test_simulate_request_past_60_s_times_out() -> None:
    model = _model(service_time_s=70.0)
    result = simulate([model], Traffic.trace([(0.0, "m")]), _instance(1))
    assert result.errors["timed_out"] == 1 and result.latency_s[0] == 60.0


def test_simulate_model_larger_than_the_instance_fails_without_a_load() -> None:
    model = _model(memory_bytes=3 * GiB)
    result = simulate([model], Traffic.trace([(0.0, "m"), (1.0, "m")]), _instance(2))
    assert (result.errors["too_large"], result.loads) == (2, 0)
    assert result.latency_percentile(50) == 0.0  # no request reached a model
    mixed = simulate(
        [model, _model("small", service_time_s=0.5)],
        Traffic.trace([(0.0, "m"), (1.0, "small"), (2.0, "m")]),
        _instance(2),
    )
    assert mixed.latency_percentile(0) == mixed.latency_percentile(100) == 0.5


def test_simulate_routes_a_model_to_the_instance_that_holds_it() -> None:
    models = [_model("a"), _model("b")]
    traffic = Traffic.uniform(models, rate=20, duration=300, seed=0)
    result = simulate(models, traffic, _instance(1), 2)
    assert (result.misses, result.loads, result.unloads) == (2, 2, 0)
    for model in (0, 1):
        assert len(set(result.instance[traffic.targets == model].tolist())) == 1


def test_simulate_sends_a_swamped_model_to_another_instance() -> None:
    model = _model(cold_start_s=3.0, service_time_s=1.0)
    traffic = Traffic.uniform([model], rate=1.5, duration=300, seed=0)
    one = simulate([model], traffic, _instance(1), 1)
    two = simulate([model], traffic, _instance(1), 2)
    assert (one.loads, two.loads) == (1, 2)
    assert set(two.instance.tolist()) == {0, 1}
    assert two.latency_percentile(99) < one.latency_percentile(99)


def test_simulate_two_instances_serve_a_paired_sequence_from_memory() -> None:
    """Four models, each requested twice in a row, in a cycle, with room for two per instance: one instance
    misses the first request of every pair (an LRU of two over a cycle of four); two instances place the
    four models on the instance with the most room and miss only the first pair of each model."""
    models = [_model(name, cold_start_s=0.5) for name in "abcd"]
    calls = [(float(k), "abcd"[(k // 2) % 4]) for k in range(64)]
    one = simulate(models, Traffic.trace(calls), _instance(2), 1)
    two = simulate(models, Traffic.trace(calls), _instance(2), 2)
    assert one.misses == 32
    assert (two.misses, two.loads, two.unloads) == (4, 4, 0)
    assert sorted(np.bincount(two.instance, minlength=2).tolist()) == [32, 32]


def test_simulate_is_repeatable() -> None:
    models = [_model(f"m{k}", cold_start_s=2.0) for k in range(30)]
    traffic = Traffic.zipf(models, s=0.9, rate=30, duration=300, seed=5)
    first, again = (simulate(models, traffic, _instance(8), 3, seed=1) for _ in range(2))
    assert np.array_equal(first.latency_s, again.latency_s)
    assert np.array_equal(first.instance, again.instance)
    assert first.summary() == again.summary()


def test_simulate_summary_has_the_endpoint_metrics_keys() -> None:
    model = _model()
    summary = simulate([model], Traffic.trace([(0.0, "m"), (1.0, "m")]), _instance(1)).summary()
    expected = {"invocations", "cache_hit_ratio", "loads", "unloads", "load_wait_mean_s", "load_wait_max_s"}
    assert expected | {"errors_4xx", "errors_5xx"} <= set(summary)
    assert (summary["invocations"], summary["cache_hit_ratio"], summary["loads"]) == (2, 0.5, 1)


def test_simulate_refuses_bad_input() -> None:
    model = _model()
    traffic = Traffic.trace([(0.0, "m"), (1.0, "other")])
    with pytest.raises(ValueError, match="the traffic names models without a profile: 'other'"):
        simulate([model], traffic, _instance(1))
    with pytest.raises(ValueError, match="instance_count must be an integer >= 1"):
        simulate([model], Traffic.trace([(0.0, "m")]), _instance(1), 0)
    with pytest.raises(ValueError, match=r"no hardware figures for instance type 'ml\.nope'"):
        simulate([model], Traffic.trace([(0.0, "m")]), "ml.nope")
    with pytest.raises(TypeError, match="traffic must be a Traffic"):
        simulate([model], [(0.0, "m")], _instance(1))  # type: ignore[arg-type]


def _cpus(count: int, models_that_fit: int = 8) -> InstanceType:
    """An instance of ``count`` vCPUs with room for ``models_that_fit`` 1 GiB models."""
    return InstanceType(
        "ml.test.cpus", memory_bytes=(models_that_fit + 1) * GiB, vcpus=count, reserved_bytes=GiB
    )


def test_simulate_executions_share_the_processors() -> None:
    """Two models' executions of 1 s each, at once, on one vCPU: each runs at half speed and both end at
    2 s (on four vCPUs they do not slow each other: 1 s each)."""
    models = [_model("a", service_time_s=1.0), _model("b", service_time_s=1.0)]
    traffic = Traffic.trace([(0.0, "a"), (0.0, "b")])
    assert simulate(models, traffic, _cpus(1)).latency_s.tolist() == pytest.approx([2.0, 2.0])
    assert simulate(models, traffic, _cpus(4)).latency_s.tolist() == pytest.approx([1.0, 1.0])


def test_simulate_processor_sharing_ends_the_shorter_execution_first() -> None:
    """1 s and 3 s of work at once on one vCPU: both at half speed until the short one ends at 2 s, then
    the long one alone at full speed for its last 2 s: it ends at 4 s."""
    models = [_model("short", service_time_s=1.0), _model("long", service_time_s=3.0)]
    traffic = Traffic.trace([(0.0, "long"), (0.0, "short")])
    result = simulate(models, traffic, _cpus(1))
    assert result.latency_s.tolist() == pytest.approx([4.0, 2.0])
    assert result.busy_s == pytest.approx((4.0,))


def test_simulate_eight_executions_on_four_processors_take_twice_as_long() -> None:
    models = [_model(f"m{k}", service_time_s=1.0) for k in range(8)]
    traffic = Traffic.trace([(0.0, f"m{k}") for k in range(8)])
    result = simulate(models, traffic, _cpus(4))
    assert result.latency_s.tolist() == pytest.approx([2.0] * 8)


def test_simulate_processor_utilization_is_the_busiest_instances_work_over_its_capacity() -> None:
    models = [_model(f"m{k}", service_time_s=0.2) for k in range(4)]
    traffic = Traffic.uniform(models, rate=10, duration=100, seed=0)  # 2 CPU-seconds per second
    one = simulate(models, traffic, _cpus(4))
    assert one.processors == 4
    assert one.processor_utilization == pytest.approx(len(traffic) * 0.2 / (4 * traffic.duration))
    assert 0.45 < one.processor_utilization < 0.55
    overloaded = simulate(models, traffic, _cpus(1))
    assert overloaded.processor_utilization > 1.9
    assert overloaded.latency_percentile(99) > 10 * one.latency_percentile(99)  # queues without end


def test_simulate_gpu_type_shares_its_gpu_not_its_vcpus() -> None:
    gpu = InstanceType(
        "ml.test.gpu", memory_bytes=16 * GiB, vcpus=8, gpus=1, gpu_memory_bytes=4 * GiB, reserved_bytes=GiB
    )
    models = [_model("a", service_time_s=1.0), _model("b", service_time_s=1.0)]
    result = simulate(models, Traffic.trace([(0.0, "a"), (0.0, "b")]), gpu)
    assert result.processors == 1
    assert result.latency_s.tolist() == pytest.approx([2.0, 2.0])
