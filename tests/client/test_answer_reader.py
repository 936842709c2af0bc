"""The HTTP/1.1 answer reader of the client's transports, against :mod:`http.client` reading the same bytes.

Every answer is fed whole, a byte at a time and in uneven pieces (as a socket or an event loop hands them
over), through the buffers the reader gives out.
"""

from __future__ import annotations

import http.client
import io
import random
from collections.abc import Iterator

import pytest

from mme_triton.client import _answer
from mme_triton.client._answer import AnswerReader

BIG = bytes(range(256)) * 1024  # 256 KiB: beyond the reader's own buffer


def _chunked(body: bytes, size: int, trailer: bytes = b"") -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    ]
    return b"".join(parts) + b"0\r\n" + trailer + b"\r\n"


ANSWERS = {
    "content-length": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    "empty-body": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "no-content": b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
    "error-status": b"HTTP/1.1 424 Failed Dependency\r\nx-amzn-ErrorType: ModelError:\r\n"
    b'Content-Length: 5\r\n\r\n{"a"}',
    "repeated-fields": b"HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 1\r\n\r\nz",
    "folded-field": b"HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 1\r\n\r\nz",
    "no-reason": b"HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nz",
    "continue-first": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(b"hello world", 4),
    "chunked-extensions-trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;name=value\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
    "chunked-big": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(BIG, 10_000),
    "length-big": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BIG) + BIG,
    "until-closed": b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + BIG,
    "connection-close": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nz",
    "http-1.0": b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nz",
    "http-1.0-keep-alive": b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nz",
}
KEPT_ALIVE = {"content-length", "empty-body", "no-content", "error-status", "repeated-fields", "folded-field",
              "no-reason", "continue-first", "chunked", "chunked-extensions-trailer", "chunked-big",
              "length-big", "http-1.0-keep-alive"}  # fmt: skip


def _pieces(data: bytes, how: str) -> Iterator[bytes]:
    if how == "whole":
        yield data
    elif how == "bytes":
        yield from (data[i : i + 1] for i in range(len(data)))
    else:
        rng = random.Random(len(data))
        at = 0
        while at < len(data):
            step = rng.choice((1, 2, 3, 7, 100, 5000, 70_000))
            yield data[at : at + step]
            at += step


def _read(data: bytes, how: str, *, close: bool = True) -> AnswerReader:
    """Feed ``data`` through the reader's buffers; the peer closes after it when ``close``."""
    reader = AnswerReader()
    done = False
    for piece in _pieces(data, how):
        while piece:
            buffer = reader.get_buffer()
            assert len(buffer) > 0
            taken = min(len(buffer), len(piece))
            buffer[:taken] = piece[:taken]
            piece = piece[taken:]
            done = reader.buffer_updated(taken)
            assert not (done and piece), "bytes left over after a whole answer"
    if not done and close:
        done = reader.eof_received()
    assert done
    return reader


class _Socket:
    def __init__(self, data: bytes) -> None:
        self._file = io.BytesIO(data)

    def makefile(self, *_: object) -> io.BytesIO:
        return self._file


def _http_client(data: bytes) -> tuple[int, dict[str, str], bytes]:
    response = http.client.HTTPResponse(_Socket(data))  # type: ignore[arg-type]
    response.begin()
    fields: dict[str, str] = {}
    for name, value in response.headers.items():
        fields[name.lower()] = f"{fields[name.lower()]}, {value}" if name.lower() in fields else value
    return response.status, fields, response.read()


@pytest.mark.parametrize("how", ["whole", "bytes", "pieces"])
@pytest.mark.parametrize("name", list(ANSWERS))
def test_reader_reads_what_http_client_reads(name: str, how: str) -> None:
    if how == "bytes" and len(ANSWERS[name]) > 10_000:
        how = "pieces"
    reader = _read(ANSWERS[name], how)
    status, fields, content = _http_client(ANSWERS[name])
    assert (reader.status, reader.content) == (status, content)
    if name == "folded-field":  # http.client keeps the fold's line break, urllib3 and botocore too
        fields["x-a"] = "one two"
    assert dict(reader.headers) == fields
    assert reader.keep_alive is (name in KEPT_ALIVE)
    assert isinstance(reader.content, bytes)


def test_reader_reads_answers_one_after_another_on_one_connection() -> None:
    reader = AnswerReader()
    for index in range(200):  # beyond the buffer's size in total
        body = b"x" * (index * 7)
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        reader.reset()
        buffer = reader.get_buffer()
        buffer[: len(answer)] = answer
        assert reader.buffer_updated(len(answer))
        assert reader.content == body
        assert reader.keep_alive


def test_reader_fields_are_looked_up_in_any_case() -> None:
    reader = _read(ANSWERS["content-length"], "whole")
    assert reader.headers.get("Content-Type") == reader.headers["CONTENT-TYPE"] == "application/json"
    assert "content-TYPE" in reader.headers
    assert reader.headers.get("x-missing") is None


def test_reader_does_not_keep_a_connection_that_sent_more_than_the_answer() -> None:
    reader = _read(ANSWERS["content-length"] + b"HTTP/1.1 200 OK\r\n", "whole")
    assert reader.content == b"{}"
    assert not reader.keep_alive


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", http.client.RemoteDisconnected),
        (b"HTTP/1.1 200 OK\r\nContent-Le", http.client.IncompleteRead),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", http.client.IncompleteRead),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", http.client.IncompleteRead),
        (b"ICY 200 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 2000 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", http.client.HTTPException),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX0\r\n\r\n",
            http.client.HTTPException,
        ),
        (b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 70_000, http.client.LineTooLong),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 5000, http.client.LineTooLong),
    ],
    ids=[
        "closed-before-answer",
        "closed-in-head",
        "closed-in-body",
        "closed-in-chunk",
        "not-http",
        "status-four-digits",
        "status-missing",
        "field-without-colon",
        "negative-length",
        "conflicting-lengths",
        "chunk-size-not-hex",
        "chunk-without-crlf",
        "too-many-fields",
        "head-too-long",
        "chunk-line-too-long",
    ],
)
def test_reader_refuses_what_is_not_a_whole_answer(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        _read(data, "pieces")


def test_reader_reads_a_body_beyond_what_it_allocates_ahead_in_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_answer, "_PREALLOCATE", 10_000)
    for how in ("whole", "pieces"):
        reader = _read(ANSWERS["length-big"], how)
        assert reader.content == BIG


def test_reader_allocates_no_more_than_its_bound_for_a_length_it_is_not_sent() -> None:
    """A server that announces a terabyte and sends a few bytes costs the reader 64 MiB, not a terabyte."""
    with pytest.raises(http.client.IncompleteRead):
        _read(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nabc" % 2**40, "whole")
