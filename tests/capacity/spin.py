"""A model whose cost is known by construction and is CPU: each request spins ``cpu_s`` seconds of its
thread's CPU time. Alone it takes ``cpu_s``; ``n`` of them at once on ``P`` cores take ``cpu_s * n / P``
each (the operating system shares the cores), which is the capacity planner's processor model.
"""

from __future__ import annotations

from pathlib import Path

import mme_triton as mt

SPIN_MODEL_PY = """\
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            end = time.thread_time() + {cpu_s!r}
            while time.thread_time() < end:
                pass
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return responses
"""


def write_spin_model(repository: Path, cpu_s: float, name: str = "spin") -> Path:
    """A one-instance python model without batching that spins ``cpu_s`` CPU-seconds per request."""
    directory = mt.new_python_model(
        repository, name, inputs={"INPUT0": ("FP32", [4])}, outputs={"OUTPUT0": ("FP32", [4])}
    )
    (directory / "1" / "model.py").write_text(SPIN_MODEL_PY.format(cpu_s=cpu_s))
    return directory
