"""``deploy-components`` and what ``status``, ``metrics`` and ``teardown`` show of an endpoint of inference
components, through ``main(argv)`` on the embedded stack's control plane reached through ``AWS_*``
variables (moto; no Triton needed: the control plane places the copies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mme_triton.cli import main

pytestmark = pytest.mark.moto

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def _deploy(name: str, url: str, *extra: str) -> list[str]:
    return [
        "deploy-components", name, url, "--role", ROLE, "--instance-type", "ml.m5.xlarge",
        "--poll-interval", "0.1s", "-q", *extra,
    ]  # fmt: skip


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_cli_deploy_components_status_metrics_and_teardown(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    linear = f"linear={EXAMPLES / 'linear'},memory=512MiB,cpus=0.5"
    scale = f"scale={EXAMPLES / 'scale'},memory=256MiB,cpus=0.25,copies=2"
    argv = _deploy(
        "cli-ic", aws_env, "--component", linear, "--component", scale, "--autoscaling", "scale=1:3:50"
    )
    assert main([*argv, "--json"]) == 0
    endpoint = _json(capsys)
    assert (endpoint["status"], endpoint["hosting"], endpoint["components"]) == (
        "InService",
        "inference-components",
        ["linear", "scale"],
    )

    assert main(["status", "cli-ic", "--no-metrics"]) == 0
    text = capsys.readouterr().out
    assert "inference components (2)" in text
    assert "component scale: InService, 2/2 copies (current/desired), 256 MiB, 0.25 cores" in text
    assert "1-3 copies, target 50 invocations/copy/min" in text
    assert main(["status", "cli-ic", "--json", "--no-metrics"]) == 0
    assert [c["name"] for c in _json(capsys)["components"]] == ["linear", "scale"]

    assert main(["metrics", "cli-ic", "--component", "linear", "--json"]) == 0
    assert set(_json(capsys)["components"]) == {"linear"}

    assert main(["teardown", "cli-ic", "--json"]) == 0
    deleted = _json(capsys)["deleted"]
    assert ["inference-component", "linear"] in deleted and ["inference-component", "scale"] in deleted
    assert ["autoscaling", "inference-component/scale"] in deleted and ["endpoint", "cli-ic"] in deleted


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--component", "linear"], "--component takes NAME=MODEL"),
        (["--component", f"linear={EXAMPLES / 'linear'},ram=1GiB"], "is not one of memory="),
        (["--component", f"linear={EXAMPLES / 'linear'},cpus=many"], "cpus takes a number"),
        (["--component", f"linear={EXAMPLES / 'linear'},memory=64MiB"], "at least 128 MiB"),
        (
            ["--component", f"linear={EXAMPLES / 'linear'}", "--autoscaling", "scale=0:2:5"],
            "names no --component",
        ),
        (
            ["--component", f"linear={EXAMPLES / 'linear'}", "--autoscaling", "linear=0:2"],
            "NAME=MIN:MAX:TARGET",
        ),
        (["--component", f"linear={EXAMPLES / 'linear'}", "--managed-scaling", "2"], "MIN:MAX instances"),
    ],
    ids=["no-model", "unknown-option", "cpus", "memory", "autoscaling-name", "autoscaling-form", "managed"],
)
def test_cli_deploy_components_usage_errors(
    aws_env: str, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(_deploy("cli-ic", aws_env, *extra)) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and message in error


def test_cli_deploy_components_dry_run_prints_the_plan_and_creates_nothing(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    argv = _deploy("planned-ic", aws_env, "--component", f"linear={EXAMPLES / 'linear'},memory=256MiB")
    assert main([*argv, "--dry-run"]) == 0
    assert "inference components plan for endpoint planned-ic" in capsys.readouterr().out
    assert main([*argv, "--dry-run", "--json", "--timeout", "10s"]) == 0
    plan = _json(capsys)
    assert plan["endpoint_action"] == "create"
    assert [(c["name"], c["action"]) for c in plan["components"]] == [("linear", "create")]
    assert boto3.Session().client("sagemaker").list_endpoints()["Endpoints"] == []  # the env now
    assert main(["list", aws_env]) == 0
    assert capsys.readouterr().out.strip() == ""  # nothing uploaded either
    zero = _deploy("planned-ic", aws_env, "--component", f"linear={EXAMPLES / 'linear'},copies=0")
    assert main([*zero, "--dry-run"]) == 1  # a blocker: the plan says why the deploy would fail
    assert "would fail:" in capsys.readouterr().out
