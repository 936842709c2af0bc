"""Timing on the embedded stack as on SageMaker: a loaded model does not wait for other models' loads and
unloads, the memory budget holds under concurrency, and an invocation has one 60 s budget.

The models sleep a known time in ``initialize``, ``finalize`` or ``execute``; the tests assert what waited
behind what (a hot model's call against a 3 s load or unload), never how fast the machine is.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

sys.path.insert(0, str(Path(__file__).parent))
from stack_deploy import deploy_on, sleepy_model

from mme_triton import MMEClient
from mme_triton.local import LocalStack

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.ones((1, 4), dtype=np.float32)


def _deploy(stack: LocalStack, name: str, models: list[Path]) -> MMEClient:
    deploy_on(stack, name, models)
    return MMEClient(name, boto3_session=stack.boto3_session(), max_concurrency=8)


@contextlib.contextmanager
def _hot_callers(client: MMEClient, count: int = 4) -> Iterator[tuple[list[float], list[BaseException]]]:
    """``count`` clients calling ``hot.tar.gz`` in a loop, each answer checked, for the block: their
    latencies and their failures."""
    stop = threading.Event()
    latencies: list[float] = []
    failures: list[BaseException] = []

    def call_hot() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                out = client.infer("hot.tar.gz", {"INPUT0": X})
            except BaseException as exc:  # reported by the test
                failures.append(exc)
                return
            latencies.append(time.perf_counter() - started)
            np.testing.assert_allclose(out["OUTPUT0"], 2 * X)

    callers = [threading.Thread(target=call_hot) for _ in range(count)]
    for caller in callers:
        caller.start()
    try:
        yield latencies, failures
    finally:
        stop.set()
        for caller in callers:
            caller.join()


@pytest.fixture(scope="module")
def two_slots() -> Iterator[LocalStack]:
    """A stack whose endpoints keep at most two models loaded."""
    with LocalStack(max_models=2) as stack:
        yield stack


def test_stack_hot_model_never_waits_behind_other_models_loads_and_unloads(
    two_slots: LocalStack, tmp_path: Path
) -> None:
    """While two slow models (3 s ``initialize``, 3 s ``finalize``) take turns in the second slot, four
    clients keep calling the hot model: none of its calls waits for a load or an unload. (Without keeping
    its calls off the front-end threads that loads and unloads occupy, calls stalled for the whole 3 s.)"""
    hot = sleepy_model(tmp_path, "hot")
    slow = [sleepy_model(tmp_path, name, initialize=3, finalize=3) for name in ("slow_a", "slow_b")]
    client = _deploy(two_slots, "hot", [hot, *slow])
    client.infer("hot.tar.gz", {"INPUT0": X})
    slow_calls = []
    with _hot_callers(client) as (latencies, failures):
        for name in ("slow_a", "slow_b", "slow_a"):  # each evicts the other (unload 3 s), then loads (3 s)
            started = time.perf_counter()
            client.infer(f"{name}.tar.gz", {"INPUT0": X})
            slow_calls.append(time.perf_counter() - started)
        runtime = two_slots.endpoint_runtime("hot")
        assert runtime is not None
        runtime.wait_for_unloads(timeout=30)

    assert failures == []
    assert runtime.evictions == 2 and runtime.loads == 4  # hot, slow_a, slow_b, slow_a again
    assert min(slow_calls) > 3  # each waited for a 3 s initialize (the last two for an unload too)
    assert len(latencies) > 100
    assert max(latencies) < 1.0, sorted(latencies)[-5:]


def test_stack_hot_model_is_never_a_victim_while_two_models_requested_at_once_take_turns(
    two_slots: LocalStack, tmp_path: Path
) -> None:
    """Room for two: the hot model (four clients calling it in a loop) and one other are loaded when two
    slow models (4 s ``initialize``, 2 s ``finalize``) are requested at the same moment. The first unloads
    the other model; the second waits until the first is unused and unloads it. The hot model has moments
    with no request in flight between its clients' calls, but it is used: never unloaded, never over 1 s.
    (Before, all four of its calls stalled, it was unloaded as if unused and came back after both slow
    models: 19 s.)"""
    hot = sleepy_model(tmp_path, "hot")
    other = sleepy_model(tmp_path, "other", factor=3)
    slow = [sleepy_model(tmp_path, name, factor=4, initialize=4, finalize=2) for name in ("turn_a", "turn_b")]
    client = _deploy(two_slots, "turns", [hot, other, *slow])
    client.infer("hot.tar.gz", {"INPUT0": X})
    client.infer("other.tar.gz", {"INPUT0": X})
    with _hot_callers(client) as (latencies, failures):
        time.sleep(0.5)
        with ThreadPoolExecutor(max_workers=2) as pool:
            answers = list(
                pool.map(lambda name: client.infer(f"{name}.tar.gz", {"INPUT0": X}), ["turn_a", "turn_b"])
            )
        runtime = two_slots.endpoint_runtime("turns")
        assert runtime is not None
        runtime.wait_for_unloads(timeout=30)

    assert failures == []
    for answer in answers:
        np.testing.assert_allclose(answer["OUTPUT0"], 4 * X)
    assert runtime.load_counts["hot.tar.gz"] == 1
    assert runtime.loads == 4 and runtime.evictions == 2  # other, then the first slow model
    assert "hot.tar.gz" in two_slots.loaded_models("turns")
    assert len(latencies) > 100
    assert max(latencies) < 1.0, sorted(latencies)[-5:]


def test_stack_load_waits_for_the_unload_that_frees_its_room_not_for_unrelated_ones(
    two_slots: LocalStack, tmp_path: Path
) -> None:
    """Room for two, both held by unused models, one whose unload takes 5 s (its ``finalize``), the other
    1 s. Two models requested at once each unload one: the first to start does so once the 1 s unload has
    freed its room, before the 5 s unload ends (it used to wait for every unload under way)."""
    slow = sleepy_model(tmp_path, "long_unload", finalize=5)
    quick = sleepy_model(tmp_path, "short_unload", finalize=1)
    wanted = [sleepy_model(tmp_path, name, factor=3) for name in ("wanted_a", "wanted_b")]
    client = _deploy(two_slots, "unloads", [slow, quick, *wanted])
    client.infer("long_unload.tar.gz", {"INPUT0": X})
    client.infer("short_unload.tar.gz", {"INPUT0": X})
    time.sleep(1.0)  # both unused now

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(
            pool.map(lambda name: client.infer(f"{name}.tar.gz", {"INPUT0": X}), ["wanted_a", "wanted_b"])
        )
    runtime = two_slots.endpoint_runtime("unloads")
    assert runtime is not None
    runtime.wait_for_unloads(timeout=30)

    for answer in answers:
        np.testing.assert_allclose(answer["OUTPUT0"], 3 * X)
    events = {
        (what, name): float(moment)
        for what, name, moment in (
            line.split() for line in (tmp_path / "events.log").read_text().splitlines()
        )
    }
    first = min(events[("initialize", "wanted_a")], events[("initialize", "wanted_b")])
    assert events[("finalized", "short_unload")] < first < events[("finalized", "long_unload")], events
    assert runtime.evictions == 2


def test_stack_never_holds_more_models_than_its_budget_under_8_clients(
    two_slots: LocalStack, tmp_path: Path
) -> None:
    """Eight clients call four models in a random order on an endpoint that keeps two: a load starts only
    once the unloads it needs are done, so Triton never holds a third model, even for a moment."""
    models = [sleepy_model(tmp_path, f"times{k}", factor=k) for k in (2, 3, 4, 5)]
    client = _deploy(two_slots, "budget", models)
    triton = two_slots.triton("budget")
    assert triton is not None
    held: list[set[str]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            held.append({p.model.rsplit("_", 2)[0] for p in triton.model_processes()})
            time.sleep(0.01)

    rng = np.random.default_rng(7)
    plan = [(int(rng.integers(2, 6)), rng.standard_normal((1, 4)).astype(np.float32)) for _ in range(32)]

    def call(step: tuple[int, Any]) -> bool:
        factor, x = step
        out = client.infer(f"times{factor}.tar.gz", {"INPUT0": x})
        return bool(np.allclose(out["OUTPUT0"], factor * x))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            correct = list(pool.map(call, plan))
    finally:
        stop.set()
        watcher.join()
    runtime = two_slots.endpoint_runtime("budget")
    assert runtime is not None

    assert all(correct)
    assert runtime.loads > 4  # models were evicted and loaded again
    assert len(held) > 100
    assert max(len(models) for models in held) <= 2, [m for m in held if len(m) > 2][:3]


@pytest.mark.slow
def test_stack_answers_an_invocation_over_60s_with_one_model_error_and_one_execution(
    two_slots: LocalStack, tmp_path: Path
) -> None:
    """A model that takes 65 s: the caller gets SageMaker's ModelError after 60 s, once, and the model ran
    once; a plain boto3 client (legacy retries, read timeout raised above 60 s) does not retry it."""
    sleepy_model(tmp_path, "sleeper", execute=65)
    _deploy(two_slots, "sleeper", [tmp_path / "sleeper"])
    runtime = two_slots.boto3_session().client("sagemaker-runtime", config=Config(read_timeout=90))
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1] * 4}]})

    started = time.monotonic()
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(
            EndpointName="sleeper", TargetModel="sleeper.tar.gz", Body=body, ContentType="application/json"
        )
    elapsed = time.monotonic() - started
    time.sleep(65 - elapsed + 3)  # the execution Triton still runs ends; a retry would have started one

    error: dict[str, Any] = dict(raised.value.response)
    assert error["Error"]["Code"] == "ModelError"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert error["ResponseMetadata"]["RetryAttempts"] == 0
    assert error["OriginalStatusCode"] == 0
    assert error["Error"]["Message"].startswith(
        'Received server error (0) from primary with message "Your invocation timed out while waiting '
        "for a response from container primary. Review the latency metrics for each container in Amazon "
        'CloudWatch, resolve the issue, and try again.". See https://'
    )
    assert 59 < elapsed < 65  # the stack's 60 s, load wait included, not the model's 65 s
    assert (tmp_path / "sleeper.executions").read_text().splitlines() == ["execute"]
