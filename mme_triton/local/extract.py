"""Extracting a model archive safely: every member checked before a byte is written.

SageMaker's platform extracts ``<ModelDataUrl><TargetModel>`` under ``/opt/ml/models/<hash>/model`` before
it asks the container to load it. :func:`safe_extract` does that for the embedded stack and refuses what
could escape the destination (absolute paths, ``..``, links, devices) or is not a model layout.
"""

from __future__ import annotations

import contextlib
import copy
import re
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from mme_triton._sagemaker import ENSEMBLE_CONFIG_PATTERN
from mme_triton.errors import LocalStackError

__all__ = ["ExtractedModel", "ModelArchiveError", "directory_size", "safe_extract"]



class ModelArchiveError(LocalStackError):
    """A model archive was refused: an unsafe member (absolute path, ``..``, link, device) or a layout
    that is not one model directory (or an ensemble with its steps); ``member`` names the entry."""

    def __init__(self, message: str, *, member: str | None = None) -> None:
        self.member = member
        super().__init__(message)


@dataclass(frozen=True)
class ExtractedModel:
    """An archive extracted by :func:`safe_extract`."""

    path: Path
    """The directory to load (``POST /models`` url): it holds the model directory or directories."""
    model_dirs: tuple[str, ...]
    """The model directories found in it, the one served first (the ensemble, if any)."""
    size: int
    """Bytes of regular files extracted."""


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


def _ensembles(root: Path, dirs: Iterable[str]) -> list[str]:
    found = []
    for name in dirs:
        config = root / name / "config.pbtxt"
        with contextlib.suppress(OSError):
            if ENSEMBLE_CONFIG_PATTERN.search(config.read_text(errors="replace")):
                found.append(name)
    return found


def safe_extract(archive: str | Path | IO[bytes], destination: str | Path) -> ExtractedModel:
    """Extract a model archive (``.tar.gz`` or any tar) into ``destination``, refusing anything unsafe.

    Every member is checked before anything is written: no absolute paths, no ``..``, no symbolic or hard
    links, no device files or FIFOs; the extraction itself then runs with tarfile's ``"data"`` filter
    (where the Python has it), which also drops set-uid bits and foreign owners. The layout must be one
    model directory at the archive root, or several where exactly one is an ensemble (its steps beside
    it); a model whose ``config.pbtxt`` sits at the archive root is moved into a ``model/`` directory.

    Parameters:
        archive: a path or a binary file object positioned at the archive's start.
        destination: the directory to extract into (created; should be empty).

    Returns:
        An :class:`ExtractedModel`; its ``path`` is ``destination``.

    Raises:
        ModelArchiveError: an unsafe member (``member`` names it), an unreadable archive or an unexpected
            layout. Nothing is extracted when a member is unsafe.

    Example:
        >>> extracted = safe_extract("linear.tar.gz", "/tmp/linear")  # doctest: +SKIP
        >>> extracted.model_dirs  # doctest: +SKIP
        ('linear',)
    """
    destination = Path(destination)
    try:
        tar = (
            tarfile.open(archive, mode="r:*")  # noqa: SIM115 - closed by the with-block below
            if isinstance(archive, (str, Path))
            else tarfile.open(fileobj=archive, mode="r:*")  # noqa: SIM115
        )
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ModelArchiveError(f"cannot read the model archive: {exc}") from exc
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ModelArchiveError(f"cannot read the model archive: {exc}") from exc
        paths: list[tuple[tarfile.TarInfo, PurePosixPath]] = []
        for member in members:
            path = _check_member(member)
            if path is not None:
                paths.append((member, path))
        top_files = {p.parts[0] for m, p in paths if len(p.parts) == 1 and m.isreg()}
        top_dirs = sorted({p.parts[0] for m, p in paths if len(p.parts) > 1 or m.isdir()})
        prefix = PurePosixPath("model") if "config.pbtxt" in top_files else None
        if prefix is None and not top_dirs:
            raise ModelArchiveError("the model archive holds no model directory")
        destination.mkdir(parents=True, exist_ok=True)
        size = 0
        data_filter = getattr(tarfile, "data_filter", None)
        for member, path in paths:
            target = prefix / path if prefix is not None else path
            member = copy.copy(member)
            member.name = str(target)
            if data_filter is not None:
                try:
                    member = data_filter(member, str(destination))
                except tarfile.FilterError as exc:
                    raise ModelArchiveError(
                        f"refusing archive member {path}: {exc}", member=str(path)
                    ) from exc
            if member.isreg():
                size += member.size
            try:
                tar.extract(member, destination, set_attrs=False, **_no_filter())
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise ModelArchiveError(f"cannot extract {path}: {exc}", member=str(path)) from exc
    if prefix is not None:
        return ExtractedModel(destination, ("model",), size)
    if len(top_dirs) == 1:
        return ExtractedModel(destination, (top_dirs[0],), size)
    ensembles = _ensembles(destination, top_dirs)
    if len(ensembles) != 1:
        what = "none is an ensemble" if not ensembles else f"{len(ensembles)} are ensembles"
        raise ModelArchiveError(
            f"the model archive holds {len(top_dirs)} model directories ({', '.join(top_dirs)}) and {what}: "
            "it must hold one model directory, or one ensemble with the models it uses"
        )
    rest = tuple(d for d in top_dirs if d != ensembles[0])
    return ExtractedModel(destination, (ensembles[0], *rest), size)


def _no_filter() -> dict[str, Any]:
    # The members were checked and filtered already; passing filter= also silences 3.12+'s warning.
    return {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}


def directory_size(path: str | Path) -> int:
    """Total bytes of the regular files under ``path`` (links are not followed)."""
    total = 0
    for item in Path(path).rglob("*"):
        with contextlib.suppress(OSError):
            if item.is_file() and not item.is_symlink():
                total += item.stat().st_size
    return total
