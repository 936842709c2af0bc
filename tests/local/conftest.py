"""Fixtures of the embedded-stack tests: small model repositories and stacks shared per module.

The models are built here, in a temporary repository, with onnx.helper and a few lines of Python:

- ``linear`` — ONNX, ``OUTPUT0 = INPUT0 @ W + B`` ([n,4] -> [n,3]) plus ``ROWS`` ([n,1]), the number of
  rows ONNX Runtime saw in the call, so a test can tell that dynamic batching merged requests;
- ``scale`` — Python backend, ``OUTPUT0 = 2 * INPUT0``;
- ``pipeline`` — an ensemble ``scale`` -> ``linear`` (packaged with both steps).
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

W = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 4.0
B = np.array([0.5, -1.0, 2.0], dtype=np.float32)


def linear_expected(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What the ``linear`` model answers for ``x``, computed with numpy."""
    return np.asarray(x @ W + B, dtype=np.float32)


def _config(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def write_linear(repository: Path, name: str = "linear", *, queue_delay_us: int = 100_000) -> Path:
    """The ONNX ``linear`` model with dynamic batching (requests wait up to ``queue_delay_us`` to merge)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("MatMul", ["INPUT0", "W"], ["product"]),
        helper.make_node("Add", ["product", "B"], ["OUTPUT0"]),
        helper.make_node("Shape", ["INPUT0"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["rows_i"], axis=0),
        helper.make_node("Cast", ["rows_i"], ["rows_f"], to=TensorProto.FLOAT),
        # ROWS[i] = rows of the whole call, for every row i: ReduceSum(x)*0 + rows
        helper.make_node("ReduceSum", ["INPUT0", "axis1"], ["sums"], keepdims=1),
        helper.make_node("Mul", ["sums", "zero_f"], ["zeros"]),
        helper.make_node("Add", ["zeros", "rows_f"], ["ROWS"]),
    ]
    initializers = [
        numpy_helper.from_array(W, "W"),
        numpy_helper.from_array(B, "B"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero_f"),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["n", 4])],
        [
            helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["n", 3]),
            helper.make_tensor_value_info("ROWS", TensorProto.FLOAT, ["n", 1]),
        ],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    onnx.save(model, str(directory / "1" / "model.onnx"))
    (directory / "config.pbtxt").write_text(
        _config(
            f"""
            name: "{name}"
            backend: "onnxruntime"
            max_batch_size: 16
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
            output [
              {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] }},
              {{ name: "ROWS" data_type: TYPE_FP32 dims: [ 1 ] }}
            ]
            dynamic_batching {{ max_queue_delay_microseconds: {queue_delay_us} }}
            """
        )
    )
    return directory


SCALE_MODEL_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (data * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def write_scale(repository: Path, name: str = "scale") -> Path:
    """The Python-backend ``scale`` model: ``OUTPUT0 = 2 * INPUT0``."""
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(SCALE_MODEL_PY)
    (directory / "config.pbtxt").write_text(
        _config(
            f"""
            name: "{name}"
            backend: "python"
            max_batch_size: 16
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
            output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
            """
        )
    )
    return directory


def write_pipeline(repository: Path) -> Path:
    """The ensemble ``pipeline``: ``scale`` then ``linear`` (both must be in the same repository)."""
    directory = repository / "pipeline"
    (directory / "1").mkdir(parents=True)
    (directory / "config.pbtxt").write_text(
        _config(
            """
            name: "pipeline"
            platform: "ensemble"
            max_batch_size: 16
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
            ensemble_scheduling {
              step [
                {
                  model_name: "scale"
                  model_version: -1
                  input_map { key: "INPUT0" value: "INPUT0" }
                  output_map { key: "OUTPUT0" value: "doubled" }
                },
                {
                  model_name: "linear"
                  model_version: -1
                  input_map { key: "INPUT0" value: "doubled" }
                  output_map { key: "OUTPUT0" value: "OUTPUT0" }
                }
              ]
            }
            """
        )
    )
    return directory


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model repository with ``linear``, ``scale`` and ``pipeline``."""
    root = tmp_path_factory.mktemp("model_repository")
    write_linear(root)
    write_scale(root)
    write_pipeline(root)
    return root


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    """One running LocalStack for the whole test module."""
    from mme_triton.local import LocalStack

    with LocalStack() as running:
        yield running


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(scope="session")
def expected_linear() -> Any:
    """``linear_expected``: the numpy reference of the ``linear`` model."""
    return linear_expected


@pytest.fixture(scope="session")
def model_writers() -> dict[str, Any]:
    """The model builders, for tests that need a repository of their own."""
    return {"linear": write_linear, "scale": write_scale, "pipeline": write_pipeline}


@pytest.fixture(scope="session")
def is_alive() -> Any:
    """``process_alive(pid)``."""
    return process_alive


@pytest.fixture
def sm(plane: Any) -> Any:
    """A real boto3 ``sagemaker`` client on the control plane."""
    return plane.client("sagemaker")


IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"


def create_endpoint_by_hand(
    stack: Any, name: str, container: dict[str, Any], **variant: Any
) -> dict[str, Any]:
    """Create the model, endpoint config and endpoint of ``container`` (with ``variant``'s extra fields, e.g.
    ``VolumeSizeInGB``) as any boto3 user would; wait until it leaves Creating."""
    sagemaker = stack.client("sagemaker")
    sagemaker.create_model(
        ModelName=name, ExecutionRoleArn=stack.role_arn, PrimaryContainer={"Image": IMAGE, **container}
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
                **variant,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    deadline = time.monotonic() + 60
    while (described := sagemaker.describe_endpoint(EndpointName=name))["EndpointStatus"] == "Creating":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return dict(described)


@pytest.fixture(scope="session")
def endpoint_by_hand() -> Any:
    """``create_endpoint_by_hand(stack, name, container, **variant)``: an endpoint made with boto3 alone."""
    return create_endpoint_by_hand
