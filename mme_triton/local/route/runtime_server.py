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

from mme_triton._inference_components import INFERENCE_COMPONENT_HEADER
from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS, TARGET_MODEL_HEADER, target_model_problem
from mme_triton.errors import LocalStackError
from mme_triton.local.route._http11 import HttpError, Message, MessageReader
from mme_triton.local.route._upstream import FAILED, TIMED_OUT, UpstreamPool, write
from mme_triton.local.route.responses import (
    RuntimeResponse,
    error_response,
    internal_failure,
    payload_too_large,
    request_id,
)
from mme_triton.local.route.status import STATUS_PATH, stack_status

if TYPE_CHECKING:
    from mme_triton.local.route._copies import CopyRuntime
    from mme_triton.local.route.components import ComponentEndpoint, ComponentRuntime
    from mme_triton.local.route.endpoint_runtime import EndpointRuntime
    from mme_triton.local.route.instance import FastPath
    from mme_triton.local.route.runtime import InvocationRuntime
    from mme_triton.local.triton.frontend import FrontEnd
    from mme_triton.local.triton.protocol import TritonLike

__all__ = ["RuntimeServer"]

logger = logging.getLogger(__name__)

_INVOCATIONS = re.compile(rb"^/endpoints/(?P<name>[^/?]+)/invocations/?(?:\?.*)?$")
_TARGET = TARGET_MODEL_HEADER.lower().encode()
_COMPONENT = INFERENCE_COMPONENT_HEADER.lower().encode()
_STATUS = STATUS_PATH.encode()
_NOT_FOUND = error_response(
    404, "UnknownOperationException", {"Message": "this port serves InvokeEndpoint only"}
)


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
        write(transport, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace"), response.body)
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
        self._upstreams: dict[int, UpstreamPool] = {}
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
        raw_component = message.headers.get(_COMPONENT)
        component = raw_component.decode("utf-8", "replace") if raw_component else None
        hosting = runtime.hosting(name) if component and not target_model else None
        if hosting is not None and component is not None:
            chosen, copy = hosting.take(component)
            if chosen is not None and copy is not None:
                self._forward_copy(hosting, chosen, copy, message.body, content_type, reply, started)
                return
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
        body = message.body
        self._run(lambda: runtime.handle(name, target_model, body, content_type, len(body), component), reply)

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

    def _pool_of(self, triton: TritonLike, front_end: FrontEnd) -> UpstreamPool:
        """The idle connections to ``triton``'s front-end (a server started again has a new one)."""
        loop = self._loop
        assert loop is not None
        pool = self._upstreams.get(id(triton))
        if pool is None or pool.front_end is not front_end:
            if pool is not None:
                pool.close()
            pool = self._upstreams[id(triton)] = UpstreamPool(loop, front_end)
        return pool

    def _forward_copy(
        self,
        hosting: ComponentEndpoint,
        component: ComponentRuntime,
        copy: CopyRuntime,
        body: bytes,
        content_type: str,
        reply: Callable[[RuntimeResponse], None],
        started: float,
    ) -> None:
        """Forward a request to a copy's ``POST /invocations`` (the copy counted it already)."""
        call = {"started": started}
        try:
            pool = self._pool_of(copy.triton, copy.triton.front_end)
        except RuntimeError as exc:  # its Triton is not running
            copy.release()
            response = hosting.failed(component, copy, exc)
            reply(response)
            hosting.record(component, response, call)
            return
        head = (
            f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1:{pool.front_end.port}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1", "replace")

        def answered(status: int, answer_type: bytes, answer: bytes) -> None:
            if status != FAILED and status != TIMED_OUT:
                call["answered"] = time.monotonic()
            copy.release()
            if status == TIMED_OUT:
                response = hosting.timed_out(component.name)
            elif status == FAILED:
                failure = LocalStackError(f"POST /invocations to {copy.copy_id} failed")
                response = hosting.failed(component, copy, failure)
            else:
                response = hosting.answer(component.name, status, answer_type.decode("latin-1"), answer)
            reply(response)
            hosting.record(component, response, call)

        call["sent"] = time.monotonic()
        pool.request(head, body, answered, INVOCATION_TIMEOUT_SECONDS)

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
        pool = self._pool_of(fast.triton, fast.front_end)
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
