"""The error boundary, met as a new user meets it: no region, no credentials, an unknown profile, expired
or rejected credentials, a denied permission — one ``error:`` line that says what to set, exit code 3.

Each case sets the environment up for itself (empty AWS files, variables, or a server answering with
AWS's own error) and runs ``main(argv)``; boto3 is never mocked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from mme_triton.cli import main
from mme_triton.cli._common import duration, key_values
from mme_triton.cli._errors import (
    EXIT_AWS,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    describe,
)

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
COMMANDS = {
    "deploy": [
        "deploy",
        "my-endpoint",
        "s3://my-bucket/mme/",
        "--role",
        ROLE,
        "--instance-type",
        "ml.m5.xlarge",
    ],
    "teardown": ["teardown", "my-endpoint"],
    "sweep": ["sweep", "--older-than", "12h"],
    "status": ["status", "my-endpoint"],
    "models": ["models", "list", "my-endpoint"],
    "invoke": ["invoke", "my-endpoint", "linear.tar.gz", "--inputs", "nothing.npz"],
}
AWS_COMMANDS = ["deploy", "teardown", "sweep", "status", "models"]


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", AWS_COMMANDS)
@pytest.mark.usefixtures("bare_aws")
def test_cli_no_region_says_to_pass_region(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(COMMANDS[command]) == EXIT_AWS
    assert "no AWS region: pass --region, or set AWS_DEFAULT_REGION" in _one_error_line(capsys)


@pytest.mark.parametrize("command", AWS_COMMANDS)
@pytest.mark.usefixtures("bare_aws")
def test_cli_no_credentials_says_what_to_set(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert main(COMMANDS[command]) == EXIT_AWS
    line = _one_error_line(capsys)
    assert "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line
    assert "--profile" in line and "mme-triton local up" in line


@pytest.mark.parametrize("how", ["variable", "flag"])
@pytest.mark.parametrize("command", AWS_COMMANDS)
@pytest.mark.usefixtures("bare_aws")
def test_cli_unknown_profile_says_so(
    command: str, how: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = COMMANDS[command]
    if how == "variable":
        monkeypatch.setenv("AWS_PROFILE", "nope")
    else:
        argv = [*argv, "--profile", "nope"]
    assert main(argv) == EXIT_AWS
    assert "AWS profile 'nope' is not in ~/.aws/config or ~/.aws/credentials" in _one_error_line(capsys)


@pytest.mark.usefixtures("bare_aws")
def test_cli_partial_credentials_say_which(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    assert main(COMMANDS["teardown"]) == EXIT_AWS
    assert "incomplete AWS credentials" in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("ExpiredTokenException", "The security token included in the request is expired", "have expired"),
        ("ExpiredToken", "The provided token has expired.", "have expired"),
        ("UnrecognizedClientException", "The security token is invalid.", "does not accept the credentials"),
        ("InvalidClientTokenId", "The security token is invalid.", "does not accept the credentials"),
        ("AccessDeniedException", "User: x is not authorized to perform: sagemaker:X", "access denied"),
    ],
    ids=["expired-token-exception", "expired-token", "unrecognized-client", "invalid-token", "access-denied"],
)
@pytest.mark.parametrize("command", AWS_COMMANDS)
def test_cli_rejected_credentials_say_what_to_do(
    command: str,
    code: str,
    message: str,
    expected: str,
    fake_aws: Callable[[str, str, int], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_aws(code, message, 400)
    assert main(COMMANDS[command]) == EXIT_AWS
    line = _one_error_line(capsys)
    assert expected in line and code in line


def test_cli_s3_access_denied_is_an_aws_error(
    fake_aws: Callable[[str, str, int], None], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_aws("AccessDenied", "Access Denied", 403)
    assert main(["list", "s3://my-bucket/mme/"]) == EXIT_AWS
    assert "access denied (AccessDenied: Access Denied)" in _one_error_line(capsys)


@pytest.mark.usefixtures("bare_aws")
def test_cli_debug_prints_the_traceback_then_the_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*COMMANDS["teardown"], "--debug"]) == EXIT_AWS
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "NoRegionError" in err
    assert err.strip().splitlines()[-1].startswith("error: no AWS region")


@pytest.mark.usefixtures("bare_aws")
def test_cli_debug_works_before_the_command_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", *COMMANDS["teardown"]]) == EXIT_AWS
    assert "Traceback" in capsys.readouterr().err


def test_cli_missing_file_is_not_found(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    assert main(["invoke", "my-endpoint", "linear.tar.gz", "--input", "INPUT0=/no/such/file.npy"]) == (
        EXIT_NOT_FOUND
    )
    assert "/no/such/file.npy" in _one_error_line(capsys)


def test_cli_unknown_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["teardown", "my-endpoint", "--no-such-flag"])
    assert caught.value.code == EXIT_USAGE
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def _raised(call: Callable[[], object]) -> BaseException:
    """The exception ``call`` raises, with its traceback (where it was raised decides its exit code)."""
    try:
        call()
    except BaseException as exc:  # KeyboardInterrupt included, on purpose
        return exc
    raise AssertionError("the call raised nothing")


def _refused_scaling() -> object:
    from mme_triton.endpoint.autoscaling import AutoScaling

    return AutoScaling(min_capacity=0, max_capacity=1, target_invocations_per_instance=1)


def _library_bug() -> object:
    from mme_triton.endpoint._resources import tag_dict

    return tag_dict([None])  # a None where a tag should be: None["Key"] inside the library


@pytest.mark.parametrize(
    ("raise_it", "code", "message"),
    [
        (lambda: _raise(KeyboardInterrupt()), EXIT_INTERRUPTED, "interrupted"),
        (
            _refused_scaling,
            EXIT_USAGE,
            "AutoScaling.min_capacity must be >= 1, got 0",
        ),
        (lambda: key_values(["A"], "--env"), EXIT_USAGE, "--env takes KEY=VALUE, got 'A'"),
        (lambda: Path("/nonexistent/x").read_text(), EXIT_NOT_FOUND, "No such file or directory"),
        (
            _library_bug,
            EXIT_FAILURE,
            "TypeError: 'NoneType' object is not subscriptable (run with --debug for the traceback)",
        ),
        (
            lambda: duration(None),  # type: ignore[arg-type]
            EXIT_FAILURE,
            "TypeError: expected string or bytes-like object, got 'NoneType' (run with --debug for the "
            "traceback)",
        ),
        (
            lambda: json.loads("{"),
            EXIT_FAILURE,
            "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1) "
            "(run with --debug for the traceback)",
        ),
        (
            lambda: int("twelve"),
            EXIT_FAILURE,
            "ValueError: invalid literal for int() with base 10: 'twelve' (run with --debug for the",
        ),
        (
            lambda: _raise(RuntimeError("boom")),
            EXIT_FAILURE,
            "RuntimeError: boom (run with --debug for the traceback)",
        ),
    ],
    ids=[
        "interrupt",
        "library-refusal",
        "command-refusal",
        "file-not-found",
        "library-bug",
        "library-bug-in-a-call",
        "data-error-elsewhere",
        "value-error-elsewhere",
        "unexpected",
    ],
)
def test_cli_describe_maps_errors_to_exit_codes(
    raise_it: Callable[[], object], code: int, message: str
) -> None:
    # only a refusal the command or the library raised on purpose is a usage error (exit 2)
    exc = _raised(raise_it)
    described, exit_code = describe(exc)
    assert exit_code == code
    assert message in described


def _raise(exc: BaseException) -> object:
    raise exc


def test_cli_describe_names_the_commands_flags() -> None:
    from mme_triton.cli import parser

    upload = parser()._subparsers._group_actions[0].choices["upload"]  # type: ignore[union-attr]
    refusal = ValueError(
        "use versioned=True (content-hash names), or pass overwrite=True; model_data_url is bad"
    )
    message, _ = describe(refusal, upload)
    assert "use --versioned (content-hash names), or pass --overwrite; S3_PREFIX is bad" in message


def test_cli_describe_keeps_one_line() -> None:
    from mme_triton.errors import ModelValidationError
    from mme_triton.model.problems import Problem

    problem = Problem("error", "config-syntax", "expected '}'", "m/config.pbtxt", 3, 1)
    message, code = describe(ModelValidationError("m", [problem, problem]))
    assert code == EXIT_FAILURE and "\n" not in message
    assert message.startswith("m: 2 validation error(s); m/config.pbtxt:3:1: error config-syntax")
