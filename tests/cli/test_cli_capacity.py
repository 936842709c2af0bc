"""``plan-capacity`` through ``main(argv)``: profiles from a file, traffic from a spec, the plan printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mme_triton.capacity.profile import ModelProfile
from mme_triton.cli import main
from mme_triton.cli._capacity import parse_traffic

GiB = 1024**3


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """One 6 GiB model: an ml.g5.xlarge holds three copies, an ml.g6e.xlarge seven."""
    path = tmp_path / "profile.json"
    path.write_text(
        json.dumps(
            [{"name": "m.tar.gz", "memory_bytes": "6GiB", "cold_start_s": 1, "service_time_s": "20ms"}]
        )
    )
    return path


def test_cli_plan_capacity_prints_the_plans_and_the_best(
    profile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "plan-capacity",
        "--models",
        str(profile),
        "--traffic",
        "zipf:6,s=1.2,rate=2/s",
        "--duration",
        "5m",
    ]
    argv += [
        "--instance-types",
        "ml.g5.xlarge,ml.g6e.xlarge",
        "--instance-counts",
        "1,2",
        "--min-hit-ratio",
        "0.95",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "zipf s=1.2 over 6 models, 2/s for 300 s, seed 0" in out
    # ml.g6e.xlarge has no price in the table: the plans are compared by size, and one instance holds all six
    assert "best: 1 x ml.g6e.xlarge (marked *), the smallest plan that meets the targets" in out
    assert "1 x ml.g5.xlarge" in out and "no: hit ratio" in out


def test_cli_plan_capacity_exits_1_when_no_plan_meets_the_targets(
    profile: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["plan-capacity", "--models", str(profile), "--traffic", "uniform:6,rate=2/s", "--duration", "2m"]
    argv += ["--instance-types", "ml.g5.xlarge", "--instance-counts", "1", "--target-p99", "10ms", "--json"]
    argv += ["--csv", str(tmp_path / "plans.csv")]
    assert main(argv) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["best"] is None and data["targets"]["p99_s"] == 0.01
    assert "p99 " in data["rows"][0]["reason"]
    assert (tmp_path / "plans.csv").read_text().startswith("instance_type,instance_count,")


def test_cli_plan_capacity_reads_a_trace_and_saves_the_plot(
    profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    trace = tmp_path / "requests.csv"
    trace.write_text("timestamp,TargetModel\n" + "".join(f"{i},m.tar.gz\n" for i in range(30)))
    argv = [
        "plan-capacity",
        "--models",
        str(profile),
        "--traffic",
        f"trace:{trace}",
        "--instance-types",
        "ml.g5.xlarge",
    ]
    argv += ["--instance-counts", "1", "--plot", str(tmp_path / "plans.png"), "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows"][0]["requests"] == 30 and data["rows"][0]["loads"] == 1
    assert (tmp_path / "plans.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_plan_capacity_copies_apply_to_every_profile(tmp_path: Path) -> None:
    profiles = [
        ModelProfile("a.tar.gz", memory_bytes=GiB, cold_start_s=1, service_time_s=0.01),
        ModelProfile("b.tar.gz", memory_bytes=GiB, cold_start_s=1, service_time_s=0.01, copies=3),
    ]
    expanded, traffic = parse_traffic("zipf:20,rate=1", profiles, duration="1m", seed=0, copies=10)
    assert [p.copies for p in expanded] == [10, 10] and len(traffic.names) == 20
    one, traffic = parse_traffic("uniform:50,rate=1", profiles[:1], duration="1m", seed=0)
    assert one[0].copies == 50 and len(traffic.names) == 50


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("poisson:rate=1", "unknown traffic 'poisson'"),
        ("zipf:6,s=1.1", "zipf needs rate="),
        ("zipf:6,rate=1,burst=2", "unknown option 'burst=2'"),
        ("zipf:7,rate=1", "the traffic names 7 models but the profiles give 6"),
        ("uniform:s=1,rate=1", "uniform takes no s="),
        ("trace:", "trace: needs a file"),
    ],
    ids=["unknown-law", "no-rate", "unknown-option", "count-disagrees", "uniform-s", "trace-no-file"],
)
def test_cli_plan_capacity_bad_traffic_is_a_usage_error(
    profile: Path, spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan-capacity", "--models", str(profile), "--copies", "6", "--traffic", spec]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_plan_capacity_missing_files_and_bad_flags(
    profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan-capacity", "--models", str(tmp_path / "nope.json"), "--traffic", "zipf:rate=1"]) == 4
    assert (
        main(["plan-capacity", "--models", str(profile), "--traffic", f"trace:{tmp_path / 'nope.csv'}"]) == 4
    )
    with pytest.raises(SystemExit) as caught:
        main(["plan-capacity", "--models", str(profile), "--traffic", "zipf:rate=1", "--target-p99", "soon"])
    assert caught.value.code == 2
    assert "--target-p99: not a duration: 'soon'" in capsys.readouterr().err
    assert (
        main(
            [
                "plan-capacity",
                "--models",
                str(profile),
                "--traffic",
                "zipf:rate=1",
                "--instance-types",
                "ml.g9.xlarge",
            ]
        )
        == 2
    )


def test_cli_plan_capacity_compares_hostings(profile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Six 6 GiB models: as inference components each copy reserves one of the GPU type's one GPU, so six
    instances; a multi-model endpoint shares the GPUs of fewer."""
    argv = ["plan-capacity", "--models", str(profile), "--copies", "6", "--traffic", "zipf:6,s=1.2,rate=2/s"]
    argv += ["--duration", "5m", "--instance-types", "ml.g5.xlarge", "--instance-counts", "2,6"]
    argv += ["--hosting", "mme,inference-components", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {(row["hosting"], row["instance_count"]): row for row in data["rows"]}
    assert not rows[("inference-components", 2)]["meets_targets"]
    assert "component copies fit no instance" in rows[("inference-components", 2)]["reason"]
    assert (
        rows[("inference-components", 6)]["copies"] == 6
        and rows[("inference-components", 6)]["meets_targets"]
    )
    assert data["best"] == {
        "instance_type": "ml.g5.xlarge", "instance_count": 2, "hosting": "mme", "chosen_by": "cost"
    }  # fmt: skip
