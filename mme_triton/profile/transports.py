"""How a profile's clients reach a target, and how it reads Triton's statistics.

- :class:`HTTPConnection` — one keep-alive HTTP/1.1 connection (:mod:`http.client`) posting the encoded
  bodies: to the embedded stack's InvokeEndpoint route (``POST /endpoints/<name>/invocations`` with the
  TargetModel header, the request SageMaker's runtime receives), or to Triton's KServe v2 route
  (``POST /v2/models/<name>/infer`` with ``Inference-Header-Content-Length``);
- :class:`InvokeEndpointConnection` — InvokeEndpoint through an ``MMEClient`` (``infer_raw``: signed, for
  a live endpoint, on the client's fast path, so the client's own cost stays out of the measurement),
  retries off so that every failure is counted;
- :func:`triton_statistics` — Triton's cumulative statistics of one model
  (``GET /v2/models/<name>/stats``), for the server-side split of a request's time.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from mme_triton._sagemaker import TARGET_MODEL_HEADER, error_code, error_message, http_status
from mme_triton.profile.inputs import Request

__all__ = [
    "HTTPConnection",
    "InvokeEndpointConnection",
    "error_text",
    "first_answer",
    "http_json",
    "triton_statistics",
]

_KEPT = 4096
_READ_SIZE = 256 * 1024
_HEAD_LIMIT = 64 * 1024
# Answers that mean "not yet": SageMaker's ModelNotReadyException (429) and a container being replaced (503).
_NOT_READY_STATUSES = frozenset({429, 503})
_NOT_READY_CODES = frozenset({"ModelNotReadyException", "ServiceUnavailable"})


class HTTPConnection:
    """One keep-alive HTTP/1.1 connection posting request bodies to ``url`` + ``path``.

    ``kserve=True`` speaks Triton's own HTTP protocol (binary tensors announced by
    ``Inference-Header-Content-Length``); otherwise the body goes with its SageMaker content type and
    ``target_model`` in the TargetModel header.

    Plain ``http://`` is spoken on a socket of its own: each request's bytes are built once and sent in one
    call, and the answer is read by ``Content-Length`` (or chunks) and dropped but for an error's first
    bytes, about a third of :mod:`http.client`'s CPU per request (the generator shares the machine with
    what it measures). ``https://`` goes through :mod:`http.client`.
    """

    def __init__(
        self,
        url: str,
        path: str,
        *,
        target_model: str | None = None,
        kserve: bool = False,
        timeout: float = 70.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"expected an http(s) URL, got {url!r}")
        self._host = parsed.hostname
        self._port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self._tls = parsed.scheme == "https"
        self._path = parsed.path.rstrip("/") + path
        self._target = target_model
        self._kserve = kserve
        self._timeout = timeout
        self._socket: socket.socket | None = None
        self._tls_connection: http.client.HTTPSConnection | None = None
        self._buffer = b""
        self._messages: dict[int, tuple[Request, bytes]] = {}

    def headers(self, request: Request) -> dict[str, str]:
        if self._kserve:
            size = request.json_header_size
            if size is None:
                return {"Content-Type": "application/json"}
            return {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(size)}
        headers = {"Content-Type": request.content_type}
        if self._target is not None:
            headers[TARGET_MODEL_HEADER] = self._target
        return headers

    def exchange(self, request: Request) -> tuple[int, bytes]:
        """Send one request; the status and the first bytes of the body (the whole body up to 4 KiB).

        Raises:
            OSError, http.client.HTTPException: the connection failed (it is closed; the next request
                opens a new one).
        """
        if self._tls:
            return self._exchange_tls(request)
        message = self._message(request)
        for attempt in (0, 1):
            reused = self._socket is not None
            try:
                if self._socket is None:
                    self._socket = socket.create_connection((self._host, self._port), timeout=self._timeout)
                    self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self._buffer = b""
                self._socket.sendall(message)
                status, body, keep = self._read()
            except _Closed:
                self.close()
                if attempt == 0 and reused:
                    continue  # the server closed an idle kept-alive connection: send it again, once
                raise http.client.RemoteDisconnected("the server closed the connection") from None
            except BaseException:
                self.close()
                raise
            if not keep:
                self.close()
            return status, body
        raise AssertionError("unreachable")  # pragma: no cover

    def send(self, request: Request) -> str | None:
        try:
            status, body = self.exchange(request)
        except (OSError, http.client.HTTPException) as exc:
            return f"{type(exc).__name__}: {exc}"
        if status != 200:
            return error_text(status, body)
        return None

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._tls_connection is not None:
            self._tls_connection.close()

    def _message(self, request: Request) -> bytes:
        found = self._messages.get(id(request))
        if found is not None and found[0] is request:
            return found[1]
        head = [f"POST {self._path} HTTP/1.1", f"Host: {self._host}:{self._port}"]
        head += [f"{name}: {value}" for name, value in self.headers(request).items()]
        head.append(f"Content-Length: {len(request.body)}")
        message = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + request.body
        self._messages[id(request)] = (request, message)
        return message

    def _receive(self) -> bytes:
        assert self._socket is not None
        data = self._socket.recv(_READ_SIZE)
        if not data:
            raise _Closed
        return data

    def _read(self) -> tuple[int, bytes, bool]:
        """The answer's status, its first bytes, and whether the connection stays open."""
        buffer = self._buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > _HEAD_LIMIT:
                raise http.client.HTTPException("an answer's head is over 64 KiB")
            buffer += self._receive()
        lines = buffer[:end].decode("latin-1").split("\r\n")
        buffer = buffer[end + 4 :]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise http.client.BadStatusLine(lines[0])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        keep = fields.get("connection", "").lower() != "close" and parts[0] == "HTTP/1.1"
        kept = bytearray()
        if fields.get("transfer-encoding", "").lower() == "chunked":
            while True:
                while (line_end := buffer.find(b"\r\n")) < 0:
                    buffer += self._receive()
                size = int(buffer[:line_end].split(b";")[0], 16)
                buffer = buffer[line_end + 2 :]
                buffer = self._skip(buffer, size, kept)
                while len(buffer) < 2:
                    buffer += self._receive()
                buffer = buffer[2:]  # the chunk's CRLF
                if size == 0:
                    break
        elif "content-length" in fields:
            buffer = self._skip(buffer, int(fields["content-length"]), kept)
        else:
            keep = False  # the body lasts until the server closes the connection
            try:
                while True:
                    buffer = self._skip(buffer + self._receive(), 0, kept)
            except _Closed:
                pass
        self._buffer = buffer
        return int(parts[1]), bytes(kept), keep

    def _skip(self, buffer: bytes, size: int, kept: bytearray) -> bytes:
        """Consume ``size`` bytes of body (keeping the first 4 KiB in ``kept``); return what follows."""
        while len(buffer) < size:
            kept += buffer[: max(0, _KEPT - len(kept))]
            size -= len(buffer)
            buffer = self._receive()
        kept += buffer[: min(size, max(0, _KEPT - len(kept)))]
        return buffer[size:]

    def _exchange_tls(self, request: Request) -> tuple[int, bytes]:
        if self._tls_connection is None:
            self._tls_connection = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout)
        connection = self._tls_connection
        try:
            connection.request("POST", self._path, body=request.body, headers=self.headers(request))
            response = connection.getresponse()
            return response.status, response.read()[:_KEPT]
        except BaseException:
            connection.close()
            raise


