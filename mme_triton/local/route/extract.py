"""Extracting a model archive safely: members checked and limits kept before their bytes are written.

SageMaker's platform extracts ``<ModelDataUrl><TargetModel>`` under ``/opt/ml/models/<hash>/model`` before
it asks the container to load it. :func:`safe_extract` does that for the embedded stack. It reads the
archive as a stream (straight from S3, no copy of the archive on disk) and refuses, before the bytes reach
the disk:

- what could escape the destination: absolute paths, ``..``, links, devices, FIFOs;
- more unpacked bytes than :attr:`ExtractLimits.max_bytes` (the endpoint's ``VolumeSizeInGB`` or
  :data:`~mme_triton.local.route.limits.DEFAULT_MAX_UNPACKED_BYTES`), or than the scratch disk can take while
  keeping :data:`~mme_triton.local.route.limits.DISK_RESERVE_BYTES` free;
- more entries than :attr:`ExtractLimits.max_members`;
- an archive that expands more than :attr:`ExtractLimits.max_ratio` times (a decompression bomb), checked
  while it decompresses;
- an archive that holds no model directory.

An archive with several model directories is extracted as SageMaker's platform extracts it, and the
SageMaker front-end picks the model it loads from it (:attr:`ExtractedModel.unserved` says which it
leaves). A refused archive leaves nothing behind.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import re
import secrets
import shutil
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from mme_triton._sagemaker import ENSEMBLE_CONFIG_PATTERN
from mme_triton.errors import LocalStackError
from mme_triton.local.route.limits import (
    DEFAULT_MAX_COMPRESSION_RATIO,
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_UNPACKED_BYTES,
    DISK_RESERVE_BYTES,
    check_compression_ratio,
    human_size,
)

__all__ = [
    "ExtractLimits",
    "ExtractedModel",
    "ModelArchiveError",
    "directory_size",
    "front_end_choice",
    "safe_extract",
]

_CHUNK = 1024 * 1024
# Small read-ahead, so that the bytes counted as read stay close to what the decompressor has used.
_READ_AHEAD = 64 * 1024


class ModelArchiveError(LocalStackError):
    """A model archive was refused: an unsafe member (absolute path, ``..``, link, device), a limit it
    breaks, or a layout that is not one model directory (or an ensemble with its steps); ``member`` names
    the entry when one is to blame."""

    def __init__(self, message: str, *, member: str | None = None) -> None:
        self.member = member
        super().__init__(message)


@dataclass(frozen=True)
class ExtractLimits:
    """What one archive may unpack to (see :mod:`mme_triton.local.route.limits` for the defaults)."""

    max_bytes: int = DEFAULT_MAX_UNPACKED_BYTES
    """Bytes of regular files, in total."""
    max_members: int = DEFAULT_MAX_MEMBERS
    """Entries: files and directories."""
    max_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO
    """Unpacked bytes per byte of the archive read so far."""
    ratio_after: int = 16 * 1024 * 1024
    """The ratio is checked once this many bytes are unpacked (small text files compress very well)."""
    disk_reserve: int = DISK_RESERVE_BYTES
    """Bytes the destination's disk keeps free, whatever ``max_bytes`` allows."""
    max_bytes_source: str = "the stack's limit (max_unpacked_bytes)"
    """Where ``max_bytes`` comes from, for the message of a refusal."""

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.max_members <= 0:
            raise ValueError("extraction limits must be > 0")
        check_compression_ratio(self.max_ratio, "max_ratio")  # the stack's own rule for the ratio


@dataclass(frozen=True)
class ExtractedModel:
    """An archive extracted by :func:`safe_extract`."""

    path: Path
    """The directory to load (``POST /models`` url): it holds the model directory or directories."""
    model_dirs: tuple[str, ...]
    """The model directories found in it, the one served first (the ensemble, if any)."""
    size: int
    """Bytes of regular files extracted."""
    unserved: tuple[str, ...] = ()
    """Directories the SageMaker front-end does not load: in an archive of several model directories
    without exactly one ensemble, all but the one it picks (see :func:`front_end_choice`)."""


