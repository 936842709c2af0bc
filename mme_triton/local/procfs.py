"""Reading a running Triton's processes from ``/proc`` (Linux): its stubs and their resident memory.

Every python-backend model instance (the stack's onnxruntime and pytorch backends included) runs in its
own stub process, a child of ``tritonserver``; their memory is what loaded models cost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PAGE_SIZE", "StubProcess", "children", "rss", "stub_processes"]

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class StubProcess:
    """One python-backend stub process of a running server (one per model instance)."""

    pid: int
    model: str
    """The model instance the stub serves, as Triton names it (e.g. ``linear.tar.gz_0_0``)."""
    model_path: str
    """The model file Triton started it for (``<model_dir>/<model>/<version>/model.onnx``)."""
    rss_bytes: int
    """Resident memory, read from ``/proc/<pid>/statm``."""


def stub_processes(pid: int) -> list[StubProcess]:
    """The python-backend stub processes among the children of ``pid``, with their resident memory."""
    found: list[StubProcess] = []
    for child in children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"triton_python_backend_stub"):
            continue
        # argv: stub, model file, shm region, shm default size, shm growth, parent pid, python
        # backend dir, ipc handle, instance name, runtime dir
        text = [a.decode("utf-8", "replace") for a in argv]
        found.append(
            StubProcess(
                pid=child,
                model=text[8] if len(text) > 8 else "",
                model_path=text[1] if len(text) > 1 else "",
                rss_bytes=rss(child),
            )
        )
    return found


def rss(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
        return int(fields[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def children(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc (psutil is not a dependency)."""
    # Stubs are forked from whichever Triton thread loads the model: read every thread's children.
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sorted({int(c) for task in tasks for c in (task / "children").read_text().split()})
    except (OSError, ValueError):
        pass  # kernels without CONFIG_PROC_CHILDREN: scan every process's parent instead
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may contain spaces: split after the last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found
