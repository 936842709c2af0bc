"""Keep-alive connections from the InvokeEndpoint server to a Triton's SageMaker front-end.

A request is written to Triton on the event loop and its answer handed to a callback (no task, no thread per
request); connections are pooled per Triton process, each on a known front-end worker
(:class:`~mme_triton.local.triton.frontend.FrontEnd`), so that a request never waits behind a load or
unload that occupies a worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from mme_triton.local.route._http11 import HttpError, MessageReader
from mme_triton.local.triton.frontend import UNKNOWN_WORKER

if TYPE_CHECKING:
    from mme_triton.local.triton.frontend import FrontEnd

__all__ = ["FAILED", "TIMED_OUT", "Answer", "UpstreamPool", "write"]

_IDLE_UPSTREAM = 64
_JOIN_LIMIT = 256 * 1024

Answer = Callable[[int, bytes, bytes], None]
"""(status, Content-Type, body) of Triton's answer; :data:`FAILED` or :data:`TIMED_OUT` for no answer."""

FAILED = 0
"""The connection to Triton failed."""
TIMED_OUT = -1
"""Triton did not answer in time (the request may still run there)."""
_FRESH_TRIES = 4


def write(transport: asyncio.BaseTransport, head: bytes, body: bytes) -> None:
    """Write a message: in one send when the body is small (each send on loopback costs a wake-up)."""
    transport = cast(asyncio.WriteTransport, transport)  # uvloop's transports are not subclasses
    if len(body) <= _JOIN_LIMIT:
        transport.write(head + body)
    else:
        transport.write(head)
        transport.write(body)


class _Upstream(asyncio.Protocol):
    """One keep-alive connection to Triton, one request at a time, on a known front-end worker."""

    def __init__(self, pool: UpstreamPool, worker: int | None) -> None:
        self._pool = pool
        self.worker = worker
        self._reader = MessageReader(body_limit=1 << 62)
        self._transport: asyncio.Transport | None = None
        self._answer: Answer | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def send(self, head: bytes, body: bytes, answer: Answer, timeout: float, *, counted: bool) -> None:
        assert self._transport is not None
        self._answer = answer
        self._counted = counted
        self._timer = self._pool.loop.call_later(timeout, self._timed_out)
        write(self._transport, head, body)

    def data_received(self, data: bytes) -> None:
        try:
            messages = self._reader.feed(data)
        except HttpError:
            self._fail(FAILED)
            return
        for message in messages:
            answer = self._finish()
            if answer is None:
                continue
            if message.keep_alive:
                self._pool.checkin(self)
            elif self._transport is not None:
                self._transport.close()
            answer(int(message.start[1]), message.headers.get(b"content-type", b""), message.body)

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.forget(self)
        self._fail(FAILED)

    def _timed_out(self) -> None:
        self._fail(TIMED_OUT)

    def _finish(self) -> Answer | None:
        """The request is over: its answer callback (once), its count on the worker released."""
        answer, self._answer = self._answer, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._counted:
            self._counted = False
            self._pool.front_end.end(self.worker)
        return answer

    def _fail(self, status: int) -> None:
        answer = self._finish()
        if self._transport is not None:
            self._transport.abort()
        if answer is not None:
            answer(status, b"", b"")

    @property
    def idle(self) -> bool:
        return self._answer is None and self._transport is not None and not self._transport.is_closing()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class UpstreamPool:
    """Idle keep-alive connections to one Triton's SageMaker front-end.

    A request takes the most recently used idle connection whose worker no load or unload occupies
    (:class:`~mme_triton.local.triton.frontend.FrontEnd`); otherwise a new one, opened through the
    server's connector on a thread (it may block) and kept if a control call holds its worker.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, front_end: FrontEnd) -> None:
        self.loop = loop
        self.front_end = front_end
        self._idle: list[_Upstream] = []

    def request(self, head: bytes, body: bytes, answer: Answer, timeout: float) -> None:
        for index in range(len(self._idle) - 1, -1, -1):
            connection = self._idle[index]
            if not connection.idle:
                del self._idle[index]
            elif self.front_end.begin(connection.worker):
                del self._idle[index]
                connection.send(head, body, answer, timeout, counted=True)
                return
        task = self.loop.create_task(self._connect())

        def connected(done: asyncio.Future[tuple[_Upstream, bool]]) -> None:
            if done.cancelled() or done.exception() is not None:
                answer(FAILED, b"", b"")
            else:
                connection, counted = done.result()
                connection.send(head, body, answer, timeout, counted=counted)

        task.add_done_callback(connected)

    async def _connect(self) -> tuple[_Upstream, bool]:
        """A new connection on a worker no control call occupies (counted on it), or after a few tries the
        last one opened, uncounted (every worker occupied: wait behind one, as a client would)."""
        front = self.front_end
        for attempt in range(_FRESH_TRIES):
            sock, worker = await self.loop.run_in_executor(None, lambda: front.connect(timeout=10.0))
            sock.setblocking(False)
            upstream = _Upstream(self, worker)
            _, connection = await self.loop.create_connection(lambda: upstream, sock=sock)  # noqa: B023
            if front.begin(worker):
                return connection, True
            if attempt == _FRESH_TRIES - 1:
                return connection, False
            if worker == UNKNOWN_WORKER:
                connection.close()
            else:
                self.checkin(connection)
            await self.loop.run_in_executor(None, front.wait_settled, 0.02 * (attempt + 1))
        raise AssertionError("unreachable")

    def checkin(self, connection: _Upstream) -> None:
        if len(self._idle) < _IDLE_UPSTREAM:
            self._idle.append(connection)
        else:
            connection.close()

    def forget(self, connection: _Upstream) -> None:
        with contextlib.suppress(ValueError):
            self._idle.remove(connection)

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
