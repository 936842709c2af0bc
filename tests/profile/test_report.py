"""The report: choosing the winner under an objective and constraints, and every way of reading it."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import mme_triton as mt
from mme_triton import Candidate, DynamicBatching, InstanceGroup, ProfileReport
from mme_triton.profile.load import Level, ServerSplit, Window
from mme_triton.profile.report import COLUMNS, CandidateResult, Constraints


def _level(concurrency: int, throughput: float, p99: float, *, stable: bool = True, errors: int = 0) -> Level:
    throughput, p99 = float(throughput), float(p99)
    if not stable:
        return Level(concurrency, None, False, None, None, None, None, None, None, 30, errors)
    return Level(
        concurrency=concurrency,
        request_rate=None,
        stable=True,
        throughput_per_s=throughput,
        p50_ms=p99 / 2,
        p90_ms=p99 * 0.8,
        p95_ms=p99 * 0.9,
        p99_ms=p99,
        mean_ms=p99 / 2,
        requests=300,
        errors=errors,
        windows=(Window(1.0, 100, 0, throughput, p99 / 2),) * 3,
        server=ServerSplit(1.0, 0.1, p99 / 3, 0.1, 2.0),
    )


def _result(
    name: str, levels: list[Level], *, memory: int = 100 << 20, cold: float = 2.0, **options: object
) -> CandidateResult:
    return CandidateResult(
        name=name,
        candidate=Candidate(name, **options),
        model_dir="repo/m",
        target_model=f"{name}.tar.gz",
        cold_start_s=cold,
        download_s=0.1,
        extract_s=0.2,
        load_s=1.5,
        unload_s=1.0,
        memory_bytes=memory,
        levels=levels,
        max_batch_size=8,
        instances=1,
    )


@pytest.fixture
def report() -> ProfileReport:
    return ProfileReport(
        [
            _result("small", [_level(1, 50, 20), _level(8, 100, 90)], max_batch_size=1),
            _result(
                "batched",
                [_level(1, 45, 25), _level(8, 300, 60)],
                memory=300 << 20,
                cold=5.0,
                max_batch_size=8,
                dynamic_batching=DynamicBatching(100),
            ),
            _result("noisy", [_level(1, 0, 0, stable=False), _level(8, 900, 10, errors=3)]),
            CandidateResult(
                "broken",
                Candidate("broken", max_batch_size=0),
                "repo/m",
                status="invalid",
                problems=["dynamic_batching needs max_batch_size > 0"],
            ),
        ]
    )


def test_best_is_the_highest_stable_error_free_throughput(report: ProfileReport) -> None:
    assert report.best is not None and report.best.name == "batched"
    assert report.best_level is not None and report.best_level.concurrency == 8
    assert report.reason.startswith("batched: highest throughput, 300.0/s at c=8")
    assert "among 4 of 6 measurements" in report.reason  # noisy's two are out: unstable, errors


@pytest.mark.parametrize(
    ("objective", "constraints", "winner", "load"),
    [
        ("latency", Constraints(), "small", "c=1"),
        ("throughput", Constraints(latency_budget_ms=50), "small", "c=1"),
        ("throughput", Constraints(max_memory=200 << 20), "small", "c=8"),
        ("throughput", Constraints(max_cold_start_s=3.0), "small", "c=8"),
        ("throughput", Constraints(min_throughput=120, latency_budget_ms=80), "batched", "c=8"),
    ],
    ids=["latency", "budget", "memory", "cold-start", "both"],
)
def test_best_follows_objective_and_constraints(
    report: ProfileReport, objective: str, constraints: Constraints, winner: str, load: str
) -> None:
    report.objective = objective  # type: ignore[assignment]
    report.constraints = constraints
    assert report.best is not None and report.best.name == winner
    assert report.best_level is not None and report.best_level.load == load


def test_no_winner_says_why_for_each_candidate(report: ProfileReport) -> None:
    report.constraints = Constraints(latency_budget_ms=5)
    assert report.best is None and report.best_level is None
    reason = report.reason
    assert reason.startswith("no candidate qualifies")
    assert "small: c=1: p99 20.0 ms > 5 ms" in reason
    assert "noisy: c=1: unstable; c=8: 3 errors" in reason
    assert "broken: invalid (dynamic_batching needs max_batch_size > 0)" in reason
    with pytest.raises(KeyError, match="no candidate won"):
        report.apply("anywhere")


def test_rows_have_the_contract_columns_one_per_candidate_and_level(report: ProfileReport) -> None:
    rows = report.rows()
    assert [(r["candidate"], r["concurrency"]) for r in rows] == [
        ("small", 1),
        ("small", 8),
        ("batched", 1),
        ("batched", 8),
        ("noisy", 1),
        ("noisy", 8),
        ("broken", None),
    ]
    assert all(list(row) == list(COLUMNS) for row in rows)
    best = [r for r in rows if r["best"]]
    assert [(r["candidate"], r["concurrency"], r["cold_start_s"], r["memory_bytes"]) for r in best] == [
        ("batched", 8, 5.0, 300 << 20)
    ]
    assert rows[2]["service_time_s"] == pytest.approx(0.0125)  # mean latency at concurrency 1
    assert rows[3]["server_batch_size"] == 2.0
    assert rows[3]["options"] == "max_batch_size=8, dynamic_batching=100us"


def test_csv_has_the_columns_other_code_reads(report: ProfileReport, tmp_path: Path) -> None:
    text = report.to_csv(tmp_path / "profile.csv")
    assert (tmp_path / "profile.csv").read_text() == text
    rows = list(csv.DictReader(io.StringIO(text)))
    required = "candidate concurrency throughput_per_s p50_ms p90_ms p95_ms p99_ms errors stable cold_start_s"
    assert {*required.split(), "memory_bytes"} <= set(rows[0])
    assert rows[3]["throughput_per_s"] == "300.0" and rows[3]["best"] == "True"
    assert rows[-1]["status"] == "invalid" and rows[-1]["throughput_per_s"] == ""


def test_json_round_trips_every_measurement(report: ProfileReport, tmp_path: Path) -> None:
    report.constraints = Constraints(latency_budget_ms=80)
    text = report.to_json(tmp_path / "profile.json")
    document = json.loads(text)
    assert document["best"] == "batched" and document["reason"] == report.reason

    again = ProfileReport.from_json(tmp_path / "profile.json")

    assert again.to_json() == text
    assert again.result("batched").candidate.options["dynamic_batching"] == DynamicBatching(100)
    assert again.result("batched").levels[1].server == ServerSplit(1.0, 0.1, 20.0, 0.1, 2.0)
    assert ProfileReport.from_json(text).best is not None


def test_table_puts_the_winner_first_and_marks_it(report: ProfileReport) -> None:
    lines = report.table().splitlines()
    heading = "candidate load thr/s p50 ms p99 ms err stable batch cold s load s mem MiB"
    assert lines[0].split() == heading.split()
    assert lines[2].split()[:2] == ["batched", "c=1"]
    assert lines[3].split()[:4] == ["*", "batched", "c=8", "300.0"]
    assert [line.split()[0] for line in lines[4:8]] == ["small", "small", "noisy", "noisy"]
    assert "broken" in lines[8] and "invalid" in lines[8]
    assert "best: batched: highest throughput" in report.table()
    assert str(report) == report.table()
    assert repr(report) == "<ProfileReport of 4 candidates on the stack (builtin), best: 'batched'>"


def test_html_marks_the_winner(report: ProfileReport) -> None:
    html = report._repr_html_()
    assert html.count('<tr style="font-weight:bold">') == 1
    assert "&#9733;" in html and "<b>best</b>: batched" in html


def test_plot_draws_throughput_against_p99_and_cold_starts(report: ProfileReport, tmp_path: Path) -> None:
    report.constraints = Constraints(latency_budget_ms=80)
    figure = report.plot(tmp_path / "profile.png")
    left, right = figure.axes
    assert left.get_xlabel() == "p99 latency (ms)" and right.get_xlabel() == "cold start (s)"
    labels = [line.get_label() for line in left.get_lines() if not line.get_label().startswith("_")]
    assert labels[:3] == ["small", "batched", "noisy"]
    assert [tick.get_text() for tick in right.get_yticklabels()] == ["small", "batched", "noisy"]
    assert (tmp_path / "profile.png").read_bytes()[:4] == b"\x89PNG"


def test_apply_writes_the_winners_options(report: ProfileReport, tmp_path: Path) -> None:
    model = mt.new_python_model(
        tmp_path / "repo", "m", inputs={"X": ("FP32", [4])}, outputs={"Y": ("FP32", [4])}, max_batch_size=16
    )
    assert report.apply(model) == model
    config = mt.read_config(model)
    assert config.max_batch_size == 8 and config.dynamic_batching.max_queue_delay_microseconds == 100
    report.apply(model, candidate="small")
    assert mt.read_config(model).max_batch_size == 1


def test_apply_keeps_the_config_of_an_as_is_winner(tmp_path: Path) -> None:
    model = mt.new_python_model(
        tmp_path / "repo", "m", inputs={"X": ("FP32", [4])}, outputs={"Y": ("FP32", [4])}
    )
    before = (model / "config.pbtxt").read_text()
    report = ProfileReport([_result("as-is", [_level(1, 10, 10)])])
    report.apply(model)
    assert (model / "config.pbtxt").read_text() == before


def test_summary_has_one_record_per_candidate_with_its_best_measurement(report: ProfileReport) -> None:
    summary = {record["candidate"]: record for record in report.summary()}
    assert list(summary) == ["small", "batched", "noisy", "broken"]
    batched = summary["batched"]
    assert (batched["best"], batched["best_load"], batched["throughput_per_s"]) == (True, "c=8", 300.0)
    assert (batched["cold_start_s"], batched["memory_bytes"], batched["load_s"]) == (5.0, 300 << 20, 1.5)
    assert summary["small"]["best_load"] == "c=8" and summary["small"]["best"] is False
    assert summary["noisy"]["best_load"] is None  # measured, but nothing qualifies
    assert summary["broken"]["status"] == "invalid" and summary["broken"]["cold_start_s"] is None


def test_result_by_name_and_unknown_name(report: ProfileReport) -> None:
    assert report.result("small").candidate == Candidate("small", max_batch_size=1)
    assert report.result().name == "batched"
    with pytest.raises(KeyError, match="no candidate 'nope'"):
        report.result("nope")


def test_memory_constraint_is_not_met_by_unknown_memory() -> None:
    unknown = _result("remote", [_level(1, 10, 10)])
    unknown.memory_bytes = None
    report = ProfileReport([unknown], constraints=Constraints(max_memory=1 << 30))
    assert report.best is None and "memory ? MiB" in report.reason


def test_instance_group_options_survive_json(tmp_path: Path) -> None:
    result = _result("two", [_level(1, 10, 10)], instance_group=[InstanceGroup(2, "KIND_GPU", (0,))])
    again = ProfileReport.from_json(ProfileReport([result]).to_json())
    assert again.result("two").candidate.options["instance_group"] == [InstanceGroup(2, "KIND_GPU", (0,))]
