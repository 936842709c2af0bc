"""Safe extraction of model archives: what the embedded stack accepts and what it refuses."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from mme_triton.local.route.extract import ExtractLimits, ModelArchiveError, directory_size, safe_extract

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
    ],
    ids=["empty", "only-a-file"],
)
def test_safe_extract_refuses_unexpected_layouts(
    tmp_path: Path, build: Callable[[tarfile.TarFile], None], reason: str
) -> None:
    archive = _archive(tmp_path / "odd.tar.gz", build)

    with pytest.raises(ModelArchiveError, match=reason):
        safe_extract(archive, tmp_path / "out")


@pytest.mark.parametrize(
    ("configs", "served"),
    [((CONFIG, CONFIG, CONFIG), None), ((ENSEMBLE_CONFIG, CONFIG, ENSEMBLE_CONFIG), "ensemble")],
    ids=["no-ensemble", "two-ensembles"],
)
def test_safe_extract_several_models_serves_what_the_front_end_picks(
    tmp_path: Path, configs: tuple[bytes, ...], served: str | None
) -> None:
    """SageMaker's front-end reads the directory and loads the last model directory it lists (the last
    ensemble, when there are ensembles); the stack's extraction keeps the others, marked unserved."""
    names = ("a", "b", "c")

    def build(tar: tarfile.TarFile) -> None:
        for name, config in zip(names, configs, strict=True):
            _file(tar, f"{name}/config.pbtxt", config)

    out = tmp_path / "out"
    extracted = safe_extract(_archive(tmp_path / "many.tar.gz", build), out)

    listed = [entry.name for entry in os.scandir(out) if entry.is_dir()]
    if served is None:
        expected = listed[-1]
    else:
        expected = [name for name in listed if configs[names.index(name)] == ENSEMBLE_CONFIG][-1]
    assert extracted.model_dirs[0] == expected
    assert sorted(extracted.model_dirs) == list(names)
    others = [n for n in names if n != expected]
    wanted = others if served is None else [n for n in others if configs[names.index(n)] == ENSEMBLE_CONFIG]
    assert sorted(extracted.unserved) == wanted


def test_safe_extract_refuses_what_is_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not a tar file at all")

    with pytest.raises(ModelArchiveError, match="cannot read"):
        safe_extract(junk, tmp_path / "out")


# --- limits ---------------------------------------------------------------------------------------------


def gzip_bomb(unpacked: int) -> bytes:
    """A tar.gz of one model file of ``unpacked`` zero bytes, a few KB per GiB on disk.

    gzip members may follow one another in a file: one compressed MiB of zeros, repeated, decompresses
    to a continuous stream, so the bomb is built without compressing ``unpacked`` bytes.
    """
    assert unpacked % (1 << 20) == 0
    header = tarfile.TarInfo("m/1/model.onnx")
    header.size = unpacked
    mib_of_zeros = gzip.compress(b"\0" * (1 << 20), compresslevel=9)
    config = tarfile.TarInfo("m/config.pbtxt")
    return (
        gzip.compress(config.tobuf(format=tarfile.GNU_FORMAT) + header.tobuf(format=tarfile.GNU_FORMAT))
        + mib_of_zeros * (unpacked >> 20)
        + gzip.compress(b"\0" * 1024)
    )


def many_members(count: int) -> bytes:
    """A tar.gz of ``count`` empty files: one header block each, from one template with its name and
    checksum rewritten (tarfile's ``tobuf`` per member takes seconds at this count)."""
    template = bytearray(tarfile.TarInfo("m/f0000000").tobuf(format=tarfile.GNU_FORMAT))
    template[148:156] = b" " * 8  # the checksum is counted with its own field as blanks
    base = sum(template) - sum(template[0:10])
    blocks = []
    for index in range(count):
        name = f"m/f{index:07d}".encode()
        block = template[:]
        block[0:10] = name
        block[148:155] = f"{base + sum(name):06o}\0".encode()
        blocks.append(bytes(block))
    blocks.append(b"\0" * 1024)
    return gzip.compress(b"".join(blocks), compresslevel=1)


