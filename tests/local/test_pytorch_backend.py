"""The python-based pytorch backend serving TorchScript models, on a real Triton (nvidia-pytriton's binary).

The TorchScript modules are built here, from the small ``torch.nn.Module`` classes below, scripted or
traced and saved with ``torch.jit.save`` into a model directory next to a ``config.pbtxt``.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from triton_fixtures import triton

from mme_triton import decode_response, encode_request
from mme_triton.local.triton import TritonServer

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.triton,
    pytest.mark.torch,
    # torch 2.9+ deprecates TorchScript; these tests build TorchScript models on purpose
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
]

__all__ = ["triton"]  # the fixture, imported for pytest


class Affine(torch.nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


class Difference(torch.nn.Module):  # type: ignore[misc]
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b


class SumAndProduct(torch.nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


def write_model(
    root: Path,
    module: Any,
    config: str,
    *,
    name: str = "model",
    example: tuple[Any, ...] | None = None,
) -> Path:
    """``root/<name>/config.pbtxt`` and ``root/<name>/1/model.pt`` (scripted, or traced on ``example``).

    Returns ``root``: the directory :meth:`TritonServer.load` takes.
    """
    directory = root / name
    (directory / "1").mkdir(parents=True)
    compiled = torch.jit.trace(module, example) if example is not None else torch.jit.script(module)
    torch.jit.save(compiled, str(directory / "1" / "model.pt"))
    (directory / "config.pbtxt").write_text(config)
    return root


def infer(
    server: TritonServer,
    model_hash: str,
    target: str,
    inputs: dict[str, np.ndarray[Any, Any]],
    *,
    binary: bool = True,
    outputs: list[str] | None = None,
) -> tuple[int, dict[str, np.ndarray[Any, Any]] | str]:
    """Triton's status and the decoded outputs (or, on an error, its message)."""
    body, content_type = encode_request(inputs, outputs, binary=binary)
    status, headers, answer = server.invoke(model_hash, target, bytes(body), content_type)
    if status != 200:
        return status, answer.decode("utf-8", "replace")
    return status, decode_response(answer, headers["content-type"])


def load(server: TritonServer, root: Path, target: str = "model.tar.gz") -> str:
    model_hash = uuid.uuid4().hex
    server.load(model_hash, root, target)
    return model_hash


AFFINE_CONFIG = """\
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_pytorch_backend_serves_a_scripted_model(triton: TritonServer, tmp_path: Path, binary: bool) -> None:
    model_hash = load(triton, write_model(tmp_path, Affine(), AFFINE_CONFIG))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x}, binary=binary)

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], x * 2 + 1)
    triton.unload(model_hash)


def test_pytorch_backend_serves_a_model_configured_by_backend_name(
    triton: TritonServer, tmp_path: Path
) -> None:
    config = AFFINE_CONFIG.replace('platform: "pytorch_libtorch"', 'backend: "pytorch"')
    model_hash = load(triton, write_model(tmp_path, Affine(), config))

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": np.ones((1, 3), np.float32)})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], [[3.0, 3.0, 3.0]])
    triton.unload(model_hash)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param("INPUT__1", "INPUT__0", "second - first", id="index-names-listed-out-of-order"),
        pytest.param("b", "a", "second - first", id="forward-argument-names"),
        pytest.param("FIRST", "SECOND", "first - second", id="config-order"),
    ],
)
def test_pytorch_backend_binds_inputs_like_the_native_backend(
    triton: TritonServer, tmp_path: Path, first: str, second: str, expected: str
) -> None:
    config = f"""\
platform: "pytorch_libtorch"
max_batch_size: 4
input [
  {{ name: "{first}" data_type: TYPE_FP32 dims: [ 2 ] }},
  {{ name: "{second}" data_type: TYPE_FP32 dims: [ 2 ] }}
]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] }} ]
"""
    model_hash = load(triton, write_model(tmp_path, Difference(), config))
    ones, tens = np.ones((1, 2), np.float32), np.full((1, 2), 10, np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {first: ones, second: tens})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    # Difference.forward(a, b) = a - b: the binding rule decides which config input is "a"
    values = {"first - second": ones - tens, "second - first": tens - ones}
    np.testing.assert_allclose(outputs["OUTPUT__0"], values[expected])
    triton.unload(model_hash)


TUPLE_CONFIG = """\
platform: "pytorch_libtorch"
max_batch_size: 4
input [
  { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 2 ] }
]
output [
  { name: "PRODUCT__1" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "SUM__0" data_type: TYPE_FP32 dims: [ 2 ] }
]
"""


def test_pytorch_backend_binds_tuple_outputs_by_index(triton: TritonServer, tmp_path: Path) -> None:
    model_hash = load(triton, write_model(tmp_path, SumAndProduct(), TUPLE_CONFIG))
    x, y = np.array([[2, 3]], np.float32), np.array([[5, 7]], np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x, "INPUT__1": y})
    _, only = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x, "INPUT__1": y}, outputs=["SUM__0"])

    assert status == 200, outputs
    assert isinstance(outputs, dict) and isinstance(only, dict)
    np.testing.assert_allclose(outputs["SUM__0"], x + y)
    np.testing.assert_allclose(outputs["PRODUCT__1"], x * y)
    assert set(only) == {"SUM__0"}
    triton.unload(model_hash)


def test_pytorch_backend_serves_a_traced_model(triton: TritonServer, tmp_path: Path) -> None:
    example = (torch.ones(1, 2), torch.ones(1, 2))
    config = TUPLE_CONFIG.replace("PRODUCT__1", "OUTPUT__1").replace("SUM__0", "OUTPUT__0")
    model_hash = load(triton, write_model(tmp_path, SumAndProduct(), config, example=example))
    x, y = np.array([[1, 2], [3, 4]], np.float32), np.array([[1, 1], [2, 2]], np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x, "INPUT__1": y})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], x + y)
    np.testing.assert_allclose(outputs["OUTPUT__1"], x * y)
    triton.unload(model_hash)