class _Closed(Exception):
    """The server closed the connection."""


class InvokeEndpointConnection:
    """InvokeEndpoint through a shared ``MMEClient`` (clients are thread-safe) made with no retries."""

    def __init__(self, client: Any, target_model: str) -> None:
        self._client = client
        self._target = target_model

    def exchange(self, request: Request) -> tuple[int, str]:
        """``(200, "")``, or the HTTP status and ``"<code>: <message>"`` of the error."""
        from botocore.exceptions import BotoCoreError, ClientError

        from mme_triton.errors import InferenceError

        try:
            self._client.infer_raw(self._target, request.body, request.content_type)
        except InferenceError as exc:
            cause = exc.__cause__  # what botocore raised (or would have), for SageMaker's own status
            if isinstance(cause, ClientError):
                code = error_code(cause)
                status = 429 if code in _NOT_READY_CODES else http_status(cause) or 500
                fields = {**cause.response.get("Error", {}), **cause.response}
                return status, f"{code}: {_cause(fields) or error_message(cause)}"[:_KEPT]
            if isinstance(cause, BotoCoreError):
                return 0, f"{type(cause).__name__}: {cause}"
            raise
        return 200, ""

    def send(self, request: Request) -> str | None:
        status, text = self.exchange(request)
        return None if status == 200 else text

    def close(self) -> None:
        pass


