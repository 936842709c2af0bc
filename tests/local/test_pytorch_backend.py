"""The python-based pytorch backend serving TorchScript models, on a real Triton (nvidia-pytriton's binary).

The TorchScript modules are built here, from the small ``torch.nn.Module`` classes below, scripted or
traced and saved with ``torch.jit.save`` into a model directory next to a ``config.pbtxt``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch  # a run without torch deselects this module (tests/conftest.py)

sys.path.insert(0, str(Path(__file__).parent))
from triton_fixtures import triton

from mme_triton import decode_response, encode_request
from mme_triton.local.triton.server import TritonLoadError, TritonServer

pytestmark = [
    pytest.mark.triton,
    pytest.mark.torch,
    # torch 2.9+ deprecates TorchScript; these tests build TorchScript models on purpose
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
]
# every test loads a TorchScript model (a stub that imports torch), minutes of them in one module: dealt
# into 3 xdist groups (tests/conftest.py)
XDIST_GROUPS = 3

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


@pytest.fixture
def serve(triton: TritonServer) -> Iterator[Any]:
    """``serve(root, target="model.tar.gz") -> model hash``: loaded now, unloaded after the test.

    The front-end knows a model by its TargetModel: one left loaded would answer the next test's load.
    """
    loaded: list[str] = []

    def _serve(root: Path, target: str = "model.tar.gz") -> str:
        model_hash = load(triton, root, target)
        loaded.append(model_hash)
        return model_hash

    yield _serve
    for model_hash in loaded:
        triton.unload(model_hash)


AFFINE_CONFIG = """\
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_pytorch_backend_serves_a_scripted_model(
    triton: TritonServer, serve: Any, tmp_path: Path, binary: bool
) -> None:
    model_hash = serve(write_model(tmp_path, Affine(), AFFINE_CONFIG))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x}, binary=binary)

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], x * 2 + 1)


def test_pytorch_backend_serves_a_model_configured_by_backend_name(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    config = AFFINE_CONFIG.replace('platform: "pytorch_libtorch"', 'backend: "pytorch"')
    model_hash = serve(write_model(tmp_path, Affine(), config))

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": np.ones((1, 3), np.float32)})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], [[3.0, 3.0, 3.0]])


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param("INPUT__1", "INPUT__0", "second - first", id="index-names-listed-out-of-order"),
        pytest.param("b", "a", "second - first", id="forward-argument-names"),
        pytest.param("FIRST", "SECOND", "first - second", id="config-order"),
    ],
)
def test_pytorch_backend_binds_inputs_like_the_native_backend(
    triton: TritonServer, serve: Any, tmp_path: Path, first: str, second: str, expected: str
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
    model_hash = serve(write_model(tmp_path, Difference(), config))
    ones, tens = np.ones((1, 2), np.float32), np.full((1, 2), 10, np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {first: ones, second: tens})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    # Difference.forward(a, b) = a - b: the binding rule decides which config input is "a"
    values = {"first - second": ones - tens, "second - first": tens - ones}
    np.testing.assert_allclose(outputs["OUTPUT__0"], values[expected])


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


def test_pytorch_backend_binds_tuple_outputs_by_index(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    model_hash = serve(write_model(tmp_path, SumAndProduct(), TUPLE_CONFIG))
    x, y = np.array([[2, 3]], np.float32), np.array([[5, 7]], np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x, "INPUT__1": y})
    _, only = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x, "INPUT__1": y}, outputs=["SUM__0"])

    assert status == 200, outputs
    assert isinstance(outputs, dict) and isinstance(only, dict)
    np.testing.assert_allclose(outputs["SUM__0"], x + y)
    np.testing.assert_allclose(outputs["PRODUCT__1"], x * y)
    assert set(only) == {"SUM__0"}


