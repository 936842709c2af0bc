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
the kernel: the server's end of the connection (a ``sock_diag`` lookup in the server's network namespace,
as ``ss`` does) and the worker's ``epoll`` instance that lists that socket
(``/proc/<pid>/fdinfo/<epoll fd>``); a control call takes a fresh
connection, reserves its worker, lets the invocations running there finish, and only then sends its
request; invocations use connections on other workers meanwhile (a connection opened while a worker runs
a callback never lands on it). Control calls keep off each other's workers too: on an idle server two
fresh connections land on the same worker, where a second load would wait for the whole first one.
Where the kernel does not show them, nothing is reserved.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
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
        self._changed = threading.Condition(threading.Lock())
        self._in_flight: Counter[int] = Counter()
        self._reserved: Counter[int] = Counter()
        self._settling = 0
        self._supported: bool | None = None
        self._epolls: list[int] = []
        self._diag: socket.socket | None = None
        self._diag_lock = threading.Lock()

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

    def worker_of(self, sock: socket.socket, *, wait: float = 1.0, queued: float = 0.05) -> int | None:
        """The worker holding the connection ``sock`` (its epoll descriptor's number in the server).

        :data:`UNKNOWN_WORKER` when no worker has taken it up within ``wait`` seconds, or within ``queued``
        seconds of its accept while a control call occupies a worker: the server then most likely handed it
        to that worker just before the call's request came, and it waits there, untaken, until the load or
        unload ends (the caller tries another connection rather than wait).
        """
        if not self.supported:
            return None
        client_port = sock.getsockname()[1]
        start = time.monotonic()
        deadline = start + wait
        pause = 0.0002
        while True:
            inode = self._inode(client_port)
            worker = _epoll_of(self.pid, inode, self._epolls) if inode is not None else None
            if worker is not None:
                return worker
            now = time.monotonic()
            if now > deadline or (inode is not None and now > start + queued and self._controlling()):
                return UNKNOWN_WORKER
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    @property
    def supported(self) -> bool:
        """Whether ``/proc`` shows which worker holds a connection (the listening socket's epoll entry)."""
        if self._supported is None:
            self._epolls = _epolls(self.pid)
            try:
                self._diag = self.connector.diag_socket(timeout=5.0)
                self._diag.settimeout(5.0)
                listener = self._inode(None)
            except OSError as exc:
                logger.debug("no sock_diag socket for the front-end: %s", exc)
                listener = None
            self._supported = listener is not None and _epoll_of(self.pid, listener, self._epolls) is not None
            if not self._supported:
                logger.info(
                    "cannot tell the front-end's worker threads apart from /proc: loads and unloads may "
                    "delay invocations that share their thread"
                )
        return self._supported

    def _controlling(self) -> bool:
        """Whether a control call holds a worker now."""
        with self._changed:
            return bool(self._reserved)

    def close(self) -> None:
        """Close the ``sock_diag`` socket (the server stopped)."""
        if self._diag is not None:
            self._diag.close()

    def _inode(self, client_port: int | None) -> int | None:
        assert self._diag is not None
        with self._diag_lock:
            return _socket_inode(self._diag, self.port, client_port)

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

    def reserve(self, worker: int | None) -> bool:
        """Reserve ``worker`` for one control call, unless another control call holds it already (or no
        worker has taken the connection up): ``False`` then, and nothing is reserved. Two control calls on
        one worker run one after the other (each runs synchronously on its worker), so the caller opens
        another connection once the other call's request is written (:meth:`wait_settled`). Pass
        ``reserved=True`` to :meth:`occupied` after it."""
        if worker is None:
            return True
        with self._changed:
            if worker == UNKNOWN_WORKER or self._reserved[worker]:
                return False
            self._reserved[worker] += 1
            self._settling += 1
            return True

    @contextlib.contextmanager
    def occupied(
        self, worker: int | None, *, drain_timeout: float, reserved: bool = False
    ) -> Iterator[Callable[[], None]]:
        """Reserve ``worker`` for a control call (``reserved``: :meth:`reserve` did): no new request goes to
        it, and the block starts once the requests running there are answered (at most ``drain_timeout``
        seconds). The block gets a function to call right after the control request is written."""
        if worker is None or worker == UNKNOWN_WORKER:
            yield lambda: None
            return
        with self._changed:
            if not reserved:
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


# -- /proc and sock_diag ---------------------------------------------------------------------------

_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_TCP_ESTABLISHED, _TCP_LISTEN = 1, 10
_NO_COOKIE = 0xFFFFFFFF
_LOOPBACK = socket.inet_aton("127.0.0.1") + bytes(12)


def _socket_inode(diag: socket.socket, port: int, client_port: int | None = None) -> int | None:
    """The inode of the server's socket on ``127.0.0.1:<port>``: its listener (``client_port`` None), or
    its end of the connection from ``127.0.0.1:<client_port>``; ``None`` when there is none, or the server
    has not accepted it yet (a socket has an inode from ``accept()`` on).

    One exact ``sock_diag`` lookup (``inet_diag_req_v2`` without ``NLM_F_DUMP``), as ``ss`` does: reading
    ``/proc/<pid>/net/tcp`` walks the kernel's whole connection table, milliseconds on a large machine.
    """
    states = 1 << (_TCP_LISTEN if client_port is None else _TCP_ESTABLISHED)
    sockid = struct.pack(
        "!HH16s16s", port, client_port or 0, _LOOPBACK, _LOOPBACK if client_port else bytes(16)
    ) + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    request = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, states) + sockid
    header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 0, 0)
    diag.send(header + request)
    answer = diag.recv(65536)
    length, kind = struct.unpack_from("=IH", answer)
    if kind == _NLMSG_ERROR or length < 16 + 72:
        return None
    inode = struct.unpack_from("=I", answer, 16 + 68)[0]
    return int(inode) or None


def _epolls(pid: int) -> list[int]:
    """The process's epoll descriptors (the listener's and one per worker thread)."""
    found: list[int] = []
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for entry in entries:
        try:
            if os.readlink(f"/proc/{pid}/fd/{entry}") == "anon_inode:[eventpoll]":
                found.append(int(entry))
        except OSError:
            continue
    return sorted(found)


def _epoll_of(pid: int, inode: int, epolls: list[int]) -> int | None:
    """The epoll of the process that watches the socket ``inode`` (an epoll's fdinfo lists each watched
    file with its inode, ``ino:<hex>``)."""
    needle = f"ino:{inode:x} "
    for epoll in epolls:
        try:
            if needle in Path(f"/proc/{pid}/fdinfo/{epoll}").read_text():
                return epoll
        except OSError:
            continue
    return None
