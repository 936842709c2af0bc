"""The fast path's HTTP exchange on the running event loop: :class:`AsyncioTransport` (``AsyncMMEClient``).

HTTP/1.1 over keep-alive connections of its own, each an :class:`asyncio.BufferedProtocol` whose answers
:class:`~mme_triton.client._answer.AnswerReader` reads straight from the loop's reads (the reader the
threads' transport uses). A request costs the loop one write and, once the answer is whole, one wakeup of
the waiting task: no task, stream, response object or timer of its own. The read timeout (no byte of
the answer for ``read_timeout`` seconds) is one timer for all the requests in flight, which looks at
them every tenth of the timeout (at most every second), so a timeout fires at most that much late.

The connections are set up as the botocore client sets up its own (the connect and read timeouts, the
socket options, the TLS verification and client certificate) and pooled as aiohttp's connector pools
them: at most ``max_pool_connections`` open at once, idle ones kept alive and reused, requests beyond
that waiting for a free one in turn. A kept-alive connection the server closed while it sat idle is
noticed as the loop runs; one closed just as a request was written to it fails before any byte of an
answer arrives, and the request goes once more on another connection.

Failures raise the botocore exceptions urllib3's would (see ``_transports.py``).
"""

from __future__ import annotations

import asyncio
import collections
import http.client
import urllib.parse
from collections.abc import Callable
from typing import Any

from mme_triton.client._answer import AnswerReader
from mme_triton.client._transports import connect_error, exchange_error, message, tls_context
from mme_triton.client._wire import Answer, Wire, WireRequest

__all__ = ["AsyncioTransport"]


class _Resend(Exception):
    """A kept-alive connection closed before any byte of the answer came: send the request again."""


class _ReadTimeout(TimeoutError):
    """No byte of the answer arrived for ``read_timeout`` seconds."""


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection: its transport, the reader of its answers, the request in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float | None) -> None:
        self.transport: asyncio.Transport | None = None
        self._loop = loop
        self.reader = AnswerReader()
        #: the connection is closed, or closing: it takes no more requests
        self.lost = False
        #: the pool it belongs to (AsyncioTransport.close starts a new one)
        self.pool = 0
        #: called once the connection is lost
        self.on_lost: Callable[[_Connection], None] = lambda connection: None
        self._read_timeout = read_timeout
        self._answered = 0
        self._reused = False
        self._waiter: asyncio.Future[None] | None = None
        #: when the last bytes arrived (or the request went out), for the read timeout
        self.last_read = 0.0

    # -- asyncio's side -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.close()
            return
        self.last_read = self._loop.time()
        try:
            done = self.reader.buffer_updated(nbytes)
        except http.client.HTTPException as exc:
            self._finish(exc)
            self.close()
            return
        if done:
            self._answered += 1
            if not self.reader.keep_alive:
                self.close()
            self._finish(None)

    def eof_received(self) -> bool:
        if self._waiter is not None:
            try:
                if self.reader.eof_received():  # a body that lasts until the server closes
                    self._answered += 1
                    self._finish(None)
            except (http.client.HTTPException, OSError) as exc:
                self._finish(self._lost(exc))
        self.lost = True
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.on_lost(self)
        if self._waiter is not None:
            self._finish(self._lost(exc or _closed()))

    # -- the request's side ---------------------------------------------------------------------------

    def exchange(self, head: bytes, body: Any) -> asyncio.Future[None]:
        """Write one request; the future is done once its answer is whole (in :attr:`reader`)."""
        assert self.transport is not None
        loop = self._loop
        self.reader.reset()
        self._reused = self._answered > 0
        self._waiter = waiter = loop.create_future()
        self.last_read = loop.time()
        try:
            self.transport.write(head)
            if body is not None:
                self.transport.write(body)
        except Exception as exc:  # a transport closed under it (uvloop raises, asyncio logs)
            self._finish(exc)
        return waiter

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()

    def _lost(self, exc: BaseException) -> BaseException:
        """The failure of a connection lost in an exchange: a resend when nothing of the answer came on a
        connection that had carried requests before (the server closed it as it was reused)."""
        if self._reused and not self.reader.received:
            return _Resend()
        return exc

    @property
    def busy(self) -> bool:
        """Whether a request waits for its answer."""
        return self._waiter is not None

    def expire(self, now: float) -> None:
        """Fail the request in flight when nothing arrived for ``read_timeout`` seconds."""
        timeout = self._read_timeout
        if self._waiter is not None and timeout is not None and now - self.last_read >= timeout:
            self._finish(_ReadTimeout(f"no byte of the answer for {timeout} s"))
            self.close()

    def _finish(self, error: BaseException | None) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


def _closed() -> http.client.RemoteDisconnected:
    return http.client.RemoteDisconnected("the server closed the connection without an answer")


