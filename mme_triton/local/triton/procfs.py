"""Reading a running Triton's processes from ``/proc`` (Linux): its stubs, their memory, their shared memory.

Every python-backend model instance (the stack's onnxruntime and pytorch backends included) runs in its
own stub process, a child of ``tritonserver``, with a shared-memory region of its own in ``/dev/shm``
(named ``<shm-region-prefix-name><uuid>``); their memory is what loaded models cost. The anonymous resident
memory of a stub (its Python objects, the model's weights) is counted, not the pages of shared libraries
(the page cache holds those once for every stub), and a region by the pages it has allocated.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EXIT_POLL_S",
    "PAGE_SIZE",
    "SHM_DIR",
    "ExitWatch",
    "ServerProcesses",
    "StubProcess",
    "anon_rss",
    "children",
    "new_shm_prefix",
    "pid_namespace",
    "process_tree_usage",
    "remove_orphaned_shm_regions",
    "remove_shm_regions",
    "rss",
    "shm_allocated",
    "shm_regions",
    "stack_shm_prefix",
    "stub_processes",
]

SHM_DIR = Path("/dev/shm")

logger = logging.getLogger("mme_triton.local.triton.server")

# The stack names its servers' regions mme_triton_ns<PID namespace>_<pid of the process that started the
# server>_<8 hex>_: a pid means something only in its own PID namespace, and containers sharing /dev/shm
# (docker run --ipc=host) each have their own.
_STACK_REGION = re.compile(r"mme_triton_ns(\d+)_(\d+)_[0-9a-f]{8}_")

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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
    anon_bytes: int = 0
    """Anonymous resident memory (``RssAnon``): what the stub holds beyond shared libraries."""
    shm_region: str = ""
    """The name of its shared-memory region in ``/dev/shm``."""
    shm_bytes: int = 0
    """Bytes that region has allocated."""

    @property
    def memory_bytes(self) -> int:
        """What the model instance costs: anonymous resident memory plus its shared-memory region."""
        return self.anon_bytes + self.shm_bytes


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
        region = text[2] if len(text) > 2 else ""
        found.append(
            StubProcess(
                pid=child,
                model=text[8] if len(text) > 8 else "",
                model_path=text[1] if len(text) > 1 else "",
                rss_bytes=rss(child),
                anon_bytes=anon_rss(child),
                shm_region=region,
                shm_bytes=shm_allocated(region),
            )
        )
    return found


def anon_rss(pid: int) -> int:
    """``RssAnon`` of ``pid`` in bytes (0 when it cannot be read)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def shm_allocated(name: str) -> int:
    """Bytes allocated by the shared-memory object ``name`` in ``/dev/shm`` (0 when there is none)."""
    if not name or "/" in name:
        return 0
    try:
        return (SHM_DIR / name).stat().st_blocks * 512
    except OSError:
        return 0


def shm_regions(prefix: str) -> dict[str, int]:
    """The shared-memory objects whose names start with ``prefix``, with the bytes each has allocated."""
    found: dict[str, int] = {}
    if not prefix:
        return found
    try:
        entries = list(SHM_DIR.iterdir())
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith(prefix):
            found[entry.name] = shm_allocated(entry.name)
    return found


def remove_shm_regions(prefix: str) -> int:
    """Remove the shared-memory objects whose names start with ``prefix``; return how many.

    A python-backend stub and its server remove their region when they stop cleanly; after a crash the
    regions stay behind, holding their memory, until someone removes them.
    """
    removed = 0
    for name in shm_regions(prefix):
        try:
            (SHM_DIR / name).unlink()
            removed += 1
        except OSError:
            continue
    return removed


