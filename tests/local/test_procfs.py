"""The stack's python-backend regions in /dev/shm: named after their PID namespace and process, and
cleaned up after a killed process only where that process's pid means something; a process's CPU time and
memory as the stack's utilization metrics read them (Linux, no server)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mme_triton.local.triton.procfs import (
    SHM_DIR,
    ExitWatch,
    cpu_seconds,
    new_shm_prefix,
    pid_namespace,
    process_tree_usage,
    remove_orphaned_shm_regions,
    stack_shm_prefix,
)

pytestmark = pytest.mark.skipif(not SHM_DIR.is_dir(), reason="needs /dev/shm (Linux)")


def _dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(finished.stdout)


@pytest.fixture
def regions() -> Iterator[list[Path]]:
    """Region files the test writes into /dev/shm, removed again whatever happens."""
    written: list[Path] = []
    yield written
    for region in written:
        region.unlink(missing_ok=True)


def _region(regions: list[Path], name: str) -> Path:
    path = SHM_DIR / f"{name}{uuid.uuid4()}"
    path.write_bytes(b"\0" * 4096)
    regions.append(path)
    return path


def test_shm_prefix_names_the_pid_namespace_and_the_process() -> None:
    namespace = os.stat("/proc/self/ns/pid").st_ino
    assert pid_namespace() == namespace
    assert stack_shm_prefix() == f"mme_triton_ns{namespace}_{os.getpid()}_"
    prefix = new_shm_prefix()
    assert prefix.startswith(stack_shm_prefix()) and prefix != new_shm_prefix()


def test_remove_orphaned_shm_regions_leaves_other_pid_namespaces_alone(regions: list[Path]) -> None:
    """With /dev/shm shared between PID namespaces (docker run --ipc=host), a pid that does not run here
    may run there: only this namespace's regions of processes gone are removed."""
    dead, live, ours = _dead_pid(), os.getppid(), pid_namespace()
    orphan = _region(regions, f"mme_triton_ns{ours}_{dead}_0123abcd_")
    running = _region(regions, f"mme_triton_ns{ours}_{live}_0123abcd_")
    mine = _region(regions, f"{stack_shm_prefix()}0123abcd_")
    other_namespace = _region(regions, f"mme_triton_ns{ours + 1}_{dead}_0123abcd_")
    no_namespace = _region(regions, f"mme_triton_{dead}_0123abcd_")  # whose namespace cannot be told
    unrelated = _region(regions, "mme_triton_notes_")

    removed = remove_orphaned_shm_regions()

    assert removed.get(dead) == 1 and live not in removed
    assert not orphan.exists()
    assert all(path.exists() for path in (running, mine, other_namespace, no_namespace, unrelated))


def test_cpu_seconds_counts_what_a_process_spent_on_the_cpu() -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
            "print('busy', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"busy\n"
        spent = cpu_seconds(process.pid)
        seconds, memory = process_tree_usage(process.pid)
    finally:
        process.kill()
        process.wait()

    assert spent >= 0.25  # /proc counts whole clock ticks
    assert seconds >= spent
    assert memory > 0  # its resident memory (it runs no python-backend stubs)
    assert cpu_seconds(process.pid) == 0.0  # gone: nothing to read


def test_exit_watch_notes_when_the_last_process_has_left() -> None:
    """Two children that exit after 0.2 s and 0.5 s (and stay zombies until reaped): the watch ends at the
    second, to its 10 ms poll, long before the children are reaped."""
    children = [
        subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({delay})"]) for delay in (0.2, 0.5)
    ]
    try:
        watch = ExitWatch([child.pid for child in children])
        ended = watch.wait(10.0)
        assert ended is not None and 0.45 <= ended < 2.0
        assert all(child.poll() is not None for child in children)
    finally:
        for child in children:
            child.wait()


def test_exit_watch_of_nothing_says_nothing() -> None:
    assert ExitWatch([]).wait(1.0) is None
    assert ExitWatch.of_model(None, "/models/x").wait(1.0) is None
    assert ExitWatch.of_model(os.getpid(), None).wait(1.0) is None


def test_exit_watch_gives_up_on_a_process_that_outlives_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert ExitWatch([child.pid]).wait(0.2) is None
    finally:
        child.kill()
        child.wait()
