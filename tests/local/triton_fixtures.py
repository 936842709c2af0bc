"""Fixtures and model builders shared by the Triton launcher, onnxruntime backend and adaptation tests.

Test modules import what they use from here explicitly (``tests/local/conftest.py`` belongs to the stack
tests). Everything that needs onnx is imported inside the builders, so importing this module is cheap.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton.local.triton.server import TritonServer

# y = x @ W + B for the linear test model
LINEAR_W = (np.arange(12, dtype=np.float32).reshape(4, 3) / 10).astype(np.float32)
LINEAR_B = np.array([1.0, 2.0, 3.0], dtype=np.float32)


def linear_expected(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What the linear model must answer for ``x``, computed with numpy."""
    return np.asarray(x @ LINEAR_W + LINEAR_B, dtype=np.float32)


def write_linear_onnx(path: Path, *, batch_dim: int | str = "batch") -> Path:
    """An ONNX graph: ``OUTPUT0 = INPUT0 @ W + B`` ([batch,4] -> [batch,3]) and ``BATCH`` ([batch,1]).

    ``BATCH`` repeats the first dimension of the input ONNX Runtime saw, so a test can tell whether
    requests were run as one concatenated batch.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("MatMul", ["INPUT0", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "B"], ["OUTPUT0"]),
        helper.make_node("Shape", ["INPUT0"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "one"], ["n_int"]),
        helper.make_node("Cast", ["n_int"], ["n"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["INPUT0", "axis1"], ["rows"], keepdims=1),
        helper.make_node("Mul", ["rows", "zero_f"], ["zeros"]),
        helper.make_node("Add", ["zeros", "n"], ["BATCH"]),
    ]
    initializers = [
        numpy_helper.from_array(LINEAR_W, "W"),
        numpy_helper.from_array(LINEAR_B, "B"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero_f"),
    ]
    graph = helper.make_graph(
        nodes,
        "linear",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [batch_dim, 4])],
        [
            helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [batch_dim, 3]),
            helper.make_tensor_value_info("BATCH", TensorProto.FLOAT, [batch_dim, 1]),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


LINEAR_CONFIG = """\
name: "linear"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "BATCH" data_type: TYPE_FP32 dims: [ 1 ] }
]
"""


def make_linear_model(
    root: Path,
    *,
    name: str = "linear",
    config: str | None = LINEAR_CONFIG,
    batch_dim: int | str = "batch",
) -> Path:
    """An extracted-archive directory ``root`` holding ``<name>/1/model.onnx`` (and ``config.pbtxt``).

    Returns ``root``: the directory :meth:`TritonServer.load` takes.
    """
    model = root / name
    write_linear_onnx(model / "1" / "model.onnx", batch_dim=batch_dim)
    if config is not None:
        (model / "config.pbtxt").write_text(config)
    return root


ADD_ONE_MODEL_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = pb_utils.Tensor("Y", (x + 1).astype(np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[y]))
        return responses
"""

ADD_ONE_CONFIG = """\
name: "add_one"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def make_python_model(root: Path, *, name: str = "add_one") -> Path:
    """A python-backend model (``Y = X + 1``, INT32) under ``root/<name>``; returns ``root``."""
    model = root / name
    (model / "1").mkdir(parents=True, exist_ok=True)
    (model / "1" / "model.py").write_text(ADD_ONE_MODEL_PY)
    (model / "config.pbtxt").write_text(ADD_ONE_CONFIG.replace('"add_one"', f'"{name}"'))
    return root


def json_request(inputs: dict[str, np.ndarray[Any, Any]], outputs: list[str] | None = None) -> bytes:
    """A KServe v2 JSON inference request body."""
    datatypes = {np.dtype(np.float32): "FP32", np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64"}
    body: dict[str, Any] = {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": datatypes[array.dtype],
                "data": array.ravel().tolist(),
            }
            for name, array in inputs.items()
        ]
    }
    if outputs is not None:
        body["outputs"] = [{"name": name} for name in outputs]
    return json.dumps(body).encode()


def json_outputs(body: bytes) -> dict[str, np.ndarray[Any, Any]]:
    """The outputs of a KServe v2 JSON inference response as numpy arrays."""
    dtypes = {"FP32": np.float32, "INT32": np.int32, "INT64": np.int64}
    answer = json.loads(body)
    return {
        out["name"]: np.asarray(out["data"], dtype=dtypes[out["datatype"]]).reshape(out["shape"])
        for out in answer["outputs"]
    }


def dedent(text: str) -> str:
    return textwrap.dedent(text)


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """A running Triton server (SageMaker front-end, multi-model mode) for one test module."""
    server = TritonServer(workdir=tmp_path_factory.mktemp("triton"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
