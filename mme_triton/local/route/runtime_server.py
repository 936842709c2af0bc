"""InvokeEndpoint on a port of its own: a small asyncio HTTP/1.1 server in front of the endpoints' Tritons.

moto's server (werkzeug's development server: HTTP/1.0, a thread per request, a new connection for every
call) also answers InvokeEndpoint, for clients that only know one endpoint URL; this server is the fast
route. boto3 takes an endpoint URL per service (``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``, or the session's
clients from :meth:`~mme_triton.local.LocalStack.boto3_session`), so ``sagemaker-runtime`` clients reach it
while every other service stays on moto.

It keeps client connections alive and forwards a request for a loaded model to Triton's SageMaker
front-end over keep-alive connections, on the event loop, with callbacks rather than a task per request:
the body is passed on as it came, never parsed, and Triton's answer comes back as it is. Everything else
(a model to load, an error, a restart under way) goes to the same
:meth:`~mme_triton.local.route.runtime.InvocationRuntime.handle` the WSGI route uses, on a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, cast
from urllib.parse import unquote

from mme_triton._sagemaker import TARGET_MODEL_HEADER, target_model_problem
from mme_triton.errors import LocalStackError
from mme_triton.local.route._http11 import HttpError, Message, MessageReader
from mme_triton.local.route.responses import (
    RuntimeResponse,
    error_response,
    internal_failure,
    payload_too_large,
    request_id,
)
from mme_triton.local.route.status import STATUS_PATH, stack_status
from mme_triton.local.triton.frontend import UNKNOWN_WORKER

if TYPE_CHECKING:
    from mme_triton.local.route.endpoint_runtime import EndpointRuntime
    from mme_triton.local.route.instance import FastPath
    from mme_triton.local.route.runtime import InvocationRuntime
    from mme_triton.local.triton.frontend import FrontEnd

__all__ = ["RuntimeServer"]

logger = logging.getLogger(__name__)

_INVOCATIONS = re.compile(rb"^/endpoints/(?P<name>[^/?]+)/invocations/?(?:\?.*)?$")
_TARGET = TARGET_MODEL_HEADER.lower().encode()
_STATUS = STATUS_PATH.encode()
_IDLE_UPSTREAM = 64
_JOIN_LIMIT = 256 * 1024
_NOT_FOUND = error_response(
    404, "UnknownOperationException", {"Message": "this port serves InvokeEndpoint only"}
)

Answer = Callable[[int, bytes, bytes], None]
"""(status, Content-Type, body) of Triton's answer; :data:`FAILED` or :data:`TIMED_OUT` for no answer."""

FAILED = 0
"""The connection to Triton failed."""
TIMED_OUT = -1
"""Triton did not answer in time (the request may still run there)."""
_FRESH_TRIES = 4


def _write(transport: asyncio.BaseTransport, head: bytes, body: bytes) -> None:
    """Write a message: in one send when the body is small (each send on loopback costs a wake-up)."""
    transport = cast(asyncio.WriteTransport, transport)  # uvloop's transports are not subclasses
    if len(body) <= _JOIN_LIMIT:
        transport.write(head + body)
    else:
        transport.write(head)
        transport.write(body)


class _Upstream(asyncio.Protocol):
    """One keep-alive connection to Triton, one request at a time, on a known front-end worker."""

    def __init__(self, pool: _UpstreamPool, worker: int | None) -> None:
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
        _write(self._transport, head, body)

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


class _UpstreamPool:
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


