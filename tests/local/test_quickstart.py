"""``mme-triton quickstart`` and the command line's size option (``local up`` has its own module)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from mme_triton.local.cli import add_local_commands, parse_size
from mme_triton.local.quickstart import run_quickstart, write_quickstart_models

pytestmark = [pytest.mark.triton, pytest.mark.moto]


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
    assert "input  INPUT0 [2, 4] = [0 0.25 0.5 0.75; 1 1.25 1.5 1.75]" in out
    assert out.count("ok (= numpy)") == 4 and "MISMATCH" not in out
    assert out.count("(first call: download from S3 + load into Triton)") == 2
    assert out.count("OUTPUT0 [2, 4] = [0 0.5 1 1.5; 2 2.5 3 3.5]") == 2  # scale: 2 * INPUT0
    assert out.count("OUTPUT0 [2, 3] = [") == 2  # linear
    assert "timings: start" in out and "total" in out


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
