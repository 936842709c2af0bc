"""examples/cleanup_job.py: the scheduled sweep, through its main(argv) and as a command.

Against one embedded stack per module. ``sweep`` ages endpoints by their ``CreationTime``, so the
fixture creates the "old" endpoints, waits a few seconds, then creates the "new" ones; ``--older-than``
is then given a value that falls inside that gap (with over a second of margin on either side).
Endpoints of each destructive test carry their own ``group`` tag, so the tests do not see each other's
deletions.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "cleanup_job.py"
# Seconds between the last old and the first new endpoint. The boundary sits just after the old ones:
# a job started as a command computes its cutoff only after its interpreter has started, which on a busy
# machine takes seconds, and that delay moves the cutoff towards the new endpoints.
GAP = 5.0
BOUNDARY_AFTER_OLD = 0.25

OLD = {
    "old-a": {"team": "a", "group": "dry"},
    "old-b": {"team": "b", "group": "dry"},
    "old-main": {"group": "main"},
    "old-cli": {"group": "cli"},
    "old-broken": {"group": "broken"},
}
NEW = {
    "new-a": {"team": "a", "group": "dry"},
    "new-main": {"group": "main"},
    "new-cli": {"group": "cli"},
}
FOREIGN = "foreign-old"  # created before the gap with plain boto3: not this library's


def _load_job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cleanup_job", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


job = _load_job()


# --- arguments (no AWS) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("2d", timedelta(days=2)),
        ("1w", timedelta(weeks=1)),
        ("1d12h", timedelta(hours=36)),
        ("1.5h", timedelta(minutes=90)),
        ("0s", timedelta(0)),
        (" 12H ", timedelta(hours=12)),
    ],
    ids=["seconds", "minutes", "hours", "days", "weeks", "sum", "decimal", "zero", "case-and-space"],
)
def test_cleanup_job_parse_age_reads_number_and_unit(text: str, age: timedelta) -> None:
    assert job.parse_age(text) == age


@pytest.mark.parametrize("text", ["12", "h", "12y", "-1h", "12h30", "1 d", ""], ids=repr)
def test_cleanup_job_parse_age_refuses_what_is_not_an_age(text: str) -> None:
    with pytest.raises(ValueError, match="is not an age: a number and a unit"):
        job.parse_age(text)


@pytest.mark.parametrize(
    ("age", "text"),
    [(timedelta(hours=36), "1d12h"), (timedelta(seconds=90), "1m30s"), (timedelta(0), "0s")],
    ids=["day-and-hours", "minute-and-seconds", "zero"],
)
def test_cleanup_job_format_age_inverts_parse_age(age: timedelta, text: str) -> None:
    assert job.format_age(age) == text
    assert job.parse_age(text) == age


def test_cleanup_job_parse_tag_splits_at_the_first_equals_sign() -> None:
    assert job.parse_tag("team=search") == ("team", "search")
    assert job.parse_tag("expr=a=b") == ("expr", "a=b")
    assert job.parse_tag("empty=") == ("empty", "")
    with pytest.raises(ValueError, match="is not a tag: give KEY=VALUE"):
        job.parse_tag("team")
    with pytest.raises(ValueError, match="is not a tag: give KEY=VALUE"):
        job.parse_tag("=search")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: --older-than"),
        (["--older-than", "12"], "'12' is not an age"),
        (["--older-than", "12h", "--tag", "team"], "'team' is not a tag"),
        (["--older-than", "12h", "--orphan-min-age", "soon"], "'soon' is not an age"),
    ],
    ids=["no-age", "no-unit", "bad-tag", "bad-orphan-age"],
)
def test_cleanup_job_bad_arguments_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        job.main(argv)

    assert exited.value.code == job.EXIT_USAGE == 2
    assert message in capsys.readouterr().err


# --- against the embedded stack --------------------------------------------------------------------------


@dataclass
class Aged:
    stack: Any
    boundary: float  # a time.time() inside the gap between old and new endpoints
    profile_env: dict[str, str]  # AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE with a "stack" profile

    def older_than(self) -> str:
        """An --older-than that selects exactly the endpoints created before the gap."""
        return f"{time.time() - self.boundary:.3f}s"

    def endpoints(self) -> list[str]:
        sm = self.stack.client("sagemaker")
        return sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"])


def _foreign_endpoint(sm: Any, name: str, model_data_url: str, role: str) -> None:
    container = {"Image": "img", "Mode": "MultiModel", "ModelDataUrl": model_data_url}
    sm.create_model(ModelName=name, ExecutionRoleArn=role, PrimaryContainer=container)
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InstanceType": "ml.c5.xlarge",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


@pytest.fixture(scope="module")
def aged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aged]:
    from mme_triton import deploy_mme
    from mme_triton.local import LocalStack

    with LocalStack() as stack:
        session = stack.boto3_session()
        sm, s3 = stack.client("sagemaker"), stack.client("s3")
        kwargs: dict[str, Any] = {
            "role": stack.role_arn,
            "instance_type": "ml.c5.xlarge",
            "poll_interval": 0.1,
            "boto3_session": session,
        }
        url = stack.model_data_url("cleanup/")
        broken_url = stack.model_data_url("cleanup/", bucket="cleanup-broken-bucket")
        for name, tags in OLD.items():
            deploy_mme(name, broken_url if name == "old-broken" else url, tags=tags, **kwargs)
        _foreign_endpoint(sm, FOREIGN, url, stack.role_arn)
        # the broken endpoint's prefix is gone: deleting its artifacts fails
        s3.delete_bucket(Bucket="cleanup-broken-bucket")
        last_old = time.time()
        time.sleep(GAP)
        for name, tags in NEW.items():
            deploy_mme(name, url, tags=tags, **kwargs)

        env = stack.environment()
        directory = tmp_path_factory.mktemp("aws")
        (directory / "credentials").write_text(
            "[stack]\n"
            f"aws_access_key_id = {env['AWS_ACCESS_KEY_ID']}\n"
            f"aws_secret_access_key = {env['AWS_SECRET_ACCESS_KEY']}\n"
            + (f"aws_session_token = {env['AWS_SESSION_TOKEN']}\n" if "AWS_SESSION_TOKEN" in env else "")
        )
        (directory / "config").write_text(f"[profile stack]\nregion = {stack.region}\n")
        profile_env = {
            "AWS_SHARED_CREDENTIALS_FILE": str(directory / "credentials"),
            "AWS_CONFIG_FILE": str(directory / "config"),
        }
        yield Aged(stack, last_old + BOUNDARY_AFTER_OLD, profile_env)


@pytest.fixture
def aws_profile(aged: Aged, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments that reach the stack through a named profile and --endpoint-url."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in aged.profile_env.items():
        monkeypatch.setenv(name, value)
    return ["--profile", "stack", "--endpoint-url", aged.stack.endpoint_url]


def _listed(output: str, verb: str) -> list[str]:
    """Endpoints named at the start of report lines that say ``verb`` ("would delete", "deleted")."""
    return sorted(line.split(":")[0] for line in output.splitlines() if f": {verb} endpoint " in line)


@pytest.mark.triton
@pytest.mark.moto
def test_cleanup_job_dry_run_selects_exactly_the_old_managed_endpoints(
    aged: Aged, aws_profile: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = aged.endpoints()

    code = job.main(["--older-than", aged.older_than(), "--dry-run", *aws_profile])

    out = capsys.readouterr().out
    assert code == job.EXIT_OK == 0
    assert out.startswith("dry run: sweeping endpoints tagged mme-triton:managed=true, created before ")
    assert _listed(out, "would delete") == sorted(OLD)
    assert f"dry run: 15 resource(s) of {len(OLD)} endpoint(s) would be deleted" in out
    assert aged.endpoints() == before


@pytest.mark.triton
@pytest.mark.moto
def test_cleanup_job_dry_run_selects_by_every_tag(
    aged: Aged, aws_profile: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    age = ["--older-than", aged.older_than()]

    assert job.main([*age, "--dry-run", "--tag", "team=a", *aws_profile]) == 0
    assert _listed(capsys.readouterr().out, "would delete") == ["old-a"]
    assert job.main([*age, "--dry-run", "--tag", "team=a", "--tag", "group=main", *aws_profile]) == 0
    assert "nothing to sweep" in capsys.readouterr().out
    assert job.main(["--older-than", "1d", "--dry-run", *aws_profile]) == 0
    assert "nothing to sweep" in capsys.readouterr().out


@pytest.mark.triton
@pytest.mark.moto
def test_cleanup_job_deletes_the_old_endpoints_and_keeps_the_new(
    aged: Aged, aws_profile: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = aged.endpoints()

    code = job.main(["--older-than", aged.older_than(), "--tag", "group=main", *aws_profile])

    out = capsys.readouterr().out
    assert code == 0
    assert _listed(out, "deleted") == ["old-main"]
    assert "swept 1 endpoint(s): 3 resource(s) deleted, 0 already gone" in out
    assert aged.endpoints() == [name for name in before if name != "old-main"]
    sm = aged.stack.client("sagemaker")
    models = [m["ModelName"] for m in sm.list_models()["Models"]]
    configs = [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]]
    assert [name for name in models + configs if name.startswith("old-main-")] == []
    assert len([name for name in models + configs if name.startswith("new-main-")]) == 2


@pytest.mark.triton
@pytest.mark.moto
def test_cleanup_job_runs_as_a_command_with_the_stacks_environment(aged: Aged, tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        **aged.stack.environment(),
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    before = aged.endpoints()

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--older-than", aged.older_than(), "--tag", "group=cli"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert _listed(done.stdout, "deleted") == ["old-cli"]
    assert aged.endpoints() == [name for name in before if name != "old-cli"]
    assert "new-cli" in aged.endpoints()


@pytest.mark.triton
@pytest.mark.moto
def test_cleanup_job_exits_1_when_a_resource_cannot_be_removed(
    aged: Aged, aws_profile: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--older-than", aged.older_than(), "--tag", "group=broken", "--delete-artifacts"]

    code = job.main([*argv, *aws_profile])

    err = capsys.readouterr().err
    assert code == job.EXIT_INCOMPLETE == 1
    assert "error: sweep incomplete: old-broken: deleted endpoint old-broken" in err
    assert "failed: artifact s3://cleanup-broken-bucket/cleanup/" in err
    assert "old-broken" not in aged.endpoints()  # the rest of it was removed


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_cleanup_job_exits_3_when_aws_cannot_be_reached(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    unreachable = f"http://127.0.0.1:{_closed_port()}"

    code = job.main(
        ["--older-than", "1h", "--region", "us-east-1", "--endpoint-url", unreachable, "--timeout", "2s"]
    )

    assert code == job.EXIT_FAILED == 3
    assert f'error: the sweep could not run: Could not connect to the endpoint URL: "{unreachable}/"' in (
        capsys.readouterr().err
    )
