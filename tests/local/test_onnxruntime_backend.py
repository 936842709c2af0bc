"""The python-based onnxruntime backend, served by a real Triton (nvidia-pytriton's binary)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from triton_fixtures import (
    LINEAR_CONFIG,
    json_outputs,
    json_request,
    linear_expected,
    make_linear_model,
    make_python_model,
    triton,
)

import mme_triton.local
from mme_triton.local.triton.server import TritonLoadError, TritonServer

pytestmark = pytest.mark.triton
# a model load per test: dealt into 2 xdist groups (tests/conftest.py)
XDIST_GROUPS = 2

__all__ = ["triton"]  # the fixture, imported for pytest

BATCHING_CONFIG = (
    LINEAR_CONFIG
    + """\
dynamic_batching { max_queue_delay_microseconds: 500000 }
instance_group [ { kind: KIND_CPU count: 2 } ]
parameters [
  { key: "intra_op_thread_count" value: { string_value: "1" } },
  { key: "inter_op_thread_count" value: { string_value: "1" } },
  { key: "execution_mode" value: { string_value: "0" } }
]
optimization { graph { level: 1 } }
"""
)


def _invoke_linear(
    server: TritonServer, model_hash: str, target: str, x: np.ndarray[Any, Any]
) -> dict[str, np.ndarray[Any, Any]]:
    status, _, body = server.invoke(model_hash, target, json_request({"INPUT0": x}), "application/json")
    assert status == 200, body
    return json_outputs(body)


def test_onnx_backend_dynamic_batching_runs_concurrent_requests_as_one_batch(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = make_linear_model(tmp_path / "extracted", config=BATCHING_CONFIG)
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, root, "linear.tar.gz")
    rows = [np.full((1, 4), i, dtype=np.float32) + np.arange(4, dtype=np.float32) for i in range(8)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda x: _invoke_linear(triton, model_hash, "linear.tar.gz", x), rows))

    for x, answer in zip(rows, answers, strict=True):
        np.testing.assert_allclose(answer["OUTPUT0"], linear_expected(x), rtol=1e-6)
    # BATCH is the first dimension ONNX Runtime saw: requests were concatenated into one run
    assert max(int(a["BATCH"][0, 0]) for a in answers) > 1
    instances = {p.model for p in triton.model_processes() if p.model.startswith("linear.tar.gz")}
    assert instances == {"linear.tar.gz_0_0", "linear.tar.gz_0_1"}
    triton.unload(model_hash)


def test_onnx_backend_serves_requests_with_several_rows(triton: TritonServer, tmp_path: Path) -> None:
    root = make_linear_model(tmp_path / "extracted", config=BATCHING_CONFIG)
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, root, "linear.tar.gz")
    batches = [np.random.default_rng(i).random((n, 4), dtype=np.float32) for i, n in enumerate((1, 3, 2))]

    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda x: _invoke_linear(triton, model_hash, "linear.tar.gz", x), batches))

    for x, answer in zip(batches, answers, strict=True):
        assert answer["OUTPUT0"].shape == (len(x), 3)
        np.testing.assert_allclose(answer["OUTPUT0"], linear_expected(x), rtol=1e-6)
    triton.unload(model_hash)


def test_onnx_backend_auto_completes_a_missing_config_as_batchable(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = make_linear_model(tmp_path / "extracted", config=None)
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, root, "linear.tar.gz")
    x = np.random.default_rng(0).random((4, 4), dtype=np.float32)

    answer = _invoke_linear(triton, model_hash, "linear.tar.gz", x)
    status, _, body = triton.invoke(
        model_hash,
        "linear.tar.gz",
        json_request({"INPUT0": np.zeros((5, 4), np.float32)}),
        "application/json",
    )

    np.testing.assert_allclose(answer["OUTPUT0"], linear_expected(x), rtol=1e-6)
    assert set(answer) == {"OUTPUT0", "BATCH"}
    # autofilled max_batch_size is 4, as Triton's native onnxruntime backend does
    assert status == 400
    assert b"batch-size must be <= 4" in body
    triton.unload(model_hash)


def test_onnx_backend_auto_completes_a_fixed_shape_graph_without_batching(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = make_linear_model(tmp_path / "extracted", config=None, batch_dim=2)
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, root, "linear.tar.gz")
    x = np.random.default_rng(1).random((2, 4), dtype=np.float32)

    answer = _invoke_linear(triton, model_hash, "linear.tar.gz", x)
    status, _, body = triton.invoke(
        model_hash,
        "linear.tar.gz",
        json_request({"INPUT0": np.zeros((3, 4), np.float32)}),
        "application/json",
    )

    np.testing.assert_allclose(answer["OUTPUT0"], linear_expected(x), rtol=1e-6)
    assert status == 400  # max_batch_size 0: dims [2,4] are the whole shape
    assert b"INPUT0" in body
    triton.unload(model_hash)


MISMATCHED_CONFIGS = [
    pytest.param(
        LINEAR_CONFIG.replace('name: "INPUT0"', 'name: "IMAGE"'),
        ["unexpected inference input 'IMAGE'", "allowed inputs are: INPUT0"],
        id="input-name",
    ),
    pytest.param(
        LINEAR_CONFIG.replace('name: "OUTPUT0"', 'name: "SCORES"'),
        ["unexpected inference output 'SCORES'", "OUTPUT0"],
        id="output-name",
    ),
    pytest.param(
        LINEAR_CONFIG.replace("data_type: TYPE_FP32 dims: [ 4 ]", "data_type: TYPE_INT64 dims: [ 4 ]"),
        ["configuration expects datatype TYPE_INT64 for input 'INPUT0', model provides TYPE_FP32"],
        id="input-datatype",
    ),
    pytest.param(
        LINEAR_CONFIG.replace("dims: [ 4 ]", "dims: [ 2, 2 ]"),
        ["input 'INPUT0'", "the model expects 2 dimensions", "specifies 3 dimensions"],
        id="input-rank",
    ),
    pytest.param(
        LINEAR_CONFIG.replace("dims: [ 3 ]", "dims: [ 5 ]"),
        ["output 'OUTPUT0'", "the model expects shape [-1,3]", "specifies shape [-1,5]"],
        id="output-dims",
    ),
    pytest.param(
        LINEAR_CONFIG.replace("max_batch_size: 8", "max_batch_size: 0"),
        ["input 'INPUT0'", "the model expects 2 dimensions", "specifies 1 dimensions"],
        id="batch-dimension-missing",
    ),
    pytest.param(
        LINEAR_CONFIG + 'parameters { key: "execution_mode" value: { string_value: "2" } }\n',
        ["execution_mode are 0 or 1 but got 2"],
        id="bad-execution-mode",
    ),
]


@pytest.mark.parametrize(("config", "fragments"), MISMATCHED_CONFIGS)
def test_onnx_backend_refuses_a_config_that_disagrees_with_the_graph(
    triton: TritonServer, tmp_path: Path, config: str, fragments: list[str]
) -> None:
    root = make_linear_model(tmp_path / "extracted", config=config)

    with pytest.raises(TritonLoadError) as caught:
        triton.load(uuid.uuid4().hex, root, "linear.tar.gz")

    assert caught.value.status == 400
    for fragment in fragments:
        assert fragment in caught.value.message


def test_onnx_backend_refuses_batching_for_a_graph_with_a_fixed_first_dimension(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = make_linear_model(tmp_path / "extracted", batch_dim=2)

    with pytest.raises(TritonLoadError) as caught:
        triton.load(uuid.uuid4().hex, root, "linear.tar.gz")

    assert "'INPUT0'" in caught.value.message
    assert "first dimension must be -1" in caught.value.message


def test_onnx_backend_reports_a_missing_model_file(triton: TritonServer, tmp_path: Path) -> None:
    root = make_linear_model(tmp_path / "extracted")
    (root / "linear" / "1" / "model.onnx").rename(root / "linear" / "1" / "other.onnx")

    with pytest.raises(TritonLoadError, match=r"model\.onnx"):
        triton.load(uuid.uuid4().hex, root, "linear.tar.gz")


def test_onnx_backend_honours_default_model_filename(triton: TritonServer, tmp_path: Path) -> None:
    root = make_linear_model(
        tmp_path / "extracted", config=LINEAR_CONFIG + 'default_model_filename: "linear.onnx"\n'
    )
    (root / "linear" / "1" / "model.onnx").rename(root / "linear" / "1" / "linear.onnx")
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, root, "linear.tar.gz")
    x = np.ones((1, 4), np.float32)

    np.testing.assert_allclose(
        _invoke_linear(triton, model_hash, "linear.tar.gz", x)["OUTPUT0"], linear_expected(x), rtol=1e-6
    )
    triton.unload(model_hash)


def test_onnx_backend_and_a_python_model_are_served_side_by_side(
    triton: TritonServer, tmp_path: Path
) -> None:
    onnx_root = make_linear_model(tmp_path / "onnx")
    python_root = make_python_model(tmp_path / "python")
    onnx_hash, python_hash = uuid.uuid4().hex, uuid.uuid4().hex
    triton.load(onnx_hash, onnx_root, "linear.tar.gz")
    triton.load(python_hash, python_root, "add_one.tar.gz")
    x = np.ones((2, 4), np.float32)

    linear = _invoke_linear(triton, onnx_hash, "linear.tar.gz", x)
    status, _, body = triton.invoke(
        python_hash, "add_one.tar.gz", json_request({"X": np.array([41, 1], np.int32)}), "application/json"
    )

    np.testing.assert_allclose(linear["OUTPUT0"], linear_expected(x), rtol=1e-6)
    assert status == 200, body
    np.testing.assert_array_equal(json_outputs(body)["Y"], [42, 2])
    triton.unload(onnx_hash)
    triton.unload(python_hash)


def test_onnx_backend_returns_only_the_requested_outputs(triton: TritonServer, tmp_path: Path) -> None:
    root = make_linear_model(tmp_path / "extracted")
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, root, "linear.tar.gz")
    body_in = json_request({"INPUT0": np.ones((1, 4), np.float32)}, outputs=["BATCH"])

    status, _, body = triton.invoke(model_hash, "linear.tar.gz", body_in, "application/json")

    assert status == 200, body
    assert set(json_outputs(body)) == {"BATCH"}
    triton.unload(model_hash)


@pytest.fixture
def backend_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The backend's model.py imported outside Triton; the stub's utilities module is stood in for."""
    stand_in = types.ModuleType("triton_python_backend_utils")

    class TritonModelException(Exception):
        pass

    stand_in.TritonModelException = TritonModelException  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", stand_in)
    path = Path(mme_triton.local.__file__).parent / "triton" / "backends" / "onnxruntime" / "model.py"
    spec = importlib.util.spec_from_file_location("onnxruntime_backend_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("optimization", "level"),
    [
        ({}, "ORT_ENABLE_ALL"),
        ({"graph": {"level": -1}}, "ORT_ENABLE_BASIC"),
        ({"graph": {"level": 0}}, "ORT_ENABLE_ALL"),
        ({"graph": {"level": 1}}, "ORT_ENABLE_EXTENDED"),
        ({"graph": {"level": 2}}, "ORT_DISABLE_ALL"),
    ],
    ids=["absent", "minus-one-basic", "zero-all", "one-extended", "two-disabled"],
)
def test_onnx_backend_maps_graph_levels_like_the_native_backend(
    backend_module: Any, optimization: dict[str, Any], level: str
) -> None:
    import onnxruntime as ort

    options = backend_module._session_options({"name": "m", "optimization": optimization})

    assert options.graph_optimization_level == getattr(ort.GraphOptimizationLevel, level)


