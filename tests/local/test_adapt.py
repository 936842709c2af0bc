"""adapt_for_cpu: GPU-only config parts rewritten in an extracted copy so the CPU stack can load it."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from triton_fixtures import LINEAR_CONFIG, json_request, make_linear_model, triton

from mme_triton.local.route.adapt import GPUModelError, adapt_for_cpu
from mme_triton.local.triton.server import TritonLoadError, TritonServer
from mme_triton.model.config import parse_config_file

__all__ = ["triton"]  # the fixture, imported for pytest

BASE = """\
name: "m"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""

GPU_GROUPS = "instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0, 1 ] }, { kind: KIND_CPU count: 1 } ]\n"
GPUS_WITHOUT_KIND = "instance_group [ { count: 3 gpus: [ 0 ] } ]\n"
TRT_ACCELERATOR = """\
optimization { execution_accelerators {
  gpu_execution_accelerator [ { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ]
  cpu_execution_accelerator [ { name: "openvino" } ]
} }
"""
CUDA_GRAPHS = "optimization { cuda { graphs: true busy_wait_events: true } }\n"


def _write(root: Path, config: str, name: str = "m") -> Path:
    (root / name / "1").mkdir(parents=True)
    path = root / name / "config.pbtxt"
    path.write_text(config)
    return path


@pytest.mark.parametrize(
    ("extra", "changed_fields"),
    [
        (GPU_GROUPS, ["instance_group[0]"]),
        (GPUS_WITHOUT_KIND, ["instance_group[0]"]),
        (TRT_ACCELERATOR, ["GPU execution accelerators", "tensorrt"]),
        (CUDA_GRAPHS, ["optimization.cuda"]),
        (GPU_GROUPS + CUDA_GRAPHS, ["instance_group[0]", "optimization.cuda"]),
    ],
    ids=["kind-gpu", "gpus-without-kind", "tensorrt-accelerator", "cuda-graphs", "groups-and-graphs"],
)
def test_adapt_for_cpu_rewrites_gpu_only_settings(
    tmp_path: Path, extra: str, changed_fields: list[str]
) -> None:
    path = _write(tmp_path, BASE + extra)

    changes = adapt_for_cpu(tmp_path)

    joined = "\n".join(changes)
    assert all(change.startswith("m: ") for change in changes)
    for field in changed_fields:
        assert field in joined
    config, problems = parse_config_file(path)
    assert problems == [] and config is not None
    assert all(group.kind == group.KIND_CPU and len(group.gpus) == 0 for group in config.instance_group)
    assert len(config.optimization.execution_accelerators.gpu_execution_accelerator) == 0
    assert not config.optimization.HasField("cuda")
    assert [i.name for i in config.input] == ["INPUT0"]  # the rest is kept


def test_adapt_for_cpu_keeps_counts_and_cpu_accelerators(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + GPU_GROUPS + TRT_ACCELERATOR)

    adapt_for_cpu(tmp_path)

    config, _ = parse_config_file(path)
    assert config is not None
    assert [group.count for group in config.instance_group] == [2, 1]
    assert [a.name for a in config.optimization.execution_accelerators.cpu_execution_accelerator] == [
        "openvino"
    ]


def test_adapt_for_cpu_leaves_cpu_configs_byte_for_byte(tmp_path: Path) -> None:
    text = "# a comment kept\n" + BASE + "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
    path = _write(tmp_path, text)

    assert adapt_for_cpu(tmp_path) == []
    assert path.read_text() == text


def test_adapt_for_cpu_adapts_every_model_of_an_ensemble_archive(tmp_path: Path) -> None:
    _write(tmp_path, BASE + GPU_GROUPS, name="step_a")
    _write(tmp_path, BASE.replace('"m"', '"step_b"') + CUDA_GRAPHS, name="step_b")
    _write(tmp_path, 'name: "pipeline"\nplatform: "ensemble"\n', name="pipeline")

    changes = adapt_for_cpu(tmp_path)

    assert {change.split(":")[0] for change in changes} == {"m", "step_b"}


@pytest.mark.parametrize(
    "config",
    [
        'name: "engine"\nplatform: "tensorrt_plan"\nmax_batch_size: 1\n',
        'name: "engine"\nbackend: "tensorrt"\nmax_batch_size: 1\n',
    ],
    ids=["platform-tensorrt-plan", "backend-tensorrt"],
)
def test_adapt_for_cpu_refuses_tensorrt_plans(tmp_path: Path, config: str) -> None:
    _write(tmp_path, config, name="engine")

    with pytest.raises(GPUModelError, match="run only on NVIDIA GPUs") as caught:
        adapt_for_cpu(tmp_path)

    assert caught.value.model == "engine"
    assert "TensorRT" in str(caught.value)


def test_adapt_for_cpu_refuses_a_plan_file_without_config(tmp_path: Path) -> None:
    (tmp_path / "engine" / "1").mkdir(parents=True)
    (tmp_path / "engine" / "1" / "model.plan").write_bytes(b"\0" * 16)

    with pytest.raises(GPUModelError, match="TensorRT"):
        adapt_for_cpu(tmp_path)


def test_adapt_for_cpu_leaves_unparsable_configs_to_triton(tmp_path: Path) -> None:
    path = _write(tmp_path, "instance_group [ { kind: KIND_GPU } \n")  # unbalanced

    assert adapt_for_cpu(tmp_path) == []
    assert path.read_text() == "instance_group [ { kind: KIND_GPU } \n"


def test_adapt_for_cpu_rejects_a_file(tmp_path: Path) -> None:
    archive = tmp_path / "m.tar.gz"
    archive.write_bytes(b"")

    with pytest.raises(ValueError, match="directory"):
        adapt_for_cpu(archive)


@pytest.mark.triton
def test_adapt_for_cpu_makes_a_gpu_config_load_on_the_cpu_stack(triton: TritonServer, tmp_path: Path) -> None:
    gpu_config = (
        LINEAR_CONFIG
        + GPU_GROUPS
        + TRT_ACCELERATOR.replace('  cpu_execution_accelerator [ { name: "openvino" } ]\n', "")
    )
    original = make_linear_model(tmp_path / "original", config=gpu_config)
    with pytest.raises(TritonLoadError):
        triton.load(uuid.uuid4().hex, original, "linear.tar.gz")

    adapted = make_linear_model(tmp_path / "adapted", config=gpu_config)
    assert adapt_for_cpu(adapted) != []
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, adapted, "linear.tar.gz")
    status, _, body = triton.invoke(
        model_hash, "linear.tar.gz", json_request({"INPUT0": np.ones((1, 4), np.float32)}), "application/json"
    )

    assert status == 200, body
    triton.unload(model_hash)
