"""Keep-alive HTTP connections to a local server, shared by every thread that talks to it."""

from __future__ import annotations

import contextlib
import http.client
import queue
from collections.abc import Mapping

__all__ = ["ConnectionPool"]


class ConnectionPool:
    """A LIFO pool of ``http.client`` connections to ``127.0.0.1:<port>``.

    WSGI servers run every request on a thread of its own, so connections are pooled across threads rather
    than kept per thread; the most recently returned one is handed out first, so a few stay warm. A
    connection the server closed while it sat idle is replaced once, transparently.

    Parameters:
        max_idle: connections kept open while unused; more are closed when returned.
    """

    def __init__(self, *, max_idle: int = 32) -> None:
        self._idle: queue.LifoQueue[tuple[http.client.HTTPConnection, int]] = queue.LifoQueue()
        self._max_idle = max_idle

    def request(
        self, port: int, method: str, path: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request; return the status, the headers (names lower-cased) and the body.

        Raises:
            OSError, http.client.HTTPException: the server could not be reached or broke the connection.
        """
        for attempt in range(2):
            conn, reused = self._checkout(port, timeout)
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
                self._checkin(conn, port)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every idle connection (connections in use are closed when they come back)."""
        with contextlib.suppress(queue.Empty):
            while True:
                self._idle.get_nowait()[0].close()

    def _checkout(self, port: int, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        while True:
            try:
                conn, conn_port = self._idle.get_nowait()
            except queue.Empty:
                return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout), False
            if conn_port != port:  # left over from a server that was restarted on another port
                conn.close()
                continue
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.timeout = timeout
            return conn, True

    def _checkin(self, conn: http.client.HTTPConnection, port: int) -> None:
        if self._idle.qsize() >= self._max_idle:
            conn.close()
            return
        self._idle.put((conn, port))
