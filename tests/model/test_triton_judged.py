"""Where validation and Triton used to disagree; a real Triton 2.51 (through the embedded stack's
SageMaker front-end) loaded or refused each of these, and validation now says the same."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mme_triton.model import validate_model


def _copy(fixture_repos: Path, case: str, tmp_path: Path) -> Path:
    shutil.copytree(fixture_repos / case, tmp_path / "repo")
    return tmp_path / "repo"


def test_validate_model_reports_a_python_syntax_error_with_its_file_and_line(fixture_repos: Path) -> None:
    model = fixture_repos / "python_syntax_error" / "scale"

    [problem] = validate_model(model)

    assert (problem.code, problem.severity) == ("python-syntax-error", "error")
    assert problem.path == str(model / "1" / "model.py")
    assert (problem.line, problem.column) == (7, 16)
    assert "'(' was never closed" in problem.message and "line 7" in problem.message


def test_validate_model_loads_a_latin1_config_as_triton_does_with_a_warning(fixture_repos: Path) -> None:
    model = fixture_repos / "config_encoding" / "scale"

    [problem] = validate_model(model)

    assert (problem.code, problem.severity, problem.line) == ("config-encoding", "warning", 1)


def test_validate_model_says_what_triton_fills_in_for_a_python_model_without_config(
    fixture_repos: Path,
) -> None:
    [problem] = validate_model(fixture_repos / "python_config_missing" / "scale")

    assert (problem.code, problem.severity) == ("python-config-missing", "warning")
    assert "max_batch_size 0" in problem.message and "no inputs or outputs" in problem.message
    assert "auto_complete_config" in problem.message


@pytest.mark.parametrize(
    ("replace", "by", "words"),
    [
        ("dims: [ 4 ]", "", "input 'INPUT0' has no dims"),
        ("data_type: TYPE_FP32\n    dims: [ 4 ]", "dims: [ 4 ]", "input 'INPUT0' has no data_type"),
        ("dims: [ 3 ]", "", "output 'OUTPUT0' has no dims"),
    ],
    ids=["input-dims", "input-data-type", "output-dims"],
)
def test_validate_model_refuses_a_listed_onnx_tensor_without_dims_or_data_type(
    fixture_repos: Path, tmp_path: Path, replace: str, by: str, words: str
) -> None:
    # the onnxruntime backend fills in tensors only when the config lists none; Triton then refuses
    # "model input 'INPUT0' must specify 'dims'"
    repo = _copy(fixture_repos, "valid_onnx", tmp_path)
    config = repo / "linear" / "config.pbtxt"
    text = config.read_text()
    assert replace in text
    config.write_text(text.replace(replace, by, 1))

    errors = [p for p in validate_model(repo / "linear") if p.is_error]

    assert [p.code for p in errors] == ["datatype-invalid" if "data_type" in words else "dims-invalid"]
    assert words in errors[0].message


@pytest.mark.parametrize(
    ("case", "model", "words"),
    [
        ("valid_savedmodel_no_config", "classifier", "no TensorFlow runtime"),
        ("valid_tensorrt_no_config", "detector", "NVIDIA GPUs"),
    ],
    ids=["savedmodel", "tensorrt"],
)
def test_validate_model_for_the_local_stack_warns_about_backends_it_cannot_run(
    fixture_repos: Path, case: str, model: str, words: str
) -> None:
    plain = validate_model(fixture_repos / case / model)
    [problem] = validate_model(fixture_repos / case / model, local_stack=True)

    assert plain == []
    assert (problem.code, problem.severity) == ("local-stack-unsupported", "warning")
    assert words in problem.message


@pytest.mark.parametrize(
    ("case", "model"),
    [("valid_onnx", "linear"), ("valid_python", "scale"), ("valid_ensemble", "pipeline")],
    ids=["onnx", "python", "ensemble"],
)
def test_validate_model_for_the_local_stack_passes_what_it_runs(
    fixture_repos: Path, case: str, model: str
) -> None:
    assert validate_model(fixture_repos / case / model, local_stack=True) == []


def test_validate_model_for_the_local_stack_checks_every_ensemble_step(
    fixture_repos: Path, tmp_path: Path
) -> None:
    repo = _copy(fixture_repos, "valid_ensemble", tmp_path)
    step = next(p for p in repo.iterdir() if p.name != "pipeline")
    config = step / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'backend: "dali"'))

    problems = [
        p for p in validate_model(repo / "pipeline", local_stack=True) if p.code == "local-stack-unsupported"
    ]

    assert [p.path for p in problems] == [str(config)]
    assert "NVIDIA DALI" in problems[0].message
