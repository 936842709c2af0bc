"""A profile on the embedded stack agrees with the physics of a model whose cost is known by construction.

``sleepy`` sleeps SLEEP_S per execute whatever its batch, and INIT_S in initialize. So: no request is
faster than SLEEP_S; one instance without batching serves at most 1/SLEEP_S requests per second; two
instances serve twice that; dynamic batching at concurrency 8 merges queued requests into one execute and
multiplies it; the cold start holds at least INIT_S. Margins are wide: the machine is shared and small.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path
from typing import Any

import pytest

import mme_triton as mt
from mme_triton import Candidate, DynamicBatching, InstanceGroup, ProfileReport
from mme_triton.profile.load import Level

from .conftest import FAST, INIT_S, SLEEP_S

pytestmark = [pytest.mark.triton, pytest.mark.moto]

SLEEP_MS = SLEEP_S * 1000
CAP = 1 / SLEEP_S  # what one instance without batching serves at most, per second
RATE = 12.0


@pytest.fixture(scope="module")
def report(stack: Any, module_sleepy: Path) -> ProfileReport:
    candidates = [
        Candidate("one", instance_group=InstanceGroup(1, "KIND_CPU")),
        Candidate("two", instance_group=InstanceGroup(2, "KIND_CPU")),
        Candidate("batching", dynamic_batching=DynamicBatching(max_queue_delay_microseconds=2000)),
        Candidate("refused", max_batch_size=0, dynamic_batching=True),
    ]
    return mt.profile_model(
        module_sleepy,
        candidates=candidates,
        concurrency=(1, 8),
        request_rate=(RATE,),
        stack=stack,
        progress=False,
        **FAST,
    )


def _level(report: ProfileReport, name: str, *, concurrency: int | None = None) -> Level:
    result = report.result(name)
    found = [lv for lv in result.levels if lv.concurrency == concurrency and (concurrency or lv.request_rate)]
    assert len(found) == 1, result.levels
    assert found[0].stable, found[0]
    return found[0]


def test_profile_measures_every_valid_candidate_stably(report: ProfileReport) -> None:
    assert [(r.name, r.status) for r in report.results] == [
        ("one", "ok"),
        ("two", "ok"),
        ("batching", "ok"),
        ("refused", "invalid"),
    ]
    for result in report.results[:3]:
        assert [(lv.load, lv.stable, lv.errors) for lv in result.levels] == [
            ("c=1", True, 0),
            ("c=8", True, 0),
            (f"{RATE:g}/s", True, 0),
        ]


def test_profile_latency_is_never_below_the_sleep(report: ProfileReport) -> None:
    for result in report.results[:3]:
        for level in result.levels:
            assert level.p50_ms is not None and level.p50_ms >= SLEEP_MS, (result.name, level)
            assert level.server is not None and level.server.compute_infer_ms >= 0.9 * SLEEP_MS


def test_profile_one_instance_without_batching_is_capped_near_one_over_sleep(report: ProfileReport) -> None:
    alone = _level(report, "one", concurrency=1)
    crowded = _level(report, "one", concurrency=8)
    assert alone.throughput_per_s is not None and crowded.throughput_per_s is not None
    assert 0.5 * CAP <= crowded.throughput_per_s <= 1.1 * CAP
    assert crowded.throughput_per_s <= 1.3 * alone.throughput_per_s  # 8 clients, still one at a time
    assert crowded.server is not None
    assert crowded.server.batch_size == pytest.approx(1.0)
    assert crowded.server.queue_ms > SLEEP_MS  # the other clients' requests wait their turn


def test_profile_two_instances_double_it(report: ProfileReport) -> None:
    one = _level(report, "one", concurrency=8).throughput_per_s
    two = _level(report, "two", concurrency=8).throughput_per_s
    assert one is not None and two is not None
    assert 1.6 * one <= two <= 2.4 * one


def test_profile_dynamic_batching_at_concurrency_8_multiplies_it(report: ProfileReport) -> None:
    one = _level(report, "one", concurrency=8).throughput_per_s
    batching = _level(report, "batching", concurrency=8)
    assert one is not None and batching.throughput_per_s is not None
    assert batching.throughput_per_s >= 2.5 * one
    assert batching.server is not None and batching.server.batch_size >= 2.0


def test_profile_open_loop_serves_the_rate_asked(report: ProfileReport) -> None:
    for name in ("one", "two", "batching"):
        level = _level(report, name)
        assert level.request_rate == RATE
        assert level.throughput_per_s == pytest.approx(RATE, rel=0.35)


def test_profile_cold_start_holds_the_initialize_time(report: ProfileReport) -> None:
    for result in report.results[:3]:
        assert result.load_s is not None and result.load_s >= INIT_S, result
        assert result.download_s is not None and result.extract_s is not None
        parts = result.download_s + result.extract_s + result.load_s
        assert result.cold_start_s is not None and result.cold_start_s >= parts >= INIT_S
        assert result.unload_s is not None and result.unload_s > 0
        assert result.memory_bytes is not None and result.memory_bytes > 0
        assert result.service_time_s is not None and result.service_time_s >= SLEEP_S
    one, two = report.result("one"), report.result("two")
    assert (one.instances, two.instances, one.max_batch_size) == (1, 2, 8)
    assert two.memory_bytes is not None and one.memory_bytes is not None
    assert two.memory_bytes > 1.5 * one.memory_bytes  # a stub process per instance


def test_profile_refused_candidate_is_reported_with_its_problems(report: ProfileReport) -> None:
    refused = report.result("refused")
    assert refused.status == "invalid" and refused.levels == []
    assert any("dynamic_batching needs max_batch_size > 0" in problem for problem in refused.problems)
    rows = list(csv.DictReader(io.StringIO(report.to_csv())))
    assert [row["status"] for row in rows if row["candidate"] == "refused"] == ["invalid"]
    assert "refused" in report.table()


def test_profile_chooses_batching_and_applies_it(
    report: ProfileReport, module_sleepy: Path, tmp_path: Path
) -> None:
    assert report.best is not None and report.best.name == "batching"
    assert report.reason.startswith("batching: highest throughput")
    copy = tmp_path / "sleepy"
    shutil.copytree(module_sleepy, copy)
    report.apply(copy)
    assert mt.read_config(copy).dynamic_batching.max_queue_delay_microseconds == 2000
    assert not mt.read_config(module_sleepy).HasField("dynamic_batching")


def test_profile_leaves_nothing_on_a_given_stack(report: ProfileReport, stack: Any) -> None:
    assert report.target == "stack"
    assert stack.runtime.endpoints() == []
    s3 = stack.client("s3")
    assert s3.list_objects_v2(Bucket=stack.default_bucket).get("KeyCount", 0) == 0
