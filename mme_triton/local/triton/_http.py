"""Keep-alive HTTP connections to a server's port, shared by every thread that talks to it."""

from __future__ import annotations

import contextlib
import http.client
import queue
from collections.abc import Mapping

from mme_triton.local.triton.netns import Connector

__all__ = ["ConnectionPool", "ConnectorHTTPConnection"]


class ConnectorHTTPConnection(http.client.HTTPConnection):
    """An :class:`http.client.HTTPConnection` to ``port`` of a server, opened through its
    :class:`~mme_triton.local.triton.netns.Connector` (into the server's network namespace)."""

    def __init__(self, connector: Connector, port: int, *, timeout: float | None = None) -> None:
        super().__init__("127.0.0.1", port, timeout=timeout)
        self.connector = connector

    def connect(self) -> None:
        self.sock = self.connector.connect(self.port, timeout=self.timeout)


class ConnectionPool:
    """A LIFO pool of keep-alive connections to a server's port.

    WSGI servers run every request on a thread of its own, so connections are pooled across threads rather
    than kept per thread; the most recently returned one is handed out first, so a few stay warm. A
    connection the server closed while it sat idle is replaced once, transparently.

    Parameters:
        max_idle: connections kept open while unused; more are closed when returned.
    """

    def __init__(self, *, max_idle: int = 32) -> None:
        self._idle: queue.LifoQueue[tuple[ConnectorHTTPConnection, Connector]] = queue.LifoQueue()
        self._max_idle = max_idle

    def request(
        self,
        connector: Connector,
        port: int,
        method: str,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request; return the status, the headers (names lower-cased) and the body.

        Raises:
            OSError, http.client.HTTPException: the server could not be reached or broke the connection.
        """
        for attempt in range(2):
            conn, reused = self._checkout(connector, port, timeout)
            try:
                conn.request(method, path, body=body or None, headers=dict(headers))
                response = conn.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                if reused and attempt == 0:
                    continue  # the server closed an idle keep-alive connection: one fresh try
                raise
            except BaseException:
                conn.close()
                raise
            if response.will_close:
                conn.close()
            else:
                self._checkin(conn, connector)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every idle connection (connections in use are closed when they come back)."""
        with contextlib.suppress(queue.Empty):
            while True:
                self._idle.get_nowait()[0].close()

    def _checkout(
        self, connector: Connector, port: int, timeout: float
    ) -> tuple[ConnectorHTTPConnection, bool]:
        while True:
            try:
                conn, owner = self._idle.get_nowait()
            except queue.Empty:
                return ConnectorHTTPConnection(connector, port, timeout=timeout), False
            if owner is not connector or conn.port != port:  # left over from a server started again
                conn.close()
                continue
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.timeout = timeout
            return conn, True

    def _checkin(self, conn: ConnectorHTTPConnection, connector: Connector) -> None:
        if self._idle.qsize() >= self._max_idle:
            conn.close()
            return
        self._idle.put((conn, connector))
