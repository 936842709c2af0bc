"""validate_model describes a malformed model, whatever it holds: it never raises, never hangs, never
reads outside the model, and names the problem."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mme_triton.model import load_model, validate_model

PYTHON_CONFIG = 'backend: "python"\n'


def _config(text: str) -> Callable[[Path], None]:
    def write(model: Path) -> None:
        (model / "config.pbtxt").write_text(text)

    return write


def _binary_garbage(model: Path) -> None:
    (model / "config.pbtxt").write_bytes(random.Random(7).randbytes(4096))


def _nul_bytes(model: Path) -> None:
    (model / "config.pbtxt").write_bytes(b'name: "scale"\x00\x00 max_batch_size: 1')


def _config_fifo(model: Path) -> None:
    (model / "config.pbtxt").unlink()
    os.mkfifo(model / "config.pbtxt")


def _model_py_fifo(model: Path) -> None:
    (model / "1" / "model.py").unlink()
    os.mkfifo(model / "1" / "model.py")


def _model_py_directory(model: Path) -> None:
    (model / "1" / "model.py").unlink()
    (model / "1" / "model.py").mkdir()


def _version_is_a_file(model: Path) -> None:
    for child in (model / "1").iterdir():
        child.unlink()
    (model / "1").rmdir()
    (model / "1").write_text("not a directory")


def _deep_directories(model: Path) -> None:
    # deeper than Python's recursion limit; created relative to an open directory to stay under PATH_MAX
    fd = os.open(model / "1", os.O_RDONLY)
    for _ in range(1200):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


def _remove_deep_directories(model: Path) -> None:
    # shutil.rmtree (and so pytest's tmp_path cleanup) recurses once per level; shorten the chain instead
    top = model / "1"
    while (top / "d" / "d").is_dir():
        os.rename(top / "d" / "d", top / "short")
        os.rmdir(top / "d")
        os.rename(top / "short", top / "d")
    if (top / "d").is_dir():
        os.rmdir(top / "d")


@pytest.fixture()
def model(python_model: Path) -> Iterator[Path]:
    """The valid python model ``repo/scale``, cleaned of deep directory chains afterwards."""
    yield python_model
    if python_model.is_dir():
        _remove_deep_directories(python_model)


def _with_tensors(extra: str) -> str:
    return (
        PYTHON_CONFIG
        + 'input [{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] }]\n'
        + 'output [{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] }]\n'
        + extra
    )


# (setup applied to a valid python model, the codes expected)
MALFORMED: list[tuple[str, Callable[[Path], None], set[str]]] = [
    # random bytes are not UTF-8 (a warning: Triton reads such files byte for byte), and no config
    ("binary-garbage-config", _binary_garbage, {"config-encoding", "config-unknown-field"}),
    ("nul-bytes-config", _nul_bytes, {"config-syntax"}),
    ("deeply-nested-blocks", _config("optimization {" * 5000 + "}" * 5000), {"config-unknown-field"}),
    ("unclosed-blocks", _config("input {" * 100000), {"config-unknown-field"}),
    (
        "dims-beyond-int64",
        _config(PYTHON_CONFIG + 'input [{ name: "x" data_type: TYPE_FP32 dims: [ 99999999999999999999 ] }]'),
        {"config-invalid-value"},
    ),
    (
        "int64-extreme-dims",
        _config(
            PYTHON_CONFIG
            + 'input [{ name: "x" data_type: TYPE_FP32 dims: [ 9223372036854775807, 9223372036854775807 ]'
            + " reshape: { shape: [ 3 ] } }]\n"
            + 'output [{ name: "y" data_type: TYPE_FP32 dims: [ -9223372036854775808 ] }]'
        ),
        {"reshape-invalid", "dims-invalid"},
    ),
    (
        "huge-preferred-batch-size",
        _config(_with_tensors("max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 2147483647 ] }")),
        {"preferred-batch-size-invalid"},
    ),
    (
        "unknown-enum-numbers",
        _config(
            PYTHON_CONFIG
            + 'input [{ name: "x" data_type: 999 dims: [ 1 ] }]\n'
            + 'output [{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] }]\n'
            + "instance_group [{ kind: 77 }]"
        ),
        {"datatype-invalid", "instance-group-invalid"},
    ),
    (
        "default-model-filename-absolute",
        _config(_with_tensors('default_model_filename: "/etc/passwd"')),
        {"model-file-missing"},
    ),
    (
        "default-model-filename-parent",
        _config(_with_tensors('default_model_filename: "../../scale/1/model.py"')),
        {"model-file-missing"},
    ),
    (
        "default-model-filename-nul",
        _config(_with_tensors('default_model_filename: "model.py\\000x"')),
        {"model-file-missing"},
    ),
    (
        "default-model-filename-too-long",
        _config(_with_tensors(f'default_model_filename: "{"m" * 5000}"')),
        {"model-file-missing"},
    ),
    ("config-is-a-fifo", _config_fifo, {"special-file"}),
    ("model-py-is-a-fifo", _model_py_fifo, {"special-file", "model-file-missing"}),
    ("model-py-is-a-directory", _model_py_directory, {"model-file-missing"}),
    ("version-is-a-file", _version_is_a_file, {"version-missing"}),
    ("deep-directories", _deep_directories, set()),
]


@pytest.mark.parametrize(("case", "setup", "expected"), MALFORMED, ids=[case for case, _, _ in MALFORMED])
def test_validate_model_describes_a_malformed_model(
    model: Path, case: str, setup: Callable[[Path], None], expected: set[str]
) -> None:
    setup(model)

    problems = validate_model(model)

    assert {problem.code for problem in problems} == expected, "\n".join(map(str, problems))
    assert all(Path(problem.path).is_relative_to(model) for problem in problems)


def test_deep_directories_are_all_archive_entries(model: Path) -> None:
    _deep_directories(model)

    entries = load_model(model).entries()

    assert max(entry.arcname.count("/d") for entry in entries) == 1200


def _onnx_directory_without_model(model: Path) -> None:
    (model / "1" / "model.onnx").mkdir()


def _onnx_external_data_outside(model: Path, make_linear_onnx: Callable[..., bytes]) -> None:
    import onnx
    from onnx import external_data_helper

    graph = onnx.load_from_string(make_linear_onnx())
    weights = next(init for init in graph.graph.initializer if init.name == "W")
    external_data_helper.set_external_data(weights, location="../../secret.bin")
    weights.data_location = onnx.TensorProto.EXTERNAL
    weights.ClearField("raw_data")
    (model / "1" / "model.onnx").write_bytes(graph.SerializeToString())
    (model.parent / "secret.bin").write_bytes(b"\0" * 48)  # exists, but outside the model


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("random-bytes", {"onnx-unreadable"}),
        ("directory-without-model", {"model-file-missing"}),
        ("external-data-outside-the-model", {"onnx-external-data-missing"}),
    ],
    ids=["random-bytes", "directory-without-model", "external-data-outside-the-model"],
)
def test_validate_model_describes_a_malformed_onnx_model(
    tmp_path: Path, make_linear_onnx: Callable[..., bytes], case: str, expected: set[str]
) -> None:
    model = tmp_path / "repo" / "linear"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    if case == "random-bytes":
        (model / "1" / "model.onnx").write_bytes(random.Random(3).randbytes(5000))
    elif case == "directory-without-model":
        _onnx_directory_without_model(model)
    else:
        _onnx_external_data_outside(model, make_linear_onnx)

    problems = validate_model(model)

    assert {problem.code for problem in problems} == expected, "\n".join(map(str, problems))


def _nested_ensembles(repo: Path, depth: int) -> None:
    for index in range(depth):
        step = f"e{index + 1}" if index + 1 < depth else "scale"
        (repo / f"e{index}" / "1").mkdir(parents=True)
        (repo / f"e{index}" / "config.pbtxt").write_text(
            'platform: "ensemble"\n'
            'input [{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] }]\n'
            'output [{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] }]\n'
            f'ensemble_scheduling {{ step [{{ model_name: "{step}" model_version: -1 '
            'input_map { key: "x" value: "x" } output_map { key: "y" value: "y" } }] }\n'
        )


def test_validate_model_reports_ensembles_nested_too_deep(python_model: Path) -> None:
    repo = python_model.parent
    (python_model / "config.pbtxt").write_text(_with_tensors(""))
    _nested_ensembles(repo, 1500)

    problems = validate_model(repo / "e0")

    assert {problem.code for problem in problems} == {"ensemble-archive-ambiguous"}
    assert any("nested more than" in problem.message for problem in problems)
