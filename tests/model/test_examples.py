"""examples/model_repository: committed output of examples/build_examples.py, and clean under validation."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from mme_triton.model import load_model, validate_model

EXAMPLES = Path(__file__).parents[2] / "examples"
REPOSITORY = EXAMPLES / "model_repository"


def _build_examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_examples", EXAMPLES / "build_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_examples_reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    written = _build_examples().build(tmp_path)

    generated = {path.relative_to(tmp_path).as_posix() for path in written}
    committed = {path.relative_to(REPOSITORY).as_posix() for path in REPOSITORY.rglob("*") if path.is_file()}
    assert generated == committed
    for relative in generated:
        assert (tmp_path / relative).read_bytes() == (REPOSITORY / relative).read_bytes(), relative


@pytest.mark.parametrize("name", ["linear", "scale", "pipeline"])
def test_example_models_validate_without_errors_or_warnings(name: str) -> None:
    assert validate_model(REPOSITORY / name) == []


def test_example_pipeline_archive_holds_all_three_models() -> None:
    model = load_model(REPOSITORY / "pipeline")

    assert [member.name for member in model.members] == ["linear", "pipeline", "scale"]


def test_example_linear_computes_input_times_w_plus_b() -> None:
    from onnx.reference import ReferenceEvaluator

    build = _build_examples()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    evaluator = ReferenceEvaluator(str(REPOSITORY / "linear" / "1" / "model.onnx"))
    outputs = evaluator.run(None, {"INPUT0": x})
    assert isinstance(outputs, list)
    y = np.asarray(outputs[0])

    np.testing.assert_allclose(y, x @ build.W + build.B, rtol=1e-6)
    assert y.shape == (2, 3)
