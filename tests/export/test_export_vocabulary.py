"""The three exporters speak one vocabulary: the same option means the same thing and has the same default
in each; the differences that remain are the ones their docstrings explain."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

from mme_triton import validate_model
from mme_triton.export import export_pytorch, export_torchscript, export_transformers
from mme_triton.model.authoring import read_config

pytestmark = pytest.mark.torch

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected where torch is missing
    torch = None

EXPORTERS = {
    "pytorch": export_pytorch,
    "torchscript": export_torchscript,
    "transformers": export_transformers,
}

#: Options every exporter takes, with one default.
SHARED = {
    "overwrite": False,
    "keep_tuning": True,
    "dynamic_batching": True,
    "instance_count": 1,
    "version": 1,
    "input_names": None,
    "output_names": None,
}


def _parameters(exporter: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(exporter).parameters)


@pytest.mark.parametrize("kind", EXPORTERS)
def test_exporters_share_options_and_defaults(kind: str) -> None:
    parameters = _parameters(EXPORTERS[kind])
    assert {name: parameters[name].default for name in SHARED} == SHARED
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in SHARED)
    assert "model_dir" in parameters and "atol" in parameters and "rtol" in parameters
    var_keyword = [p.name for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    if kind == "torchscript":  # no ONNX export: no opset, nothing to pass on to torch.onnx.export
        assert "opset_version" not in parameters and var_keyword == []
    else:
        assert parameters["opset_version"].default is None and var_keyword == ["export_kwargs"]


def test_exporters_keep_the_contract_signatures() -> None:
    """ARCHITECTURE.md's public contract: these names, positions and defaults are fixed."""
    torchscript = _parameters(export_torchscript)
    assert list(torchscript)[:3] == ["module", "example_inputs", "model_dir"]
    assert {k: torchscript[k].default for k in ("max_batch_size", "input_names", "output_names")} == {
        "max_batch_size": 0,
        "input_names": None,
        "output_names": None,
    }
    transformers = _parameters(export_transformers)
    assert list(transformers)[:2] == ["model", "model_dir"]
    fixed = ("tokenizer", "max_batch_size", "sequence_length", "opset_version")
    assert {k: transformers[k].default for k in fixed} == {
        "tokenizer": None,
        "max_batch_size": 8,
        "sequence_length": None,
        "opset_version": None,
    }
    assert list(_parameters(export_pytorch))[:3] == ["module", "example_inputs", "model_dir"]


def _export(kind: str, target: Path, **options: Any) -> Path:
    if kind == "transformers":
        transformers = importlib.import_module("transformers")
        torch.manual_seed(0)
        bert = transformers.BertModel(
            transformers.BertConfig(
                hidden_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=37,
                vocab_size=100,
            )
        ).eval()
        return export_transformers(bert, target, **options)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    return EXPORTERS[kind](net, torch.randn(2, 4), target, **options)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", EXPORTERS)
def test_exporters_options_mean_the_same(tmp_path: Path, kind: str) -> None:
    model_dir = _export(
        kind, tmp_path / "m", max_batch_size=4, dynamic_batching=False, instance_count=2, version=3
    )
    config = read_config(model_dir)
    assert config.max_batch_size == 4 and not config.HasField("dynamic_batching")
    assert [group.count for group in config.instance_group] == [2]
    assert sorted(p.name for p in model_dir.iterdir() if p.is_dir()) == ["3"]
    assert [p for p in validate_model(model_dir) if p.is_error] == []


@pytest.mark.parametrize("kind", ["pytorch", "transformers"])
def test_onnx_exporters_write_the_same_default_opset(tmp_path: Path, kind: str) -> None:
    import onnx

    model_dir = _export(kind, tmp_path / "m", max_batch_size=2)
    graph = onnx.load(str(model_dir / "1" / "model.onnx"), load_external_data=False)
    assert {o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")} == {17}


@pytest.mark.parametrize("kind", EXPORTERS)
@pytest.mark.parametrize(("option", "value"), [("instance_count", 0), ("version", 0), ("max_batch_size", -1)])
def test_exporters_refuse_the_same_values(tmp_path: Path, kind: str, option: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"{option} must be an int >= "):
        _export(kind, tmp_path / "m", **{option: value})
    assert list(tmp_path.iterdir()) == []
