"""The HTTP exchange of the fast path: one request out, one answer back, failures as botocore's exceptions.

- :class:`SocketTransport` (``MMEClient``) speaks HTTP/1.1 on keep-alive sockets it pools itself (the
  answers read by :class:`~mme_triton.client._answer.AnswerReader`), set up as the botocore client sets
  up its own: the connect and read timeouts, the socket options (``TCP_NODELAY``, ``tcp_keepalive``),
  the TLS verification (CA bundle, ``verify=False``) and client certificate, at most
  ``max_pool_connections`` idle connections, and an idle connection the server closed is dropped before
  it is used, as urllib3 drops it.
- ``AsyncMMEClient``'s transport, on the event loop, is in ``_aio_transport.py``: the same reader, the
  same request bytes (:func:`message`) and TLS context (:func:`tls_context`).

Neither goes through a proxy: a client configured with one sends through botocore (``Wire.of``).

A failure to exchange raises the botocore exception ``URLLib3Session.send`` raises for it
(``EndpointConnectionError``, ``ConnectTimeoutError``, ``ReadTimeoutError``, ``ConnectionClosedError``,
``SSLError``, ``HTTPClientError``), so the retry handlers and the error mapping read it as they read
botocore's.
"""

from __future__ import annotations

import collections
import os
import socket
import ssl
import struct
import sys
import urllib.parse
import warnings
from http.client import HTTPException
from typing import Any

from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ReadTimeoutError,
    SSLError,
)
from botocore.httpsession import get_cert_path
from urllib3.exceptions import InsecureRequestWarning
from urllib3.util.ssl_ import create_urllib3_context

from mme_triton.client._answer import AnswerReader
from mme_triton.client._signing import signed_host
from mme_triton.client._wire import Answer, Wire, WireRequest

__all__ = ["SocketTransport", "connect_error", "exchange_error", "message", "tls_context"]

# Bodies up to this size are sent in one call with the head (copied once); larger ones after it.
_JOINED_BODY = 64 * 1024
# SO_RCVTIMEO and SO_SNDTIMEO take a struct timeval, two C longs on Linux.
_SYSTEM_TIMEOUTS = sys.platform.startswith("linux") and hasattr(socket, "SO_RCVTIMEO")


def tls_context(wire: Wire) -> ssl.SSLContext | None:
    """The TLS context botocore's session would give its connections, ``None`` for ``http://``."""
    if not wire.endpoint_url.lower().startswith("https"):
        return None
    context = create_urllib3_context()
    verify = wire.http_session._verify
    if verify:
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = True
        bundle = str(get_cert_path(verify))
        if os.path.isdir(bundle):
            context.load_verify_locations(capath=bundle)
        else:
            context.load_verify_locations(cafile=bundle)
    else:
        # what urllib3 says of every such request botocore sends
        warnings.warn(
            f"certificate verification is off for {wire.endpoint_url} (verify=False)",
            InsecureRequestWarning,
            stacklevel=2,
        )
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = wire.client.meta.config.client_cert
    if isinstance(cert, tuple):
        context.load_cert_chain(cert[0], keyfile=cert[1])
    elif cert:
        context.load_cert_chain(cert)
    return context


def connect_error(exc: BaseException, url: str) -> BaseException:
    """The botocore exception for a failure to connect (what ``URLLib3Session.send`` raises)."""
    if isinstance(exc, ssl.SSLError):  # the handshake: a certificate refused, a protocol error
        return SSLError(endpoint_url=url, error=exc)
    if isinstance(exc, TimeoutError):
        return ConnectTimeoutError(endpoint_url=url, error=exc)
    if isinstance(exc, OSError):  # refused, unreachable, no such host (socket.gaierror)
        return EndpointConnectionError(endpoint_url=url, error=exc)
    return exc


def exchange_error(exc: BaseException, request: WireRequest) -> BaseException:
    """The botocore exception for a failure of an exchange on an open connection (as urllib3's)."""
    url = request.url
    if isinstance(exc, ssl.SSLError):
        return SSLError(endpoint_url=url, error=exc)
    # a timeout: TimeoutError from Python's own, BlockingIOError (EAGAIN) from the system's SO_RCVTIMEO
    if isinstance(exc, TimeoutError | BlockingIOError):
        return ReadTimeoutError(endpoint_url=url, error=exc)
    if isinstance(exc, OSError | HTTPException):  # reset, closed, a bad answer
        return ConnectionClosedError(error=exc, request=request, endpoint_url=url)
    if isinstance(exc, Exception):
        return HTTPClientError(error=exc)
    return exc


class _Resend(Exception):
    """A kept-alive connection failed before any byte of the answer came: send the request again."""


class _Connection:
    """One kept-alive connection: its socket, the reader of its answers, whether it has carried one."""

    __slots__ = ("reader", "sock", "used")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = AnswerReader()
        self.used = False


