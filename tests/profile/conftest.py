"""Fixtures of the profile tests: a model whose cost is known by construction, and a stack per module.

``sleepy`` is a python-backend model whose ``initialize`` sleeps :data:`INIT_S` and whose ``execute``
sleeps :data:`SLEEP_S` once per call, whatever the number of requests (and rows) it was given: its
latency, its throughput with one or two instances and with dynamic batching, and its cold start follow
from those two numbers alone.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SLEEP_S = 0.03
"""What one ``execute`` of ``sleepy`` takes, whatever its batch."""
INIT_S = 1.0
"""What ``sleepy``'s ``initialize`` takes, once per model instance."""

# Short windows and a wide stability band (perf_analyzer's max/min rule: an open-loop window of 20 Poisson
# arrivals is noisy): the numbers the tests assert are far apart, noise on a busy 2-core machine is not.
FAST = {"window": 0.4, "window_requests": 20, "warmup": 0.3, "stability": 0.5, "max_trials": 12}

SLEEPY_MODEL_PY = f"""\
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep({INIT_S})

    def execute(self, requests):
        time.sleep({SLEEP_S})  # once per call: a batch of 8 costs what one request costs
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]
"""


def write_sleepy(repository: Path, name: str = "sleepy") -> Path:
    """The ``sleepy`` model (max_batch_size 8, one CPU instance, no dynamic batching) in ``repository``."""
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(SLEEPY_MODEL_PY)
    (directory / "config.pbtxt").write_text(
        textwrap.dedent(
            f"""\
            name: "{name}"
            backend: "python"
            max_batch_size: 8
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
            output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
            instance_group [ {{ count: 1 kind: KIND_CPU }} ]
            """
        )
    )
    return directory


@pytest.fixture
def sleepy(tmp_path: Path) -> Path:
    """A fresh ``sleepy`` model directory (tests may change it)."""
    return write_sleepy(tmp_path / "repository")


@pytest.fixture(scope="module")
def module_sleepy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``sleepy`` model directory for the whole module (not to be changed)."""
    return write_sleepy(tmp_path_factory.mktemp("repository"))


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    """One embedded stack with Triton's own ports open, for the whole module."""
    from mme_triton.local import LocalStack

    with LocalStack(triton_ports=True) as running:
        yield running
