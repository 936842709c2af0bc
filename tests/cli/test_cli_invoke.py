"""``invoke`` through ``main(argv)`` against a real Triton on the embedded stack, reached through the
variables ``mme-triton local up`` prints: inputs from .npy, .npz and KServe v2 JSON, outputs printed,
as JSON, or saved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton.cli import main

pytestmark = [pytest.mark.triton, pytest.mark.moto]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
ENDPOINT = "invoke-mme"


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    """A LocalStack with ``linear`` and ``scale`` deployed on one endpoint."""
    from mme_triton import deploy_mme
    from mme_triton.local import LocalStack

    with LocalStack() as running:
        deploy_mme(
            ENDPOINT,
            running.model_data_url(),
            models=[EXAMPLES / "linear", EXAMPLES / "scale"],
            role=running.role_arn,
            instance_type="ml.m5.xlarge",
            poll_interval=0.1,
            boto3_session=running.boto3_session(),
        )
        yield running


@pytest.fixture
def stack_env(stack: Any, monkeypatch: pytest.MonkeyPatch, bare_aws: None) -> Any:
    for name, value in stack.environment().items():
        monkeypatch.setenv(name, value)
    return stack


def _expected(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``linear``: OUTPUT0 = INPUT0 @ W + B, computed with ONNX Runtime from the shipped model."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(EXAMPLES / "linear" / "1" / "model.onnx"))
    (out,) = session.run(["OUTPUT0"], {"INPUT0": x})
    return np.asarray(out)


X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_npy_input_prints_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", X)
    assert main(["invoke", ENDPOINT, "linear.tar.gz", "--input", f"INPUT0={tmp_path / 'x.npy'}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OUTPUT0 FP32 [2, 3]\n[[")


@pytest.mark.parametrize("wire", ["--binary", "--json-data"])
@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_json_output_matches_the_model(
    wire: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.savez(tmp_path / "inputs.npz", INPUT0=X)
    assert (
        main(["invoke", ENDPOINT, "linear.tar.gz", "--inputs", str(tmp_path / "inputs.npz"), wire, "--json"])
        == 0
    )
    output = json.loads(capsys.readouterr().out)["outputs"]["OUTPUT0"]
    assert (output["datatype"], output["shape"]) == ("FP32", [2, 3])
    np.testing.assert_allclose(np.array(output["data"], np.float32), _expected(X), rtol=1e-6)


@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_kserve_json_request_and_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = {
        "inputs": [{"name": "INPUT0", "shape": [2, 4], "datatype": "FP32", "data": X.ravel().tolist()}]
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    saved = tmp_path / "out.npz"
    args = [
        "invoke",
        ENDPOINT,
        "scale.tar.gz",
        "--inputs",
        str(tmp_path / "request.json"),
        "--save",
        str(saved),
    ]
    assert main(args) == 0
    assert f"saved OUTPUT0 to {saved}" in capsys.readouterr().out
    with np.load(saved) as outputs:
        np.testing.assert_array_equal(outputs["OUTPUT0"], 2 * X)
    # a name without .npz: numpy adds it, and the command names the file it wrote
    assert main([*args[:-1], str(tmp_path / "plain"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["saved"] == str(tmp_path / "plain.npz")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("plain")) == ["plain.npz"]


@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_over_the_limit_names_split_batches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "big.npy", np.ones((400_000, 4), dtype=np.float32))  # 6.4 MB: over the 6 MiB limit
    argv = ["invoke", ENDPOINT, "scale.tar.gz", "--input", f"INPUT0={tmp_path / 'big.npy'}"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "pass --split-batches to send the batch along dimension 0" in err and len(err.splitlines()) == 1


@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_split_batches_by_max_batch_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = np.arange(80, dtype=np.float32).reshape(20, 4)  # scale takes at most 8 rows a request
    np.save(tmp_path / "batch.npy", batch)
    argv = ["invoke", ENDPOINT, "scale.tar.gz", "--input", f"INPUT0={tmp_path / 'batch.npy'}", "--json"]
    assert main(argv) == 1
    assert "batch-size must be <= 8" in capsys.readouterr().err
    assert main([*argv, "--split-batches", "--max-batch-size", "8"]) == 0
    output = json.loads(capsys.readouterr().out)["outputs"]["OUTPUT0"]
    np.testing.assert_array_equal(np.array(output["data"], np.float32), 2 * batch)


@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_wrong_input_name_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "x.npy", X)
    assert main(["invoke", ENDPOINT, "linear.tar.gz", "--input", f"WRONG={tmp_path / 'x.npy'}"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "WRONG" in err


@pytest.mark.usefixtures("stack_env")
def test_cli_invoke_unknown_model_is_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", X)
    assert main(["invoke", ENDPOINT, "nope.tar.gz", "--input", f"INPUT0={tmp_path / 'x.npy'}"]) == 4
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "INPUT0"], "--input takes NAME=FILE.npy"),
        (["--input", "INPUT0=x.csv"], "is not a .npy file"),
        (["--inputs", "x.csv"], "give a .npz file or a KServe v2 .json request body"),
        ([], "no inputs: give --input NAME=FILE.npy"),
    ],
    ids=["no-equals", "not-npy", "unknown-kind", "none"],
)
def test_cli_invoke_bad_inputs_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["invoke", ENDPOINT, "linear.tar.gz", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_invoke_input_file_that_is_not_npy_data_is_an_error_not_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the command line is right; the file's content is not: exit 1 with the --debug hint, not 2
    bad = tmp_path / "x.npy"
    bad.write_bytes(b"not numpy data at all")
    assert main(["invoke", ENDPOINT, "linear.tar.gz", "--input", f"INPUT0={bad}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ValueError: ") and "(run with --debug for the traceback)" in err
