"""load_model / TritonModel: parsed fields, ensemble members, archive entries, and errors for bad paths."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import mme_triton
from mme_triton.model import JUNK_NAMES, ModelEntry, load_model, validate_repository
from mme_triton.model.validate import validate_model


def test_load_model_reads_name_versions_config_and_backend(fixture_repos: Path) -> None:
    model = load_model(fixture_repos / "valid_onnx" / "linear")

    assert model.name == "linear"
    assert model.path == (fixture_repos / "valid_onnx" / "linear").resolve()
    assert model.repository == (fixture_repos / "valid_onnx").resolve()
    assert model.versions == (1,)
    assert model.backend == "onnxruntime"
    assert model.config is not None and model.config.max_batch_size == 8
    assert model.members == (model.path,)
    assert model.problems == model.errors == model.warnings == ()


def test_load_model_config_is_none_when_missing_or_broken(fixture_repos: Path) -> None:
    assert load_model(fixture_repos / "valid_onnx_no_config" / "linear").config is None
    broken = load_model(fixture_repos / "config_syntax" / "scale")
    assert broken.config is None
    assert [p.code for p in broken.errors] == ["config-syntax"]


def test_load_model_ensemble_members_are_the_ensemble_and_its_steps(fixture_repos: Path) -> None:
    repo = (fixture_repos / "valid_ensemble").resolve()

    model = load_model(repo / "pipeline")

    assert model.backend == "ensemble"
    assert model.members == (repo / "linear", repo / "pipeline", repo / "scale")
    assert [entry.arcname for entry in model.entries()] == [
        "linear",
        "linear/1",
        "linear/1/model.onnx",
        "linear/config.pbtxt",
        "pipeline",
        "pipeline/1",
        "pipeline/1/.gitkeep",
        "pipeline/config.pbtxt",
        "scale",
        "scale/1",
        "scale/1/model.py",
        "scale/config.pbtxt",
    ]


def test_load_model_ensemble_problems_include_its_components(fixture_repos: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(fixture_repos / "valid_ensemble", repo)
    (repo / "scale" / "1" / "model.py").unlink()

    problems = validate_model(repo / "pipeline")

    assert [(p.code, p.path) for p in problems] == [
        ("model-file-missing", str(repo.resolve() / "scale" / "1"))
    ]


def test_entries_are_sorted_by_utf8_bytes_with_sizes_and_exec_bits(tmp_path: Path) -> None:
    model_dir = tmp_path / "repo" / "m"
    (model_dir / "1" / "sub").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [{name: "x" data_type: TYPE_FP32 dims: [1]}]\n'
        'output [{name: "y" data_type: TYPE_FP32 dims: [1]}]\n'
    )
    (model_dir / "1" / "model.py").write_text("# model\n")
    (model_dir / "1" / "run.sh").write_text("#!/bin/sh\n")
    (model_dir / "1" / "run.sh").chmod(0o750)
    (model_dir / "1" / "Zeta.txt").write_bytes(b"z" * 5)
    (model_dir / "1" / "é.txt").write_bytes(b"")
    (model_dir / "1" / "sub" / "a.bin").write_bytes(b"\0" * 3)
    (model_dir / "1" / "sub.txt").write_bytes(b"")

    model = load_model(model_dir)
    entries = model.entries()

    names = [entry.arcname for entry in entries]
    assert names == sorted(names, key=lambda name: name.encode("utf-8"))
    # "/" (0x2f) sorts after "." (0x2e): byte order, not path-component order.
    assert names.index("m/1/sub") < names.index("m/1/sub.txt") < names.index("m/1/sub/a.bin")
    assert names.index("m/1/Zeta.txt") < names.index("m/1/model.py") < names.index("m/1/é.txt")
    by_name = {entry.arcname: entry for entry in entries}
    assert by_name["m/1/run.sh"].executable and not by_name["m/1/model.py"].executable
    assert by_name["m/1/Zeta.txt"] == ModelEntry(
        "m/1/Zeta.txt", model.path / "1" / "Zeta.txt", False, 5, False
    )
    assert by_name["m/1/sub"] == ModelEntry("m/1/sub", model.path / "1" / "sub", True, 0, False)
    assert by_name["m"].path == model.path
    assert entries == model.entries()


def test_load_model_keeps_the_directory_name_of_a_linked_model(tmp_path: Path, fixture_repos: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "served").symlink_to(fixture_repos / "valid_python" / "scale", target_is_directory=True)

    model = load_model(repo / "served")

    assert model.name == "served"
    assert [p.code for p in model.problems] == ["config-name-mismatch"]
    assert [e.arcname for e in model.entries()][:2] == ["served", "served/1"]


def _missing(tmp_path: Path) -> Path:
    return tmp_path / "model"


def _file(tmp_path: Path) -> Path:
    (tmp_path / "model").write_text("not a directory")
    return tmp_path / "model"


def _below_a_file(tmp_path: Path) -> Path:
    (tmp_path / "repo").write_text("a file where the repository should be")
    return tmp_path / "repo" / "model"


def _link_loop(tmp_path: Path) -> Path:
    (tmp_path / "model").symlink_to(tmp_path / "model")
    return tmp_path / "model"


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (_missing, FileNotFoundError),
        (_file, NotADirectoryError),
        (_below_a_file, NotADirectoryError),
        (_link_loop, OSError),
    ],
    ids=["missing", "not-a-directory", "parent-is-a-file", "symlink-loop"],
)
def test_load_model_raises_for_a_path_it_cannot_read(
    tmp_path: Path, make: Callable[[Path], Path], error: type[Exception]
) -> None:
    path = make(tmp_path)

    with pytest.raises(error):
        load_model(path)
    with pytest.raises(error):
        mme_triton.validate_model(path)


def test_validate_model_raises_permission_error_for_an_unlistable_directory(
    python_model: Path, unprivileged: Callable[[Callable[[], object]], object]
) -> None:
    python_model.chmod(0)
    try:
        with pytest.raises(PermissionError):
            unprivileged(lambda: mme_triton.validate_model(python_model))
    finally:
        python_model.chmod(0o755)


def test_validate_model_reports_an_unlistable_subdirectory(
    python_model: Path, unprivileged: Callable[[Callable[[], object]], object]
) -> None:
    assets = python_model / "1" / "assets"
    assets.mkdir()
    assets.chmod(0)
    try:
        problems = unprivileged(lambda: validate_model(python_model))
    finally:
        assets.chmod(0o755)

    assert isinstance(problems, list)
    assert [(p.code, p.severity, p.path) for p in problems] == [("unreadable", "error", str(assets))]


def test_top_level_validate_model_is_the_model_stage_function() -> None:
    assert mme_triton.validate_model is validate_model


def test_validate_repository_validates_every_model(fixture_repos: Path) -> None:
    results = validate_repository(fixture_repos / "ensemble_batch_size_mismatch")

    assert sorted(results) == ["linear", "pipeline", "scale"]
    assert results["linear"] == [] and results["scale"] == []
    assert [p.code for p in results["pipeline"]] == ["ensemble-batch-size-mismatch"]


def test_validate_repository_includes_linked_model_directories(fixture_repos: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "served").symlink_to(fixture_repos / "valid_python" / "scale", target_is_directory=True)
    (repo / "dangling").symlink_to(tmp_path / "nowhere", target_is_directory=True)

    results = validate_repository(repo)

    assert {name: [p.code for p in problems] for name, problems in results.items()} == {
        "served": ["config-name-mismatch"]
    }


def test_junk_names_are_the_documented_three() -> None:
    assert frozenset({".ipynb_checkpoints", "__pycache__", ".DS_Store"}) == JUNK_NAMES