class _Client(asyncio.Protocol):
    """One client connection: requests answered one after the other, kept alive."""

    def __init__(self, server: RuntimeServer) -> None:
        self._server = server
        self._reader = MessageReader(body_limit=server.runtime.max_payload_bytes)
        self._transport: asyncio.Transport | None = None
        self._queue: list[Message] = []
        self._busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._server.connections.add(self._transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._server.connections.discard(self._transport)
        self._transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self._queue.extend(self._reader.feed(data))
        except HttpError as exc:
            self._send(error_response(400, "BadRequest", {"Message": str(exc)}), close=True)
            return
        self._next()

    def _next(self) -> None:
        if self._busy or not self._queue or self._transport is None:
            return
        message = self._queue.pop(0)
        self._busy = True
        if message.headers.get(b"expect", b"").lower() == b"100-continue":
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self._server.answer(message, lambda response: self._done(message, response))

    def _done(self, message: Message, response: RuntimeResponse) -> None:
        self._busy = False
        self._send(response, close=not message.keep_alive)
        self._next()

    def _send(self, response: RuntimeResponse, *, close: bool = False) -> None:
        transport = self._transport
        if transport is None:
            return
        lines = [f"HTTP/1.1 {response.status_line}", *(f"{k}: {v}" for k, v in response.headers)]
        if close:
            lines.append("Connection: close")
        _write(transport, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace"), response.body)
        if close:
            transport.close()


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when it is installed (it is in the ``local`` extra), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class RuntimeServer:
    """The InvokeEndpoint route of ``runtime`` on ``http://127.0.0.1:<port>`` (a free port by default).

    Example::

        server = RuntimeServer(runtime)
        server.start(); server.url  # 'http://127.0.0.1:40123'
    """

    def __init__(self, runtime: InvocationRuntime, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.runtime = runtime
        self._host = host
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        # one pool per Triton process: a server started again has a new connector
        self._upstreams: dict[int, _UpstreamPool] = {}
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="invoke")
        self.connections: set[asyncio.Transport] = set()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` once started."""
        if self._server is None:
            raise RuntimeError("the runtime server is not running")
        return f"http://{self._host}:{self._port}"

    def start(self) -> None:
        """Start serving on a thread of its own."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = _new_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    loop.create_server(lambda: _Client(self), self._host, self._port, backlog=512)
                )
                self._port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                for upstream in self._upstreams.values():
                    upstream.close()
                loop.close()

        self._thread = threading.Thread(target=run, name="mme-triton-runtime", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise LocalStackError(f"cannot start the InvokeEndpoint server: {failure[0]}") from failure[0]
        logger.info("InvokeEndpoint route on %s", self.url)

    def stop(self) -> None:
        """Stop serving (requests in progress are cut off)."""
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        def shut() -> None:
            server.close()
            for transport in list(self.connections):
                transport.abort()
            loop.stop()

        loop.call_soon_threadsafe(shut)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._server = None

    # -- one request ---------------------------------------------------------------------------------

    def answer(self, message: Message, reply: Callable[[RuntimeResponse], None]) -> None:
        """Answer ``message`` through ``reply``, now (on the loop) or when Triton or a thread is done."""
        started = time.monotonic()
        method, path, _ = message.start
        match = _INVOCATIONS.match(path)
        if match is None and method == b"GET" and path.split(b"?")[0] == _STATUS:
            self._run(self._status, reply)
            return
        if match is None or method != b"POST":
            reply(_NOT_FOUND)
            return
        runtime = self.runtime
        if message.too_large:
            reply(payload_too_large(runtime.max_payload_bytes))
            return
        name = unquote(match.group("name").decode("latin-1"))
        raw_target = message.headers.get(_TARGET)
        target_model = raw_target.decode("utf-8", "replace") if raw_target is not None else None
        content_type = (
            message.headers.get(b"content-type", b"").decode("latin-1") or "application/octet-stream"
        )
        endpoint = runtime.endpoint(name)
        if (
            endpoint is not None
            and target_model
            and endpoint.models.mode == "MultiModel"
            and target_model_problem(target_model) is None
        ):
            fast = endpoint.fast_path(target_model)
            if fast is not None:
                self._forward(endpoint, fast, target_model, message.body, content_type, reply, started)
                return
        self._run(
            lambda: runtime.handle(name, target_model, message.body, content_type, len(message.body)), reply
        )

    def _run(self, work: Callable[[], RuntimeResponse], reply: Callable[[RuntimeResponse], None]) -> None:
        """Answer with what ``work`` returns, run on a thread."""
        future = self._pool.submit(work)
        loop = self._loop
        assert loop is not None

        def handled(done: ThreadFuture[RuntimeResponse]) -> None:
            try:
                response = done.result()
            except Exception as exc:  # the caller must get an answer, and a real error
                logger.exception("a request to the InvokeEndpoint route failed")
                response = internal_failure(f"{type(exc).__name__}: {exc}")
            loop.call_soon_threadsafe(reply, response)

        future.add_done_callback(handled)

    def _status(self) -> RuntimeResponse:
        """``GET /mme-triton/status``: :func:`~mme_triton.local.route.status.stack_status` as JSON."""
        document = {"endpoints": [status.to_dict() for status in stack_status(self.runtime)]}
        body = json.dumps(document).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        return RuntimeResponse(200, headers, body)

    def _forward(
        self,
        endpoint: EndpointRuntime,
        fast: FastPath,
        target_model: str,
        body: bytes,
        content_type: str,
        reply: Callable[[RuntimeResponse], None],
        started: float,
    ) -> None:
        loop = self._loop
        assert loop is not None
        pool = self._upstreams.get(id(fast.triton))
        if pool is None or pool.front_end is not fast.front_end:
            if pool is not None:
                pool.close()
            pool = self._upstreams[id(fast.triton)] = _UpstreamPool(loop, fast.front_end)
        head = (
            f"POST /models/{fast.model_hash}/invoke HTTP/1.1\r\nHost: 127.0.0.1:{fast.front_end.port}\r\n"
            f"{TARGET_MODEL_HEADER}: {target_model}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1", "replace")

        call = {"started": started, "hit": 1.0}
        instance = fast.instance

        def answered(status: int, answer_type: bytes, answer: bytes) -> None:
            if status != FAILED and status != TIMED_OUT:
                call["answered"] = time.monotonic()
            instance.release(target_model)
            if status == TIMED_OUT:
                response = instance.timed_out(target_model)
            elif status == FAILED:
                failure = LocalStackError(
                    f"POST /models/{fast.model_hash}/invoke to Triton on {fast.triton.address} failed"
                )
                response = instance.forward_failed(fast.triton, failure)
            elif 200 <= status < 300:
                response = RuntimeResponse(
                    status,
                    [
                        ("Content-Type", answer_type.decode("latin-1") or "application/octet-stream"),
                        ("x-Amzn-Invoked-Production-Variant", endpoint.models.variant_name),
                        ("x-amzn-RequestId", request_id()),
                        ("Content-Length", str(len(answer))),
                    ],
                    answer,
                )
            else:
                response = instance.answer(target_model, status, answer_type.decode("latin-1"), answer)
            reply(response)
            endpoint.record(instance, target_model, response, call)

        call["sent"] = time.monotonic()
        pool.request(head, body, answered, instance.invoke_timeout)