def test_pytorch_backend_serves_a_traced_model(triton: TritonServer, serve: Any, tmp_path: Path) -> None:
    example = (torch.ones(1, 2), torch.ones(1, 2))
    config = TUPLE_CONFIG.replace("PRODUCT__1", "OUTPUT__1").replace("SUM__0", "OUTPUT__0")
    model_hash = serve(write_model(tmp_path, SumAndProduct(), config, example=example))
    x, y = np.array([[1, 2], [3, 4]], np.float32), np.array([[1, 1], [2, 2]], np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x, "INPUT__1": y})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], x + y)
    np.testing.assert_allclose(outputs["OUTPUT__1"], x * y)


class Dictionary(torch.nn.Module):  # type: ignore[misc]
    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return inputs["scale"] * inputs["value"]


def test_pytorch_backend_passes_a_dict_input_keyed_by_config_name(
    triton: TritonServer, serve: Any, tmp_path: Path
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
    model_hash = serve(write_model(tmp_path, Dictionary(), config))
    value, scale = np.array([1, 2], np.float32), np.array([10, 100], np.float32)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"value": value, "scale": scale})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], [10, 200])


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
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    model_hash = serve(write_model(tmp_path, RowsSeen(), ROWS_CONFIG))
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


def test_pytorch_backend_without_batching_takes_the_whole_shape(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    config = """\
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2, 3 ] } ]
"""
    model_hash = serve(write_model(tmp_path, Affine(), config))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x})
    batched_status, message = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x[None]})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], x * 2 + 1)
    assert batched_status == 400
    assert "INPUT__0" in message


def test_pytorch_backend_runs_one_stub_per_instance(triton: TritonServer, serve: Any, tmp_path: Path) -> None:
    config = ROWS_CONFIG + "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
    model_hash = serve(write_model(tmp_path, RowsSeen(), config), "twins.tar.gz")
    requests = [np.full((1, 2), i, dtype=np.float32) for i in range(4)]

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = list(pool.map(lambda x: _infer_rows(triton, model_hash, "twins.tar.gz", x), requests))

    for x, (status, outputs) in zip(requests, answers, strict=True):
        assert status == 200, outputs
        assert isinstance(outputs, dict)
        np.testing.assert_allclose(outputs["OUTPUT__0"], x + 1)
    instances = {p.model for p in triton.model_processes() if p.model.startswith("twins.tar.gz")}
    assert instances == {"twins.tar.gz_0_0", "twins.tar.gz_0_1"}


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


class Bracket(torch.nn.Module):  # type: ignore[misc]
    def forward(self, texts: list[str]) -> list[str]:
        return ["<" + text + ">" for text in texts]


