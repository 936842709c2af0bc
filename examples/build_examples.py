"""Write the example Triton model repository under examples/model_repository/.

    python examples/build_examples.py [OUTPUT_DIR]

Three tiny models, all with explicit config.pbtxt files:

- ``linear``   ONNX: OUTPUT0 = INPUT0 @ W + b, INPUT0 FP32 [batch, 4] -> OUTPUT0 FP32 [batch, 3];
- ``scale``    Python backend: OUTPUT0 = 2 * INPUT0, FP32 [batch, 4];
- ``pipeline`` ensemble: INPUT0 -> scale -> linear -> OUTPUT0.

The output is deterministic (same bytes on every run), so the committed files can be checked against it.
Needs ``onnx`` and ``numpy``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "model_repository"

# Fixed weights: OUTPUT0[:, j] = sum_i INPUT0[:, i] * W[i, j] + b[j].
W = np.array(
    [
        [1.0, 0.0, 0.5],
        [0.0, 1.0, 0.5],
        [1.0, 1.0, 0.0],
        [-1.0, 0.0, 0.25],
    ],
    dtype=np.float32,
)
B = np.array([0.5, -0.5, 1.0], dtype=np.float32)

LINEAR_CONFIG = """\
name: "linear"
backend: "onnxruntime"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
]
dynamic_batching { }
"""

SCALE_CONFIG = """\
name: "scale"
backend: "python"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
"""

SCALE_MODEL = '''\
"""Triton Python backend model: OUTPUT0 = 2 * INPUT0."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", (data * 2).astype(data.dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
'''

PIPELINE_CONFIG = """\
name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
]
ensemble_scheduling {
  step [
    {
      model_name: "scale"
      model_version: -1
      input_map { key: "INPUT0" value: "INPUT0" }
      output_map { key: "OUTPUT0" value: "scaled" }
    },
    {
      model_name: "linear"
      model_version: -1
      input_map { key: "INPUT0" value: "scaled" }
      output_map { key: "OUTPUT0" value: "OUTPUT0" }
    }
  ]
}
"""

# Triton needs a version directory even for an ensemble, which has no model file; git keeps this one.
PIPELINE_KEEP = "An ensemble has no model file, but Triton needs its version directory.\n"


def linear_onnx() -> bytes:
    """The ``linear`` model as serialized ONNX (opset 13, IR version 8)."""
    graph = helper.make_graph(
        nodes=[
            helper.make_node("MatMul", ["INPUT0", "W"], ["xw"], name="matmul"),
            helper.make_node("Add", ["xw", "b"], ["OUTPUT0"], name="add"),
        ],
        name="linear",
        inputs=[helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 4])],
        outputs=[helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(W, name="W"), numpy_helper.from_array(B, name="b")],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13)],
        producer_name="mme_triton examples",
        ir_version=8,
    )
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def files() -> dict[str, bytes]:
    """Every file of the example repository, by POSIX path relative to it."""
    return {
        "linear/config.pbtxt": LINEAR_CONFIG.encode(),
        "linear/1/model.onnx": linear_onnx(),
        "scale/config.pbtxt": SCALE_CONFIG.encode(),
        "scale/1/model.py": SCALE_MODEL.encode(),
        "pipeline/config.pbtxt": PIPELINE_CONFIG.encode(),
        "pipeline/1/README.md": PIPELINE_KEEP.encode(),
    }


def build(output: Path = DEFAULT_OUTPUT) -> list[Path]:
    """Write the example repository under ``output``; returns the files written."""
    written = []
    for relative, content in files().items():
        target = output / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        written.append(target)
    return written


if __name__ == "__main__":
    destination = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUTPUT
    for path in build(destination):
        print(path)
