"""The quickstart: two small models deployed to one multi-model endpoint on the embedded stack.

:func:`run_quickstart` is what ``mme-triton quickstart`` runs. In a temporary directory it writes

- ``linear`` — an ONNX model built with ``onnx.helper`` (``OUTPUT0 = INPUT0 @ W + B``, [n,4] -> [n,3])
  served by the stack's onnxruntime backend with dynamic batching, and
- ``scale`` — a Python-backend model (``OUTPUT0 = 2 * INPUT0``),

starts a :class:`~mme_triton.local.stack.LocalStack`, deploys both to one endpoint with
:func:`~mme_triton.deploy_mme`, invokes each by TargetModel with the binary and the JSON encodings
through :class:`~mme_triton.MMEClient`, compares the answers with numpy, and tears everything down.
The library functions are the ones that talk to AWS; only the session points at the stack.
"""

from __future__ import annotations

import logging
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["QuickstartCall", "QuickstartResult", "run_quickstart", "write_quickstart_models"]

logger = logging.getLogger(__name__)

Progress = Callable[[str], None]

_LINEAR_W = [[0.5, -1.0, 0.25], [1.0, 0.0, -0.5], [-0.25, 0.75, 1.0], [0.0, 0.5, 0.5]]
_LINEAR_B = [0.1, 0.2, 0.3]

_SCALE_MODEL = '''\
"""Triton Python backend model: OUTPUT0 = 2 * INPUT0."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            output = pb_utils.Tensor("OUTPUT0", (data * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
'''


@dataclass(frozen=True)
class QuickstartCall:
    """One ``MMEClient.infer`` call of the quickstart."""

    target_model: str
    binary: bool
    """``True``: Triton's binary-tensor encoding; ``False``: JSON."""
    inputs: dict[str, np.ndarray[Any, Any]]
    outputs: dict[str, np.ndarray[Any, Any]]
    expected: dict[str, np.ndarray[Any, Any]]
    """What numpy computes for the same inputs."""
    seconds: float
    """Wall time of the call (the first call of a model includes its download and load)."""

    @property
    def matches(self) -> bool:
        """The outputs equal the numpy reference (to float32 rounding)."""
        import numpy as np

        return set(self.outputs) == set(self.expected) and all(
            np.allclose(self.outputs[name], self.expected[name], rtol=1e-5, atol=1e-5)
            for name in self.expected
        )


