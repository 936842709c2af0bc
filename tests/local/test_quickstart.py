"""``mme-triton quickstart`` and ``mme-triton local up``."""

from __future__ import annotations

import argparse
import shlex
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mme_triton.local.cli import add_local_commands, local_up, parse_size
from mme_triton.local.quickstart import run_quickstart, write_quickstart_models

pytestmark = pytest.mark.local


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mme-triton")
    add_local_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_quickstart_answers_what_onnx_runtime_computes(tmp_path: Path) -> None:
    import onnxruntime

    steps: list[str] = []

    result = run_quickstart(workdir=tmp_path, progress=steps.append)

    reference_dir = tmp_path / "reference"
    linear, _scale = write_quickstart_models(reference_dir)
    session = onnxruntime.InferenceSession(
        str(linear / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    assert [(c.target_model, c.binary) for c in result.calls] == [
        ("linear.tar.gz", True),
        ("linear.tar.gz", False),
        ("scale.tar.gz", True),
        ("scale.tar.gz", False),
    ]
    for call in result.calls:
        x = call.inputs["INPUT0"]
        if call.target_model == "linear.tar.gz":
            expected = session.run(["OUTPUT0"], {"INPUT0": x})[0]
        else:
            expected = x * 2
        np.testing.assert_allclose(call.outputs["OUTPUT0"], expected, rtol=1e-6)
    assert result.ok
    assert set(result.timings) == {"start", "deploy", "invoke", "teardown", "total"}
    assert any("deploying 2 models" in step for step in steps)
    assert [p.name for p in tmp_path.iterdir()] == ["reference"]  # its scratch files are gone


def test_quickstart_command_prints_outputs_and_timings(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["quickstart", "--endpoint-name", "qs-cli"])

    code = args.handler(args)

    out = capsys.readouterr().out
    assert code == 0
    assert out.count(" ok\n") == 4
    assert "OUTPUT0 [2, 3] = [" in out and "OUTPUT0 [2, 4] = [" in out
    assert "timings: start" in out


def test_local_up_prints_a_working_environment(capsys: pytest.CaptureFixture[str]) -> None:
    import boto3

    args = _parser().parse_args(["local", "up", "--memory-budget", "64MiB"])
    stop = threading.Event()
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(local_up(args, stop=stop)))
    runner.start()
    printed = ""
    try:
        deadline = time.monotonic() + 60
        while "Press Ctrl-C" not in printed and time.monotonic() < deadline and runner.is_alive():
            time.sleep(0.1)
            printed += capsys.readouterr().out
        exports = dict(
            shlex.split(line.removeprefix("export "))[0].split("=", 1)
            for line in printed.splitlines()
            if line.startswith("export ")
        )
        assert set(exports) >= {
            "AWS_ENDPOINT_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_DEFAULT_REGION",
        }
        s3 = boto3.Session(
            aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=exports.get("AWS_SESSION_TOKEN"),
            region_name=exports["AWS_DEFAULT_REGION"],
        ).client("s3", endpoint_url=exports["AWS_ENDPOINT_URL"])
        buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
        model_data_url = next(line for line in printed.splitlines() if line.startswith("model data url: "))
        assert model_data_url.split("s3://", 1)[1].split("/", 1)[0] in buckets
    finally:
        stop.set()
        runner.join(timeout=60)
    assert codes == [0]


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", 1048576), ("2GiB", 2 * 1024**3), ("500MB", 500 * 1000**2), ("1.5 KiB", 1536)],
    ids=["bytes", "gib", "mb", "fraction"],
)
def test_parse_size_reads_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "2 parsecs", "0"], ids=["empty", "word", "unit", "zero"])
def test_parse_size_refuses_what_is_not_a_size(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)
