"""export_pytorch: a torch module becomes a valid Triton ONNX model directory that computes the same thing."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import validate_model
from mme_triton.export import export_pytorch
from mme_triton.model.config import parse_config_file

# torch and onnxruntime (the export extra) are installed where this marker is selected;
# the core run (numpy 2, no extras) deselects it.
pytestmark = pytest.mark.torch

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected in the core run
    torch = None


def _two_heads() -> Any:
    """A module with two inputs and two outputs, one of them a single value per row."""

    class TwoHeads(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.body = torch.nn.Linear(4, 3)

        def forward(self, x: Any, bias: Any) -> tuple[Any, Any]:
            y = self.body(x) + bias
            return torch.relu(y), y.argmax(dim=1)

    return TwoHeads()


def _run(model_dir: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model_dir / "1" / "model.onnx"))
    return list(session.run(None, feeds))


def test_export_pytorch_writes_a_valid_batched_model(tmp_path: Path) -> None:
    net = _two_heads()
    x, bias = torch.randn(2, 4), torch.randn(2, 3)
    model_dir = export_pytorch(
        net, (x, bias), tmp_path / "heads", output_names=["SCORES", "LABEL"], max_batch_size=16
    )

    assert validate_model(model_dir) == []
    config, problems = parse_config_file(model_dir / "config.pbtxt")
    assert problems == [] and config is not None
    assert config.name == "heads"
    assert config.platform == "onnxruntime_onnx"
    assert config.max_batch_size == 16
    assert config.HasField("dynamic_batching")
    assert [(t.name, list(t.dims)) for t in config.input] == [("INPUT0", [4]), ("INPUT1", [3])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("SCORES", [3]), ("LABEL", [1])]
    assert config.output[1].HasField("reshape") and list(config.output[1].reshape.shape) == []

    # a batch size other than the example's runs and matches torch
    x5, b5 = torch.randn(5, 4), torch.randn(5, 3)
    scores, labels = _run(model_dir, {"INPUT0": x5.numpy(), "INPUT1": b5.numpy()})
    want_scores, want_labels = net(x5, b5)
    np.testing.assert_allclose(scores, want_scores.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(labels, want_labels.numpy())


def test_export_pytorch_without_batching_keeps_full_dims(tmp_path: Path) -> None:
    model_dir = export_pytorch(torch.nn.Linear(4, 2), torch.randn(3, 4), tmp_path / "fixed")
    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert config.max_batch_size == 0
    assert not config.HasField("dynamic_batching")
    assert list(config.input[0].dims) == [3, 4]
    assert list(config.output[0].dims) == [3, 2]
    assert validate_model(model_dir) == []


def test_export_pytorch_refuses_to_replace_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_pytorch(torch.nn.Linear(4, 2), torch.randn(1, 4), tmp_path / "taken")
    export_pytorch(torch.nn.Linear(4, 2), torch.randn(1, 4), tmp_path / "taken", overwrite=True)
    assert (tmp_path / "taken" / "1" / "model.onnx").is_file()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_batch_size": -1}, "max_batch_size"),
        ({"instance_count": 0}, "instance_count"),
        ({"input_names": ["A", "B"]}, "2 input names for 1 example inputs"),
        ({"output_names": ["A", "B"]}, "2 output names for 1 module outputs"),
    ],
    ids=["negative-batch", "zero-instances", "too-many-inputs", "too-many-outputs"],
)
def test_export_pytorch_rejects_bad_arguments(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        export_pytorch(torch.nn.Linear(4, 2), torch.randn(1, 4), tmp_path / "m", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "m").exists()


def test_export_pytorch_failed_export_leaves_nothing(tmp_path: Path) -> None:
    class NotExportable(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            if torch.onnx.is_in_onnx_export():
                raise RuntimeError("this module cannot be exported")
            return x * 2

    with pytest.raises(RuntimeError, match="cannot be exported"):
        export_pytorch(NotExportable(), torch.randn(2, 4), tmp_path / "broken", max_batch_size=4)
    assert list(tmp_path.iterdir()) == []


def _square_root() -> Any:
    """sqrt: NaN for a negative input, in PyTorch and in ONNX Runtime alike."""

    class SquareRoot(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return torch.sqrt(x)

    return SquareRoot()


def test_export_pytorch_output_with_nan_where_pytorch_has_nan_exports(tmp_path: Path) -> None:
    example = torch.tensor([[4.0, -1.0], [9.0, float("inf")]])
    model_dir = export_pytorch(_square_root(), example, tmp_path / "sqrt", max_batch_size=4)
    (out,) = _run(model_dir, {"INPUT0": example.numpy()})
    assert np.isnan(out[0, 1]) and out[1, 1] == np.inf and out[0, 0] == 2.0


@pytest.mark.parametrize(
    ("got", "expected", "message"),
    [
        pytest.param([1.0, float("nan")], [1.0, float("nan")], None, id="same-nan"),
        pytest.param([float("inf"), -float("inf")], [float("inf"), -float("inf")], None, id="same-inf"),
        pytest.param([1.0, float("nan")], [1.0, 2.0], "NaN against a number in 1 element", id="nan-vs-2"),
        pytest.param([1.5, float("nan")], [1.0, float("nan")], r"by up to 0\.5, more than", id="number-off"),
        pytest.param([float("inf")], [1.0], r"by up to inf", id="inf-vs-1"),
    ],
)
def test_compare_outputs_takes_nan_as_equal_to_nan_only(
    tmp_path: Path, got: list[float], expected: list[float], message: str | None
) -> None:
    from mme_triton.export import ExportError
    from mme_triton.export._common import compare_outputs

    def compare() -> float:
        return compare_outputs(
            "check",
            ["y"],
            [np.array(got, np.float32)],
            [np.array(expected, np.float32)],
            atol=1e-4,
            rtol=1e-3,
            model_dir=tmp_path,
        )

    if message is None:
        assert compare() == 0.0
        return
    with pytest.raises(ExportError, match=message) as caught:
        compare()
    assert "by up to 0," not in str(caught.value)  # never a difference of 0 given as the reason
