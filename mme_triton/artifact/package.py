"""Packaging: a validated model directory → a deterministic ``<name>.tar.gz`` artifact.

The archive has the layout the SageMaker Triton container expects for a multi-model endpoint: the model
directory at the archive root, and for an ensemble its component models beside it (exactly the ones it
names). The same files always give the same bytes: members sorted by name, mtime 0, uid/gid 0, no
user/group names, modes normalised to 0o755 (directories, executables) and 0o644 (other files), a
POSIX pax archive, and a gzip header with no time and no name. Each file is read once, in chunks: the
same pass feeds the tar stream, ISA-L's deflate, the archive's SHA-256 and the content digest.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from mme_triton._sagemaker import ARCHIVE_SUFFIX, target_model_problem
from mme_triton.artifact import _tar
from mme_triton.artifact._files import open_regular_file
from mme_triton.artifact._gzip import GzipWriter, isal_level
from mme_triton.artifact.digest import CHUNK_SIZE, ContentDigest, entry_mode
from mme_triton.errors import ArtifactError, ModelValidationError

if TYPE_CHECKING:
    from mme_triton.model.repository import ModelEntry, TritonModel

__all__ = [
    "DEFAULT_COMPRESSLEVEL",
    "SUFFIX",
    "Artifact",
    "check_artifact_name",
    "package_model",
    "versioned_name",
]

logger = logging.getLogger(__name__)

SUFFIX = ARCHIVE_SUFFIX
# ISA-L level 1: on float weights (incompressible) as small as zlib -6 and ~30x faster.
DEFAULT_COMPRESSLEVEL = 1
_VERSION_HEX = 12

Progress = Callable[[int, int], object]


@dataclass(frozen=True)
class Artifact:
    """A packaged model: the ``.tar.gz`` file and what identifies it.

    Attributes:
        path: where the archive is on disk.
        name: the TargetModel under which a multi-model endpoint serves it, e.g. ``"resnet.tar.gz"``.
        sha256: hex SHA-256 of the archive file.
        size: archive size in bytes.
        content_digest: ``"sha256:<hex>"`` over the model's files (see :mod:`mme_triton.artifact.digest`);
            unlike ``sha256`` it does not change with the compressor.
        model_name: the packaged model (its directory name).
        members: the model directories at the archive root, sorted: the model and, for an ensemble, the
            components it names.
        member_digests: the content digest of each member directory, computed as ``content_digest`` is
            but over that directory's entries alone: a step's digest inside an ensemble's archive equals
            the digest of the step packaged on its own, which tells an ensemble that embeds an older copy
            of a model (see :func:`~mme_triton.artifact.s3.upload_models`).
    """

    path: Path
    name: str
    sha256: str
    size: int
    content_digest: str
    model_name: str
    members: tuple[str, ...]
    member_digests: Mapping[str, str] = field(default_factory=dict, hash=False, kw_only=True)


def check_artifact_name(name: str) -> str:
    """Return ``name`` if the library may create an artifact under it, else raise ``ValueError``.

    The name is the TargetModel the endpoint serves the artifact under, so InvokeEndpoint's rule applies
    (:func:`mme_triton._sagemaker.check_target_model`). On top of it, an artifact name ends with
    ``.tar.gz``, has no ``/`` (it is one object directly under the ModelDataUrl prefix, and one file in
    ``out_dir``) and no whitespace at all: Triton's python backend starts its stub through a shell with
    the model name unquoted, so a model under a name with a space can never load.
    """
    if not isinstance(name, str):
        raise TypeError(f"an artifact name must be a str, not {type(name).__name__}")
    if not name.endswith(SUFFIX) or len(name) == len(SUFFIX):
        raise ValueError(f"artifact name {name!r} must end with {SUFFIX!r} (e.g. 'resnet{SUFFIX}')")
    problem = target_model_problem(name)
    if problem is not None:
        raise ValueError(f"artifact name {name!r} cannot be a TargetModel: {problem}")
    if any(char.isspace() for char in name) or not name.isascii():
        raise ValueError(
            f"artifact name {name!r} must be printable ASCII without whitespace: Triton's python backend "
            "cannot load a model whose name holds a space"
        )
    if "/" in name:
        raise ValueError(f"artifact name {name!r} must not contain '/'")
    return name


def package_model(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    compresslevel: int = DEFAULT_COMPRESSLEVEL,
    progress: Progress | None = None,
    versioned: bool = False,
) -> Artifact:
    """Validate a model directory and package it as ``<out_dir>/<name>.tar.gz``.

    Parameters:
        path: the model directory (``repo/resnet``); an ensemble's components are taken from beside it.
        out_dir: where the archive goes (created if missing); default: the current directory.
        name: the artifact's file name and TargetModel; default ``"<directory>.tar.gz"``. Must end with
            ``.tar.gz`` (see :func:`check_artifact_name`).
        compresslevel: 0..9. 0..3 are ISA-L's levels; 4..9 use ISA-L's strongest, 3. The default, 1, is
            the fastest level that does not expand incompressible float weights. 0 is *not* "store":
            it is ISA-L's quickest level, which makes random float data about 24% larger.
        progress: called as ``progress(bytes_done, bytes_total)`` with the model's file bytes read so far.
            An exception raised by it aborts packaging (nothing is left behind).
        versioned: name the artifact ``"<directory>-<12 hex digits of the content digest>.tar.gz"``, a
            new TargetModel for every change of the model, the safe way to update a live endpoint.

    Returns the :class:`Artifact`. An existing file of the same name in ``out_dir`` is replaced.

    Raises:
        ModelValidationError: validation found an error (nothing is written).
        ArtifactError: a file changed size or became a link while being read.
        ValueError, TypeError: bad ``name``, ``compresslevel``, ``name`` together with ``versioned``, or
            an ``out_dir`` inside the model (the archive would end up in the next archive).
        OSError: reading the model or writing ``out_dir`` failed.

    The archive is written to a hidden temporary file in ``out_dir`` and renamed when complete, so an
    interrupted run never leaves a truncated file under the final name.

    Example::

        artifact = package_model("model_repository/resnet", "build")
        artifact.name, artifact.size  # ('resnet.tar.gz', 97960312)
    """
    level = isal_level(compresslevel)
    _check_name_options(name, versioned)
    from mme_triton.model.repository import load_model

    model = load_model(path)
    if model.errors:
        raise ModelValidationError(str(path), model.problems)
    return _package(model, out_dir, name=name, level=level, progress=progress, versioned=versioned)


def versioned_name(directory: str, content_digest: str) -> str:
    """The name ``versioned=True`` gives a model directory's archive: ``<directory>-<12 hex of the content
    digest>.tar.gz``.

    Example:
        >>> versioned_name("linear", "sha256:" + "ab" * 32)
        'linear-abababababab.tar.gz'
    """
    return f"{directory}-{content_digest.removeprefix('sha256:')[:_VERSION_HEX]}{SUFFIX}"


def _check_name_options(name: str | None, versioned: bool) -> None:
    if name is not None:
        if versioned:
            raise ValueError(
                "give name= or versioned=True, not both: a versioned name comes from the content"
            )
        check_artifact_name(name)


def _package(
    model: TritonModel,
    out_dir: str | os.PathLike[str] | None,
    *,
    name: str | None,
    level: int,
    progress: Progress | None,
    versioned: bool,
) -> Artifact:
    """Package a loaded model that has no errors (the checks of :func:`package_model` are done)."""
    directory = model.path.name
    if versioned:
        # checked now, with a digest-sized stand-in, so a bad directory name fails before any work
        check_artifact_name(f"{directory}-{'0' * _VERSION_HEX}{SUFFIX}")
    elif name is None:
        try:
            name = check_artifact_name(directory + SUFFIX)
        except ValueError as exc:
            raise ValueError(f"{exc}; the directory name cannot be the TargetModel, pass name=") from exc

    target_dir = Path.cwd() if out_dir is None else Path(out_dir)
    resolved = target_dir.resolve()
    for member in model.members:
        if resolved.is_relative_to(member.resolve()):
            raise ValueError(f"out_dir {target_dir} is inside the model directory {member}; choose another")
    target_dir.mkdir(parents=True, exist_ok=True)
    entries = model.entries()
    members = tuple(member.name for member in model.members)

    # short enough for a 255-byte file name limit even when the TargetModel is long
    temporary = target_dir / f".{(name or directory + SUFFIX)[:200]}.tmp-{secrets.token_hex(6)}"
    try:
        with open(temporary, "xb") as file:
            written = _write_archive(entries, file, level=level, progress=progress)
            file.flush()
            os.fsync(file.fileno())
        if versioned:
            name = versioned_name(directory, written.content_digest)
        assert name is not None
        final = target_dir / name
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    logger.info(
        "packaged %s (%d entries, %d bytes read) into %s: %d bytes, %s",
        model.path,
        len(entries),
        written.bytes_read,
        final,
        written.size,
        written.content_digest,
    )
    return Artifact(
        path=final,
        name=name,
        sha256=written.sha256,
        size=written.size,
        content_digest=written.content_digest,
        model_name=directory,
        members=members,
        member_digests=written.member_digests,
    )


@dataclass(frozen=True)
class _Written:
    sha256: str
    size: int
    content_digest: str
    bytes_read: int
    member_digests: dict[str, str]


def _write_archive(
    entries: list[ModelEntry], file: BinaryIO, *, level: int, progress: Progress | None
) -> _Written:
    digest = ContentDigest()
    per_member: dict[str, ContentDigest] = {}
    total = sum(entry.size for entry in entries if not entry.is_dir)
    done = 0
    if progress is not None:
        progress(0, total)
    with GzipWriter(file, level=level) as gzip:
        # A chunk handed to the deflate thread is reused only after max_pending later writes.
        ring = [memoryview(bytearray(CHUNK_SIZE)) for _ in range(gzip.max_pending + 1)]
        turn = 0
        for entry in entries:
            mode = entry_mode(entry)
            member = per_member.setdefault(entry.arcname.split("/", 1)[0], ContentDigest())
            if entry.is_dir:
                gzip.write(_tar.directory_header(entry.arcname, mode=mode))
                digest.add_directory(entry.arcname, mode)
                member.add_directory(entry.arcname, mode)
                continue
            source, size = open_regular_file(Path(entry.path))
            with source:
                gzip.write(_tar.file_header(entry.arcname, size=size, mode=mode))
                sha = hashlib.sha256()
                remaining = size
                while remaining:
                    view = ring[turn]
                    turn = (turn + 1) % len(ring)
                    n = _read_full(source, view[: min(CHUNK_SIZE, remaining)])
                    if n == 0:
                        raise ArtifactError(
                            f"{entry.path}: the file shrank while it was being packaged", path=str(entry.path)
                        )
                    chunk = view[:n]
                    sha.update(chunk)
                    gzip.write(chunk)
                    remaining -= n
                    done += n
                    if progress is not None:
                        progress(done, total)
                if source.read(1):
                    raise ArtifactError(
                        f"{entry.path}: the file grew while it was being packaged", path=str(entry.path)
                    )
            gzip.write(_tar.padding(size))
            digest.add_file(entry.arcname, mode, sha.hexdigest())
            member.add_file(entry.arcname, mode, sha.hexdigest())
        gzip.write(_tar.end_of_archive(gzip.uncompressed_size))
        gzip.close()
    return _Written(
        sha256=gzip.sha256.hexdigest(),
        size=gzip.compressed_size,
        content_digest=digest.hexdigest(),
        bytes_read=done,
        member_digests={name: member.hexdigest() for name, member in per_member.items()},
    )


def _read_full(source: io.FileIO, into: memoryview) -> int:
    # A read may return less than asked for; filling the chunk keeps the deflate input split, and so
    # the archive bytes, the same from run to run.
    filled = 0
    while filled < len(into):
        n = source.readinto(into[filled:])
        if not n:
            break
        filled += n
    return filled