def first_answer(connection: Any, request: Request, *, timeout: float = 360.0) -> tuple[float, str | None]:
    """Seconds until the first successful answer (retrying "not ready yet" answers), and the error if the
    request failed otherwise or ``timeout`` passed: a cold start as a client sees it."""
    started = time.perf_counter()
    deadline = started + timeout
    delay = 0.05
    while True:
        try:
            status, body = connection.exchange(request)
        except (OSError, http.client.HTTPException) as exc:
            return time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - started
        if status == 200:
            return elapsed, None
        if status not in _NOT_READY_STATUSES or time.perf_counter() + delay > deadline:
            return elapsed, error_text(status, body) if isinstance(body, bytes) else f"HTTP {status}: {body}"
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def error_text(status: int, body: bytes) -> str:
    """``"HTTP <status>: <cause>"`` for an error answer, the cause whole.

    The cause is taken out of the body where it has a known shape: a SageMaker ``ModelError``'s
    ``OriginalMessage`` with its ``OriginalStatusCode`` (what the model answered; Triton's
    ``{"error": "..."}`` unwrapped), another SageMaker error's ``Message``, Triton's own ``error``; any
    other body is its text. A connection keeps the first 4 KiB of a body, which bounds it.
    """
    text = body.decode("utf-8", "replace").strip()
    try:
        document = json.loads(text) if text.startswith("{") else None
    except ValueError:
        document = None
    cause = _cause(document) if isinstance(document, Mapping) else None
    return f"HTTP {status}: {cause or text}"


def _cause(document: Mapping[str, Any]) -> str | None:
    from mme_triton.client._errors_map import triton_message

    original = document.get("OriginalMessage")
    if isinstance(original, str):
        return f"the model answered {document.get('OriginalStatusCode', '?')}: {triton_message(original)}"
    for key in ("Message", "message", "error"):
        if isinstance(document.get(key), str):
            return str(document[key])
    return None


def http_json(url: str, *, method: str = "GET", body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    """One JSON request with :mod:`http.client`: the status and the decoded answer (text if not JSON)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"expected an http(s) URL, got {url!r}")
    factory = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
    connection = factory(parsed.hostname, parsed.port, timeout=timeout)
    path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
    payload = None if body is None else json.dumps(body).encode()
    try:
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        connection.request(method, path or "/", body=payload, headers=headers)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(raw) if raw else None
    except ValueError:
        return response.status, raw.decode("utf-8", "replace")


def triton_statistics(http_url: str, model_name: str) -> Callable[[], Mapping[str, int] | None]:
    """A reader of Triton's cumulative statistics for ``model_name`` (all versions summed).

    Keys: ``success_count``, ``queue_ns``, ``compute_input_ns``, ``compute_infer_ns``,
    ``compute_output_ns``, ``inference_count``, ``execution_count``.
    """
    url = f"{http_url.rstrip('/')}/v2/models/{urllib.parse.quote(model_name, safe='')}/stats"

    def read() -> Mapping[str, int] | None:
        status, answer = http_json(url, timeout=5.0)
        if status != 200 or not isinstance(answer, Mapping):
            return None
        totals = dict.fromkeys(
            (
                "success_count",
                "queue_ns",
                "compute_input_ns",
                "compute_infer_ns",
                "compute_output_ns",
                "inference_count",
                "execution_count",
            ),
            0,
        )
        for model in answer.get("model_stats", []):
            stats = model.get("inference_stats", {})
            totals["success_count"] += int(stats.get("success", {}).get("count", 0))
            for part in ("queue", "compute_input", "compute_infer", "compute_output"):
                totals[f"{part}_ns"] += int(stats.get(part, {}).get("ns", 0))
            totals["inference_count"] += int(model.get("inference_count", 0))
            totals["execution_count"] += int(model.get("execution_count", 0))
        return totals

    return read
