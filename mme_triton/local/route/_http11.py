"""A minimal HTTP/1.1 message reader for asyncio protocols: request and response heads, bodies by
``Content-Length`` or chunked, nothing copied more than once.

The stack's InvokeEndpoint server (:mod:`mme_triton.local.route.runtime_server`) reads requests from boto3 and
answers from Triton's SageMaker front-end with it; both sides keep their connections alive.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HttpError", "Message", "MessageReader"]

_HEAD_LIMIT = 64 * 1024


class HttpError(Exception):
    """The bytes received are not an HTTP/1.1 message this reader accepts."""


@dataclass
class Message:
    """One request or response: the start line's three parts, the headers (names lower-cased), the body."""

    start: list[bytes]
    headers: dict[bytes, bytes]
    body: bytes = b""
    too_large: bool = False
    """The body was over the reader's limit: it was read and dropped."""

    @property
    def keep_alive(self) -> bool:
        """Whether the connection stays open after this message (HTTP/1.1's default, 1.0's opt-in)."""
        connection = self.headers.get(b"connection", b"").lower()
        version = self.start[0] if self.start[0].startswith(b"HTTP/") else self.start[2]
        if version == b"HTTP/1.0":
            return connection == b"keep-alive"
        return connection != b"close"


class MessageReader:
    """Feeds on bytes as they arrive and hands out complete messages.

    Parameters:
        body_limit: bodies over this many bytes are read and dropped (``Message.too_large``).
    """

    def __init__(self, *, body_limit: int) -> None:
        self._buffer = bytearray()
        self._body_limit = body_limit
        self._message: Message | None = None
        self._remaining = 0
        self._chunked = False
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> list[Message]:
        """Add ``data``; return the messages it completed, in order.

        Raises:
            HttpError: malformed start line, headers or chunk sizes, or headers over 64 KiB.
        """
        buffer = self._buffer
        buffer += data
        done: list[Message] = []
        while True:
            message = self._message
            if message is None:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > _HEAD_LIMIT:
                        raise HttpError("message headers over 64 KiB")
                    return done
                message = self._start(bytes(buffer[:end]))
                del buffer[: end + 4]
                if message is None:
                    continue
            if self._chunked:
                if not self._read_chunks():
                    return done
            else:
                if len(buffer) < self._remaining:
                    if message.too_large:  # dropped as it arrives
                        self._remaining -= len(buffer)
                        buffer.clear()
                    return done
                if not message.too_large:
                    message.body = bytes(buffer[: self._remaining])
                del buffer[: self._remaining]
            self._message = None
            done.append(message)

    def _start(self, head: bytes) -> Message | None:
        lines = head.split(b"\r\n")
        start = lines[0].split(b" ", 2)
        if len(start) != 3:
            raise HttpError(f"malformed start line {lines[0][:80]!r}")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise HttpError(f"malformed header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        message = Message(start, headers)
        self._message = message
        self._chunked = headers.get(b"transfer-encoding", b"").lower() == b"chunked"
        self._chunks = []
        self._size = 0
        if not self._chunked:
            try:
                length = int(headers.get(b"content-length", b"0") or b"0")
            except ValueError as exc:
                raise HttpError("malformed Content-Length") from exc
            if length < 0:
                raise HttpError("negative Content-Length")
            self._remaining = length
            message.too_large = length > self._body_limit
        return message

    def _read_chunks(self) -> bool:
        """Consume chunks from the buffer; ``True`` once the last one (and the trailers) arrived."""
        buffer = self._buffer
        message = self._message
        assert message is not None
        while True:
            end = buffer.find(b"\r\n")
            if end < 0:
                return False
            try:
                length = int(bytes(buffer[:end]).split(b";", 1)[0].strip() or b"0", 16)
            except ValueError as exc:
                raise HttpError("malformed chunk size") from exc
            if length == 0:
                trailers = buffer.find(b"\r\n\r\n", end)
                if bytes(buffer[end : end + 4]) == b"\r\n\r\n":
                    del buffer[: end + 4]
                elif trailers >= 0:
                    del buffer[: trailers + 4]
                else:
                    return False
                message.too_large = self._size > self._body_limit
                message.body = b"" if message.too_large else b"".join(self._chunks)
                return True
            if len(buffer) < end + 2 + length + 2:
                return False
            self._size += length
            if self._size <= self._body_limit:
                self._chunks.append(bytes(buffer[end + 2 : end + 2 + length]))
            del buffer[: end + 2 + length + 2]
