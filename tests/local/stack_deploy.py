"""Deploying test models on an embedded stack, and a python model that sleeps as told, shared by the
stack's test modules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mme_triton import deploy_mme
from mme_triton.local import LocalStack


def deploy_on(
    stack: LocalStack, name: str, models: list[Path], *, prefix: str | None = None, **options: Any
) -> str:
    """Deploy ``models`` as endpoint ``name`` (an ``ml.m5.large``) on ``stack``, its artifacts under
    ``prefix`` of the stack's bucket (default ``<name>/``), polling every 0.1 s; ``options`` go to
    :func:`deploy_mme`. Returns the endpoint's model data URL."""
    url = stack.model_data_url(prefix or f"{name}/")
    deploy_mme(
        name,
        url,
        models=models,
        role=stack.role_arn,
        instance_type="ml.m5.large",
        poll_interval=0.1,
        boto3_session=stack.boto3_session(),
        **options,
    )
    return url


_SLEEPY_MODEL_PY = """\
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        with open({events!r}, "a") as events:
            events.write(f"initialize {name} {{time.time()}}\\n")
        time.sleep({initialize})

    def execute(self, requests):
        with open({log!r}, "a") as log:
            log.write("execute\\n")
        time.sleep({execute})
        outputs = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            result = pb_utils.Tensor("OUTPUT0", (data * {factor}).astype(np.float32))
            outputs.append(pb_utils.InferenceResponse(output_tensors=[result]))
        return outputs

    def finalize(self):
        time.sleep({finalize})
        with open({events!r}, "a") as events:
            events.write(f"finalized {name} {{time.time()}}\\n")
"""


def sleepy_model(
    repository: Path,
    name: str,
    *,
    factor: int = 2,
    initialize: float = 0,
    execute: float = 0,
    finalize: float = 0,
) -> Path:
    """A python model ``OUTPUT0 = factor * INPUT0`` that sleeps as told, logs each execution to
    ``repository/<name>.executions``, and when its ``initialize`` starts and its ``finalize`` ends (with
    ``time.time()``) to ``repository/events.log``, which the models of a repository share."""
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(
        _SLEEPY_MODEL_PY.format(
            initialize=initialize,
            execute=execute,
            finalize=finalize,
            factor=factor,
            log=str(repository / f"{name}.executions"),
            events=str(repository / "events.log"),
            name=name,
        )
    )
    (directory / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        "instance_group [ { kind: KIND_CPU count: 1 } ]\n"
    )
    return directory