@dataclass(frozen=True)
class QuickstartResult:
    """What :func:`run_quickstart` did."""

    endpoint_name: str
    model_data_url: str
    target_models: list[str]
    calls: list[QuickstartCall]
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per step: ``start``, ``deploy``, ``invoke``, ``teardown`` and ``total``."""

    @property
    def ok(self) -> bool:
        """Every call answered what numpy computes."""
        return bool(self.calls) and all(call.matches for call in self.calls)


def write_quickstart_models(directory: str | Path) -> list[Path]:
    """Write the quickstart's models, ``linear`` (ONNX) and ``scale`` (Python backend), into ``directory``.

    Returns the two model directories. Needs ``onnx``.

    Example::

        [p.name for p in write_quickstart_models("/tmp/repo")]  # ['linear', 'scale']
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    repository = Path(directory)
    linear = repository / "linear"
    (linear / "1").mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["INPUT0", "W"], ["product"]),
            helper.make_node("Add", ["product", "B"], ["OUTPUT0"]),
        ],
        "linear",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 3])],
        [
            numpy_helper.from_array(np.asarray(_LINEAR_W, dtype=np.float32), "W"),
            numpy_helper.from_array(np.asarray(_LINEAR_B, dtype=np.float32), "B"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every ONNX Runtime the local extra allows
    onnx.save(model, str(linear / "1" / "model.onnx"))
    (linear / "config.pbtxt").write_text(
        textwrap.dedent(
            """\
            name: "linear"
            backend: "onnxruntime"
            max_batch_size: 8
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
            dynamic_batching { }
            """
        )
    )

    scale = repository / "scale"
    (scale / "1").mkdir(parents=True, exist_ok=True)
    (scale / "1" / "model.py").write_text(_SCALE_MODEL)
    (scale / "config.pbtxt").write_text(
        textwrap.dedent(
            """\
            name: "scale"
            backend: "python"
            max_batch_size: 8
            input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
            """
        )
    )
    return [linear, scale]


def _expected(target_model: str, x: np.ndarray[Any, Any]) -> dict[str, np.ndarray[Any, Any]]:
    import numpy as np

    if target_model.startswith("linear"):
        weights = np.asarray(_LINEAR_W, dtype=np.float32)
        return {"OUTPUT0": (x @ weights + np.asarray(_LINEAR_B, dtype=np.float32)).astype(np.float32)}
    return {"OUTPUT0": (x * 2).astype(np.float32)}


@contextmanager
def _step(name: str, timings: dict[str, float]) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - started


def run_quickstart(
    *,
    endpoint_name: str = "mme-triton-quickstart",
    workdir: str | Path | None = None,
    instance_type: str = "ml.m5.xlarge",
    progress: Progress | None = None,
) -> QuickstartResult:
    """Deploy two models to one multi-model endpoint on a fresh embedded stack, invoke them, tear down.

    Parameters:
        endpoint_name: the endpoint's name (on the stack, so it cannot clash with a real one).
        workdir: where the temporary model repository and the stack's files go; default: the system's
            temporary directory. Everything written is removed at the end.
        instance_type: the instance type recorded in the endpoint config (the stack runs on this machine).
        progress: called with one line per step (``"deploying ..."``), e.g. ``print``.

    Returns:
        A :class:`QuickstartResult`: the calls with their outputs, the numpy reference and timings.

    Raises:
        UnsupportedPlatformError: the embedded stack cannot run here (not Linux x86_64, glibc >= 2.35).
        LocalStackError, DeploymentError, InferenceError: a step failed; the stack is stopped either way.

    Example::

        result = run_quickstart(progress=print)
        result.ok  # True
    """
    import numpy as np

    from mme_triton.client.client import MMEClient
    from mme_triton.endpoint.deploy import deploy_mme
    from mme_triton.endpoint.teardown import teardown
    from mme_triton.local.stack import LocalStack

    def say(message: str) -> None:
        logger.info("%s", message)
        if progress is not None:
            progress(message)

    timings: dict[str, float] = {}
    calls: list[QuickstartCall] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mme-triton-quickstart-", dir=workdir) as scratch:
        models = write_quickstart_models(Path(scratch) / "model_repository")
        say(
            f"wrote linear (ONNX: OUTPUT0 = INPUT0 @ W + B) and scale (Python backend: OUTPUT0 = 2 * INPUT0) "
            f"to {Path(scratch) / 'model_repository'}"
        )
        with _step("start", timings):
            stack = LocalStack(workdir=scratch).start()
        try:
            say(f"embedded stack running at {stack.endpoint_url}")
            session = stack.boto3_session()
            model_data_url = stack.model_data_url("quickstart/")
            with _step("deploy", timings):
                say(f"deploying {len(models)} models to endpoint {endpoint_name} ({model_data_url})")
                deploy_mme(
                    endpoint_name,
                    model_data_url,
                    models=models,
                    role=stack.role_arn,
                    instance_type=instance_type,
                    poll_interval=0.25,  # the stack is in service within a second
                    boto3_session=session,
                )
            client = MMEClient(endpoint_name, boto3_session=session)
            x = np.arange(8, dtype=np.float32).reshape(2, 4) / 4
            targets = [f"{p.name}.tar.gz" for p in models]
            with _step("invoke", timings):
                say(f"invoking {' and '.join(targets)} with MMEClient, binary and JSON encodings")
                for target in targets:
                    for binary in (True, False):
                        call_started = time.perf_counter()
                        outputs = client.infer(target, {"INPUT0": x}, binary=binary, copy=True)
                        seconds = time.perf_counter() - call_started
                        calls.append(
                            QuickstartCall(
                                target_model=target,
                                binary=binary,
                                inputs={"INPUT0": x},
                                outputs=dict(outputs),
                                expected=_expected(target, x),
                                seconds=seconds,
                            )
                        )
            with _step("teardown", timings):
                say(f"tearing down {endpoint_name}")
                teardown(endpoint_name, delete_artifacts=True, boto3_session=session)
        finally:
            stack.stop()
    timings["total"] = time.perf_counter() - started
    return QuickstartResult(
        endpoint_name=endpoint_name,
        model_data_url=model_data_url,
        target_models=targets,
        calls=calls,
        timings=timings,
    )
