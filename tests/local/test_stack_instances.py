"""An endpoint's production variant of several instances on the stack, as on SageMaker: each instance its own
Triton, memory budget and volume; requests routed to where their model is loaded, spilled when it is
swamped; the count changed under traffic without a failed call; the variant's metrics over its instances.

One stack for the module: each instance keeps two models loaded, metrics are published every second.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_deploy import deploy_on, sleepy_model

from mme_triton import MMEClient
from mme_triton._sagemaker import INSTANCE_METRICS_NAMESPACE, METRICS_NAMESPACE
from mme_triton.local import LocalStack
from mme_triton.local.route.status import status_from_json

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.ones((1, 4), dtype=np.float32)
SLOTS = 2


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """Each instance keeps two models loaded; metrics are published every second."""
    with LocalStack(max_models=SLOTS, metrics_period=1) as running:
        yield running


def _models(repository: Path, count: int, **options: Any) -> list[Path]:
    """``m2`` ... ``m<count+1>``: ``m<k>`` multiplies by ``k``."""
    return [sleepy_model(repository, f"m{k}", factor=k, **options) for k in range(2, count + 2)]


def _call(client: MMEClient, factor: int) -> bool:
    """One request for ``m<factor>``; whether the answer is that model's."""
    x = np.random.default_rng(factor).standard_normal((1, 4)).astype(np.float32)
    return bool(np.allclose(client.infer(f"m{factor}.tar.gz", {"INPUT0": x})["OUTPUT0"], factor * x))


def _wait_for(answers: list[bool], count: int, timeout: float = 120.0) -> None:
    """Wait until ``count`` answers came back."""
    deadline = time.monotonic() + timeout
    while len(answers) < count:
        assert time.monotonic() < deadline, len(answers)
        time.sleep(0.05)


def _wait_in_service(stack: LocalStack, name: str, timeout: float = 120.0) -> dict[str, Any]:
    sagemaker = stack.client("sagemaker")
    deadline = time.monotonic() + timeout
    while (described := sagemaker.describe_endpoint(EndpointName=name))["EndpointStatus"] != "InService":
        assert time.monotonic() < deadline, described
        time.sleep(0.1)
    return dict(described)


def test_stack_two_instances_serve_a_paired_sequence_from_memory(stack: LocalStack, tmp_path: Path) -> None:
    """Four models, each requested twice at once, in a cycle, with room for two per instance: one instance
    would miss every pair (an LRU of two over a cycle of four); two instances place each model where the
    most room is and load each once, the second request of a pair waiting for the first's load there."""
    deploy_on(stack, "paired", _models(tmp_path, 4), instance_count=2)
    client = MMEClient("paired", boto3_session=stack.boto3_session(), max_concurrency=4)
    runtime = stack.endpoint_runtime("paired")
    assert runtime is not None and [i.instance_id for i in runtime.instances] == ["i-1", "i-2"]

    correct = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        for step in range(24):
            factor = 2 + (step % 4)
            correct += pool.map(lambda f: _call(client, f), [factor, factor])

    assert all(correct) and len(correct) == 48
    assert runtime.loads == 4 and runtime.evictions == 0  # the compulsory misses, nothing more
    held = sorted(sorted(i.loaded_models()) for i in runtime.instances)
    assert [len(models) for models in held] == [2, 2]
    assert sorted(m for models in held for m in models) == [f"m{k}.tar.gz" for k in range(2, 6)]
    status = next(s for s in stack.status() if s.endpoint_name == "paired")
    shown = {i.instance_id: sorted(m.target_model for m in i.loaded) for i in status.instances}
    assert shown == {i.instance_id: sorted(i.loaded_models()) for i in runtime.instances}
    assert status.loads == 4 and len(status.loaded) == 4 and status.not_loaded == []
    again = status_from_json(json.loads(json.dumps({"endpoints": [status.to_dict()]})))
    assert again == [status]  # what `mme-triton local status` reads from the route


