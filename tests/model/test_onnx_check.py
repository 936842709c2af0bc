"""ONNX graph against config: the onnxruntime backend's rules, auto-complete, and the no-onnx warning."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from mme_triton.model import validate_model
from mme_triton.model.config import parse_config
from mme_triton.model.onnx_check import autocomplete_config, check_onnx, read_graph_signature

CONFIG = """
name: "linear"
backend: "onnxruntime"
max_batch_size: {mbs}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {input_dims} ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {output_dims} ] }} ]
"""

SHAPE_RULES = [
    # (graph input, graph output, max_batch_size, config input dims, config output dims, codes)
    (("batch", 4), ("batch", 3), 8, "4", "3", set()),
    (("batch", 4), ("batch", 3), 0, "-1, 4", "-1, 3", set()),
    (("batch", "n"), ("batch", 3), 8, "4", "3", set()),  # a variable input dim accepts any config dim
    (("batch", 4), ("batch", "m"), 8, "4", "3", {"onnx-dim-mismatch"}),  # outputs compare exactly
    (("batch", 4), ("batch", 3), 8, "-1", "3", {"onnx-dim-mismatch"}),  # fixed graph dim, -1 in config
    (("batch", 4), ("batch", 3), 0, "4", "3", {"onnx-rank-mismatch"}),  # forgot the batch dim
    ((2, 4), (2, 3), 0, "2, 4", "2, 3", set()),
    ((2, 4), (2, 3), 1, "4", "3", {"onnx-batch-dim-fixed"}),
]


@pytest.mark.parametrize(
    ("graph_in", "graph_out", "mbs", "input_dims", "output_dims", "expected"),
    SHAPE_RULES,
    ids=[
        "batched",
        "unbatched-full-shape",
        "variable-input-dim",
        "variable-output-dim",
        "wildcard-against-fixed",
        "missing-batch-dim",
        "fixed-unbatched",
        "fixed-first-dim-batched",
    ],
)
def test_check_onnx_applies_the_backends_shape_rules(
    tmp_path: Path,
    make_linear_onnx: Callable[..., bytes],
    graph_in: tuple[str | int, ...],
    graph_out: tuple[str | int, ...],
    mbs: int,
    input_dims: str,
    output_dims: str,
    expected: set[str],
) -> None:
    onnx_path = tmp_path / "model.onnx"
    onnx_path.write_bytes(make_linear_onnx(graph_in, graph_out))
    config, _ = parse_config(CONFIG.format(mbs=mbs, input_dims=input_dims, output_dims=output_dims))

    problems = check_onnx(onnx_path, config, where="config.pbtxt")

    assert {p.code for p in problems} == expected, "\n".join(map(str, problems))


def test_read_graph_signature_leaves_initializers_out(
    tmp_path: Path, make_linear_onnx: Callable[..., bytes]
) -> None:
    onnx_path = tmp_path / "model.onnx"
    onnx_path.write_bytes(make_linear_onnx())

    inputs, outputs = read_graph_signature(onnx_path)

    assert [(t.name, t.triton_type, t.dims) for t in inputs] == [("INPUT0", "TYPE_FP32", (-1, 4))]
    assert [(t.name, t.triton_type, t.dims) for t in outputs] == [("OUTPUT0", "TYPE_FP32", (-1, 3))]


@pytest.mark.parametrize(
    ("graph_in", "graph_out", "mbs", "input_dims", "output_dims"),
    [(("batch", 4), ("batch", 3), 4, [4], [3]), ((2, 4), (2, 3), 0, [2, 4], [2, 3])],
    ids=["batchable", "fixed"],
)
def test_autocomplete_config_infers_what_triton_fills_in(
    tmp_path: Path,
    make_linear_onnx: Callable[..., bytes],
    graph_in: tuple[str | int, ...],
    graph_out: tuple[str | int, ...],
    mbs: int,
    input_dims: list[int],
    output_dims: list[int],
) -> None:
    onnx_path = tmp_path / "model.onnx"
    onnx_path.write_bytes(make_linear_onnx(graph_in, graph_out))

    config = autocomplete_config(onnx_path)

    assert config is not None
    assert config.max_batch_size == mbs
    assert [(t.name, list(t.dims)) for t in config.input] == [("INPUT0", input_dims)]
    assert [(t.name, list(t.dims)) for t in config.output] == [("OUTPUT0", output_dims)]


def test_ensemble_sees_the_auto_completed_batch_size_of_an_onnx_step(
    fixture_repos: Path, tmp_path: Path
) -> None:
    # Without config.pbtxt Triton gives a batchable ONNX model max_batch_size 4; an ensemble allowing 8
    # therefore fails to load.
    repo = tmp_path / "repo"
    shutil.copytree(fixture_repos / "valid_ensemble_onnx_autocomplete", repo)
    config = repo / "pipeline" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 4", "max_batch_size: 8"))

    [problem] = validate_model(repo / "pipeline")

    assert problem.code == "ensemble-batch-size-mismatch"
    assert "allows only 4" in problem.message


def test_onnx_config_without_io_is_checked_against_auto_complete(
    tmp_path: Path, make_linear_onnx: Callable[..., bytes]
) -> None:
    model = tmp_path / "repo" / "linear"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.onnx").write_bytes(make_linear_onnx((1, 4), (1, 3)))
    (model / "config.pbtxt").write_text('backend: "onnxruntime"\nmax_batch_size: 8\n')

    [problem] = validate_model(model)

    assert problem.code == "onnx-batch-dim-fixed"


def test_onnx_check_skipped_is_a_warning_when_onnx_is_missing(fixture_repos: Path) -> None:
    model = fixture_repos / "onnx_check_skipped" / "linear"
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["onnx"] = None  # makes "import onnx" raise ImportError
        from mme_triton.model import validate_model
        for problem in validate_model({str(model)!r}):
            print(problem.severity, problem.code, problem.path)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"warning onnx-check-skipped {model / '1' / 'model.onnx'}"]
    # With onnx installed the same model is clean: the warning is about the missing package only.
    assert validate_model(model) == []


def _graph_with_everything() -> bytes:
    """Initializers listed as inputs (old exporters), a sparse initializer, external data, metadata."""
    import numpy as np
    import onnx
    from onnx import TensorProto, external_data_helper, helper, numpy_helper

    weights = numpy_helper.from_array(np.ones((4, 3), dtype=np.float32), "W")
    external_data_helper.set_external_data(weights, location="weights/W.bin", offset=0, length=48)
    weights.data_location = TensorProto.EXTERNAL
    weights.ClearField("raw_data")
    bias = numpy_helper.from_array(np.zeros(3, dtype=np.float32), "b")
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0], dtype=np.float32), "S"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "S_indices"),
        [3],
    )
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "everything",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["n", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
        initializer=[weights, bias],
        sparse_initializer=[sparse],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    helper.set_model_props(model, {"author": "tests", "vocab_size": "30522"})
    data: bytes = model.SerializeToString()
    onnx.load_from_string(data)  # well-formed for the reference parser too
    return data


def test_graph_scan_agrees_with_onnx_load(tmp_path: Path) -> None:
    import onnx

    from mme_triton.model._onnx_wire import read_graph_parts, read_model_metadata

    path = tmp_path / "model.onnx"
    path.write_bytes(_graph_with_everything())
    reference = onnx.load(str(path), load_external_data=False)

    parts = read_graph_parts(path)

    assert [onnx.ValueInfoProto.FromString(b) for b in parts.inputs] == list(reference.graph.input)
    assert [onnx.ValueInfoProto.FromString(b) for b in parts.outputs] == list(reference.graph.output)
    assert parts.initializers == ["W", "b", "S"]
    assert parts.external_locations == ["weights/W.bin"]
    assert read_model_metadata(path) == {p.key: p.value for p in reference.metadata_props}
    assert read_model_metadata(path) == {"author": "tests", "vocab_size": "30522"}


def test_check_onnx_reads_the_scanned_signature(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(_graph_with_everything())

    inputs, outputs = read_graph_signature(path)
    problems = check_onnx(path, None)

    # "b" is an initializer, so not an input Triton expects; "y" has no declared shape.
    assert [(t.name, t.triton_type, t.dims) for t in inputs] == [("x", "TYPE_FP16", (-1, 4))]
    assert [(t.name, t.triton_type, t.dims) for t in outputs] == [("y", "TYPE_FP16", None)]
    assert [(p.code, p.message.split(",")[0]) for p in problems] == [
        ("onnx-external-data-missing", "the graph keeps weights in 'weights/W.bin'")
    ]
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "W.bin").write_bytes(b"\0" * 48)
    assert check_onnx(path, None) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data[:-1],
        lambda data: b"\xff" * 16,
        lambda data: b"",
    ],
    ids=["half", "last-byte-missing", "garbage", "empty"],
)
def test_check_onnx_reports_a_damaged_file_as_unreadable(
    tmp_path: Path, make_linear_onnx: Callable[..., bytes], damage: Callable[[bytes], bytes]
) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(damage(make_linear_onnx()))

    [problem] = check_onnx(path, None)

    assert (problem.code, problem.path) == ("onnx-unreadable", str(path))
