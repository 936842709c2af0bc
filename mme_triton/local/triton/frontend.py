"""The SageMaker front-end's worker threads: which one holds each connection, and which a load occupies.

Triton's SageMaker front-end is an evhtp server with ``--sagemaker-thread-count`` worker threads (8 by
default; ``src/http_server.cc`` calls ``evhtp_use_threads_wexit``). Each accepted connection is handed to
one worker for its whole life: the first worker, in a fixed order, that is not running a request callback
and has nothing queued (``evthr_pool_defer`` in Triton's libevhtp, ``third_party/libevhtp/thread.c``).
``POST /models`` and ``DELETE /models/<hash>`` run synchronously in that callback
(``src/sagemaker_server.cc``: ``TRITONSERVER_ServerLoadModel``, then polling every 500 ms until the model
is unloaded), and the answer to an invocation is written by the worker that owns its connection. So every
keep-alive connection on a worker that a load or unload occupies waits for the whole load or unload, and
on an idle server every connection lands on the first worker: a control call on a connection of its own is
not enough.

:class:`FrontEnd` keeps invocations off an occupied worker. It reads which worker owns a connection from
``/proc`` (the server-side socket of the connection, its file descriptor, and the worker's ``epoll``
instance that watches that descriptor, ``/proc/<pid>/fdinfo/<epoll fd>``); a control call takes a fresh
connection, reserves its worker, lets the invocations running there finish, and only then sends its
request; invocations use connections on other workers meanwhile (a connection opened while a worker runs
a callback never lands on it). Where ``/proc`` does not show epoll registrations, nothing is reserved.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from mme_triton.local.triton.netns import Connector

__all__ = ["UNKNOWN_WORKER", "FrontEnd"]

logger = logging.getLogger("mme_triton.local.triton.server")

UNKNOWN_WORKER = -1
"""The worker of a connection the server has not taken up yet (every worker was busy)."""


class FrontEnd:
    """Connections to one running server's SageMaker front-end, and the worker thread each is on.

    Parameters:
        connector: opens connections to the server's ports.
        port: the SageMaker front-end's port (where the server listens).
        pid: the ``tritonserver`` process, whose ``/proc`` entries say which worker holds a connection.
    """

    def __init__(self, connector: Connector, port: int, pid: int) -> None:
        self.connector = connector
        self.port = port
        self.pid = pid
        self._changed = threading.Condition()
        self._in_flight: Counter[int] = Counter()
        self._reserved: Counter[int] = Counter()
        self._settling = 0
        self._supported: bool | None = None

    # -- connections ---------------------------------------------------------------------------------

    def connect(self, *, timeout: float | None = None) -> tuple[socket.socket, int | None]:
        """A new connection to the front-end and the worker that holds it (``None`` when ``/proc`` cannot
        tell, :data:`UNKNOWN_WORKER` when no worker has taken it up within a second)."""
        sock = self.connector.connect(self.port, timeout=timeout)
        try:
            return sock, self.worker_of(sock)
        except BaseException:
            sock.close()
            raise

    def worker_of(self, sock: socket.socket, *, wait: float = 1.0) -> int | None:
        """The worker holding the connection ``sock`` (its epoll descriptor's number in the server)."""
        if not self.supported:
            return None
        client_port = sock.getsockname()[1]
        deadline = time.monotonic() + wait
        pause = 0.0005
        while True:
            worker = _worker(self.pid, self.port, client_port)
            if worker is not None:
                return worker
            if time.monotonic() > deadline:
                return UNKNOWN_WORKER
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    @property
    def supported(self) -> bool:
        """Whether ``/proc`` shows which worker holds a connection (the listening socket's epoll entry)."""
        if self._supported is None:
            self._supported = _listener_watched(self.pid, self.port)
            if not self._supported:
                logger.info(
                    "cannot tell the front-end's worker threads apart from /proc: loads and unloads may "
                    "delay invocations that share their thread"
                )
        return self._supported

    # -- invocations ---------------------------------------------------------------------------------

    def begin(self, worker: int | None) -> bool:
        """Count a request on a connection of ``worker``; ``False`` (nothing counted) when a load or
        unload occupies that worker, or it is unknown."""
        if worker is None:
            return True
        with self._changed:
            if worker == UNKNOWN_WORKER or self._reserved[worker]:
                return False
            self._in_flight[worker] += 1
            return True

    def end(self, worker: int | None) -> None:
        """The request counted by :meth:`begin` is answered."""
        if worker is None:
            return
        with self._changed:
            self._in_flight[worker] -= 1
            if self._in_flight[worker] <= 0:
                del self._in_flight[worker]
                self._changed.notify_all()

    def wait_settled(self, timeout: float) -> None:
        """Wait until every control call that reserved a worker has sent its request (from then on, new
        connections avoid that worker), at most ``timeout`` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self._settling == 0, timeout=timeout)

    # -- control calls -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def occupied(self, worker: int | None, *, drain_timeout: float) -> Iterator[Callable[[], None]]:
        """Reserve ``worker`` for a control call: no new request goes to it, and the block starts once the
        requests running there are answered (at most ``drain_timeout`` seconds). The block gets a function
        to call right after the control request is written."""
        if worker is None or worker == UNKNOWN_WORKER:
            yield lambda: None
            return
        with self._changed:
            self._reserved[worker] += 1
            self._settling += 1
            self._changed.wait_for(lambda: self._in_flight[worker] <= 0, timeout=drain_timeout)
        settled = False

        def sent() -> None:
            nonlocal settled
            with self._changed:
                if not settled:
                    settled = True
                    self._settling -= 1
                    self._changed.notify_all()

        try:
            yield sent
        finally:
            sent()
            with self._changed:
                self._reserved[worker] -= 1
                if self._reserved[worker] <= 0:
                    del self._reserved[worker]
                self._changed.notify_all()


# -- /proc ------------------------------------------------------------------------------------------


def _worker(pid: int, port: int, client_port: int) -> int | None:
    """The epoll descriptor (one per worker) that watches the server side of the connection whose client
    end is ``127.0.0.1:<client_port>``; ``None`` when it is not registered yet."""
    inode = _server_inode(pid, port, client_port)
    if inode is None:
        return None
    fd = _descriptor(pid, inode)
    if fd is None:
        return None
    for epoll, watched in _epolls(pid).items():
        if fd in watched:
            return epoll
    return None


def _server_inode(pid: int, port: int, client_port: int) -> int | None:
    local, remote = f":{port:04X}", f":{client_port:04X}"
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[1].endswith(local) and fields[2].endswith(remote) and fields[3] == "01":
                return int(fields[9])
    return None


def _descriptor(pid: int, inode: int) -> int | None:
    target = f"socket:[{inode}]"
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for entry in entries:
        try:
            if os.readlink(f"/proc/{pid}/fd/{entry}") == target:
                return int(entry)
        except OSError:
            continue
    return None


def _epolls(pid: int) -> dict[int, set[int]]:
    """Every epoll instance of the process and the descriptors it watches."""
    found: dict[int, set[int]] = {}
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for entry in entries:
        try:
            if os.readlink(f"/proc/{pid}/fd/{entry}") != "anon_inode:[eventpoll]":
                continue
            text = Path(f"/proc/{pid}/fdinfo/{entry}").read_text()
        except OSError:
            continue
        found[int(entry)] = {int(line.split()[1]) for line in text.splitlines() if line.startswith("tfd:")}
    return found


def _listener_watched(pid: int, port: int) -> bool:
    """Whether an epoll entry of the process watches its listening socket on ``port``."""
    local = f":{port:04X}"
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        inodes |= {
            int(f[9]) for f in (line.split() for line in lines) if f[1].endswith(local) and f[3] == "0A"
        }
    fds = {fd for fd in (_descriptor(pid, inode) for inode in inodes) if fd is not None}
    return any(fds & watched for watched in _epolls(pid).values())
