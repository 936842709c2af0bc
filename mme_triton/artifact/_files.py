"""Opening the files of a model for reading, without following a link that appeared after the listing."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from mme_triton.errors import ArtifactError

__all__ = ["open_regular_file"]

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def open_regular_file(path: Path) -> tuple[io.FileIO, int]:
    """Open ``path`` unbuffered for reading; return the file and its size.

    Raises ``ArtifactError`` when ``path`` is a symbolic link or not a regular file (a FIFO would block,
    a link could pack a file from outside the model).
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise ArtifactError(f"{path}: is a symbolic link; it cannot go into an artifact") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError(f"{path}: not a regular file; it cannot go into an artifact")
        return io.FileIO(fd, "rb", closefd=True), info.st_size
    except BaseException:
        os.close(fd)
        raise
