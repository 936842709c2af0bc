"""The python-based pytorch backend serving TorchScript models, on a real Triton (nvidia-pytriton's binary).

The TorchScript modules are built here, from the small ``torch.nn.Module`` classes below, scripted or
traced and saved with ``torch.jit.save`` into a model directory next to a ``config.pbtxt``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
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


class Dictionary(torch.nn.Module):  # type: ignore[misc]
    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return inputs["scale"] * inputs["value"]


def test_pytorch_backend_passes_a_dict_input_keyed_by_config_name(
    triton: TritonServer, tmp_path: Path
) -> None:
    config = """\
backend: "pytorch"
max_batch_size: 0
input [
  { name: "value" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "scale" data_type: TYPE_FP32 dims: [ 2 ] }
]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""
    model_hash = load(triton, write_model(tmp_path, Dictionary(), config))
    value, scale = np.array([1, 2], np.float32), np.array([10, 100], np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"value": value, "scale": scale})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], [10, 200])
    triton.unload(model_hash)


class RowsSeen(torch.nn.Module):  # type: ignore[misc]
    """``OUTPUT__0 = x + 1`` and ``ROWS__1``: the number of rows of the ``forward`` call, on every row."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + 1.0, torch.full([x.shape[0], 1], x.shape[0], dtype=torch.int64)


def _infer_rows(
    server: TritonServer, model_hash: str, target: str, x: np.ndarray[Any, Any]
) -> tuple[int, dict[str, np.ndarray[Any, Any]] | str]:
    return infer(server, model_hash, target, {"INPUT__0": x})


ROWS_CONFIG = """\
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "ROWS__1" data_type: TYPE_INT64 dims: [ 1 ] }
]
dynamic_batching { max_queue_delay_microseconds: 500000 }
"""


def test_pytorch_backend_dynamic_batching_runs_concurrent_requests_as_one_batch(
    triton: TritonServer, tmp_path: Path
) -> None:
    model_hash = load(triton, write_model(tmp_path, RowsSeen(), ROWS_CONFIG))
    requests = [np.full((1 + i % 2, 2), i, dtype=np.float32) for i in range(6)]

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = list(pool.map(lambda x: _infer_rows(triton, model_hash, "model.tar.gz", x), requests))

    for x, (status, outputs) in zip(requests, answers, strict=True):
        assert status == 200, outputs
        assert isinstance(outputs, dict)
        np.testing.assert_allclose(outputs["OUTPUT__0"], x + 1)
        assert outputs["ROWS__1"].shape == (len(x), 1)
    # ROWS__1 is the row count forward saw: requests were concatenated into one call
    assert max(int(o["ROWS__1"].max()) for _, o in answers if isinstance(o, dict)) > 2
    triton.unload(model_hash)


def test_pytorch_backend_without_batching_takes_the_whole_shape(triton: TritonServer, tmp_path: Path) -> None:
    config = """\
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
"""
    model_hash = load(triton, write_model(tmp_path, Affine(), config))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x})
    batched_status, message = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x[None]})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], x * 2 + 1)
    assert batched_status == 400
    assert "INPUT__0" in message
    triton.unload(model_hash)


def test_pytorch_backend_runs_one_stub_per_instance(triton: TritonServer, tmp_path: Path) -> None:
    config = ROWS_CONFIG + "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
    model_hash = load(triton, write_model(tmp_path, RowsSeen(), config), "twins.tar.gz")
    requests = [np.full((1, 2), i, dtype=np.float32) for i in range(4)]

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = list(pool.map(lambda x: _infer_rows(triton, model_hash, "twins.tar.gz", x), requests))

    for x, (status, outputs) in zip(requests, answers, strict=True):
        assert status == 200, outputs
        assert isinstance(outputs, dict)
        np.testing.assert_allclose(outputs["OUTPUT__0"], x + 1)
    instances = {p.model for p in triton.model_processes() if p.model.startswith("twins.tar.gz")}
    assert instances == {"twins.tar.gz_0_0", "twins.tar.gz_0_1"}
    triton.unload(model_hash)


class EveryDatatype(torch.nn.Module):  # type: ignore[misc]
    def forward(
        self,
        b: torch.Tensor,
        u8: torch.Tensor,
        i8: torch.Tensor,
        i16: torch.Tensor,
        i32: torch.Tensor,
        i64: torch.Tensor,
        f16: torch.Tensor,
        f32: torch.Tensor,
        f64: torch.Tensor,
        bf16: torch.Tensor,
    ) -> tuple[
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
    ]:
        return (
            ~b,
            u8 + 1,
            i8 - 1,
            i16 * 2,
            i32 * 3,
            i64 - 5,
            f16 * 2,
            f32 / 2,
            f64 + 0.5,
            bf16 * 2,
        )


# Triton datatype -> (an input, what EveryDatatype answers), in EveryDatatype's argument order
DATATYPE_CASES = {
    "BOOL": (np.array([[True, False]]), np.array([[False, True]])),
    "UINT8": (np.array([[0, 254]], np.uint8), np.array([[1, 255]], np.uint8)),
    "INT8": (np.array([[-127, 5]], np.int8), np.array([[-128, 4]], np.int8)),
    "INT16": (np.array([[-300, 300]], np.int16), np.array([[-600, 600]], np.int16)),
    "INT32": (np.array([[-7, 1 << 20]], np.int32), np.array([[-21, 3 << 20]], np.int32)),
    "INT64": (np.array([[1 << 40, 5]], np.int64), np.array([[(1 << 40) - 5, 0]], np.int64)),
    "FP16": (np.array([[1.5, -2.25]], np.float16), np.array([[3.0, -4.5]], np.float16)),
    "FP32": (np.array([[1.5, -3.0]], np.float32), np.array([[0.75, -1.5]], np.float32)),
    "FP64": (np.array([[1e-300, 2.0]], np.float64), np.array([[0.5, 2.5]], np.float64)),
    "BF16": (
        np.array([[1.5, -0.25]], ml_dtypes.bfloat16),
        np.array([[3.0, -0.5]], ml_dtypes.bfloat16),
    ),
}


def _tensor_entries(kind: str) -> str:
    return ",\n".join(
        f'  {{ name: "{kind}__{i}" data_type: TYPE_{datatype} dims: [ 2 ] }}'
        for i, datatype in enumerate(DATATYPE_CASES)
    )


@pytest.fixture(scope="module")
def every_datatype(triton: TritonServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``EveryDatatype`` loaded once: ``INPUT__<i>``/``OUTPUT__<i>`` of each datatype the backend serves."""
    config = (
        'platform: "pytorch_libtorch"\nmax_batch_size: 4\n'
        f"input [\n{_tensor_entries('INPUT')}\n]\noutput [\n{_tensor_entries('OUTPUT')}\n]\n"
    )
    root = write_model(tmp_path_factory.mktemp("every_datatype"), EveryDatatype(), config)
    model_hash = load(triton, root, "datatypes.tar.gz")
    yield model_hash
    triton.unload(model_hash)


@pytest.mark.parametrize("datatype", list(DATATYPE_CASES))
def test_pytorch_backend_round_trips_every_datatype(
    triton: TritonServer, every_datatype: str, datatype: str
) -> None:
    inputs = {f"INPUT__{i}": given for i, (given, _) in enumerate(DATATYPE_CASES.values())}
    index = list(DATATYPE_CASES).index(datatype)

    status, outputs = infer(triton, every_datatype, "datatypes.tar.gz", inputs, outputs=[f"OUTPUT__{index}"])

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    expected = DATATYPE_CASES[datatype][1]
    assert outputs[f"OUTPUT__{index}"].dtype == expected.dtype
    np.testing.assert_array_equal(outputs[f"OUTPUT__{index}"], expected)
