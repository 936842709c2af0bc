"""check_servable: what the CPU-only stack refuses before Triton sees it, in one sentence each."""

from __future__ import annotations

from pathlib import Path

import pytest

from mme_triton.local.route.extract import ExtractedModel
from mme_triton.local.route.support import UnsupportedModelError, check_servable


def _model(root: Path, name: str, config: str | None, files: dict[str, bytes]) -> None:
    directory = root / name
    (directory / "1").mkdir(parents=True)
    if config is not None:
        (directory / "config.pbtxt").write_text(config)
    for file, data in files.items():
        path = directory / "1" / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.mark.parametrize(
    ("config", "files", "backend", "instead"),
    [
        (
            'platform: "tensorflow_savedmodel"',
            {"model.savedmodel/saved_model.pb": b"x"},
            "tensorflow",
            "tf2onnx",
        ),
        ('platform: "tensorflow_graphdef"', {"model.graphdef": b"x"}, "tensorflow", "ONNX"),
        (None, {"model.savedmodel/saved_model.pb": b"x"}, "tensorflow", "ONNX"),
        ('backend: "dali"', {"model.dali": b"x"}, "dali", "python model"),
        ('backend: "fil"', {"xgboost.json": b"{}"}, "fil", "hummingbird"),
        ('platform: "tensorrt_plan"', {"model.plan": b"x"}, "tensorrt", "NVIDIA GPUs"),
        ('backend: "openvino"', {"model.xml": b"x"}, "openvino", "ONNX"),
        ('platform: "torch_aoti"', {"model.pt2": b"x"}, "torch_aoti", "TorchScript"),
        ('backend: "identity"', {}, "identity", "python model"),
    ],
    ids=[
        "savedmodel",
        "graphdef",
        "savedmodel-no-config",
        "dali",
        "fil",
        "tensorrt",
        "openvino",
        "aoti",
        "identity",
    ],
)
def test_check_servable_names_the_backend_and_what_runs_instead(
    tmp_path: Path, config: str | None, files: dict[str, bytes], backend: str, instead: str
) -> None:
    _model(tmp_path, "m", config, files)

    with pytest.raises(UnsupportedModelError) as caught:
        check_servable(ExtractedModel(tmp_path, ("m",), 0))

    message = str(caught.value)
    assert message.startswith("model 'm' (") and backend in message and instead in message
    assert caught.value.model == "m"


@pytest.mark.parametrize(
    ("config", "files"),
    [
        ('backend: "python"', {"model.py": b"class TritonPythonModel: pass"}),
        ('platform: "onnxruntime_onnx"', {"model.onnx": b"x"}),
        (None, {"model.onnx": b"x"}),
        ('platform: "pytorch_libtorch"', {"model.pt": b"x"}),
        ('backend: "pytorch"', {"model.pt": b"x"}),
        ('platform: "ensemble"', {}),
    ],
    ids=["python", "onnx", "onnx-no-config", "torchscript", "pytorch-backend", "ensemble"],
)
def test_check_servable_lets_through_what_the_stack_runs(
    tmp_path: Path, config: str | None, files: dict[str, bytes]
) -> None:
    _model(tmp_path, "m", config, files)
    extracted = ExtractedModel(tmp_path, ("m",), 0)

    assert check_servable(extracted) == extracted


def test_check_servable_renames_a_single_models_directory_the_shell_would_split(tmp_path: Path) -> None:
    _model(tmp_path, "my model", 'backend: "python"', {"model.py": b"class TritonPythonModel: pass"})

    served = check_servable(ExtractedModel(tmp_path, ("my model",), 7))

    assert served.model_dirs == ("model",) and served.size == 7
    assert (tmp_path / "model" / "1" / "model.py").is_file()
    assert not (tmp_path / "my model").exists()


def test_check_servable_refuses_an_ensemble_step_the_shell_would_split(tmp_path: Path) -> None:
    _model(tmp_path, "pipeline", 'platform: "ensemble"', {})
    _model(tmp_path, "pre process", 'backend: "python"', {"model.py": b"class TritonPythonModel: pass"})

    with pytest.raises(UnsupportedModelError, match="'pre process' holds characters"):
        check_servable(ExtractedModel(tmp_path, ("pipeline", "pre process"), 0))


def test_check_servable_refuses_a_model_file_name_the_shell_would_run(tmp_path: Path) -> None:
    config = 'backend: "python"\ndefault_model_filename: "m.py;touch pwned"'
    _model(tmp_path, "m", config, {"m.py;touch pwned": b"class TritonPythonModel: pass"})

    with pytest.raises(UnsupportedModelError, match="default_model_filename"):
        check_servable(ExtractedModel(tmp_path, ("m",), 0))
