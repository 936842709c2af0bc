"""Fixtures for the model tests: a copy of tests/model/fixtures with the ONNX files generated into it.

Each directory under fixtures/ is one small model repository, named after the layout it shows
(``valid_*``) or the problem code it triggers (``config_syntax`` -> ``config-syntax``). ONNX graphs are
not committed: :data:`ONNX_FILES` says which graph goes where, and ``fixture_repos`` writes them.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def linear_onnx(
    input_shape: tuple[str | int, ...] = ("batch", 4),
    output_shape: tuple[str | int, ...] = ("batch", 3),
) -> bytes:
    """OUTPUT0 = INPUT0 @ W + b with FP32 tensors of the given shapes (symbolic names are variable dims)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weights = np.arange(12, dtype=np.float32).reshape(4, 3)
    bias = np.ones(3, dtype=np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["INPUT0", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["OUTPUT0"]),
        ],
        "linear",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, list(output_shape))],
        initializer=[numpy_helper.from_array(weights, "W"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    data: bytes = model.SerializeToString()
    return data


def external_weights_onnx() -> bytes:
    """The linear graph with W stored in an external file, ``linear.weights``, that is not written."""
    import onnx
    from onnx import external_data_helper

    model = onnx.load_from_string(linear_onnx())
    weights = next(init for init in model.graph.initializer if init.name == "W")
    external_data_helper.set_external_data(weights, location="linear.weights")
    weights.data_location = onnx.TensorProto.EXTERNAL
    weights.ClearField("raw_data")
    data: bytes = model.SerializeToString()
    return data


def complex_onnx() -> bytes:
    """An Identity graph over COMPLEX64 tensors, a type Triton's onnxruntime backend cannot serve."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        "complex",
        [helper.make_tensor_value_info("INPUT0", TensorProto.COMPLEX64, ["batch", 2])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.COMPLEX64, ["batch", 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    data: bytes = model.SerializeToString()
    return data


# Where each generated graph goes, relative to the fixtures directory.
ONNX_FILES: dict[str, Callable[[], bytes]] = {
    "valid_onnx/linear/1/model.onnx": linear_onnx,
    "valid_onnx_no_config/linear/1/model.onnx": linear_onnx,
    "valid_ensemble/linear/1/model.onnx": linear_onnx,
    "valid_ensemble_onnx_autocomplete/linear/1/model.onnx": linear_onnx,
    "component_name_mismatch/linear/1/model.onnx": linear_onnx,
    "ensemble_not_detected/linear/1/model.onnx": linear_onnx,
    "ensemble_archive_ambiguous/linear/1/model.onnx": linear_onnx,
    "ensemble_input_map_invalid/linear/1/model.onnx": linear_onnx,
    "ensemble_output_map_invalid/linear/1/model.onnx": linear_onnx,
    "ensemble_output_unproduced/linear/1/model.onnx": linear_onnx,
    "ensemble_tensor_unused/linear/1/model.onnx": linear_onnx,
    "ensemble_datatype_mismatch/linear/1/model.onnx": linear_onnx,
    "ensemble_shape_mismatch/linear/1/model.onnx": linear_onnx,
    "ensemble_batch_size_mismatch/linear/1/model.onnx": linear_onnx,
    "onnx_check_skipped/linear/1/model.onnx": linear_onnx,
    "inter_op_threads_ignored/linear/1/model.onnx": linear_onnx,
    "onnx_external_data_missing/linear/1/model.onnx": external_weights_onnx,
    "onnx_tensor_missing/linear/1/model.onnx": linear_onnx,
    "onnx_datatype_mismatch/linear/1/model.onnx": linear_onnx,
    "onnx_datatype_unsupported/complex/1/model.onnx": complex_onnx,
    "onnx_rank_mismatch/linear/1/model.onnx": linear_onnx,
    "onnx_dim_mismatch/linear/1/model.onnx": linear_onnx,
    "onnx_batch_dim_fixed/linear/1/model.onnx": lambda: linear_onnx((1, 4), (1, 3)),
}


@pytest.fixture(scope="session")
def fixture_repos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy of tests/model/fixtures with every ONNX file of :data:`ONNX_FILES` generated."""
    root = tmp_path_factory.mktemp("fixtures") / "fixtures"
    shutil.copytree(FIXTURES, root)
    for relative, build in ONNX_FILES.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(build())
    return root


@pytest.fixture(scope="session")
def make_linear_onnx() -> Callable[..., bytes]:
    """:func:`linear_onnx` for tests that build their own graphs (conftest is not importable)."""
    return linear_onnx


@pytest.fixture()
def python_model(tmp_path: Path) -> Path:
    """A fresh, valid python-backend model ``repo/scale`` that a test may change."""
    model = tmp_path / "repo" / "scale"
    shutil.copytree(FIXTURES / "valid_python" / "scale", model)
    return model


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_CAPABILITY_VERSION_3 = 0x20080522
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _run_without_dac_override(action: Callable[[], object]) -> object:
    """Run ``action`` on a thread whose capabilities do not bypass file permissions; its result or exception.

    root reads any directory through CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH. Linux keeps capabilities per
    thread, so dropping the two from one thread's effective set makes permission bits apply to it (as
    to any other owner) and leaves the rest of the test process untouched.
    """
    outcome: list[tuple[object, BaseException | None]] = []

    def target() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        header = _CapHeader(_CAPABILITY_VERSION_3, 0)
        data = (_CapData * 2)()
        if libc.capget(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capget failed")
        data[0].effective &= ~((1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH))
        if libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")
        try:
            outcome.append((action(), None))
        except BaseException as exc:  # handed to the test thread
            outcome.append((None, exc))

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    assert outcome, "the capability change failed; see the thread's exception above"
    result, raised = outcome[0]
    if raised is not None:
        raise raised
    return result


@pytest.fixture()
def unprivileged() -> Callable[[Callable[[], object]], object]:
    """Call a function so that file permissions apply to it even when the tests run as root (as CI does)."""
    if os.geteuid() != 0:
        return lambda action: action()
    return _run_without_dac_override