def test_pytorch_backend_passes_strings_as_lists_of_str(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    # the native rule: one dimension per string tensor, so a batched one is dims [1] reshaped to []
    config = """\
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "TEXT__0" data_type: TYPE_STRING dims: [ 1 ] reshape: { shape: [ ] } } ]
output [ { name: "LOUD__0" data_type: TYPE_STRING dims: [ 1 ] reshape: { shape: [ ] } } ]
dynamic_batching { max_queue_delay_microseconds: 300000 }
"""
    model_hash = serve(write_model(tmp_path, Bracket(), config))
    texts = [np.array([["héllo"], ["wörld"]], dtype=object), np.array([["one"]], dtype=object)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(lambda t: infer(triton, model_hash, "model.tar.gz", {"TEXT__0": t}), texts))

    (first_status, first), (second_status, second) = answers
    assert first_status == 200 and second_status == 200, answers
    assert isinstance(first, dict) and isinstance(second, dict)
    assert first["LOUD__0"].tolist() == [["<héllo>".encode()], ["<wörld>".encode()]]
    assert second["LOUD__0"].tolist() == [[b"<one>"]]


class WithInt(torch.nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return x * n


class ReturnsDict(torch.nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"y": x}


def _config(inputs: str, outputs: str, extra: str = "", max_batch_size: int = 4) -> str:
    return (
        f'platform: "pytorch_libtorch"\nmax_batch_size: {max_batch_size}\n'
        f"input [ {inputs} ]\noutput [ {outputs} ]\n{extra}"
    )


FP32_IN = '{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] }'
FP32_OUT = '{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] }'
SECOND_IN = '{ name: "INPUT__1" data_type: TYPE_FP32 dims: [ 3 ] }'

LOAD_ERRORS = [
    pytest.param(
        Affine(),
        _config(f"{FP32_IN}, {SECOND_IN}", FP32_OUT),
        ["configuration expects 2 inputs, model provides 1", "forward(x)"],
        id="more-inputs-than-forward-takes",
    ),
    pytest.param(
        Difference(),
        _config(f'{FP32_IN}, {{ name: "INPUT__5" data_type: TYPE_FP32 dims: [ 3 ] }}', FP32_OUT),
        ["input 'INPUT__5' refers to forward argument 5, but forward takes 2 inputs (a, b)"],
        id="input-index-out-of-range",
    ),
    pytest.param(
        Affine(),
        _config(FP32_IN.replace("TYPE_FP32", "TYPE_UINT32"), FP32_OUT),
        ["unsupported datatype TYPE_UINT32 for input 'INPUT__0'"],
        id="datatype-without-torch-tensor",
    ),
    pytest.param(
        Affine(),
        _config(FP32_IN.replace("TYPE_FP32", "TYPE_BF16"), FP32_OUT),
        ["unsupported datatype TYPE_BF16 for input 'INPUT__0'"],
        id="bf16-refused-as-natively",
    ),
    pytest.param(
        SumAndProduct(),
        _config(
            f"{FP32_IN}, {SECOND_IN}",
            f'{FP32_OUT}, {{ name: "OUTPUT__2" data_type: TYPE_FP32 dims: [ 3 ] }}',
        ),
        [
            "the output OUTPUT__2 in the model configuration refers to an output index which doesn't exist",
            "This model has 2 outputs",
        ],
        id="more-outputs-than-forward-returns",
    ),
    pytest.param(
        WithInt(),
        _config(f"{FP32_IN}, {SECOND_IN}", FP32_OUT),
        ["an input of type 'int' was detected in the model (forward argument 'n')"],
        id="forward-argument-not-a-tensor",
    ),
    pytest.param(
        Affine(),
        _config('{ name: "INPUT__0" data_type: TYPE_STRING dims: [ -1 ] }', FP32_OUT, max_batch_size=0),
        ["input 'INPUT__0' has TYPE_STRING", "forward argument 'x' of type Tensor"],
        id="string-input-for-a-tensor-argument",
    ),
    pytest.param(
        Bracket(),
        _config(
            '{ name: "TEXT__0" data_type: TYPE_STRING dims: [ 2 ] }',
            '{ name: "LOUD__0" data_type: TYPE_STRING dims: [ 2 ] }',
        ),
        ["Triton only supports 1 dimensional List of String as input for 'TEXT__0'"],
        id="string-input-with-two-dimensions",
    ),
    pytest.param(
        ReturnsDict(),
        _config(FP32_IN, FP32_OUT),
        ["It should not be a List / Dictionary of Tensors", "forward returns Dict[str, Tensor]"],
        id="dict-output",
    ),
    pytest.param(
        Affine(),
        _config(
            FP32_IN.replace("[ 3 ]", "[ -1 ]"),
            '{ name: "OUTPUT__0" data_type: TYPE_STRING dims: [ -1 ] }',
            max_batch_size=0,
        ),
        ["configuration expects datatype TYPE_STRING for output 'OUTPUT__0', model provides a Tensor"],
        id="string-output-for-a-tensor",
    ),
    pytest.param(
        Affine(),
        _config(FP32_IN, FP32_OUT, 'parameters { key: "INFERENCE_MODE" value: { string_value: "maybe" } }'),
        ["failed to convert 'maybe' to boolean value for parameter 'INFERENCE_MODE'"],
        id="parameter-not-a-boolean",
    ),
    pytest.param(
        Affine(),
        _config(FP32_IN.replace("dims", "optional: true dims"), FP32_OUT, max_batch_size=0),
        ["input 'INPUT__0' is optional"],
        id="optional-input",
    ),
]


@pytest.mark.parametrize(("module", "config", "fragments"), LOAD_ERRORS)
def test_pytorch_backend_refuses_a_config_that_disagrees_with_the_module(
    triton: TritonServer, tmp_path: Path, module: Any, config: str, fragments: list[str]
) -> None:
    root = write_model(tmp_path, module, config)

    with pytest.raises(TritonLoadError) as caught:
        triton.load(uuid.uuid4().hex, root, "model.tar.gz")

    assert caught.value.status == 400
    for fragment in fragments:
        assert fragment in caught.value.message


def test_pytorch_backend_refuses_a_model_directory_without_config(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = write_model(tmp_path, Affine(), "")
    (root / "model" / "config.pbtxt").unlink()

    with pytest.raises(TritonLoadError) as caught:
        triton.load(uuid.uuid4().hex, root, "model.tar.gz")

    assert "must contain at least one input" in caught.value.message
    assert "does not auto-complete configurations" in caught.value.message


def test_pytorch_backend_refuses_a_checkpoint_that_is_not_torchscript(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = write_model(tmp_path, Affine(), AFFINE_CONFIG)
    torch.save({"weight": torch.ones(3)}, str(root / "model" / "1" / "model.pt"))

    with pytest.raises(TritonLoadError) as caught:
        triton.load(uuid.uuid4().hex, root, "model.tar.gz")

    assert "failed to load model 'model.tar.gz'" in caught.value.message
    assert "a torch.save() checkpoint or state_dict is not TorchScript" in caught.value.message


def test_pytorch_backend_reports_a_missing_model_file(triton: TritonServer, tmp_path: Path) -> None:
    root = write_model(tmp_path, Affine(), AFFINE_CONFIG)
    (root / "model" / "1" / "model.pt").rename(root / "model" / "1" / "affine.pt")

    with pytest.raises(TritonLoadError, match=r"unable to find '.*/1/model\.pt' for model instance"):
        triton.load(uuid.uuid4().hex, root, "model.tar.gz")


def test_pytorch_backend_honours_default_model_filename(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    root = write_model(tmp_path, Affine(), AFFINE_CONFIG + 'default_model_filename: "affine.pt"\n')
    (root / "model" / "1" / "model.pt").rename(root / "model" / "1" / "affine.pt")
    model_hash = serve(root)

    status, outputs = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": np.zeros((1, 3), np.float32)})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    np.testing.assert_allclose(outputs["OUTPUT__0"], [[1.0, 1.0, 1.0]])


class MaybeTensor(torch.nn.Module):  # type: ignore[misc]
    """Declares Optional[Tensor]: how many outputs it has is only known once it has run."""

    def forward(self, x: torch.Tensor) -> torch.Tensor | None:
        return x


class MatrixProduct(torch.nn.Module):  # type: ignore[misc]
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ torch.ones(3, 2)


RUN_ERRORS = [
    pytest.param(
        Affine(),
        _config(FP32_IN, FP32_OUT.replace("TYPE_FP32", "TYPE_INT64")),
        "configuration expects datatype TYPE_INT64 for output 'OUTPUT__0', model provides TYPE_FP32",
        id="output-datatype",
    ),
    pytest.param(
        Affine(),
        _config(FP32_IN, FP32_OUT.replace("dims: [ 3 ]", "dims: [ 3, 1 ]")),
        "output 'OUTPUT__0' of model 'model.tar.gz' has shape [1,3] but the model configuration's dims "
        "[3,1] make it [-1,3,1] (a batch dimension because max_batch_size > 0, then the dims)",
        id="output-rank",
    ),
    pytest.param(
        MaybeTensor(),
        _config(FP32_IN, f'{FP32_OUT}, {{ name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 3 ] }}'),
        "The output OUTPUT__1 in the model configuration refers to an output index which doesn't exist. "
        "This model has 1 outputs",
        id="output-index-known-only-at-run",
    ),
    pytest.param(
        MatrixProduct(),
        _config(
            '{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] }',
            '{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] }',
        ),
        "PyTorch execute failure: The following operation failed in the TorchScript interpreter.",
        id="forward-fails",
    ),
]


@pytest.mark.parametrize(("module", "config", "fragment"), RUN_ERRORS)
def test_pytorch_backend_answers_an_error_naming_what_the_module_returned(
    triton: TritonServer, serve: Any, tmp_path: Path, module: Any, config: str, fragment: str
) -> None:
    model_hash = serve(write_model(tmp_path, module, config))
    x = np.ones((1, 4 if isinstance(module, MatrixProduct) else 3), np.float32)

    answer_status, message = infer(triton, model_hash, "model.tar.gz", {"INPUT__0": x})

    # the front-end answers 400 for every failed inference, whatever the backend's error code
    assert answer_status == 400, message
    assert fragment in message


class AutogradState(torch.nn.Module):  # type: ignore[misc]
    """``[[x.is_inference(), torch.is_grad_enabled()]]``: the autograd mode forward runs in."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tensor([[int(x.is_inference()), int(torch.is_grad_enabled())]])


AUTOGRAD_CONFIG = """\
backend: "pytorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ 1, 2 ] } ]
"""


def _parameters(**values: str) -> str:
    return "".join(
        f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n' for k, v in values.items()
    )


def _log_with(triton: TritonServer, *lines: str, timeout: float = 30.0) -> str:
    """Triton's log once it holds every line: a stub's log records reach Triton's log through a queue,
    after the request that caused them may already have been answered."""
    deadline = time.monotonic() + timeout
    while True:
        log = triton.log_path.read_text()
        missing = [line for line in lines if line not in log]
        if not missing or time.monotonic() > deadline:
            assert missing == [], f"not in Triton's log after {timeout} s: {missing}"
            return log
        time.sleep(0.05)


def _log_matching(triton: TritonServer, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    """The first match of ``pattern`` in Triton's log, waiting for it as :func:`_log_with` does."""
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(pattern, triton.log_path.read_text())
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"{pattern!r} not in Triton's log after {timeout} s"
        time.sleep(0.05)


def test_pytorch_backend_applies_the_native_parameters(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    parameters = _parameters(
        INTRA_OP_THREAD_COUNT="1",
        INTER_OP_THREAD_COUNT="1",
        INFERENCE_MODE="false",
        DISABLE_OPTIMIZED_EXECUTION="true",
        ENABLE_JIT_EXECUTOR="false",
        ENABLE_JIT_PROFILING="false",
        ENABLE_TENSOR_FUSER="false",
        DISABLE_CUDNN="true",
        ENABLE_WEIGHT_SHARING="true",
        NUM_THREADS="4",
    )
    model_hash = serve(write_model(tmp_path, AutogradState(), AUTOGRAD_CONFIG + parameters), "tuned.tar.gz")

    status, outputs = infer(triton, model_hash, "tuned.tar.gz", {"INPUT__0": np.ones(1, np.float32)})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    # INFERENCE_MODE false: no inference mode, and gradients still off as natively (NoGradGuard)
    assert outputs["OUTPUT__0"].tolist() == [[0, 0]]
    log = _log_with(
        triton,
        "Intra op thread count is set to 1 and inter op thread count to 1 for model instance 'tuned.tar.gz'",
        "Optimized execution is disabled, Inference Mode is disabled for model instance 'tuned.tar.gz'",
        "Jit executor is disabled for model instance 'tuned.tar.gz'",
        "Jit profiling is disabled for model instance 'tuned.tar.gz'",
        "Tensor fuser is disabled for model instance 'tuned.tar.gz'",
        "model 'tuned.tar.gz': parameter DISABLE_CUDNN has no effect on the embedded stack",
        "model 'tuned.tar.gz': parameter ENABLE_WEIGHT_SHARING has no effect on the embedded stack",
        "model 'tuned.tar.gz': parameter NUM_THREADS belongs to Triton's python-based PyTorch 2 runtime",
    )
    assert "Intra op thread count" in log


def test_pytorch_backend_defaults_to_inference_mode_and_at_most_a_thread_per_cpu(
    triton: TritonServer, serve: Any, tmp_path: Path
) -> None:
    model_hash = serve(write_model(tmp_path, AutogradState(), AUTOGRAD_CONFIG), "defaults.tar.gz")

    status, outputs = infer(triton, model_hash, "defaults.tar.gz", {"INPUT__0": np.ones(1, np.float32)})

    assert status == 200, outputs
    assert isinstance(outputs, dict)
    assert outputs["OUTPUT__0"].tolist() == [[1, 0]]
    found = _log_matching(
        triton,
        r"Intra op thread count is set to (\d+) and inter op thread count to (\d+) "
        r"for model instance 'defaults.tar.gz'",
    )
    cpus = len(os.sched_getaffinity(0))
    assert 1 <= int(found.group(1)) <= cpus and 1 <= int(found.group(2)) <= cpus


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A virtual environment with this one's packages except torch: what a ``local``-only install has."""
    root = tmp_path_factory.mktemp("no_torch")
    # --copies: TritonServer takes an interpreter whose real path is the running one's for the running one
    venv = [sys.executable, "-m", "venv", "--without-pip", "--copies", str(root / "venv")]
    subprocess.run(venv, check=True)
    packages = root / "packages"
    packages.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("torch", "functorch")):
            (packages / entry.name).symlink_to(entry)
    (site_packages,) = (root / "venv" / "lib").glob("python3*/site-packages")
    (site_packages / "packages.pth").write_text(f"{packages}\n")
    return str(root / "venv" / "bin" / "python3")


def test_pytorch_backend_without_torch_says_how_to_install_it(
    python_without_torch: str, tmp_path: Path
) -> None:
    root = write_model(tmp_path / "model", Affine(), AFFINE_CONFIG)

    with (
        TritonServer(workdir=tmp_path, python_executable=python_without_torch) as server,
        pytest.raises(TritonLoadError) as caught,
    ):
        server.load(uuid.uuid4().hex, root, "model.tar.gz")

    assert "the embedded stack serves TorchScript models with PyTorch" in caught.value.message
    assert "pip install 'mme-triton[export]'" in caught.value.message


@pytest.mark.moto
def test_pytorch_backend_serves_beside_an_onnx_model_on_one_endpoint(
    stack: Any, model_writers: dict[str, Any], expected_linear: Any, tmp_path: Path
) -> None:
    from mme_triton import MMEClient, deploy_mme, teardown

    torchscript = write_model(tmp_path, Affine(), AFFINE_CONFIG, name="affine") / "affine"
    onnx = model_writers["linear"](tmp_path)
    session = stack.boto3_session()
    deploy_mme(
        "torch-and-onnx",
        stack.model_data_url("torch-and-onnx/"),
        models=[torchscript, onnx],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        environment={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"},
        poll_interval=0.1,
        boto3_session=session,
    )
    client = MMEClient("torch-and-onnx", boto3_session=session)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8

    try:
        affine = client.infer("affine.tar.gz", {"INPUT__0": x[:, :3]})
        linear = client.infer("linear.tar.gz", {"INPUT0": x})
    finally:
        teardown("torch-and-onnx", boto3_session=session)

    np.testing.assert_allclose(affine["OUTPUT__0"], x[:, :3] * 2 + 1)
    np.testing.assert_allclose(linear["OUTPUT0"], expected_linear(x), rtol=1e-6)