def rss(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
        return int(fields[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def _stat_fields(stat: Path) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` after the command name, the state (field 3 of proc(5)) first.

    The command name is in parentheses and may hold spaces and parentheses: the split starts after the
    last ``)``. Raises ``OSError`` when the file cannot be read.
    """
    text = stat.read_text()
    return text[text.rfind(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds ``pid`` has used (``/proc/<pid>/stat``; 0 when it cannot be read)."""
    try:
        fields = _stat_fields(Path(f"/proc/{pid}/stat"))
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def process_tree_usage(pid: int) -> tuple[float, int]:
    """CPU seconds used by ``pid`` and its children (a server's model stubs), and the memory they hold: the
    resident memory of ``pid`` and what each stub costs (:attr:`StubProcess.memory_bytes`)."""
    stubs = stub_processes(pid)
    seconds = cpu_seconds(pid) + sum(cpu_seconds(stub.pid) for stub in stubs)
    return seconds, rss(pid) + sum(stub.memory_bytes for stub in stubs)


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
            fields = _stat_fields(entry / "stat")
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


def pid_namespace() -> int:
    """This process's PID namespace: the inode of ``/proc/self/ns/pid`` (0 where it cannot be read)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def stack_shm_prefix(pid: int | None = None) -> str:
    """The start of the region names of the servers process ``pid`` (default: this one) starts:
    ``mme_triton_ns<PID namespace>_<pid>_``."""
    return f"mme_triton_ns{pid_namespace()}_{os.getpid() if pid is None else pid}_"


def new_shm_prefix() -> str:
    """A fresh ``shm-region-prefix-name`` for one server, naming the PID namespace and the process that
    start it."""
    return f"{stack_shm_prefix()}{secrets.token_hex(4)}_"


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_orphaned_shm_regions() -> dict[int, int]:
    """Remove the stack's regions whose starting process no longer runs; return {pid: regions removed}.

    A process that is killed (SIGKILL, the OOM killer) cannot clean up, and its servers' regions would
    hold their memory until the machine restarts; every new server removes them first, and logs it.
    Only regions of this PID namespace are judged: a pid of another one (a container sharing
    ``/dev/shm`` through ``--ipc=host``) says nothing here, so its regions are left alone, as are names
    without a namespace, whose pid cannot be placed.
    """
    namespace = pid_namespace()
    removed: dict[int, int] = {}
    for name in shm_regions("mme_triton_ns"):
        match = _STACK_REGION.match(name)
        if match is None or not namespace or int(match.group(1)) != namespace:
            continue
        pid = int(match.group(2))
        if pid == os.getpid() or _runs(pid):
            continue
        try:
            (SHM_DIR / name).unlink()
        except OSError:
            continue
        removed[pid] = removed.get(pid, 0) + 1
    for pid, count in removed.items():
        logger.info(
            "removed %d shared-memory regions left in /dev/shm by process %d, which no longer runs",
            count,
            pid,
        )
    return removed


EXIT_POLL_S = 0.01
"""How often :class:`ExitWatch` looks at the processes it watches: the resolution of a measured unload."""


class ExitWatch:
    """Notes when every one of some processes has exited (a zombie counts as exited), looking every
    :data:`EXIT_POLL_S` on a thread of its own.

    Triton's SageMaker front-end answers an unload at its next 1 s poll of the model's state (its
    ``UNLOAD_SLEEP_MILLISECONDS_``), so the answer's time is a multiple of that poll, not the unload: the
    model's stub processes leaving is its end, when their memory is free.
    """

    def __init__(self, pids: list[int]) -> None:
        self._pids = list(pids)
        self._started = time.monotonic()
        self._ended: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._pids:
            self._thread = threading.Thread(target=self._watch, name="exit-watch", daemon=True)
            self._thread.start()

    @classmethod
    def of_model(cls, server_pid: int | None, root: str | None) -> ExitWatch:
        """A watch of the stub processes ``server_pid`` runs for the model loaded from ``root`` (none
        when either is unknown)."""
        if server_pid is None or root is None:
            return cls([])
        prefix = root.rstrip("/") + "/"
        return cls([stub.pid for stub in stub_processes(server_pid) if stub.model_path.startswith(prefix)])

    def _watch(self) -> None:
        while not self._stop.is_set():
            if not any(_alive(pid) for pid in self._pids):
                self._ended = time.monotonic() - self._started
                return
            self._stop.wait(EXIT_POLL_S)

    def wait(self, timeout: float) -> float | None:
        """Seconds from the watch's start until the last process exited; ``None`` when nothing was
        watched, or the processes still run after ``timeout`` more seconds."""
        if self._thread is None:
            return None
        self._thread.join(timeout)
        self._stop.set()
        return self._ended

    def cancel(self) -> None:
        """Stop watching."""
        self._stop.set()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (exists and is not a zombie)."""
    try:
        fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    except OSError:
        return False
    return bool(fields) and fields[0] not in ("Z", "X")


class ServerProcesses:
    """What ``/proc`` and ``/dev/shm`` say of a running server: mixed into
    :class:`~mme_triton.local.triton.server.TritonServer`."""

    _shm_prefix: str

    @property
    def pid(self) -> int | None:  # pragma: no cover - defined by the server
        raise NotImplementedError

    def rss_bytes(self) -> int:
        """Resident memory of the ``tritonserver`` process itself (0 when it is not running)."""
        pid = self.pid
        return rss(pid) if pid is not None else 0

    @property
    def shm_prefix(self) -> str:
        """The ``shm-region-prefix-name`` of this server's python-backend regions in ``/dev/shm``."""
        return self._shm_prefix

    def shm_bytes(self) -> int:
        """Bytes allocated by this server's shared-memory regions in ``/dev/shm``."""
        return sum(shm_regions(self._shm_prefix).values())

    def model_processes(self) -> list[StubProcess]:
        """The python-backend stub processes of this server, with their resident memory.

        Every python-backend model instance (the stack's onnxruntime backend included) runs in its own stub
        process, so their resident memory is what loaded models cost. Read from ``/proc`` (Linux only).
        """
        pid = self.pid
        return stub_processes(pid) if pid is not None else []
