"""Fixtures of the notebook and cleanup-job tests: telling which processes a child process left behind.

A process started with ``marker.env()`` carries the marker variable in its environment, and so does every
process it starts in turn (a kernel, its stack's Tritons and their stubs); ``marker.left()`` finds those
still alive in ``/proc``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

EXIT_TIMEOUT = 30.0  # seconds for a child's processes to be gone after it exited


class ProcessMarker:
    """A variable that marks a child process and everything it starts."""

    def __init__(self) -> None:
        self.name = f"MME_TRITON_TEST_RUN_{uuid.uuid4().hex}"

    def env(self, base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
        """``base`` (default: this process's environment) plus ``extra`` and the marker."""
        return {**(os.environ if base is None else base), **extra, self.name: "1"}

    def alive(self) -> list[str]:
        """The marked processes now alive (pid and command line)."""
        needle = f"{self.name}=1".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:120]
                    found.append(f"{entry.name}: {command!r}")
            except OSError:  # gone meanwhile, or not ours to read
                continue
        return found

    def left(self) -> list[str]:
        """The marked processes still alive after waiting up to EXIT_TIMEOUT for them to exit."""
        deadline = time.monotonic() + EXIT_TIMEOUT
        while (alive := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.2)
        return alive


@pytest.fixture
def marker() -> ProcessMarker:
    return ProcessMarker()
