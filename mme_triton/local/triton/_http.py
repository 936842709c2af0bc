"""HTTP to a server's SageMaker front-end: kept-alive connections for requests, fresh ones for control calls.

Invocations go over kept-alive connections, pooled across threads, on front-end workers that no load or
unload occupies; loads and unloads each take a fresh connection and reserve its worker
(:class:`~mme_triton.local.triton.frontend.FrontEnd` says why).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from mme_triton.local.triton.frontend import UNKNOWN_WORKER, FrontEnd
from mme_triton.local.triton.netns import Connector

__all__ = ["ConnectionPool", "ConnectorHTTPConnection", "control_request", "ping"]

Answer = tuple[int, dict[str, str], bytes]
_FRESH_TRIES = 4


class ConnectorHTTPConnection(http.client.HTTPConnection):
    """An :class:`http.client.HTTPConnection` to ``port`` of a server, opened through its
    :class:`~mme_triton.local.triton.netns.Connector` (into the server's network namespace)."""

    def __init__(self, connector: Connector, port: int, *, timeout: float | None = None) -> None:
        super().__init__("127.0.0.1", port, timeout=timeout)
        self.connector = connector

    def connect(self) -> None:
        self.sock = self.connector.connect(self.port, timeout=self.timeout)


def ping(connector: Connector, port: int, *, timeout: float) -> bool:
    """``True`` when ``GET /ping`` answers 200, on a connection of its own."""
    conn = ConnectorHTTPConnection(connector, port, timeout=timeout)
    try:
        conn.request("GET", "/ping")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


@dataclass
class _Pooled:
    conn: ConnectorHTTPConnection
    front: FrontEnd
    worker: int | None


def _exchange(
    conn: http.client.HTTPConnection, method: str, path: str, body: bytes, headers: Mapping[str, str]
) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request(method, path, body=body or None, headers=dict(headers))
    response = conn.getresponse()
    return response, response.read()


def _answer(response: http.client.HTTPResponse, data: bytes) -> Answer:
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def control_request(
    front: FrontEnd,
    method: str,
    path: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout: float,
    *,
    drain_timeout: float,
) -> Answer:
    """A load or unload: a fresh connection, on a worker no other load or unload holds, reserved until the
    answer came (the requests running on it are answered first, for at most ``drain_timeout`` seconds).

    Raises:
        OSError, http.client.HTTPException: the server could not be reached or broke the connection.
    """
    for attempt in range(_FRESH_TRIES):
        sock, worker = front.connect(timeout=timeout)
        reserved = front.reserve(worker)
        if reserved or attempt == _FRESH_TRIES - 1:
            break  # the last try shares the worker: it waits behind the other control call there
        sock.close()
        front.wait_settled(0.05 * (attempt + 1))  # then a new connection keeps off that call's worker
    conn = ConnectorHTTPConnection(front.connector, front.port, timeout=timeout)
    conn.sock = sock
    try:
        with front.occupied(worker, drain_timeout=drain_timeout, reserved=reserved) as sent:
            conn.request(method, path, body=body or None, headers=dict(headers))
            sent()
            response = conn.getresponse()
            return _answer(response, response.read())
    finally:
        conn.close()


class ConnectionPool:
    """A LIFO pool of keep-alive connections to a server's SageMaker front-end, for requests.

    WSGI servers run every request on a thread of its own, so connections are pooled across threads rather
    than kept per thread; the most recently returned one is handed out first, so a few stay warm. A
    connection on a worker that a load or unload occupies is passed over (a new one is opened if none is
    left). A connection the server closed while it sat idle is replaced once, transparently.

    Parameters:
        max_idle: connections kept open while unused; more are closed when returned.
    """

    def __init__(self, *, max_idle: int = 32) -> None:
        self._idle: list[_Pooled] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle

    def request(
        self,
        front: FrontEnd,
        method: str,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
    ) -> Answer:
        """Send one request; return the status, the headers (names lower-cased) and the body.

        Raises:
            OSError, http.client.HTTPException: the server could not be reached or broke the connection.
        """
        for attempt in range(2):
            pooled, reused, counted = self._checkout(front, timeout)
            try:
                response, data = _exchange(pooled.conn, method, path, body, headers)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                pooled.conn.close()
                if reused and attempt == 0:
                    continue  # the server closed an idle keep-alive connection: one fresh try
                raise
            except BaseException:
                pooled.conn.close()
                raise
            finally:
                if counted:
                    front.end(pooled.worker)
            if response.will_close:
                pooled.conn.close()
            else:
                self._checkin(pooled)
            return _answer(response, data)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every idle connection (connections in use are closed when they come back)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for pooled in idle:
            pooled.conn.close()

    def _checkout(self, front: FrontEnd, timeout: float) -> tuple[_Pooled, bool, bool]:
        """A connection for one request, counted on its worker: (connection, reused, counted)."""
        stale: list[_Pooled] = []
        chosen: _Pooled | None = None
        with self._lock:
            for index in range(len(self._idle) - 1, -1, -1):
                pooled = self._idle[index]
                if pooled.front is not front:  # left over from a server that was started again
                    stale.append(self._idle.pop(index))
                elif front.begin(pooled.worker):
                    chosen = self._idle.pop(index)
                    break
        for pooled in stale:
            pooled.conn.close()
        if chosen is not None:
            if chosen.conn.sock is not None:
                chosen.conn.sock.settimeout(timeout)
            chosen.conn.timeout = timeout
            return chosen, True, True
        for attempt in range(_FRESH_TRIES):
            pooled = self._open(front, timeout)
            if front.begin(pooled.worker):
                return pooled, False, True
            if attempt == _FRESH_TRIES - 1:
                return pooled, False, False  # every worker is occupied: wait behind one, as a client would
            if pooled.worker == UNKNOWN_WORKER:
                pooled.conn.close()
            else:
                self._checkin(pooled)  # its worker is free again after the control call
            front.wait_settled(0.02 * (attempt + 1))  # a control call about to occupy it: then it is skipped
        raise AssertionError("unreachable")

    @staticmethod
    def _open(front: FrontEnd, timeout: float) -> _Pooled:
        sock, worker = front.connect(timeout=timeout)
        conn = ConnectorHTTPConnection(front.connector, front.port, timeout=timeout)
        conn.sock = sock
        return _Pooled(conn, front, worker)

    def _checkin(self, pooled: _Pooled) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(pooled)
                return
        pooled.conn.close()
