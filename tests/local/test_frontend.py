"""Which front-end worker thread a connection is on, and keeping requests off the ones a load occupies."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mme_triton.local.triton.frontend import UNKNOWN_WORKER, FrontEnd
from mme_triton.local.triton.netns import Connector
from mme_triton.local.triton.server import TritonServer


def _front_end() -> FrontEnd:
    return FrontEnd(Connector(None), 1, pid=-1)  # no /proc reads in these tests


def test_front_end_refuses_requests_on_a_worker_a_control_call_occupies() -> None:
    front = _front_end()
    assert front.begin(3) and front.begin(4)
    front.end(4)
    drained = threading.Event()

    def control() -> None:
        with front.occupied(3, drain_timeout=10) as sent:
            drained.set()
            assert not front.begin(3)  # occupied: requests go elsewhere
            assert front.begin(4)
            front.end(4)
            sent()

    caller = threading.Thread(target=control)
    caller.start()
    time.sleep(0.2)
    assert not drained.is_set()  # the request running on worker 3 finishes first
    front.end(3)
    caller.join(timeout=10)

    assert drained.is_set()
    assert front.begin(3)  # free again once the control call answered
    front.end(3)


def test_front_end_keeps_a_control_call_off_a_worker_another_control_call_holds() -> None:
    front = _front_end()

    assert front.reserve(3)
    assert not front.reserve(3)  # a second load there would wait for the whole first one
    assert not front.reserve(UNKNOWN_WORKER)  # queued behind a busy worker: try another connection
    assert front.reserve(None)  # /proc cannot tell: nothing is kept apart
    assert front.reserve(4)
    with front.occupied(3, drain_timeout=1, reserved=True) as sent:
        assert not front.begin(3)
        sent()
    front.wait_settled(0.01)  # the call on worker 4 has not sent its request yet
    with front.occupied(4, drain_timeout=1, reserved=True) as sent:
        sent()
    front.wait_settled(1)

    assert front.reserve(3)  # free again once its control call answered


def test_front_end_counts_nothing_for_unknown_or_untracked_workers() -> None:
    front = _front_end()

    assert not front.begin(UNKNOWN_WORKER)  # a connection no worker has taken up yet
    assert front.begin(None)  # /proc cannot tell: nothing is kept apart
    with front.occupied(None, drain_timeout=1) as sent:
        sent()
    front.wait_settled(0.01)


def test_front_end_gives_up_on_a_connection_queued_behind_a_control_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An accepted connection no worker lists yet is waited for, unless a control call holds a worker:
    the server may have handed it to that worker just before the call's request came, where it would
    wait untaken for the whole load or unload."""
    from mme_triton.local.triton import frontend

    front = _front_end()
    front._supported = True
    monkeypatch.setattr(front, "_inode", lambda client_port: 1234)  # accepted
    looks: list[int] = []

    def taken_up_at_the_fifth_look(pid: int, inode: int, epolls: list[int]) -> int | None:
        looks.append(inode)
        return 7 if len(looks) >= 5 else None

    monkeypatch.setattr(frontend, "_epoll_of", taken_up_at_the_fifth_look)
    with socket.socket() as sock:
        assert front.worker_of(sock, wait=60, queued=0) == 7  # no control call: waited for
        looks.clear()
        with front.occupied(3, drain_timeout=1) as sent:
            sent()
            assert front.worker_of(sock, wait=60, queued=0) == UNKNOWN_WORKER
        assert len(looks) < 5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with TritonServer(workdir=tmp_path_factory.mktemp("front")) as running:
        yield running


@pytest.mark.triton
def test_front_end_reads_which_worker_holds_each_connection(server: TritonServer, tmp_path: Path) -> None:
    """On an idle server every new connection lands on the same worker (the first one free); one opened
    while that worker runs a callback lands on another."""
    front = server.front_end
    assert front.supported
    first, first_worker = front.connect(timeout=5)
    second, second_worker = front.connect(timeout=5)

    assert first_worker is not None and first_worker >= 0
    assert second_worker == first_worker
    first.close()
    second.close()

    model = tmp_path / "sleepy"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(_SLEEPY)
    (model / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    loading = threading.Thread(target=server.load, args=("5eed", tmp_path, "sleepy.tar.gz"))
    loading.start()  # holds the first free worker for its 2 s initialize
    time.sleep(1.0)
    during, during_worker = front.connect(timeout=5)
    loading.join()
    during.close()
    server.unload("5eed")

    assert during_worker is not None and during_worker >= 0
    assert during_worker != first_worker


@pytest.mark.triton
def test_front_end_runs_two_loads_requested_at_once_side_by_side(
    server: TritonServer, tmp_path: Path
) -> None:
    """Two loads sent at the same moment on an idle server: their fresh connections land on the same
    worker, where the second would wait for the whole first load; each takes a worker of its own, so the
    two ``initialize`` calls overlap, every time."""
    for round_ in range(3):
        log = tmp_path / f"initialize-{round_}.log"
        names = [f"side{round_}{k}" for k in range(2)]
        for name in names:
            model = tmp_path / name / name
            (model / "1").mkdir(parents=True)
            (model / "1" / "model.py").write_text(_LOGGED.format(log=str(log), name=name))
            (model / "config.pbtxt").write_text(
                'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
                'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
            )
        hashes = [f"{round_}{k}ab" for k in range(2)]
        loads = [
            threading.Thread(target=server.load, args=(h, tmp_path / n, f"{n}.tar.gz"))
            for h, n in zip(hashes, names, strict=True)
        ]
        for load in loads:
            load.start()
        for load in loads:
            load.join()
        unloads = [threading.Thread(target=server.unload, args=(h,)) for h in hashes]
        for unload in unloads:
            unload.start()
        for unload in unloads:
            unload.join()
        events = [line.split() for line in log.read_text().splitlines()]

        # both began before either ended
        assert [what for what, _, _ in events[:2]] == ["start", "start"], events
        assert sorted(what for what, _, _ in events) == ["end", "end", "start", "start"]


_LOGGED = """\
import time


class TritonPythonModel:
    def initialize(self, args):
        with open({log!r}, "a") as log:
            log.write(f"start {name} {{time.time()}}\\n")
        time.sleep(1.0)
        with open({log!r}, "a") as log:
            log.write(f"end {name} {{time.time()}}\\n")

    def execute(self, requests):
        return []
"""


_SLEEPY = """\
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(2)

    def execute(self, requests):
        return []
"""
