"""One HTTP/1.1 answer read from bytes as they arrive, into buffers it hands out.

:class:`AnswerReader` has the interface of :class:`asyncio.BufferedProtocol` (``get_buffer``,
``buffer_updated``, ``eof_received``), so that one reader serves both transports: the threads'
(``socket.recv_into`` on what ``get_buffer`` gives) and the event loop's (a ``BufferedProtocol`` that hands
the loop the same buffers). It reads what :mod:`http.client` reads of an answer: the status line (interim
``1xx`` answers skipped), the header fields (repeated fields joined with ``", "``, as urllib3 joins them,
folded lines unfolded), and the body by ``Content-Length``, chunked (trailers dropped) or until the server
closes the connection; ``204``, ``304`` and ``1xx`` answers have none. A head over 64 KiB or with more
than 100 fields, a status line that is not HTTP's, a bad length or chunk size, and a connection closed
before the answer is whole raise :mod:`http.client`'s exceptions for them.

A small answer is read into the reader's own 64 KiB buffer; a body beyond it is read straight into a
buffer of its announced length (one copy to ``bytes`` at the end; past 64 MiB, into pieces of that size
as the bytes arrive), or in pieces when its length is not known.
"""

from __future__ import annotations

import http.client

__all__ = ["AnswerReader", "Fields"]

_BUFFER = 64 * 1024  # also the longest head (http.client's line limit is 64 KiB)
# The most allocated ahead of the bytes for a body of announced length: a server that announces more than
# it sends makes the reader hold no more than this beyond what arrived.
_PREALLOCATE = 64 * 2**20
_MAX_FIELDS = 100  # as http.client
_MAX_CHUNK_LINE = 4096
_NO_BODY = frozenset({204, 304})

# what the reader is reading
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSED, _DONE = range(8)


class Fields(dict[str, str]):
    """An answer's header fields by lower-cased name, looked up in any case (as botocore reads them)."""

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name.lower() if isinstance(name, str) else name)


