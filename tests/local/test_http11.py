"""MessageReader: HTTP/1.1 messages as the stack's InvokeEndpoint server reads them."""

from __future__ import annotations

import pytest

from mme_triton.local.route._http11 import HttpError, MessageReader

REQUEST = b"POST /endpoints/e/invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"


def test_message_reader_reads_a_request_fed_byte_by_byte() -> None:
    reader = MessageReader(body_limit=100)
    messages = [m for byte in REQUEST for m in reader.feed(bytes([byte]))]

    assert len(messages) == 1
    assert messages[0].start == [b"POST", b"/endpoints/e/invocations", b"HTTP/1.1"]
    assert messages[0].headers[b"host"] == b"x" and messages[0].body == b"hello"
    assert messages[0].keep_alive


def test_message_reader_reads_pipelined_requests_in_order() -> None:
    messages = MessageReader(body_limit=100).feed(REQUEST + REQUEST.replace(b"hello", b"world"))

    assert [m.body for m in messages] == [b"hello", b"world"]


def test_message_reader_reads_a_chunked_body_with_trailers() -> None:
    data = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\nT: 1\r\n\r\n"
    )

    (message,) = MessageReader(body_limit=100).feed(data)

    assert message.start[1] == b"200" and message.body == b"abcde"


def test_message_reader_drops_a_body_over_the_limit_but_keeps_reading() -> None:
    reader = MessageReader(body_limit=3)

    first = reader.feed(REQUEST[:-2])
    messages = reader.feed(REQUEST[-2:] + REQUEST.replace(b"Content-Length: 5", b"Content-Length: 2")[:-3])

    assert first == []
    assert [(m.too_large, m.body) for m in messages] == [(True, b""), (False, b"he")]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"NONSENSE\r\n\r\n", "start line"),
        (b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", "header line"),
        (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", "Content-Length"),
        (b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
    ],
    ids=["start-line", "header", "content-length", "chunk-size"],
)
def test_message_reader_refuses_what_is_not_http(data: bytes, match: str) -> None:
    with pytest.raises(HttpError, match=match):
        MessageReader(body_limit=100).feed(data)


@pytest.mark.parametrize(
    ("start", "connection", "keep"),
    [
        (b"GET / HTTP/1.1", b"", True),
        (b"GET / HTTP/1.1", b"close", False),
        (b"GET / HTTP/1.0", b"", False),
        (b"GET / HTTP/1.0", b"keep-alive", True),
        (b"HTTP/1.1 200 OK", b"close", False),
    ],
    ids=["1.1", "1.1-close", "1.0", "1.0-keep-alive", "response-close"],
)
def test_message_keep_alive_follows_the_version_and_the_connection_header(
    start: bytes, connection: bytes, keep: bool
) -> None:
    head = start + b"\r\n" + (b"Connection: " + connection + b"\r\n" if connection else b"") + b"\r\n"

    (message,) = MessageReader(body_limit=100).feed(head)

    assert message.keep_alive is keep
