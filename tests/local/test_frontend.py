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


_SLEEPY = """\
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(2)

    def execute(self, requests):
        return []
"""