class AnswerReader:
    """Reads one answer at a time (call :meth:`reset` before the next one on the same connection).

    Once :meth:`buffer_updated` or :meth:`eof_received` returns ``True``: ``status``, ``headers`` (names
    lower-cased), ``content`` (``bytes``) and ``keep_alive`` (the connection may carry another request:
    HTTP/1.1 without ``Connection: close``, or HTTP/1.0 with ``keep-alive``, and nothing sent beyond the
    answer).
    """

    __slots__ = (
        "_big",
        "_big_filled",
        "_body",
        "_buffer",
        "_end",
        "_filled",
        "_remaining",
        "_start",
        "_state",
        "_view",
        "content",
        "headers",
        "keep_alive",
        "received",
        "status",
    )

    def __init__(self) -> None:
        self._buffer = bytearray(_BUFFER)
        self._view = memoryview(self._buffer)
        self.reset()

    def reset(self) -> None:
        """Forget the last answer: the next bytes start a new one."""
        self._state = _HEAD
        self._filled = 0  # bytes of self._buffer received and not consumed
        self._start = 0  # where the unread part of self._buffer starts
        self._end = 0  # where the search for the end of the head resumes
        self._remaining = 0
        self._body: bytearray | list[bytes | bytearray] | None = None
        self._big: bytearray | None = None  # a body of known length beyond the buffer, read in place
        self._big_filled = 0
        self.status = 0
        self.headers = Fields()
        self.content = b""
        self.keep_alive = False
        #: whether any byte of the answer has arrived
        self.received = False

    # -- the BufferedProtocol side ------------------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes go (not empty)."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._filled == len(self._buffer):
            self._compact()
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> bool:
        """``nbytes`` arrived in the last buffer given; ``True`` once the answer is whole.

        Raises:
            http.client.HTTPException: the bytes are not an answer this reader accepts.
        """
        self.received = True
        big = self._big
        if big is not None:
            self._remaining -= nbytes
            self._big_filled += nbytes
            if self._big_filled < len(big):
                return False
            assert isinstance(self._body, list)
            if self._remaining:  # the next piece of a body announced beyond _PREALLOCATE
                self._next_piece()
                return False
            self.content = b"".join([*self._body, big]) if self._body else bytes(big)
            self._big = None
            self._body = None
            self._state = _DONE
            return True
        self._filled += nbytes
        return self._advance()

    def eof_received(self) -> bool:
        """The server closed the connection: ``True`` when that ends the answer (a body read until then).

        Raises:
            http.client.RemoteDisconnected: nothing of the answer had arrived.
            http.client.IncompleteRead: the answer was cut short.
        """
        if self._state == _UNTIL_CLOSED:
            assert isinstance(self._body, list)
            self._body.append(bytes(self._view[self._start : self._filled]))
            self.content = b"".join(self._body)
            self._state = _DONE
            self.keep_alive = False
            return True
        if self._state == _DONE:
            return True
        if not self.received:
            raise http.client.RemoteDisconnected("the server closed the connection without an answer")
        raise http.client.IncompleteRead(bytes(self._view[self._start : self._filled]))

    # -- reading --------------------------------------------------------------------------------------

    def _compact(self) -> None:
        """Move the unread bytes to the front of the buffer; refuse a head (or chunk line) that fills it."""
        if self._start == 0:
            raise http.client.LineTooLong("an answer's head over 64 KiB")
        unread = self._filled - self._start
        self._view[:unread] = self._view[self._start : self._filled]
        self._end = max(0, self._end - self._start)
        self._filled, self._start = unread, 0

    def _advance(self) -> bool:
        while True:
            state = self._state
            if state == _HEAD:
                if not self._head():
                    return False
            elif state == _LENGTH:
                available = self._filled - self._start
                if available < self._remaining:
                    if self._start + self._remaining > len(self._buffer):
                        self._go_big(available)
                    return False
                end = self._start + self._remaining
                self.content = bytes(self._view[self._start : end])
                return self._done(end)
            elif state == _UNTIL_CLOSED:
                assert isinstance(self._body, list)
                if self._filled == len(self._buffer):
                    self._body.append(bytes(self._view[self._start : self._filled]))
                    self._start = self._filled = 0
                return False
            elif not self._chunked():
                return False
            if self._state == _DONE:
                return True

    def _go_big(self, available: int) -> None:
        """Read the rest of a body of known length straight into a buffer of its size (up to
        :data:`_PREALLOCATE` bytes: a larger one takes pieces of that size as the bytes arrive)."""
        self._big = bytearray(max(available, min(self._remaining, _PREALLOCATE)))
        self._big[:available] = self._view[self._start : self._filled]
        self._big_filled = available
        self._remaining -= available
        self._body = []
        self._start = self._filled = 0
        if self._big_filled == len(self._big):
            self._next_piece()

    def _next_piece(self) -> None:
        assert isinstance(self._body, list) and self._big is not None
        self._body.append(self._big)
        self._big = bytearray(min(self._remaining, _PREALLOCATE))
        self._big_filled = 0

    def _done(self, end: int) -> bool:
        if end != self._filled:  # bytes beyond the answer: the connection is not to be trusted again
            self.keep_alive = False
        self._start = end
        self._state = _DONE
        return True

    def _head(self) -> bool:
        """Read the head once it is whole; ``False`` while more bytes are needed."""
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n", max(self._start, self._end - 3), self._filled)
        if end < 0:
            self._end = self._filled
            return False
        lines = buffer[self._start : end].decode("latin-1").split("\r\n")
        self._start = self._end = end + 4
        version, status = self._status(lines[0])
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the final one follows
            return True
        if len(lines) > _MAX_FIELDS + 1:
            raise http.client.HTTPException(f"got more than {_MAX_FIELDS} headers")
        headers: dict[str, str] = {}
        name = ""
        for line in lines[1:]:
            if line[:1] in (" ", "\t") and name:  # a folded line continues the field before it
                headers[name] = f"{headers[name]} {line.strip()}"
                continue
            name, colon, value = line.partition(":")
            if not colon:
                raise http.client.HTTPException(f"a header line without a colon: {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.status = status
        self.headers = Fields(headers)
        connection = headers.get("connection", "").lower()
        self.keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        coding = headers.get("transfer-encoding")
        if status in _NO_BODY:
            self._state = _LENGTH
            self._remaining = 0
        elif coding is not None:
            if coding.rsplit(",", 1)[-1].strip().lower() == "chunked":
                self._state = _CHUNK_SIZE
                self._body = bytearray()
            else:
                self._until_closed()
        elif "content-length" in headers:
            self._state = _LENGTH
            self._remaining = _length(headers["content-length"])
        else:
            self._until_closed()
        return True

    @staticmethod
    def _status(line: str) -> tuple[str, int]:
        version, _, rest = line.partition(" ")
        code = rest[:3]
        if (
            not version.startswith("HTTP/")
            or len(code) != 3
            or not code.isdigit()
            or rest[3:4] not in ("", " ")
        ):
            raise http.client.BadStatusLine(line)
        return version, int(code)

    def _until_closed(self) -> None:
        self._state = _UNTIL_CLOSED
        self._body = []
        self.keep_alive = False

    def _line(self) -> str | None:
        """The next CRLF-terminated line of a chunked body, or ``None`` while it is incomplete."""
        end = self._buffer.find(b"\r\n", self._start, self._filled)
        if end < 0:
            if self._filled - self._start > _MAX_CHUNK_LINE:
                raise http.client.LineTooLong("a chunk size or trailer line")
            return None
        line = self._buffer[self._start : end].decode("latin-1")
        self._start = end + 2
        return line

    def _chunked(self) -> bool:
        """Read as much of a chunked body as has arrived; ``False`` while more bytes are needed."""
        body = self._body
        assert isinstance(body, bytearray)
        while True:
            state = self._state
            if state == _CHUNK_DATA:
                take = min(self._remaining, self._filled - self._start)
                body += self._view[self._start : self._start + take]
                self._start += take
                self._remaining -= take
                if self._remaining:
                    self._start = self._filled = 0  # all of the buffer was read
                    return False
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if self._filled - self._start < 2:
                    return False
                if self._buffer[self._start : self._start + 2] != b"\r\n":
                    raise http.client.HTTPException("a chunk does not end with CRLF")
                self._start += 2
                self._state = _CHUNK_SIZE
            else:
                line = self._line()
                if line is None:
                    return False
                if state == _TRAILER:
                    if line == "":
                        self.content = bytes(body)
                        return self._done(self._start)
                    continue
                self._remaining = _chunk_size(line)
                self._state = _CHUNK_DATA if self._remaining else _TRAILER


def _length(text: str) -> int:
    values = {value.strip() for value in text.split(",")}  # repeated fields were joined
    if len(values) != 1:
        raise http.client.HTTPException(f"conflicting Content-Length values: {text!r}")
    (value,) = values
    if not value.isdigit():
        raise http.client.HTTPException(f"Content-Length is not a number: {text!r}")
    return int(value)


def _chunk_size(line: str) -> int:
    size = line.split(";", 1)[0].strip()
    try:
        value = int(size, 16)
    except ValueError:
        raise http.client.HTTPException(f"a chunk size that is not a number: {line[:100]!r}") from None
    if value < 0 or size.startswith(("-", "+", "0x", "0X")):
        raise http.client.HTTPException(f"a chunk size that is not a number: {line[:100]!r}")
    return value
