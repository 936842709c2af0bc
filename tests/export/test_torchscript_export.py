"""export_torchscript: a torch module becomes a valid pytorch_libtorch model that computes the same."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import validate_model
from mme_triton.export import ExportError, export_torchscript
from mme_triton.model.config import datatype_name, parse_config_file

pytestmark = pytest.mark.torch

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected where torch is missing
    torch = None


def test_export_torchscript_cnn_writes_ordinal_names_and_a_batched_config(
    tmp_path: Path, small_cnn: Any
) -> None:
    model_dir = export_torchscript(small_cnn, torch.randn(2, 3, 16, 16), tmp_path / "cnn", max_batch_size=16)

    assert validate_model(model_dir) == []
    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert config.platform == "pytorch_libtorch"
    assert config.max_batch_size == 16 and config.HasField("dynamic_batching")
    assert [(t.name, datatype_name(t.data_type), list(t.dims)) for t in config.input] == [
        ("INPUT__0", "TYPE_FP32", [3, 16, 16])
    ]
    assert [(t.name, datatype_name(t.data_type), list(t.dims)) for t in config.output] == [
        ("OUTPUT__0", "TYPE_FP32", [5])
    ]

    loaded = torch.jit.load(str(model_dir / "1" / "model.pt"))
    images = torch.randn(7, 3, 16, 16)
    with torch.no_grad():
        np.testing.assert_allclose(loaded(images).numpy(), small_cnn(images).numpy(), rtol=1e-5, atol=1e-6)


def test_export_torchscript_names_and_dtypes_follow_the_module(tmp_path: Path) -> None:
    class Count(torch.nn.Module):  # type: ignore[misc]
        def forward(self, tokens: Any, scale: Any) -> tuple[Any, Any]:
            return (tokens > 0).sum(dim=1, keepdim=True), tokens.to(torch.float32) * scale

    model_dir = export_torchscript(
        Count(),
        (torch.tensor([[1, 0, 3]], dtype=torch.int64), torch.tensor([[2.0, 2.0, 2.0]])),
        tmp_path / "count",
        input_names=["tokens", "scale"],
        output_names=["COUNT", "SCALED"],
    )
    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert [(t.name, datatype_name(t.data_type), list(t.dims)) for t in config.input] == [
        ("tokens", "TYPE_INT64", [1, 3]),
        ("scale", "TYPE_FP32", [1, 3]),
    ]
    assert [(t.name, datatype_name(t.data_type), list(t.dims)) for t in config.output] == [
        ("COUNT", "TYPE_INT64", [1, 1]),
        ("SCALED", "TYPE_FP32", [1, 3]),
    ]
    assert validate_model(model_dir) == []


class _FixedRows(torch.nn.Module if torch else object):  # type: ignore[misc]
    def forward(self, x: Any) -> Any:
        return torch.cat([x, torch.zeros(int(x.shape[0]), 1)], dim=1)  # int(): the trace keeps a constant


class _FixedView(torch.nn.Module if torch else object):  # type: ignore[misc]
    def forward(self, x: Any) -> Any:
        return x.view(2, -1)  # runs on any even element count, but dim 0 is always 2


@pytest.mark.parametrize(
    ("module", "message"),
    [(_FixedRows, "fails on a batch of 3 rows"), (_FixedView, r"has shape \[2, 6\] for a batch of 3 rows")],
    ids=["constant-in-trace", "reshaped-batch"],
)
def test_export_torchscript_refuses_a_model_that_does_not_batch(
    tmp_path: Path, module: type[Any], message: str
) -> None:
    with pytest.raises(ExportError, match=message):
        export_torchscript(module(), torch.randn(2, 4), tmp_path / "fixed", max_batch_size=8)
    assert list(tmp_path.iterdir()) == []


def test_export_torchscript_script_keeps_control_flow(tmp_path: Path) -> None:
    class Branch(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if bool(x.sum() > 0):
                return x * 2
            return x * -1

    model_dir = export_torchscript(
        Branch(), torch.ones(1, 3), tmp_path / "branch", max_batch_size=4, script=True
    )
    loaded = torch.jit.load(str(model_dir / "1" / "model.pt"))
    assert loaded(-torch.ones(2, 3)).tolist() == [[1.0, 1.0, 1.0]] * 2


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((torch.randn(2, 4),) if torch else (), {"max_batch_size": -1}, ValueError, "max_batch_size"),
        ((torch.randn(2, 4),) if torch else (), {"input_names": ["A", "B"]}, ValueError, "2 input names"),
        ((torch.randn(2, 4),) if torch else (), {"output_names": ["A", "B"]}, ValueError, "2 output names"),
        (([1.0, 2.0],), {}, TypeError, "not a torch.Tensor"),
    ],
    ids=["negative-batch", "too-many-inputs", "too-many-outputs", "not-a-tensor"],
)
def test_export_torchscript_rejects_bad_arguments(
    tmp_path: Path, args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        export_torchscript(torch.nn.Linear(4, 2), args[0], tmp_path / "m", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_export_torchscript_refuses_non_tensor_outputs(tmp_path: Path) -> None:
    class Labels(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return {"y": x}

    with pytest.raises(TypeError, match="serves tensors"):
        export_torchscript(Labels(), torch.randn(1, 2), tmp_path / "labels")


def test_export_torchscript_refuses_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_torchscript(torch.nn.Linear(4, 2), torch.randn(1, 4), tmp_path / "taken")
    export_torchscript(torch.nn.Linear(4, 2), torch.randn(1, 4), tmp_path / "taken", overwrite=True)
    assert (tmp_path / "taken" / "1" / "model.pt").is_file()


def test_export_torchscript_output_with_nan_where_pytorch_has_nan_exports(tmp_path: Path) -> None:
    class LogOf(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return torch.log(x)  # NaN for a negative input, -inf for 0

    example = torch.tensor([[1.0, -1.0, 0.0]])
    model_dir = export_torchscript(LogOf(), example, tmp_path / "log", max_batch_size=2)
    loaded = torch.jit.load(str(model_dir / "1" / "model.pt"))
    out = loaded(example).numpy()
    assert out[0, 0] == 0.0 and np.isnan(out[0, 1]) and out[0, 2] == -np.inf
