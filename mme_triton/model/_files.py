"""Reading a model's files safely: never through a symbolic link, never blocking on a FIFO.

A model directory can hold anything a user put there: a FIFO named ``config.pbtxt`` (opening it for
reading waits for a writer forever), a link created after the directory was listed, a configured file
name too long for the file system. Validation must describe all of these, not hang or raise, so every
file the model stage reads goes through :func:`open_regular`, and every existence test through
:func:`path_kind`.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import Literal

__all__ = ["PathKind", "open_regular", "path_kind", "read_regular"]

PathKind = Literal["file", "dir", "other"]

# O_NONBLOCK makes opening a FIFO return at once instead of waiting for a writer; for regular files it
# has no effect.
_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def open_regular(path: str | os.PathLike[str]) -> io.FileIO:
    """Open ``path`` unbuffered for reading, if it is a regular file.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        OSError: ``path`` is a symbolic link (``ELOOP``), a FIFO, socket or device (``EINVAL``, "not a
            regular file"), or cannot be opened.
    """
    fd = os.open(path, _FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole content of a (small) regular file; raises as :func:`open_regular` does."""
    with open_regular(path) as file:
        return file.readall()


def path_kind(path: Path) -> PathKind | None:
    """What ``path`` is, following symbolic links; ``None`` when it cannot be found or named at all.

    Unlike ``Path.exists``/``is_file`` this never raises: a name too long for the file system, a NUL
    byte, a permission error on the way all read as ``None``.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"
