"""content_digest: what changes it and what does not, and that packaging computes the same value."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mme_triton.artifact.digest import content_digest
from mme_triton.artifact.package import package_model
from mme_triton.model.repository import load_model


def test_content_digest_standalone_equals_the_packaging_value(repo: Path, out_dir: Path) -> None:
    artifact = package_model(repo / "pipeline", out_dir)

    assert content_digest(repo / "pipeline") == artifact.content_digest
    assert content_digest(str(repo / "pipeline")) == artifact.content_digest
    assert content_digest(load_model(repo / "pipeline")) == artifact.content_digest


def test_content_digest_does_not_depend_on_the_compresslevel(repo: Path, tmp_path: Path) -> None:
    fast = package_model(repo / "scale", tmp_path / "fast", compresslevel=0)
    best = package_model(repo / "scale", tmp_path / "best", compresslevel=3)

    assert fast.sha256 != best.sha256
    assert fast.content_digest == best.content_digest


def _touch(model: Path) -> None:
    for path in model.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))


def _add_junk(model: Path) -> None:
    (model / "1" / "__pycache__").mkdir()
    (model / "1" / "__pycache__" / "model.cpython-312.pyc").write_bytes(b"\x01")


def _read_only(model: Path) -> None:
    (model / "config.pbtxt").chmod(0o400)


@pytest.mark.parametrize(
    "change",
    [_touch, _add_junk, _read_only],
    ids=["mtimes", "junk-added", "write-bit-removed"],
)
def test_content_digest_ignores_what_the_archive_does_not_keep(
    repo: Path, change: Callable[[Path], None]
) -> None:
    before = content_digest(repo / "scale")

    change(repo / "scale")

    assert content_digest(repo / "scale") == before


def _edit_file(model: Path) -> None:
    (model / "1" / "data" / "nested" / "vocab.txt").write_text("a\nb\nX\n")


def _rename_file(model: Path) -> None:
    (model / "1" / "data" / "nested" / "vocab.txt").rename(model / "1" / "data" / "nested" / "words.txt")


def _make_executable(model: Path) -> None:
    (model / "1" / "model.py").chmod(0o755)


def _add_empty_directory(model: Path) -> None:
    (model / "1" / "data" / "more").mkdir()


def _move_file_to_other_directory(model: Path) -> None:
    shutil.move(model / "1" / "data" / "empty.bin", model / "1" / "data" / "nested" / "empty.bin")


@pytest.mark.parametrize(
    "change",
    [_edit_file, _rename_file, _make_executable, _add_empty_directory, _move_file_to_other_directory],
    ids=["content-edited", "file-renamed", "made-executable", "empty-directory-added", "file-moved"],
)
def test_content_digest_changes_with_what_the_archive_keeps(
    repo: Path, change: Callable[[Path], None]
) -> None:
    before = content_digest(repo / "scale")

    change(repo / "scale")

    assert content_digest(repo / "scale") != before


def test_content_digest_covers_the_ensemble_components(repo: Path) -> None:
    before = content_digest(repo / "pipeline")

    (repo / "offset" / "1" / "model.py").write_text("# changed\n")

    assert content_digest(repo / "pipeline") != before
