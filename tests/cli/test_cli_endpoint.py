"""``deploy``, ``status``, ``models``, ``teardown`` and ``sweep`` through ``main(argv)``, on the embedded
stack's control plane reached through ``AWS_*`` variables (moto; no Triton needed)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from mme_triton.cli import main

pytestmark = pytest.mark.moto

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
FAST = ["--poll-interval", "0.1s", "-q"]


def _deploy(name: str, url: str, *extra: str) -> list[str]:
    return ["deploy", name, url, "--role", ROLE, "--instance-type", "ml.m5.xlarge", *FAST, *extra]


def _json(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


def test_cli_deploy_json_status_and_teardown(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_deploy("cli-mme", aws_env, "--model", str(EXAMPLES / "linear")), "--json"]) == 0
    endpoint = _json(capsys)
    assert (endpoint["name"], endpoint["status"], endpoint["model_data_url"]) == (
        "cli-mme",
        "InService",
        aws_env,
    )

    assert main(["status", "cli-mme"]) == 0
    text = capsys.readouterr().out
    assert "cli-mme: InService" in text and "ml.m5.xlarge x 1/1" in text and "linear.tar.gz" in text
    assert main(["status", "cli-mme", "--json"]) == 0
    status = _json(capsys)
    assert status["models"] == ["linear.tar.gz"]
    assert status["variants"][0]["instance_type"] == "ml.m5.xlarge"

    assert main(["teardown", "cli-mme", "--dry-run", "--json"]) == 0
    planned = _json(capsys)
    assert planned["dry_run"] is True and ["endpoint", "cli-mme"] in planned["deleted"]
    assert main(["status", "cli-mme", "--no-models"]) == 0  # the dry run deleted nothing
    capsys.readouterr()

    assert main(["teardown", "cli-mme", "--json"]) == 0
    assert ["endpoint", "cli-mme"] in _json(capsys)["deleted"]
    assert main(["status", "cli-mme"]) == 4
    assert capsys.readouterr().err.startswith("error: ")


def test_cli_deploy_autoscaling_shows_in_status(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_deploy("scaled-mme", aws_env, "--autoscaling", "1:3:150")) == 0
    capsys.readouterr()
    assert main(["status", "scaled-mme"]) == 0
    assert "1-3 instances, target 150 invocations/instance/min" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("value", "message"),
    [("1:3", "--autoscaling takes MIN:MAX:TARGET"), ("3:1:100", "max_capacity (1) must be >= min_capacity")],
    ids=["short", "inverted"],
)
def test_cli_deploy_bad_autoscaling_is_a_usage_error(
    aws_env: str, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    assert main(_deploy("bad-mme", aws_env, "--autoscaling", value)) == 2
    assert message in capsys.readouterr().err


def test_cli_models_list_add_remove_on_a_live_endpoint(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_deploy("models-mme", aws_env)) == 0
    capsys.readouterr()
    assert main(["models", "list", "models-mme"]) == 0
    assert capsys.readouterr().out.strip() == ""

    assert main(["models", "add", "models-mme", "-q", str(EXAMPLES / "scale"), str(EXAMPLES / "linear")]) == 0
    assert "scale.tar.gz  uploaded" in capsys.readouterr().out
    assert main(["models", "list", "models-mme", "--json"]) == 0
    assert _json(capsys) == {"model_data_url": aws_env, "models": ["linear.tar.gz", "scale.tar.gz"]}

    assert main(["models", "remove", "models-mme", "scale.tar.gz"]) == 0
    assert "removed scale.tar.gz" in capsys.readouterr().out
    assert main(["models", "list", "models-mme"]) == 0
    assert capsys.readouterr().out.split() == ["linear.tar.gz"]


def test_cli_models_add_names_and_updates_ensembles_with_an_older_step(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repository = tmp_path / "model_repository"
    shutil.copytree(EXAMPLES, repository)
    assert main(_deploy("steps-mme", aws_env)) == 0
    assert main(["models", "add", "steps-mme", "-q", str(repository / "pipeline")]) == 0
    capsys.readouterr()
    (repository / "scale" / "1" / "model.py").write_text(
        (repository / "scale" / "1" / "model.py").read_text() + "\n# version 2\n"
    )

    assert main(["models", "add", "steps-mme", "-q", "--versioned", str(repository / "scale")]) == 0
    assert "  pipeline.tar.gz embeds an older copy of scale (--update-ensembles repackages it)" in (
        capsys.readouterr().out
    )
    args = ["models", "add", "steps-mme", "-q", "--versioned", "--update-ensembles", "--json"]
    assert main([*args, str(repository / "scale")]) == 0
    [scale, pipeline] = _json(capsys)
    assert scale["status"] == "unchanged" and scale["stale_ensembles"] == []
    assert pipeline["supersedes"] == "pipeline.tar.gz" and pipeline["name"].startswith("pipeline-")


def test_cli_models_of_missing_endpoint_is_not_found(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "list", "no-such-endpoint"]) == 4
    assert capsys.readouterr().err.startswith("error: ")


def test_cli_sweep_dry_run_json_lists_what_would_go(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_deploy("swept-mme", aws_env)) == 0
    capsys.readouterr()
    assert main(["sweep", "--dry-run", "--json"]) == 0
    reports = _json(capsys)
    assert [r["endpoint_name"] for r in reports] == ["swept-mme"]
    assert all(r["dry_run"] for r in reports)
    assert main(["sweep", "--older-than", "1d"]) == 0  # nothing that old
    assert capsys.readouterr().out.strip() == "nothing to sweep"
    assert main(["sweep"]) == 0
    assert "swept-mme: deleted endpoint swept-mme" in capsys.readouterr().out


def test_cli_deploy_without_role_or_sdk_says_to_pass_role(
    aws_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "sagemaker" or m.startswith("sagemaker.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("sagemaker", "sagemaker.core.helper.session_helper", "sagemaker.session"):
        monkeypatch.setitem(sys.modules, name, None)
    assert main(["deploy", "no-role", aws_env, "--instance-type", "ml.m5.xlarge"]) == 2
    err = capsys.readouterr().err
    assert "role is required: pass --role 'arn:aws:iam::<account>:role/<name>'" in err
    assert main(["deploy", "no-prefix", "--role", ROLE, "--instance-type", "ml.m5.xlarge"]) == 2
    assert "S3_PREFIX is required: pass S3_PREFIX 's3://<bucket>/<prefix>/'" in capsys.readouterr().err


def test_cli_deploy_dry_run_prints_the_plan_and_creates_nothing(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    assert main(_deploy("planned-mme", aws_env, "--model", str(EXAMPLES / "linear"), "--dry-run")) == 0
    assert "planned-mme" in capsys.readouterr().out
    assert (
        main(_deploy("planned-mme", aws_env, "--model", str(EXAMPLES / "linear"), "--dry-run", "--json")) == 0
    )
    plan = _json(capsys)
    assert plan["endpoint_action"] == "create"
    assert [upload["target_model"] for upload in plan["uploads"]] == ["linear.tar.gz"]
    assert plan["environment"]["SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE"] == str(16 * 1024 * 1024)
    assert boto3.Session().client("sagemaker").list_endpoints()["Endpoints"] == []  # the env now
    assert main(["list", aws_env]) == 0
    assert capsys.readouterr().out.strip() == ""  # nothing uploaded either


def test_cli_deploy_dry_run_passes_its_timeout_to_the_plan(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # --timeout bounds the plan's reads: a timeout of 0 is refused as plan_deployment refuses it
    assert main(_deploy("planned-mme", aws_env, "--dry-run", "--timeout", "0s")) == 2
    assert "timeout must be > 0 seconds" in capsys.readouterr().err
    assert main(_deploy("planned-mme", aws_env, "--dry-run", "--timeout", "10s", "--json")) == 0
    assert _json(capsys)["endpoint_action"] == "create"


def test_cli_deploy_dry_run_takes_the_ami_version_and_unset_variables(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ami = "al2-ami-sagemaker-inference-gpu-3-1"
    argv = _deploy(
        "planned-gpu",
        aws_env,
        "--instance-type",
        "ml.g5.xlarge",
        "--dry-run",
        "--json",
        "--inference-ami-version",
        ami,
        "--unset-env",
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE",
        "--env",
        "SAGEMAKER_TRITON_LOG_VERBOSE=0",
    )
    assert main(argv) == 0
    plan = _json(capsys)
    assert plan["inference_ami_version"] == ami
    assert "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE" not in plan["environment"]
    assert plan["environment"]["SAGEMAKER_TRITON_LOG_VERBOSE"] == "0"
    assert "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE" in plan["environment"]


def test_cli_deploy_dry_run_exits_1_when_the_plan_has_blockers(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import shutil

    broken = tmp_path / "linear"
    shutil.copytree(EXAMPLES / "linear", broken)
    (broken / "config.pbtxt").write_text('platform: "onnxruntime_onnx"\ninput [ { name: "X" \n')
    assert main(_deploy("blocked-mme", aws_env, "--model", str(broken), "--dry-run", "--json")) == 1
    assert _json(capsys)["blockers"]


def test_cli_endpoint_url_flag_reaches_the_stack(
    aws_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    url = os.environ["AWS_ENDPOINT_URL"]
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert main(["upload", "-q", aws_env, str(EXAMPLES / "scale"), "--endpoint-url", url]) == 0
    capsys.readouterr()
    assert main(["list", aws_env, "--endpoint-url", url, "--json"]) == 0
    assert _json(capsys)["models"] == ["scale.tar.gz"]


def test_cli_profile_and_region_flags_are_used(
    aws_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os

    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[stack]\n"
        f"aws_access_key_id = {os.environ['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {os.environ['AWS_SECRET_ACCESS_KEY']}\n"
        f"aws_session_token = {os.environ.get('AWS_SESSION_TOKEN', '')}\n"
    )
    region = os.environ["AWS_DEFAULT_REGION"]
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    assert main(["teardown", "nothing-here"]) == 3  # neither region nor credentials without the flags
    assert "no AWS region" in capsys.readouterr().err
    assert main(["teardown", "nothing-here", "--profile", "stack", "--region", region]) == 0
    assert "nothing-here: deleted nothing" in capsys.readouterr().out