def test_onnx_backend_applies_thread_and_execution_parameters(backend_module: Any) -> None:
    import onnxruntime as ort

    parameters = {
        "intra_op_thread_count": {"string_value": "3"},
        "inter_op_thread_count": {"string_value": "2"},
        "execution_mode": {"string_value": "1"},
        "enable_mem_arena": {"string_value": "false"},
    }

    options = backend_module._session_options({"name": "m", "parameters": parameters})

    assert options.intra_op_num_threads == 3
    assert options.inter_op_num_threads == 2
    assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert options.enable_cpu_mem_arena is False


def test_onnx_backend_round_trips_string_tensors(triton: TritonServer, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["TEXT"], ["ECHO"])],
        "echo",
        [helper.make_tensor_value_info("TEXT", TensorProto.STRING, ["batch", 1])],
        [helper.make_tensor_value_info("ECHO", TensorProto.STRING, ["batch", 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (tmp_path / "echo" / "1").mkdir(parents=True)
    onnx.save(model, str(tmp_path / "echo" / "1" / "model.onnx"))
    model_hash = uuid.uuid4().hex
    triton.load(model_hash, tmp_path, "echo.tar.gz")  # auto-completed: TYPE_STRING in and out
    request = json.dumps(
        {"inputs": [{"name": "TEXT", "shape": [2, 1], "datatype": "BYTES", "data": ["héllo", "wörld"]}]}
    ).encode()

    status, _, body = triton.invoke(model_hash, "echo.tar.gz", request, "application/json")

    assert status == 200, body
    (output,) = json.loads(body)["outputs"]
    assert (output["datatype"], output["shape"], output["data"]) == ("BYTES", [2, 1], ["héllo", "wörld"])
    triton.unload(model_hash)
