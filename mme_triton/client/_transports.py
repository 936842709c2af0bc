"""The HTTP exchange of the fast path: one request out, one answer back, failures as botocore's exceptions.

- :class:`HTTPClientTransport` (``MMEClient``) sends with the standard library's :mod:`http.client` over
  keep-alive connections it pools itself, set up as the botocore client sets up its own: the connect and
  read timeouts, the socket options (``TCP_NODELAY``, ``tcp_keepalive``), the TLS verification (CA
  bundle, ``verify=False``) and client certificate, at most ``max_pool_connections`` idle connections,
  and an idle connection the server closed is dropped before it is used, as urllib3 drops it.
- :class:`AiohttpTransport` (``AsyncMMEClient``) sends with aiohttp on the running event loop: one
  ``ClientSession`` per client, keep-alive connections pooled up to the client's
  ``max_pool_connections``, the same timeouts, TLS verification and client certificate.

Neither goes through a proxy: a client configured with one sends through botocore (``Wire.of``).

A failure to exchange raises the botocore exception ``URLLib3Session.send`` raises for it
(``EndpointConnectionError``, ``ConnectTimeoutError``, ``ReadTimeoutError``, ``ConnectionClosedError``,
``SSLError``, ``HTTPClientError``), so the retry handlers and the error mapping read it as they read
botocore's.
"""

from __future__ import annotations

import asyncio
import collections
import http.client
import os
import ssl
import urllib.parse
import warnings
from typing import TYPE_CHECKING

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
from urllib3.util.wait import wait_for_read

from mme_triton.client._wire import Answer, Wire, WireRequest

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AiohttpTransport", "HTTPClientTransport"]

# Bodies up to this size are copied to bytes, which http.client sends in one call with the headers.
_JOINED_BODY = 64 * 1024


def _tls_context(wire: Wire) -> ssl.SSLContext | None:
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


class HTTPClientTransport:
    """Requests with :mod:`http.client` over a pool of keep-alive connections (thread-safe).

    Connections are opened on demand; at most ``max_pool_connections`` idle ones are kept, more are
    closed once answered (botocore's urllib3 pool does the same, without blocking a caller).
    """

    def __init__(self, wire: Wire) -> None:
        config = wire.client.meta.config
        parts = urllib.parse.urlsplit(wire.endpoint_url)
        self._host = parts.hostname or ""
        self._tls = _tls_context(wire)
        self._port = parts.port or (443 if self._tls is not None else 80)
        self._connect_timeout = config.connect_timeout
        self._read_timeout = config.read_timeout
        self._socket_options = list(wire.http_session._socket_options or ())
        self._idle: collections.deque[http.client.HTTPConnection] = collections.deque()
        self._keep = int(config.max_pool_connections)

    def _connection(self) -> http.client.HTTPConnection:
        """An idle connection the server has not closed, or a new one (not connected yet)."""
        while True:
            try:
                connection = self._idle.pop()
            except IndexError:
                break
            # A kept-alive connection with something to read has been closed (or spoiled) by the server.
            if connection.sock is not None and not wait_for_read(connection.sock, timeout=0.0):
                return connection
            connection.close()
        if self._tls is not None:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._connect_timeout, context=self._tls
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self._connect_timeout)

    def _connect(self, connection: http.client.HTTPConnection, url: str) -> None:
        try:
            connection.connect()
        except ssl.SSLError as exc:
            raise SSLError(endpoint_url=url, error=exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(endpoint_url=url, error=exc) from exc
        except OSError as exc:  # refused, unreachable, no such host (socket.gaierror)
            raise EndpointConnectionError(endpoint_url=url, error=exc) from exc
        sock = connection.sock
        sock.settimeout(self._read_timeout)
        for option in self._socket_options:
            sock.setsockopt(*option)

    def send(self, request: WireRequest) -> Answer:
        url = request.url
        connection = self._connection()
        if connection.sock is None:
            self._connect(connection, url)
        path = url[url.index("/", url.index("//") + 2) :]
        # botocore sends header values as UTF-8 bytes (Endpoint._encode_headers)
        headers = {name: value.encode("utf-8") for name, value in request.headers.items()}
        body = request.body
        if not isinstance(body, bytes) and len(body) <= _JOINED_BODY:
            body = bytes(body)  # http.client sends a bytes body with the headers, in one packet
        try:
            connection.request(request.method, path, body=body, headers=headers)
            response = connection.getresponse()
            content = response.read()
        except BaseException as exc:
            connection.close()
            if isinstance(exc, ssl.SSLError):
                raise SSLError(endpoint_url=url, error=exc) from exc
            if isinstance(exc, TimeoutError):
                raise ReadTimeoutError(endpoint_url=url, error=exc) from exc
            if isinstance(exc, (OSError, http.client.HTTPException)):  # reset, closed, a bad answer
                raise ConnectionClosedError(error=exc, request=request, endpoint_url=url) from exc
            if isinstance(exc, Exception):
                raise HTTPClientError(error=exc) from exc
            raise
        if response.will_close or len(self._idle) >= self._keep:
            connection.close()
        else:
            self._idle.append(connection)
        return Answer(url, response.status, response.headers, content)  # type: ignore[arg-type]

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class AiohttpTransport:
    """Requests with aiohttp, on the event loop the client is first used on."""

    def __init__(self, wire: Wire) -> None:
        config = wire.client.meta.config
        self._limit = int(config.max_pool_connections)
        self._timeouts = (config.connect_timeout, config.read_timeout)
        tls = _tls_context(wire)
        self._ssl: ssl.SSLContext | bool = True if tls is None else tls
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _opened(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is not None:
            if loop is not self._loop:
                raise RuntimeError(
                    "an AsyncMMEClient serves the event loop it was first used on; make one client per loop"
                )
            return self._session
        connect, read = self._timeouts
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._limit, ssl=self._ssl),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read),
            # as botocore: no cookies kept, no Accept or Accept-Encoding added, the body as it came
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("Accept", "Accept-Encoding"),
            auto_decompress=False,
        )
        self._loop = loop
        return self._session

    async def send(self, request: WireRequest) -> Answer:
        import aiohttp
        import yarl

        url = request.url
        session = self._opened()
        for resend in (True, False):
            try:
                async with session.request(
                    request.method, yarl.URL(url, encoded=True), data=request.body, headers=request.headers
                ) as response:
                    return Answer(url, response.status, response.headers, await response.read())
            except (aiohttp.ClientSSLError, ssl.SSLError) as exc:
                raise SSLError(endpoint_url=url, error=exc) from exc
            except aiohttp.ClientConnectorError as exc:
                raise EndpointConnectionError(endpoint_url=url, error=exc) from exc
            except aiohttp.ConnectionTimeoutError as exc:
                raise ConnectTimeoutError(endpoint_url=url, error=exc) from exc
            except (aiohttp.ServerTimeoutError, asyncio.TimeoutError) as exc:
                raise ReadTimeoutError(endpoint_url=url, error=exc) from exc
            except (
                aiohttp.ServerDisconnectedError,
                aiohttp.ClientOSError,
                aiohttp.ClientPayloadError,
            ) as exc:
                # A kept-alive connection the server closed while it sat idle fails as the request is
                # written: it never went out, so it goes once more, on another connection (urllib3 drops
                # such a connection before it writes; aiohttp finds out only once the loop has run).
                if resend and isinstance(exc.__cause__ or exc, ConnectionResetError):
                    continue
                raise ConnectionClosedError(error=exc, request=request, endpoint_url=url) from exc
            except Exception as exc:
                raise HTTPClientError(error=exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