class _Counting(io.RawIOBase):
    """A readable stream counting the bytes read from ``source`` (a file or a botocore body)."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        size = len(data)
        buffer[:size] = data
        self.count += size
        return size


def _check_member(member: tarfile.TarInfo) -> PurePosixPath | None:
    """The member's normalised relative path, ``None`` for the archive root; raise if it is unsafe."""
    name = member.name
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise ModelArchiveError(f"refusing archive member with an absolute path: {name!r}", member=name)
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ModelArchiveError(
            f"refusing archive member that leaves the archive ('..'): {name!r}", member=name
        )
    if member.issym() or member.islnk():
        raise ModelArchiveError(
            f"refusing archive member that is a link: {name!r} -> {member.linkname!r}", member=name
        )
    if member.ischr() or member.isblk():
        raise ModelArchiveError(f"refusing archive member that is a device file: {name!r}", member=name)
    if not (member.isreg() or member.isdir()):
        raise ModelArchiveError(
            f"refusing archive member that is neither a file nor a directory: {name!r}", member=name
        )
    return PurePosixPath(*parts) if parts else None


def front_end_choice(root: Path) -> str | None:
    """The model directory of an extracted archive that the SageMaker front-end loads when the archive has
    no config.pbtxt at its root: the last directory it lists whose config says ``platform: "ensemble"``,
    else the last directory it lists (``SageMakerMMELoadModel`` in ``src/sagemaker_server.cc`` reads the
    directory with ``readdir``; ``os.scandir`` lists in the same order on the same file system)."""
    last: str | None = None
    ensemble: str | None = None
    with os.scandir(root) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            last = entry.name
            if _ensembles(root, [entry.name]):
                ensemble = entry.name
    return ensemble or last


def _ensembles(root: Path, dirs: Iterable[str]) -> list[str]:
    found = []
    for name in dirs:
        config = root / name / "config.pbtxt"
        with contextlib.suppress(OSError):
            if ENSEMBLE_CONFIG_PATTERN.search(config.read_text(errors="replace")):
                found.append(name)
    return found


def _decompressed(raw: io.BufferedReader) -> Any:
    """The tar stream inside ``raw``: gzip (several members too), bzip2, xz, or a plain tar."""
    magic = raw.peek(6)[:6]
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


