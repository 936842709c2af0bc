"""Safe extraction of model archives: what the embedded stack accepts and what it refuses."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from mme_triton.local.extract import ModelArchiveError, directory_size, safe_extract

CONFIG = b'name: "linear"\nbackend: "onnxruntime"\nmax_batch_size: 0\n'
ENSEMBLE_CONFIG = b'name: "pipeline"\nplatform: "ensemble"\nmax_batch_size: 0\n'


def _file(tar: tarfile.TarFile, name: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def _special(tar: tarfile.TarFile, name: str, kind: bytes, linkname: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    tar.addfile(info)


def _archive(path: Path, build: Callable[[tarfile.TarFile], None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        build(tar)
    return path


def _single_model(tar: tarfile.TarFile) -> None:
    _dir(tar, "linear")
    _file(tar, "linear/config.pbtxt", CONFIG)
    _dir(tar, "linear/1")
    _file(tar, "linear/1/model.onnx", b"0123456789")


def test_safe_extract_single_model_directory(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "linear.tar.gz", _single_model)

    extracted = safe_extract(archive, tmp_path / "out")

    assert extracted.model_dirs == ("linear",)
    assert (tmp_path / "out" / "linear" / "1" / "model.onnx").read_bytes() == b"0123456789"
    assert extracted.size == len(CONFIG) + 10 == directory_size(tmp_path / "out")


def test_safe_extract_accepts_a_file_object(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "linear.tar.gz", _single_model)

    with archive.open("rb") as fh:
        extracted = safe_extract(fh, tmp_path / "out")

    assert extracted.model_dirs == ("linear",)


def test_safe_extract_ensemble_comes_first(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _file(tar, "./preprocess/config.pbtxt", b'name: "preprocess"\nbackend: "python"\n')
        _file(tar, "./preprocess/1/model.py", b"")
        _file(tar, "./pipeline/config.pbtxt", ENSEMBLE_CONFIG)
        _dir(tar, "./pipeline/1")
        _file(tar, "./linear/config.pbtxt", CONFIG)

    extracted = safe_extract(_archive(tmp_path / "p.tar.gz", build), tmp_path / "out")

    assert extracted.model_dirs == ("pipeline", "linear", "preprocess")
    assert (tmp_path / "out" / "preprocess" / "1" / "model.py").exists()


def test_safe_extract_moves_a_root_level_model_into_a_directory(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _file(tar, "config.pbtxt", CONFIG)
        _file(tar, "1/model.onnx", b"w")

    extracted = safe_extract(_archive(tmp_path / "root.tar.gz", build), tmp_path / "out")

    assert extracted.model_dirs == ("model",)
    assert (tmp_path / "out" / "model" / "config.pbtxt").read_bytes() == CONFIG
    assert (tmp_path / "out" / "model" / "1" / "model.onnx").exists()


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda tar: _file(tar, "/etc/evil", b"x"), "absolute path"),
        (lambda tar: _file(tar, "linear/../../evil", b"x"), "'..'"),
        (lambda tar: _file(tar, "../evil", b"x"), "'..'"),
        (lambda tar: _special(tar, "linear/1/model.onnx", tarfile.SYMTYPE, "/etc/passwd"), "link"),
        (lambda tar: _special(tar, "linear/1/rel", tarfile.SYMTYPE, "../../x"), "link"),
        (lambda tar: _special(tar, "linear/1/hard", tarfile.LNKTYPE, "linear/config.pbtxt"), "link"),
        (lambda tar: _special(tar, "linear/1/tty", tarfile.CHRTYPE), "device"),
        (lambda tar: _special(tar, "linear/1/disk", tarfile.BLKTYPE), "device"),
        (lambda tar: _special(tar, "linear/1/pipe", tarfile.FIFOTYPE), "neither a file nor a directory"),
    ],
    ids=[
        "absolute",
        "dotdot-inside",
        "dotdot-leading",
        "symlink-absolute",
        "symlink-relative",
        "hardlink",
        "char-device",
        "block-device",
        "fifo",
    ],
)
def test_safe_extract_refuses_unsafe_members_and_writes_nothing(
    tmp_path: Path, build: Callable[[tarfile.TarFile], None], reason: str
) -> None:
    def archive_with_bad_member(tar: tarfile.TarFile) -> None:
        _single_model(tar)
        build(tar)

    archive = _archive(tmp_path / "evil.tar.gz", archive_with_bad_member)
    out = tmp_path / "sandbox" / "out"

    with pytest.raises(ModelArchiveError, match=reason) as caught:
        safe_extract(archive, out)

    assert caught.value.member is not None
    assert not out.exists() or not any(out.iterdir())
    assert not (tmp_path / "evil").exists() and not (tmp_path / "sandbox" / "evil").exists()


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda tar: None, "no model directory"),
        (lambda tar: _file(tar, "README.md", b"hi"), "no model directory"),
        (
            lambda tar: (_file(tar, "a/config.pbtxt", CONFIG), _file(tar, "b/config.pbtxt", CONFIG)),
            "none is an ensemble",
        ),
        (
            lambda tar: (
                _file(tar, "a/config.pbtxt", ENSEMBLE_CONFIG),
                _file(tar, "b/config.pbtxt", ENSEMBLE_CONFIG),
            ),
            "2 are ensembles",
        ),
    ],
    ids=["empty", "only-a-file", "two-models-no-ensemble", "two-ensembles"],
)
def test_safe_extract_refuses_unexpected_layouts(
    tmp_path: Path, build: Callable[[tarfile.TarFile], None], reason: str
) -> None:
    archive = _archive(tmp_path / "odd.tar.gz", build)

    with pytest.raises(ModelArchiveError, match=reason):
        safe_extract(archive, tmp_path / "out")


def test_safe_extract_refuses_what_is_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not a tar file at all")

    with pytest.raises(ModelArchiveError, match="cannot read"):
        safe_extract(junk, tmp_path / "out")
