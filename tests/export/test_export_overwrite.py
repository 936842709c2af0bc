"""A re-export with overwrite=True keeps the tuning configure_model wrote where it still fits the new graph,
says what it drops and why, and starts fresh with keep_tuning=False."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import (
    DynamicBatching,
    InstanceGroup,
    MMETritonWarning,
    ModelWarmup,
    configure_model,
    read_config,
    validate_model,
)
from mme_triton.export import export_pytorch, export_torchscript, export_transformers

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import build_bert_head

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")]

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected where torch is missing
    torch = None


def _export(kind: str, target: Path, **options: Any) -> Path:
    if kind == "transformers":
        return export_transformers(build_bert_head("sequence-classification"), target, **options)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    exporter = export_pytorch if kind == "pytorch" else export_torchscript
    options.setdefault("max_batch_size", 8)
    return exporter(net, torch.randn(2, 4), target, **options)  # type: ignore[no-any-return]


def _tuning(model_dir: Path) -> dict[str, Any]:
    config = read_config(model_dir)
    return {
        "dynamic_batching": (
            config.dynamic_batching.max_queue_delay_microseconds,
            list(config.dynamic_batching.preferred_batch_size),
        )
        if config.HasField("dynamic_batching")
        else None,
        "instance_group": [(g.count, g.kind) for g in config.instance_group],
    }


CPU = 2  # ModelInstanceGroup.KIND_CPU


@pytest.mark.parametrize("kind", ["pytorch", "torchscript", "transformers"])
def test_reexport_with_overwrite_keeps_batching_and_instances(tmp_path: Path, kind: str) -> None:
    model_dir = _export(kind, tmp_path / "m")
    configure_model(
        model_dir,
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=500, preferred_batch_size=(2, 4)),
        instance_group=InstanceGroup(count=2, kind="KIND_CPU"),
    )

    _export(kind, model_dir, overwrite=True)

    assert _tuning(model_dir) == {"dynamic_batching": (500, [2, 4]), "instance_group": [(2, CPU)]}
    assert validate_model(model_dir) == []


@pytest.mark.parametrize("kind", ["pytorch", "torchscript", "transformers"])
def test_reexport_with_keep_tuning_false_starts_fresh(tmp_path: Path, kind: str) -> None:
    model_dir = _export(kind, tmp_path / "m")
    configure_model(model_dir, instance_group=InstanceGroup(count=2, kind="KIND_CPU"), dynamic_batching=None)

    _export(kind, model_dir, overwrite=True, keep_tuning=False)

    assert _tuning(model_dir) == {"dynamic_batching": (0, []), "instance_group": [(1, 0)]}


def test_reexport_keeps_warmup_cache_and_backend_parameters(tmp_path: Path) -> None:
    model_dir = _export("pytorch", tmp_path / "m")
    samples = {"INPUT0": np.arange(4, dtype=np.float32)}
    configure_model(
        model_dir,
        preset="onnx-cpu",
        model_warmup=ModelWarmup(data=samples, name="real"),
        response_cache=True,
        intra_op_thread_count=2,
        graph_optimization_level="extended",
    )
    before = read_config(model_dir)
    warmup_files = sorted(p.name for p in (model_dir / "warmup").iterdir())

    _export("pytorch", model_dir, overwrite=True)

    after = read_config(model_dir)
    for field in ("dynamic_batching", "instance_group", "model_warmup", "response_cache", "optimization"):
        assert getattr(after, field) == getattr(before, field), field
    assert dict(after.parameters) == dict(before.parameters)
    assert sorted(p.name for p in (model_dir / "warmup").iterdir()) == warmup_files
    assert validate_model(model_dir) == []


def test_reexport_drops_what_no_longer_fits_and_says_why(tmp_path: Path) -> None:
    model_dir = _export("pytorch", tmp_path / "m")
    configure_model(
        model_dir,
        dynamic_batching=DynamicBatching(preferred_batch_size=(2, 8)),
        model_warmup=ModelWarmup(data="zero", batch_size=8),
    )

    with pytest.warns(MMETritonWarning) as caught:
        _export("pytorch", model_dir, overwrite=True, max_batch_size=4)

    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        "re-export of m drops model_warmup 'warmup': batch_size 8 is above the new max_batch_size 4",
        "re-export of m drops preferred_batch_size [8]: above the new max_batch_size 4",
    ]
    config = read_config(model_dir)
    assert list(config.dynamic_batching.preferred_batch_size) == [2]
    assert len(config.model_warmup) == 0
    assert validate_model(model_dir) == []


def test_reexport_of_another_graph_drops_warmup_for_inputs_that_changed(tmp_path: Path) -> None:
    model_dir = _export("pytorch", tmp_path / "m")
    configure_model(model_dir, model_warmup="zero")
    wider = torch.nn.Linear(6, 3).eval()

    with pytest.warns(MMETritonWarning, match=r"input 'INPUT0' has dims \[6\] now, the sample \[4\]"):
        export_pytorch(wider, torch.randn(2, 6), model_dir, max_batch_size=8, overwrite=True)
    assert len(read_config(model_dir).model_warmup) == 0


def test_reexport_to_another_backend_drops_its_parameters(tmp_path: Path) -> None:
    model_dir = _export("pytorch", tmp_path / "m")
    configure_model(model_dir, preset="onnx-cpu")

    with pytest.warns(MMETritonWarning, match="written for the onnxruntime backend.*served by pytorch"):
        _export("torchscript", model_dir, overwrite=True)

    config = read_config(model_dir)
    assert dict(config.parameters) == {} and not config.HasField("optimization")
    assert _tuning(model_dir) == {"dynamic_batching": (100, []), "instance_group": [(1, CPU)]}


def test_reexport_arguments_other_than_the_defaults_win(tmp_path: Path) -> None:
    model_dir = _export("pytorch", tmp_path / "m")
    configure_model(model_dir, instance_group=InstanceGroup(count=2, kind="KIND_CPU"))

    with pytest.warns(MMETritonWarning) as caught:
        _export("pytorch", model_dir, overwrite=True, instance_count=3, dynamic_batching=False)

    assert sorted(str(w.message) for w in caught) == [
        "re-export of m drops dynamic_batching: dynamic_batching=False was passed",
        "re-export of m drops instance_group: instance_count was passed",
    ]
    assert _tuning(model_dir) == {"dynamic_batching": None, "instance_group": [(3, 0)]}
