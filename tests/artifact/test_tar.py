"""The tar header encoder, read back by tarfile: sizes and names that need pax extended headers."""

from __future__ import annotations

import io
import tarfile

import pytest

from mme_triton.artifact import _tar


def read_header(block: bytes) -> tarfile.TarInfo:
    # Stream mode reads the header without needing the member's data.
    with tarfile.open(fileobj=io.BytesIO(block + bytes(1024)), mode="r|") as archive:
        info = archive.next()
    assert info is not None
    return info


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("model/1/model.onnx", 123),
        ("model/" + "x" * 200, 1),
        ("model/\u6a21\u578b.bin", 7),
        ("model/1/weights.bin", 9 << 30),
        ("model/1/weights.bin", 0o77777777777),
    ],
    ids=["ustar", "long-name", "non-ascii", "9-GiB", "largest-ustar-size"],
)
def test_file_header_round_trips_through_tarfile(name: str, size: int) -> None:
    info = read_header(_tar.file_header(name, size=size, mode=0o644))

    assert (info.name, info.size, info.mode, info.mtime) == (name, size, 0o644, 0)
    assert info.isfile()


def test_file_header_uses_pax_only_when_ustar_cannot_hold_the_value() -> None:
    assert len(_tar.file_header("model/1/model.onnx", size=0o77777777777, mode=0o644)) == _tar.BLOCK_SIZE
    assert len(_tar.file_header("model/1/model.onnx", size=8 << 30, mode=0o644)) > _tar.BLOCK_SIZE


def test_directory_header_is_a_directory_with_a_trailing_slash() -> None:
    block = _tar.directory_header("model/1", mode=0o755)

    assert block[:8] == b"model/1/"
    info = read_header(block)
    assert info.isdir()
    assert (info.name, info.mode) == ("model/1", 0o755)


@pytest.mark.parametrize("written", [0, 512, 9728, 10240, 123 * 512], ids=str)
def test_end_of_archive_fills_the_last_record(written: int) -> None:
    end = _tar.end_of_archive(written)

    assert len(end) >= 1024
    assert (written + len(end)) % 10240 == 0
    assert end == bytes(len(end))
