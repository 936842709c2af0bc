"""A plan validated on the embedded stack: the predicted cache-hit ratio is the measured one.

Six copies of a tiny python model, a stack that keeps four loaded per instance (``max_models=4``), three
traffic mixes (uniform, Zipf 0.8, Zipf 1.2) on one instance, and the uniform one on two instances (the
stack routes among them by the simulation's rules). One client sends the requests one after the other,
so each request finds the cache as the requests before it left it: under LRU its hit or miss follows
from the sequence alone, which the simulation replays. The hit ratio is read from the stack's own
CloudWatch metrics. Timings are not asserted (the stack's loads and unloads take seconds on a busy
machine): benchmarks/capacity.py reports the p99 errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import mme_triton as mt

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

MiB = 1024**2
MODELS = 6
HELD = 4
REQUESTS = 48


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mt.new_python_model(  # a pass-through model
        tmp_path_factory.mktemp("repository"),
        "tiny",
        inputs={"INPUT0": ("FP32", [4])},
        outputs={"OUTPUT0": ("FP32", [4])},
        max_batch_size=8,
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from mme_triton.local import LocalStack

    with LocalStack(max_models=HELD, metrics_period=1) as running:
        yield running


# The stack's figures, roughly (a load about 2 s, an unload 2 s): the hit ratio does not depend on them.
PROFILE = mt.ModelProfile(
    "tiny.tar.gz", memory_bytes=40 * MiB, cold_start_s=2.0, reload_s=1.8, unload_s=2.0,
    service_time_s=0.005, copies=MODELS,
)  # fmt: skip


MIXES = ("uniform", "zipf-0.8", "zipf-1.2", "uniform-2-instances")


def _validate(stack: Any, tiny: Path, mix: str) -> Any:
    if mix.startswith("uniform"):
        traffic = mt.Traffic.uniform([PROFILE], rate=5, duration=60, seed=7)
    else:
        traffic = mt.Traffic.zipf([PROFILE], s=float(mix.split("-")[1]), rate=5, duration=60, seed=7)
    count = 2 if mix.endswith("2-instances") else 1
    plan = mt.plan_capacity([PROFILE], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[count])
    return plan.validate(
        {"tiny.tar.gz": tiny}, stack=stack, max_requests=REQUESTS, time_scale=0.01,
        endpoint_name=f"validate-{mix.replace('.', '')}",
    )  # fmt: skip


@pytest.fixture(scope="module")
def validations(stack: Any, tiny: Path) -> dict[str, Any]:
    """The mixes validated at once, each on an endpoint of its own (the stack's loads and unloads mostly
    wait: four endpoints take little longer than one)."""
    with ThreadPoolExecutor(max_workers=len(MIXES)) as pool:
        futures = {mix: pool.submit(_validate, stack, tiny, mix) for mix in MIXES}
        return {mix: future.result() for mix, future in futures.items()}


@pytest.mark.parametrize("mix", MIXES)
def test_plan_validate_predicts_the_stacks_hit_ratio(
    stack: Any, validations: dict[str, Any], mix: str
) -> None:
    validation = validations[mix]
    measured = validation.measured
    assert (validation.requests, validation.failed, measured["invocations"]) == (REQUESTS, 0, REQUESTS)
    assert validation.budget == f"max_models={HELD}"
    assert measured["loads"] >= HELD and measured["loaded_models_max"] <= HELD
    hit = validation["cache_hit_ratio"]
    assert hit.measured is not None and hit.measured < 1.0  # a first request of each model misses
    assert hit.predicted == pytest.approx(hit.measured, abs=0.05), str(validation)
    if validation.instance_count == 2:  # eight slots between them: each of the six models loads once
        assert measured["loads"] == MODELS and measured["unloads"] == 0, str(validation)
        assert not any("one instance" in note for note in validation.notes)
    assert validation["loads"].predicted == pytest.approx(measured["loads"], abs=3), str(validation)
    assert stack.endpoint_runtime(validation.endpoint_name) is None  # torn down