class _Extraction:
    """One streaming extraction into a staging directory, with its running totals."""

    def __init__(self, staging: Path, limits: ExtractLimits, counter: _Counting) -> None:
        self.staging = staging
        self.limits = limits
        self.counter = counter
        self.members = 0
        self.declared = 0
        self.written = 0
        free = shutil.disk_usage(staging).free
        self.disk_budget = max(0, free - limits.disk_reserve)

    def add(
        self, tar: tarfile.TarFile, member: tarfile.TarInfo
    ) -> tuple[tarfile.TarInfo, PurePosixPath] | None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ModelArchiveError(
                f"the archive has more than {self.limits.max_members} entries, the stack's limit "
                "(max_archive_members); a model directory needs far fewer",
                member=member.name,
            )
        path = _check_member(member)
        if path is None:
            return None
        target = self.staging.joinpath(*path.parts)
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            return member, path
        self.declared += member.size
        self._check_size(self.declared, member.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        source = tar.extractfile(member)
        if source is None:  # pragma: no cover - regular members always have data
            raise ModelArchiveError(f"cannot read archive member {path}", member=member.name)
        mode = 0o755 if member.mode & 0o111 else 0o644
        with source, open(target, "wb") as out:
            os.fchmod(out.fileno(), mode)
            while chunk := source.read(_CHUNK):
                self.written += len(chunk)
                self._check_size(self.written, member.name)
                self._check_ratio(member.name)
                out.write(chunk)
        return member, path

    def _check_size(self, size: int, member: str) -> None:
        limits = self.limits
        if size > limits.max_bytes:
            raise ModelArchiveError(
                f"the archive unpacks to more than {human_size(limits.max_bytes)}, {limits.max_bytes_source}",
                member=member,
            )
        if size > self.disk_budget:
            raise ModelArchiveError(
                f"the archive unpacks to more than the {human_size(self.disk_budget)} the scratch disk can "
                f"take while keeping {human_size(limits.disk_reserve)} free",
                member=member,
            )

    def _check_ratio(self, member: str) -> None:
        limits = self.limits
        read = max(1, self.counter.count)
        if self.written > limits.ratio_after and self.written / read > limits.max_ratio:
            raise ModelArchiveError(
                f"the archive expands more than {limits.max_ratio:g} times ({human_size(read)} read became "
                f"{human_size(self.written)}): refusing what looks like a decompression bomb (the stack's "
                "max_compression_ratio)",
                member=member,
            )


def safe_extract(
    archive: str | Path | IO[bytes] | Any,
    destination: str | Path,
    *,
    limits: ExtractLimits | None = None,
) -> ExtractedModel:
    """Extract a model archive (``.tar.gz``, ``.tar.bz2``, ``.tar.xz`` or a plain tar) into ``destination``.

    The archive is read once, as a stream. Each member is checked before its bytes are written (no
    absolute paths, no ``..``, no symbolic or hard links, no device files or FIFOs: regular files and
    directories only, written with modes 0o644/0o755 and no owner), and ``limits`` are kept while it
    decompresses. The archive must hold a model directory; a model whose ``config.pbtxt`` sits at the
    archive root is moved into a ``model/`` directory. With several directories, the one served is the
    ensemble, or the one the SageMaker front-end picks (:func:`front_end_choice`), the others
    ``unserved``.

    Parameters:
        archive: a path, or a binary stream positioned at the archive's start (a file, a botocore
            ``StreamingBody``).
        destination: the directory to extract into (created; must not hold anything yet).
        limits: what the archive may unpack to; default :class:`ExtractLimits()`.

    Returns:
        An :class:`ExtractedModel`; its ``path`` is ``destination``.

    Raises:
        ModelArchiveError: an unsafe member (``member`` names it), a limit broken, an unreadable archive
            or no model directory. Nothing is left in ``destination`` then.

    Example::

        extracted = safe_extract("linear.tar.gz", "/tmp/linear")
        extracted.model_dirs  # ('linear',)
    """
    destination = Path(destination)
    limits = limits or ExtractLimits()
    created = not destination.exists()
    destination.mkdir(parents=True, exist_ok=True)
    if any(destination.iterdir()):
        raise ValueError(f"safe_extract needs an empty destination, {destination} is not")
    staging = destination / f".extracting-{secrets.token_hex(8)}"
    staging.mkdir()
    try:
        with contextlib.ExitStack() as stack:
            source: Any = archive
            if isinstance(archive, (str, Path)):
                try:
                    source = stack.enter_context(open(archive, "rb"))
                except OSError as exc:
                    raise ModelArchiveError(f"cannot read the model archive: {exc}") from exc
            counter = _Counting(source)
            extraction = _Extraction(staging, limits, counter)
            try:
                stream = _decompressed(io.BufferedReader(counter, buffer_size=_READ_AHEAD))
                tar = stack.enter_context(tarfile.open(fileobj=stream, mode="r|"))
                entries = [found for member in tar if (found := extraction.add(tar, member)) is not None]
            except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
                raise ModelArchiveError(f"cannot read the model archive: {exc}") from exc
        return _finish(destination, staging, entries, extraction.written)
    except BaseException:
        if created:
            shutil.rmtree(destination, ignore_errors=True)
        else:
            for child in list(destination.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise


def _finish(
    destination: Path, staging: Path, entries: list[tuple[tarfile.TarInfo, PurePosixPath]], size: int
) -> ExtractedModel:
    top_files = {p.parts[0] for m, p in entries if len(p.parts) == 1 and m.isreg()}
    top_dirs = sorted({p.parts[0] for m, p in entries if len(p.parts) > 1 or m.isdir()})
    if "config.pbtxt" in top_files:
        staging.rename(destination / "model")
        return ExtractedModel(destination, ("model",), size)
    if not top_dirs:
        raise ModelArchiveError("the model archive holds no model directory")
    for name in sorted(top_files | set(top_dirs)):
        (staging / name).rename(destination / name)
    staging.rmdir()
    if len(top_dirs) == 1:
        return ExtractedModel(destination, (top_dirs[0],), size)
    ensembles = _ensembles(destination, top_dirs)
    if len(ensembles) == 1:
        rest = tuple(d for d in top_dirs if d != ensembles[0])
        return ExtractedModel(destination, (ensembles[0], *rest), size)
    # No single ensemble: the front-end loads one directory and leaves the others (the models a python
    # model calls through BLS among them), as it does on SageMaker.
    chosen = front_end_choice(destination) or top_dirs[-1]
    rest = tuple(d for d in top_dirs if d != chosen)
    unserved = rest if not ensembles else tuple(d for d in ensembles if d != chosen)
    return ExtractedModel(destination, (chosen, *rest), size, unserved=unserved)


def directory_size(path: str | Path) -> int:
    """Total bytes of the regular files under ``path`` (links are not followed)."""
    total = 0
    for item in Path(path).rglob("*"):
        with contextlib.suppress(OSError):
            if item.is_file() and not item.is_symlink():
                total += item.stat().st_size
    return total
