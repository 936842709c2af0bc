"""``mme-triton profile`` through ``main(argv)``: its small parsers, its usage errors, and one real run."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from mme_triton.cli import main
from mme_triton.cli._profile import concurrency_levels
from tests.profile.conftest import SLEEP_S, write_sleepy


@pytest.mark.parametrize(
    ("text", "levels"),
    [("1:8", [1, 2, 4, 8]), ("2:20", [2, 4, 8, 16]), ("1:8:3", [1, 4, 7]), ("1,4,8", [1, 4, 8]), ("3", [3])],
    ids=["doubling", "doubling-uneven", "steps", "list", "one"],
)
def test_cli_profile_concurrency_levels(text: str, levels: list[int]) -> None:
    assert concurrency_levels(text) == levels


@pytest.mark.parametrize(
    "text", ["0", "1:x", "8:1", "1:8:0", ""], ids=["zero", "not-int", "empty-range", "step-0", "empty"]
)
def test_cli_profile_concurrency_levels_refuse_what_they_cannot_read(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--concurrency"):
        concurrency_levels(text)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "0"], "--concurrency levels are >= 1"),
        (["--grid", "max_batch_size"], "--grid takes OPTION=VALUE"),
        (["--request-rate", "fast"], "--request-rate takes rates per second"),
        (["--endpoint", "a", "--triton-url", "http://b"], "not allowed with argument"),
        (["--stability", "150"], "--stability is a fraction between 0 and 1"),
        (["--stability", "150%"], "--stability is a fraction between 0 and 1"),
        (["--latency-budget", "soon"], "--latency-budget: not a duration"),
    ],
    ids=["concurrency", "grid", "rate", "two-targets", "stability", "stability-percent", "budget"],
)
def test_cli_profile_usage_errors_exit_2(
    tmp_path: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_sleepy(tmp_path)
    with pytest.raises(SystemExit) as exited:
        code = main(["profile", str(model), *argv])
        raise SystemExit(code)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.triton
@pytest.mark.moto
def test_cli_profile_runs_on_its_own_stack_writes_files_and_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_sleepy(tmp_path / "repository")
    argv = ["profile", str(model), "--grid", "instance_count=1,2", "--concurrency", "4", "--window", "0.4"]
    argv += ["--stability", "25%", "--warmup", "0.3", "--csv", str(tmp_path / "p.csv")]
    argv += ["--plot", str(tmp_path / "p.png"), "--apply", "--json"]

    assert main(argv) == 0

    document = json.loads(capsys.readouterr().out)
    assert document["best"] == "instances=2cpu" and document["applied"] == str(model)
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert [(row["candidate"], row["concurrency"], row["stable"]) for row in rows] == [
        ("instances=1cpu", "4", "True"),
        ("instances=2cpu", "4", "True"),
    ]
    assert float(rows[0]["p50_ms"]) >= SLEEP_S * 1000
    assert (tmp_path / "p.png").stat().st_size > 0
    assert "count: 2" in (model / "config.pbtxt").read_text()  # the winner's two instances


def test_cli_profile_of_an_invalid_model_exits_1_without_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_sleepy(tmp_path / "repository")
    (model / "1" / "model.py").unlink()
    assert main(["profile", str(model), "--grid", "max_batch_size=1,8"]) == 1
    err = capsys.readouterr().err
    assert "no candidate can be profiled" in err
    assert err.count("max_batch=1: ") == 1 and err.count("max_batch=8: ") == 1


@pytest.mark.triton
@pytest.mark.moto
def test_cli_profile_exits_1_when_no_candidate_meets_the_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same rule as plan-capacity's: the table is printed, the reason goes to stderr, exit 1, and
    --apply writes nothing."""
    model = write_sleepy(tmp_path / "repository")
    before = (model / "config.pbtxt").read_text()
    argv = ["profile", str(model), "--concurrency", "1", "--window", "0.3", "--warmup", "0.2"]
    argv += ["--stability", "0.5", "--latency-budget", "1ms", "--apply"]

    assert main(argv) == 1

    out, err = capsys.readouterr()
    assert "c=1" in out and "best: no candidate qualifies" in out
    assert "error: no candidate qualifies" in err and "p99" in err and "> 1 ms" in err
    assert (model / "config.pbtxt").read_text() == before
