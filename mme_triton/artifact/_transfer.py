"""What an upload needs around boto3's managed transfer: a build directory and a progress counter."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["BuildDir", "ByteCounter", "UploadProgress"]

UploadProgress = Callable[[str, str, int, int], object]
"""``progress(stage, name, bytes_done, bytes_total)``; stage is ``"package"`` (name: the model directory)
or ``"upload"`` (name: the TargetModel)."""


class BuildDir:
    """``workdir`` as given (created if missing), or a temporary directory removed on exit."""

    def __init__(self, workdir: str | os.PathLike[str] | None) -> None:
        self._workdir = workdir
        self._temporary: str | None = None

    def __enter__(self) -> Path:
        if self._workdir is not None:
            path = Path(self._workdir)
            path.mkdir(parents=True, exist_ok=True)
            return path
        self._temporary = tempfile.mkdtemp(prefix="mme-triton-artifacts-")
        return Path(self._temporary)

    def __exit__(self, *exc_info: object) -> None:
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)


class ByteCounter:
    """boto3's transfer Callback (called from its worker threads with byte increments) → progress."""

    def __init__(self, name: str, total: int, progress: UploadProgress | None) -> None:
        self._name = name
        self._total = total
        self._progress = progress
        self._done = 0
        self._lock = threading.Lock()
        if progress is not None:
            progress("upload", name, 0, total)

    def __call__(self, increment: int) -> None:
        if self._progress is None:
            return
        with self._lock:
            self._done += increment
            self._progress("upload", self._name, self._done, self._total)
