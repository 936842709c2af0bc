"""The command line, called through ``main(argv)``: exit codes, output, and the one-line error boundary."""

from __future__ import annotations

import json
import shutil
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest

from mme_triton.cli import main
from mme_triton.cli._common import duration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
FIXTURES = ROOT / "tests" / "model" / "fixtures"


def test_cli_validate_examples_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(EXAMPLES / name) for name in ("linear", "scale", "pipeline")]
    assert main(["validate", *paths]) == 0
    out = capsys.readouterr().out
    for name in ("linear", "scale", "pipeline"):
        assert f"{name}: ok (0 error(s), 0 warning(s))" in out


def test_cli_validate_broken_config_names_file_line_and_field(capsys: pytest.CaptureFixture[str]) -> None:
    model = next((FIXTURES / "config_unknown_field").iterdir())
    assert main(["validate", str(model)]) == 1
    out = capsys.readouterr().out
    line = next(text for text in out.splitlines() if "config-unknown-field" in text)
    # "<path>/config.pbtxt:<line>:<column>: error config-unknown-field: ..."
    location = line.split(": error ")[0]
    file_part, line_no, column = location.rsplit(":", 2)
    assert file_part.endswith("config.pbtxt")
    assert int(line_no) >= 1 and int(column) >= 1
    assert "FAILED" in out


def test_cli_validate_json_lists_problems(capsys: pytest.CaptureFixture[str]) -> None:
    model = next((FIXTURES / "config_name_mismatch").iterdir())
    assert main(["validate", "--json", str(model)]) == 0  # a warning only
    report = json.loads(capsys.readouterr().out)
    problems = report[str(model)]
    assert [p["code"] for p in problems] == ["config-name-mismatch"]
    assert problems[0]["severity"] == "warning"


def test_cli_validate_local_stack_warns_about_backends_the_stack_cannot_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = tmp_path / "savedmodel"
    (model / "1" / "model.savedmodel").mkdir(parents=True)
    (model / "1" / "model.savedmodel" / "saved_model.pb").write_bytes(b"\x08\x01")
    (model / "config.pbtxt").write_text(
        'platform: "tensorflow_savedmodel"\nmax_batch_size: 0\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }]\n'
    )
    assert main(["validate", "--json", str(model)]) == 0
    assert "local-stack-unsupported" not in capsys.readouterr().out
    assert main(["validate", "--json", "--local-stack", str(model)]) == 0  # a warning, not an error
    problems = json.loads(capsys.readouterr().out)[str(model)]
    assert [(p["code"], p["severity"]) for p in problems] == [("local-stack-unsupported", "warning")]
    assert "tensorflow" in problems[0]["message"].lower()


def test_cli_validate_strict_fails_on_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    model = next((FIXTURES / "config_name_mismatch").iterdir())
    assert main(["validate", "--strict", str(model)]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_cli_validate_missing_path_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["validate", str(tmp_path / "nope")]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1


def test_cli_package_writes_the_artifact(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["package", "-q", "-o", str(tmp_path), str(EXAMPLES / "pipeline")]) == 0
    out = capsys.readouterr().out
    archive = tmp_path / "pipeline.tar.gz"
    assert str(archive) in out
    assert "TargetModel=pipeline.tar.gz" in out
    with tarfile.open(archive) as tar:
        tops = {member.name.split("/")[0] for member in tar.getmembers()}
    assert tops == {"pipeline", "scale", "linear"}


def test_cli_package_broken_model_fails_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = next((FIXTURES / "config_syntax").iterdir())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["package", "-q", "-o", str(out_dir), str(model)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "config-syntax" in err
    assert list(out_dir.iterdir()) == []


def test_cli_package_name_with_several_models_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = [
        "package",
        "-q",
        "-o",
        str(tmp_path),
        "--name",
        "x.tar.gz",
        str(EXAMPLES / "linear"),
        str(EXAMPLES / "scale"),
    ]
    assert main(args) == 2
    assert "--name applies to one model" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("45s", timedelta(seconds=45)),
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("1.5h", timedelta(hours=1.5)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
    ],
    ids=["seconds", "minutes", "hours", "fraction", "days", "weeks"],
)
def test_cli_duration_parses_units(text: str, expected: timedelta) -> None:
    assert duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("soon", "not a duration: 'soon'"), ("12", "'12' has no unit: write 12h for hours")],
    ids=["word", "no-unit"],
)
def test_cli_bad_duration_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["sweep", "--older-than", text])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------------------------ against moto's server
def test_cli_upload_list_remove_round_trip(
    aws_env: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = tmp_path / "scale"
    shutil.copytree(EXAMPLES / "scale", model)
    assert main(["upload", "-q", aws_env, str(model)]) == 0
    assert capsys.readouterr().out.strip() == f"{aws_env}scale.tar.gz  uploaded"

    assert main(["list", aws_env]) == 0
    assert capsys.readouterr().out.split() == ["scale.tar.gz"]

    # the same content again is fine; changed content under the same name is refused
    assert main(["upload", "-q", aws_env, str(model)]) == 0
    capsys.readouterr()
    (model / "1" / "model.py").write_text((model / "1" / "model.py").read_text() + "\n# changed\n")
    assert main(["upload", "-q", aws_env, str(model)]) == 1
    err = capsys.readouterr().err
    # the message names the command's flags, not the Python arguments
    assert "with --versioned (content-hash names), or pass --overwrite to replace it" in err
    assert "=True" not in err

    assert main(["remove", aws_env, "scale.tar.gz"]) == 0
    assert "removed scale.tar.gz" in capsys.readouterr().out
    assert main(["list", aws_env]) == 0
    assert capsys.readouterr().out.strip() == ""


def test_cli_deploy_and_teardown(aws_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    role = "arn:aws:iam::123456789012:role/SageMakerRole"
    args = ["deploy", "cli-endpoint", aws_env, "--role", role, "--instance-type", "ml.c5.xlarge"]
    args += ["--poll-interval", "0.1s"]
    assert main([*args, "--model", str(EXAMPLES / "linear"), "--env", "SAGEMAKER_TRITON_LOG_VERBOSE=1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cli-endpoint  InService  arn:aws:sagemaker:")
    assert f"model data url: {aws_env}" in out

    assert main(["list", aws_env]) == 0
    assert capsys.readouterr().out.split() == ["linear.tar.gz"]

    assert main(["sweep", "--dry-run"]) == 0
    assert "cli-endpoint" in capsys.readouterr().out

    assert main(["teardown", "cli-endpoint"]) == 0
    assert "cli-endpoint" in capsys.readouterr().out
    assert main(["teardown", "cli-endpoint"]) == 0  # twice is fine


def test_cli_deploy_bad_environment_is_one_error_line(
    aws_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    role = "arn:aws:iam::123456789012:role/SageMakerRole"
    args = ["deploy", "cli-bad", aws_env, "--role", role, "--instance-type", "ml.c5.xlarge"]
    assert main([*args, "--env", "SAGEMAKER_TRITON_LOG_VERBOSTY=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "SAGEMAKER_TRITON_LOG_VERBOSE" in err


def test_cli_validate_checks_environments_against_the_triton_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = FIXTURES / "python_env_python_mismatch" / "scale"
    assert main(["validate", str(model)]) == 1
    assert "python-env-python-mismatch" in capsys.readouterr().out
    assert main(["validate", "--triton-version", "25.04", str(model)]) == 0
    assert "scale: ok (0 error(s), 0 warning(s))" in capsys.readouterr().out