def test_stack_scales_two_three_one_instances_under_traffic_without_a_failed_call(
    stack: LocalStack, tmp_path: Path
) -> None:
    """Four clients call three models while Application Auto Scaling's range takes the variant from two
    instances to three (RegisterScalableTarget with a minimum of 3), and UpdateEndpointWeightsAndCapacities
    takes it to one: the new instance starts cold, the removed ones finish their requests first."""
    deploy_on(stack, "scaled", _models(tmp_path, 3, execute=0.02), instance_count=2)
    client = MMEClient("scaled", boto3_session=stack.boto3_session(), max_concurrency=8)
    runtime = stack.endpoint_runtime("scaled")
    assert runtime is not None
    first_two = runtime.instances
    sagemaker, autoscaling = stack.client("sagemaker"), stack.client("application-autoscaling")
    stop = threading.Event()
    answers: list[bool] = []
    failures: list[BaseException] = []

    def traffic(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            try:
                answers.append(_call(client, int(rng.integers(2, 5))))
            except BaseException as exc:  # reported below
                failures.append(exc)

    assert all(_call(client, factor) for factor in (2, 3, 4))
    callers = [threading.Thread(target=traffic, args=(seed,)) for seed in range(4)]
    for caller in callers:
        caller.start()
    try:
        _wait_for(answers, 20)
        target = {
            "ServiceNamespace": "sagemaker",
            "ResourceId": "endpoint/scaled/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        }
        autoscaling.register_scalable_target(**target, MinCapacity=3, MaxCapacity=4)
        three = _wait_in_service(stack, "scaled")["ProductionVariants"][0]
        _wait_for(answers, len(answers) + 20)
        autoscaling.deregister_scalable_target(**target)
        sagemaker.update_endpoint_weights_and_capacities(
            EndpointName="scaled",
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 1}],
        )
        one = _wait_in_service(stack, "scaled")["ProductionVariants"][0]
        remaining = runtime.instances
        _wait_for(answers, len(answers) + 20)
    finally:
        stop.set()
        for caller in callers:
            caller.join()

    assert failures == []
    assert all(answers)
    assert (three["CurrentInstanceCount"], three["DesiredInstanceCount"]) == (3, 3)
    assert (one["CurrentInstanceCount"], one["DesiredInstanceCount"]) == (1, 1)
    assert [i.instance_id for i in remaining] == ["i-1"] and remaining[0] is first_two[0]
    deadline = time.monotonic() + 90
    while any(i.triton.returncode is None for i in first_two[1:]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first_two[1].triton.returncode is not None  # drained, then stopped
    stack.client("sagemaker").delete_endpoint(EndpointName="scaled")


def test_stack_update_endpoint_to_another_instance_count_fails_no_call(
    stack: LocalStack, tmp_path: Path
) -> None:
    """UpdateEndpoint to a config of two instances (a blue/green update, as SageMaker's): calls made during
    it all succeed; the new fleet starts cold, the old instance finishes its requests and stops."""
    models = _models(tmp_path, 2)
    deploy_on(stack, "updated", models)
    before = stack.endpoint_runtime("updated")
    assert before is not None and len(before.instances) == 1
    old = before.instances[0]
    client = MMEClient("updated", boto3_session=stack.boto3_session(), max_concurrency=4)
    stop = threading.Event()
    answers: list[bool] = []
    failures: list[BaseException] = []

    def traffic(factor: int) -> None:
        while not stop.is_set():
            try:
                answers.append(_call(client, factor))
            except BaseException as exc:  # reported below
                failures.append(exc)

    assert _call(client, 2) and _call(client, 3)
    callers = [threading.Thread(target=traffic, args=(factor,)) for factor in (2, 3)]
    for caller in callers:
        caller.start()
    try:
        _wait_for(answers, 10)
        deploy_on(stack, "updated", models, instance_count=2)
        _wait_for(answers, len(answers) + 10)  # from the new instances, once they loaded the models
    finally:
        stop.set()
        for caller in callers:
            caller.join()
    after = stack.endpoint_runtime("updated")

    assert failures == [] and all(answers)
    assert after is not None and after is not before and len(after.instances) == 2
    assert [i.instance_id for i in after.instances] == ["i-2", "i-3"]  # never a name twice
    deadline = time.monotonic() + 90
    while old.triton.returncode is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert old.triton.returncode is not None
    stack.client("sagemaker").delete_endpoint(EndpointName="updated")


def test_stack_four_instances_each_take_one_of_four_models(stack: LocalStack, tmp_path: Path) -> None:
    """A four-instance endpoint on this machine: a model no instance holds goes to the instance with the
    most free memory, so four models land on four instances."""
    deploy_on(stack, "four", _models(tmp_path, 4), instance_count=4)
    client = MMEClient("four", boto3_session=stack.boto3_session())
    runtime = stack.endpoint_runtime("four")
    assert runtime is not None

    assert all(_call(client, factor) for factor in (2, 3, 4, 5, 2, 3, 4, 5))

    assert [len(i.loaded_models()) for i in runtime.instances] == [1, 1, 1, 1]
    assert runtime.loads == 4
    stack.client("sagemaker").delete_endpoint(EndpointName="four")


def test_stack_spills_a_swamped_model_to_another_instance(stack: LocalStack, tmp_path: Path) -> None:
    """A model whose execution takes 1.5 s, one model instance: with one request running, the next would
    wait longer than the model's cold start and 1 s, so it goes to the other instance, which loads the model
    too; the one after goes there as well (a shorter wait than behind two)."""
    deploy_on(stack, "spill", [sleepy_model(tmp_path, "heavy", factor=7, execute=1.5)], instance_count=2)
    client = MMEClient("spill", boto3_session=stack.boto3_session(), max_concurrency=4)
    runtime = stack.endpoint_runtime("spill")
    assert runtime is not None
    x = np.ones((1, 4), np.float32)
    np.testing.assert_allclose(client.infer("heavy.tar.gz", {"INPUT0": x})["OUTPUT0"], 7 * x)
    assert runtime.loads == 1

    def call(_: int) -> Any:
        return client.infer("heavy.tar.gz", {"INPUT0": x})["OUTPUT0"]

    with ThreadPoolExecutor(max_workers=3) as pool:
        starts = []
        outputs = []
        for index in range(3):
            starts.append(pool.submit(call, index))
            time.sleep(0.2)  # one after the other, while the first runs
        outputs = [future.result() for future in starts]

    for output in outputs:
        np.testing.assert_allclose(output, 7 * x)
    assert [i.loaded_models() for i in runtime.instances] == [["heavy.tar.gz"], ["heavy.tar.gz"]]
    assert runtime.loads == 2
    stack.client("sagemaker").delete_endpoint(EndpointName="spill")


def _statistics(stack: LocalStack, namespace: str, metric: str, since: datetime) -> list[dict[str, Any]]:
    """The per-second datapoints of ``metric`` of endpoint ``counted``, oldest first."""
    points = stack.client("cloudwatch").get_metric_statistics(
        Namespace=namespace,
        MetricName=metric,
        Dimensions=[
            {"Name": "EndpointName", "Value": "counted"},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
        StartTime=since,
        EndTime=datetime.now(timezone.utc) + timedelta(minutes=1),
        Period=1,
        Statistics=["Sum", "SampleCount", "Average", "Maximum"],
    )["Datapoints"]
    return sorted(points, key=lambda point: point["Timestamp"])


def test_stack_metrics_of_two_instances_are_the_counts_made_by_hand(
    stack: LocalStack, tmp_path: Path
) -> None:
    """Sixteen requests, four models in pairs, on two instances that hold two each: 16 invocations, 8 per
    instance (``InvocationsPerInstance`` is 1/2 per request), 4 misses (the first request of each model),
    4 downloads and loads, no unload; each instance publishes its own ``LoadedModelCount`` (2), so a
    window has two samples, Sum 4 and Average 2, as SageMaker aggregates a variant's instances."""
    since = datetime.now(timezone.utc) - timedelta(seconds=5)
    deploy_on(stack, "counted", _models(tmp_path, 4), instance_count=2)
    client = MMEClient("counted", boto3_session=stack.boto3_session())
    factors = [2 + (step // 2) % 4 for step in range(16)]  # 2 2 3 3 4 4 5 5 2 2 ...

    assert all(_call(client, factor) for factor in factors)
    time.sleep(2.5)  # a few windows with every model loaded on both instances
    stack.metrics.flush()

    def total(metric: str, statistic: str) -> float:
        return sum(p[statistic] for p in _statistics(stack, METRICS_NAMESPACE, metric, since))

    assert total("Invocations", "Sum") == 16
    assert total("InvocationsPerInstance", "Sum") == pytest.approx(8)
    assert (total("ModelCacheHit", "Sum"), total("ModelCacheHit", "SampleCount")) == (12, 16)
    assert total("ModelLoadingWaitTime", "SampleCount") == 4
    assert total("ModelLoadingTime", "SampleCount") == 4
    assert total("ModelDownloadingTime", "SampleCount") == 4
    assert total("ModelUnloadingTime", "SampleCount") == 0
    assert total("Invocation4XXErrors", "Sum") + total("Invocation5XXErrors", "Sum") == 0
    loaded = _statistics(stack, INSTANCE_METRICS_NAMESPACE, "LoadedModelCount", since)[-1]
    assert (loaded["SampleCount"], loaded["Sum"], loaded["Average"], loaded["Maximum"]) == (2, 4, 2, 2)
    memory = _statistics(stack, INSTANCE_METRICS_NAMESPACE, "MemoryUtilization", since)[-1]
    assert memory["SampleCount"] == 2 and 0 < memory["Maximum"] < 100  # one sample per instance
    stack.client("sagemaker").delete_endpoint(EndpointName="counted")
