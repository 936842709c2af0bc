"""Opening the files of a model for packaging, without following a link that appeared after the listing."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

from mme_triton.errors import ArtifactError
from mme_triton.model._files import open_regular

__all__ = ["open_regular_file"]


def open_regular_file(path: Path) -> tuple[io.FileIO, int]:
    """Open ``path`` unbuffered for reading; return the file and its size.

    Raises ``ArtifactError`` when ``path`` is a symbolic link or not a regular file (a FIFO would block,
    a link could pack a file from outside the model), ``OSError`` when it cannot be read.
    """
    try:
        file = open_regular(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise ArtifactError(
                f"{path}: is a symbolic link; it cannot go into an artifact", path=str(path)
            ) from exc
        if exc.errno in (errno.EISDIR, errno.EINVAL):
            raise ArtifactError(
                f"{path}: not a regular file; it cannot go into an artifact", path=str(path)
            ) from exc
        raise
    return file, os.fstat(file.fileno()).st_size