def test_safe_extract_refuses_a_gzip_bomb_early_and_leaves_nothing(tmp_path: Path) -> None:
    bomb = gzip_bomb(2 << 30)  # 2 GiB of zeros in about 2 MB
    out = tmp_path / "out"

    with pytest.raises(ModelArchiveError, match="decompression bomb") as caught:
        safe_extract(io.BytesIO(bomb), out)

    assert len(bomb) < 4 << 20
    assert "expands more than 200 times" in str(caught.value)
    assert not out.exists()


def test_safe_extract_refuses_an_archive_of_100000_members(tmp_path: Path) -> None:
    archive = many_members(100_000)
    out = tmp_path / "out"

    with pytest.raises(ModelArchiveError, match="more than 10000 entries"):
        safe_extract(io.BytesIO(archive), out)

    assert not out.exists()


def test_safe_extract_refuses_more_bytes_than_the_limit_before_writing_them(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _single_model(tar)
        _file(tar, "linear/1/weights.bin", os.urandom(300_000))

    archive = _archive(tmp_path / "big.tar.gz", build)
    limits = ExtractLimits(max_bytes=200_000, max_bytes_source="the endpoint's VolumeSizeInGB (1)")

    with pytest.raises(ModelArchiveError, match=r"unpacks to more than 195\.3 KiB, the endpoint's") as caught:
        safe_extract(archive, tmp_path / "out", limits=limits)

    assert caught.value.member == "linear/1/weights.bin"
    assert not (tmp_path / "out").exists()


def test_safe_extract_keeps_free_space_on_the_scratch_disk(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "linear.tar.gz", _single_model)
    free = shutil.disk_usage(tmp_path).free

    with pytest.raises(ModelArchiveError, match="the scratch disk can take"):
        safe_extract(archive, tmp_path / "out", limits=ExtractLimits(disk_reserve=free))


@pytest.mark.parametrize("mode", ["w", "w:bz2", "w:xz", "w:gz"], ids=["tar", "bz2", "xz", "gzip"])
def test_safe_extract_reads_each_compression_from_a_stream(tmp_path: Path, mode: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
        _single_model(tar)

    class Unseekable(io.RawIOBase):  # what an S3 body offers: read() and nothing else
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            return self._data.read(size)

    extracted = safe_extract(Unseekable(buffer.getvalue()), tmp_path / "out")

    assert extracted.model_dirs == ("linear",)
    assert (tmp_path / "out" / "linear" / "1" / "model.onnx").read_bytes() == b"0123456789"


def test_safe_extract_writes_plain_modes_whatever_the_archive_says(tmp_path: Path) -> None:
    def build(tar: tarfile.TarFile) -> None:
        _dir(tar, "linear")
        info = tarfile.TarInfo("linear/run.sh")
        info.size, info.mode = 2, 0o4777  # set-uid, world-writable
        tar.addfile(info, io.BytesIO(b"hi"))
        _file(tar, "linear/config.pbtxt", CONFIG)

    safe_extract(_archive(tmp_path / "modes.tar.gz", build), tmp_path / "out")

    assert (tmp_path / "out" / "linear" / "run.sh").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "out" / "linear" / "config.pbtxt").stat().st_mode & 0o7777 == 0o644


def test_safe_extract_needs_an_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")

    with pytest.raises(ValueError, match="empty destination"):
        safe_extract(_archive(tmp_path / "linear.tar.gz", _single_model), tmp_path / "out")

    assert (tmp_path / "out" / "keep").read_text() == "mine"


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_ratio": 0.5}, "max_ratio must be > 1, got 0.5"),
        ({"max_ratio": 1}, "max_ratio must be > 1, got 1"),
        ({"max_ratio": float("nan")}, "max_ratio must be > 1, got nan"),
        ({"max_bytes": 0}, "extraction limits must be > 0"),
        ({"max_members": -1}, "extraction limits must be > 0"),
    ],
    ids=["half", "one", "nan", "bytes", "members"],
)
def test_extract_limits_refuse_what_the_stack_refuses(limits: dict[str, float], message: str) -> None:
    # the stack's rule (check_limits): a ratio of 1 or less would refuse every archive
    with pytest.raises(ValueError, match=message):
        ExtractLimits(**limits)  # type: ignore[arg-type]