class SocketTransport:
    """Requests over a pool of keep-alive sockets of its own (thread-safe).

    Each request is written in one call (head and body together, but for large bodies) and its answer
    read straight into the connection's :class:`AnswerReader`. Connections are opened on demand; at most
    ``max_pool_connections`` idle ones are kept, more are closed once answered (botocore's urllib3 pool
    does the same, without blocking a caller).

    A request goes out on an idle connection without asking the system first whether the server has
    closed it (urllib3 asks, with a ``poll``): a connection the server closed while it sat idle fails
    before any byte of the answer arrives, and the request goes once more, on a new connection. On
    Linux a plain-TCP socket is blocking with the read timeout as ``SO_RCVTIMEO``/``SO_SNDTIMEO`` rather
    than Python's own timeout, which polls before every read and write. Each system call spared is a
    release of the GIL spared, and with many threads each release can cost a switch between threads.
    """

    def __init__(self, wire: Wire) -> None:
        config = wire.client.meta.config
        parts = urllib.parse.urlsplit(wire.endpoint_url)
        self._tls = tls_context(wire)
        self._host = parts.hostname or ""
        self._address = (self._host, parts.port or (443 if self._tls is not None else 80))
        self._connect_timeout = config.connect_timeout
        self._read_timeout = config.read_timeout
        self._socket_options = list(wire.http_session._socket_options or ())
        read_timeout = self._read_timeout
        self._system_timeout: bytes | None = None
        if (
            _SYSTEM_TIMEOUTS
            and self._tls is None
            and isinstance(read_timeout, int | float)
            and read_timeout > 0
        ):
            seconds = int(read_timeout)
            self._system_timeout = struct.pack("ll", seconds, int((read_timeout - seconds) * 1e6))
        self._idle: collections.deque[_Connection] = collections.deque()
        self._keep = int(config.max_pool_connections)

    def _connect(self, url: str) -> _Connection:
        """A new connection (TLS handshake done), or botocore's exception for the failure."""
        try:
            sock = socket.create_connection(self._address, timeout=self._connect_timeout)
        except OSError as exc:
            raise connect_error(exc, url) from exc
        try:
            for option in self._socket_options:
                sock.setsockopt(*option)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
            if self._system_timeout is not None:
                sock.settimeout(None)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, self._system_timeout)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, self._system_timeout)
            else:
                sock.settimeout(self._read_timeout)
        except BaseException as exc:
            sock.close()
            error = connect_error(exc, url)
            if error is exc:
                raise
            raise error from exc
        return _Connection(sock)

    def send(self, request: WireRequest) -> Answer:
        head, body = message(request)
        while True:
            try:
                connection = self._idle.pop()
            except IndexError:
                connection = self._connect(request.url)
            try:
                return self._exchange(connection, request, head, body)
            except _Resend:
                continue  # on another idle connection, or a new one (which is never resent)

    def _exchange(self, connection: _Connection, request: WireRequest, head: bytes, body: Any) -> Answer:
        sock, reader = connection.sock, connection.reader
        reader.reset()
        reused, connection.used = connection.used, True
        try:
            sock.sendall(head)
            if body is not None:
                sock.sendall(body)
            while True:
                received = sock.recv_into(reader.get_buffer())
                if received == 0:
                    if reader.eof_received():
                        break
                elif reader.buffer_updated(received):
                    break
        except BaseException as exc:
            sock.close()
            error = exchange_error(exc, request)
            if reused and not reader.received and isinstance(error, ConnectionClosedError | SSLError):
                raise _Resend from exc  # (a timeout is not: the server may be slow)
            if error is exc:
                raise
            raise error from exc
        if reader.keep_alive and len(self._idle) < self._keep:
            self._idle.append(connection)
        else:
            sock.close()
        return Answer(request.url, reader.status, reader.headers, reader.content)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().sock.close()


def message(request: WireRequest) -> tuple[bytes, Any]:
    """The request's head, with its body when that is small (else the body, to send after it).

    The fields are those :mod:`http.client` writes for urllib3 and botocore: ``Host`` (as signed),
    ``Accept-Encoding: identity``, ``Content-Length``, then the request's own, their values in UTF-8
    (botocore's ``Endpoint`` encodes them so).

    Raises:
        HTTPClientError: a field's value holds a line break (``http.client`` refuses those too).
    """
    url, headers, body = request.url, request.headers, request.body
    if "\r" in (values := "".join(headers.values())) or "\n" in values:
        error = ValueError(f"a header value holds a line break: {headers!r}")
        raise HTTPClientError(error=error) from error
    size = len(body) if type(body) is bytes else memoryview(body).nbytes
    path = url[url.index("/", url.index("//") + 2) :]
    lines = [f"{request.method} {path} HTTP/1.1\r\nHost: {signed_host(url)}\r\nAccept-Encoding: identity\r\n"]
    lines += [f"{name}: {value}\r\n" for name, value in headers.items()]
    lines.append(f"Content-Length: {size}\r\n\r\n")
    head = "".join(lines).encode("utf-8")
    if size > _JOINED_BODY:
        return head, body
    return b"".join((head, body)), None
