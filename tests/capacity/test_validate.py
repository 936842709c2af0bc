"""Validation results and what validate_plan refuses before it deploys anything (the replay itself runs on
the embedded stack in test_validate_stack.py)."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest

from mme_triton import CapacityPlan, ModelProfile, Traffic, plan_capacity
from mme_triton.capacity._predict import budget, timing_notes
from mme_triton.capacity.validate import Comparison, Validation, validate_plan
from mme_triton.endpoint.instance_specs import INSTANCE_TYPES

MiB = 1024**2


@pytest.fixture(scope="module")
def plan() -> CapacityPlan:
    model = ModelProfile("m.tar.gz", memory_bytes=40 * MiB, cold_start_s=2.0, service_time_s=0.01, copies=6)
    traffic = Traffic.zipf([model], s=0.8, rate=2, duration=60, seed=3)
    return plan_capacity([model], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[1, 2])


def test_comparison_error_is_absolute_for_ratios_and_relative_otherwise() -> None:
    ratio = Comparison("cache_hit_ratio", 0.70, 0.74, tolerance=0.05, relative=False)
    assert ratio.error == pytest.approx(-0.04) and ratio.within is True
    p99 = Comparison("p99_s", 2.6, 2.0, calibrated=2.1, tolerance=0.3)
    assert p99.error == pytest.approx(0.3) and p99.calibrated_error == pytest.approx(0.05)
    assert Comparison("p99_s", 2.7, 2.0, tolerance=0.3).within is False
    assert Comparison("loads", 3, None).error is None and Comparison("loads", 3, 0).error == math.inf
    assert Comparison("loads", 3, 3).within is None  # reported only


def test_validation_reads_as_a_table_and_as_json() -> None:
    comparisons = (
        Comparison("cache_hit_ratio", 0.6, 0.62, 0.6, tolerance=0.05, relative=False),
        Comparison("p99_s", 2.0, 4.0, 3.9, tolerance=0.3),
        Comparison("loads", 12, 13),
    )
    validation = Validation(
        "ml.c5.xlarge", 2, "validate-x", 50, 0, 0.1, "max_models=3", comparisons, {}, None, {},
        notes=("the replay runs on one instance",),
    )  # fmt: skip
    text = str(validation)
    assert "2 x ml.c5.xlarge" in text and "max_models=3" in text
    assert "-0.020" in text and "-50%" in text and "3.900" in text and "NO" in text
    assert text.splitlines()[-1] == "- the replay runs on one instance"
    assert validation["p99_s"].measured == 4.0 and validation.ok is False
    data = json.loads(json.dumps(validation.to_dict()))
    assert data["ok"] is False and data["comparisons"][0]["within"] is True
    assert re.search(r"^loads +12 +13 +-8% ", text, re.MULTILINE)
    with pytest.raises(KeyError, match="no figure 'p50_s'"):
        validation["p50_s"]


def test_validate_budget_is_the_stacks_count_or_memory_else_the_instance_types() -> None:
    kind = INSTANCE_TYPES["ml.c5.xlarge"]
    model = ModelProfile("m.tar.gz", memory_bytes=40 * MiB, cold_start_s=2.0, service_time_s=0.01)

    counted, weights, text, notes = budget(kind, [model], stack=SimpleNamespace(max_models=3))
    assert counted.memory_budget_bytes == 3 and [w.memory_bytes for w in weights] == [1]
    assert text == "max_models=3" and "keeps 3 models loaded" in notes[0]
    assert budget(kind, [model], max_models=2)[2] == "max_models=2"  # without a stack: said by hand

    stack = SimpleNamespace(max_models=None, memory_budget=100 * MiB)
    sized, same, text, notes = budget(kind, [model], stack=stack)
    assert sized.memory_budget_bytes == 100 * MiB and same == [model] and "memory budget" in notes[0]
    assert budget(kind, [model], memory_budget=50 * MiB)[0].memory_budget_bytes == 50 * MiB

    plain, same, text, notes = budget(kind, [model])
    assert plain is kind and notes == []
    with pytest.raises(ValueError, match="max_models must be an integer >= 1"):
        budget(kind, [model], max_models=0)


def test_validate_plan_refuses_what_it_cannot_replay(plan: CapacityPlan) -> None:
    with pytest.raises(ValueError, match=r"give the model directory of \['m.tar.gz'\]"):
        validate_plan(plan, {}, row=0)
    with pytest.raises(ValueError, match="give traffic="):
        validate_plan(CapacityPlan.from_json(plan.to_json()), {"m.tar.gz": "repo/m"}, row=0)
    with pytest.raises(ValueError, match="no row"):
        validate_plan(plan, {"m.tar.gz": "repo/m"}, row=("ml.m5.xlarge", 1))
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        validate_plan(plan, {"m.tar.gz": "repo/m"}, row=0, time_scale=0)
    with pytest.raises(ValueError, match="boto3_session=, role= and model_data_url= together"):
        validate_plan(plan, {"m.tar.gz": "repo/m"}, row=0)


def test_validate_notes_timings_far_from_the_profiles() -> None:
    model = ModelProfile("m.tar.gz", memory_bytes=MiB, cold_start_s=2.0, reload_s=1.0, service_time_s=0.01)
    notes = timing_notes([model], {"load_mean_s": 2.0, "unload_mean_s": 2.0, "model_latency_p50_ms": 11.0})
    assert len(notes) == 2
    assert notes[0].startswith(
        "the endpoint's load time (2.000 s on average) is 2.00x the profile's (1.000 s)"
    )
    assert notes[1].startswith("the endpoint's unload time is 2.000 s on average; the profile has none")
    assert timing_notes([model], {"load_mean_s": 1.1, "unload_mean_s": 0.002}) == []  # close, or negligible
