"""``mme-triton metrics`` and the health line of ``mme-triton status``, through ``main(argv)`` on the stack's
control plane reached through ``AWS_*`` variables; the metrics are put as the stack's route puts them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from mme_triton.cli import main
from mme_triton.local.aws.metrics import MetricsRecorder

pytestmark = pytest.mark.moto

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def _deploy(name: str, url: str) -> None:
    argv = ["deploy", name, url, "--role", ROLE, "--instance-type", "ml.m5.xlarge", "--poll-interval", "0.1s"]
    assert main([*argv, "-q"]) == 0


def _publish(endpoint: str, requests: str) -> None:
    """One invocation per letter: ``h`` a cache hit, ``m`` a miss (with a load and, after the first, an
    unload), published now as the stack publishes them."""
    # a session of its own: boto3's default one keeps the credentials of the first test's environment
    recorder = MetricsRecorder(boto3.Session().client("cloudwatch"), period=60)
    sink = recorder.endpoint(endpoint)
    for index, kind in enumerate(requests):
        if kind == "m":
            if index:
                sink.model_unloaded(0.2)
            sink.model_loaded(0.5)
        sink.invocation(
            status=200,
            cache_hit=kind == "h",
            model_seconds=0.002,
            overhead_seconds=0.001,
            load_wait_seconds=None if kind == "h" else 0.6,
        )
    recorder.stop()


def test_cli_status_adds_the_last_hours_health(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    _deploy("healthy", aws_env)
    capsys.readouterr()
    assert main(["status", "healthy"]) == 0
    assert "last hour" not in capsys.readouterr().out  # no metrics yet: no line
    _publish("healthy", "mhhhmhhh")

    assert main(["status", "healthy"]) == 0
    text = capsys.readouterr().out
    assert main(["status", "healthy", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert main(["status", "healthy", "--no-metrics", "--json"]) == 0
    without = json.loads(capsys.readouterr().out)

    assert "last hour        8 invocations, cache-hit ratio 75.0%, 2 loads, 1 unloads, 0 5xx" in text
    assert (document["metrics"]["invocations"], document["metrics"]["cache_hit_ratio"]) == (8, 0.75)
    assert without["metrics"] is None


def test_cli_metrics_prints_json_and_writes_a_plot_and_csv(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _deploy("measured", aws_env)
    _publish("measured", "mhmh")
    capsys.readouterr()

    files = ["--plot", str(tmp_path / "m.png"), "--csv", str(tmp_path / "m.csv")]
    code = main(["metrics", "measured", "--since", "10m", "--period", "1m", "--json", *files])

    assert code == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    summary = document["summary"]
    assert (summary["invocations"], summary["cache_hits"], summary["loads"], summary["unloads"]) == (
        4,
        2,
        2,
        1,
    )
    assert summary["load_wait_mean_s"] == pytest.approx(0.6)
    assert document["variants"] == ["AllTraffic"] and document["period"] == 60
    assert (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "m.csv").read_text().startswith("endpoint,variant,namespace,metric,statistic")


def test_cli_metrics_prints_the_summary(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    _deploy("summed", aws_env)
    _publish("summed", "mh")
    capsys.readouterr()

    assert main(["metrics", "summed", "--since", "5m"]) == 0

    out = capsys.readouterr().out
    assert out.startswith("summed (AllTraffic): ")
    assert "cache_hit_ratio            0.5" in out and "invocations                2" in out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["metrics", "nowhere"], 4, "error: "),
        (["metrics", "any", "--period", "7s"], 2, "period must be 1, 5, 10, 20, 30 or a multiple of 60"),
        (["metrics", "any", "--since", "3"], 2, "has no unit"),
    ],
    ids=["unknown-endpoint", "period", "since-without-unit"],
)
def test_cli_metrics_errors(
    aws_env: str, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    try:
        result = main(argv)
    except SystemExit as exc:  # argparse refuses a value before the command runs
        result = int(exc.code or 0)

    assert result == code
    assert message in capsys.readouterr().err