class AsyncioTransport:
    """Requests on the event loop the client is first used on, over a pool of its own connections."""

    def __init__(self, wire: Wire) -> None:
        config = wire.client.meta.config
        parts = urllib.parse.urlsplit(wire.endpoint_url)
        self._tls = tls_context(wire)
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls is not None else 80)
        self._limit = int(config.max_pool_connections)
        self._connect_timeout = config.connect_timeout
        self._read_timeout = config.read_timeout
        self._socket_options = list(wire.http_session._socket_options or ())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Connection] = []
        self._open = 0  # connections open or opening, idle ones included
        self._waiting: collections.deque[asyncio.Future[_Connection | None]] = collections.deque()
        self._pool = 0  # counts the pools :meth:`close` ended
        self._connections: set[_Connection] = set()  # those open, for the read timeouts
        self._sweeping: asyncio.AbstractEventLoop | None = None  # the loop the timeouts are looked at on
        # how often the read timeouts are looked at: a timeout fires at most a tenth of itself late
        self._tick = None if self._read_timeout is None else min(1.0, max(0.01, self._read_timeout / 10))

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError(
                "an AsyncMMEClient serves the event loop it was first used on; make one client per loop"
            )
        return loop

    async def send(self, request: WireRequest) -> Answer:
        url = request.url
        head, body = message(request)
        loop = self._running_loop()
        for resend in (True, False):
            connection = self._idle_connection() or await self._acquire(loop, url)
            if self._sweeping is not loop and self._tick is not None:
                self._sweeping = loop
                loop.call_later(self._tick, self._sweep, loop)
            try:
                await connection.exchange(head, body)
            except _Resend as exc:
                self._release(connection)
                if resend:
                    continue
                raise exchange_error(_closed(), request) from exc
            except BaseException as exc:
                connection.close()
                self._release(connection)
                error = exchange_error(exc, request)
                if error is exc:
                    raise
                raise error from exc
            reader = connection.reader
            answer = Answer(url, reader.status, reader.headers, reader.content)
            self._release(connection)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Fail the requests that waited ``read_timeout`` for a byte; look again while any is in flight
        (one timer for all, rather than one per request)."""
        now = loop.time()
        busy = [connection for connection in self._connections if connection.busy]
        for connection in busy:
            connection.expire(now)
        if busy and self._tick is not None:
            loop.call_later(self._tick, self._sweep, loop)
        elif self._sweeping is loop:
            self._sweeping = None

    def _idle_connection(self) -> _Connection | None:
        """An idle connection still open, or ``None``."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.lost and not (connection.transport and connection.transport.is_closing()):
                return connection
            connection.close()
            self._open -= 1
        return None

    async def _acquire(self, loop: asyncio.AbstractEventLoop, url: str) -> _Connection:
        """An idle connection, a new one while fewer than the limit are open, else the next one freed."""
        while True:
            connection = self._idle_connection()
            if connection is not None:
                return connection
            if self._open < self._limit:
                self._open += 1
                try:
                    return await self._connect(loop, url)
                except BaseException:
                    self._open -= 1
                    self._wake(None)
                    raise
            waiter: asyncio.Future[_Connection | None] = loop.create_future()
            self._waiting.append(waiter)
            try:
                handed = await waiter
            except BaseException:  # cancelled while waiting: pass on what was handed over meanwhile
                if not waiter.done():
                    waiter.cancel()
                elif not waiter.cancelled():
                    self._pass_on(waiter.result())
                raise
            if handed is not None:
                return handed

    async def _connect(self, loop: asyncio.AbstractEventLoop, url: str) -> _Connection:
        """A new connection (TLS handshake done), or botocore's exception for the failure."""
        opening = loop.create_connection(
            lambda: _Connection(loop, self._read_timeout),
            self._host,
            self._port,
            ssl=self._tls,
            server_hostname=self._host if self._tls is not None else None,
        )
        try:
            _, connection = await asyncio.wait_for(opening, self._connect_timeout)
        except OSError as exc:  # TimeoutError and ssl.SSLError among them
            raise connect_error(exc, url) from exc
        except asyncio.TimeoutError as exc:  # Python 3.10's is not the built-in TimeoutError
            raise connect_error(TimeoutError(str(exc) or "timed out"), url) from exc
        assert connection.transport is not None
        connection.pool = self._pool
        self._connections.add(connection)
        connection.on_lost = self._connections.discard
        sock = connection.transport.get_extra_info("socket")
        if sock is not None:
            for option in self._socket_options:
                sock.setsockopt(*option)
        return connection

    def _release(self, connection: _Connection) -> None:
        """Give a connection back: to the first request waiting for one, else to the idle ones; a lost
        one frees its place. A connection of the pool before :meth:`close` is closed."""
        if connection.pool != self._pool:
            connection.close()
        elif connection.lost:
            self._open -= 1
            self._wake(None)
        elif not self._wake(connection):
            self._idle.append(connection)

    def _pass_on(self, handed: _Connection | None) -> None:
        if handed is None:
            self._wake(None)
        else:
            self._release(handed)

    def _wake(self, connection: _Connection | None) -> bool:
        """Hand ``connection`` (or, with ``None``, a free place) to the first request still waiting."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return True
        return False

    def _wake_all(self) -> None:
        """Send the requests waiting for a connection of the pool that ended on to open their own."""
        while self._wake(None):
            pass

    async def close(self) -> None:
        """Close the idle connections (those in use close once answered); the next request starts a new
        pool, on the loop it runs on."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        self._pool += 1
        self._open = 0
        self._loop = None
        self._wake_all()
        await asyncio.sleep(0)  # the transports close on the loop's next turn
