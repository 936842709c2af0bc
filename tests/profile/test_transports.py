"""The generator's HTTP/1.1 connection against a real HTTP server: keep-alive, Content-Length and chunked
answers, a server that closes, errors as the target words them; and the cold-start helper's retries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from mme_triton.local.route.responses import model_error
from mme_triton.profile.inputs import Request
from mme_triton.profile.transports import HTTPConnection, InvokeEndpointConnection, first_answer

BINARY = "application/vnd.sagemaker-triton.binary+json;json-header-size=13"
REQUEST = Request(b'{"inputs":[]}BINARY', BINARY, {})
# What the stack's ONNX Runtime backend answers for a token type beyond the model's table, ONNX Runtime's
# message at its full length.
ORT_CAUSE = (
    "onnx runtime error for model 'rob.tar.gz': [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status "
    "code returned while running Gather node. Name:'/model/embeddings/token_type_embeddings/Gather' Status "
    "Message: indices element out of data bounds, idx=85 must be within the inclusive range [-2,1]"
)
ORT_ERROR = json.dumps({"error": ORT_CAUSE}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, Any]]] = []
    not_ready = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Handler.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if self.path.endswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"abc", b"x" * 70_000, b""):
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            return
        if self.path.endswith("/not-ready") and _Handler.not_ready > 0:
            _Handler.not_ready -= 1
            self._answer(429, b'{"ErrorCode": "ModelNotReadyException"}')
            return
        if self.path.endswith("/refuse"):
            self._answer(400, b'{"error": "unexpected inference input \'BAD\'"}' + b" " * 10_000)
            return
        if "/model-error" in self.path:
            answer = model_error(400, ORT_ERROR, endpoint_name="ep", region="us-east-1", account_id="1" * 12)
            self.send_response(answer.status)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)
            return
        if self.path.endswith("/close"):
            self._answer(200, b"ok", close=True)
            return
        self._answer(200, b"y" * 300_000)

    def _answer(self, status: int, body: bytes, *, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_http_connection_sends_the_route_request_and_keeps_the_connection(server: str) -> None:
    connection = HTTPConnection(server, "/endpoints/ep/invocations", target_model="m.tar.gz")
    assert [connection.send(REQUEST) for _ in range(3)] == [None, None, None]
    connection.close()
    first = _Handler.seen[0]
    assert first["path"] == "/endpoints/ep/invocations" and first["body"] == REQUEST.body
    assert first["headers"]["X-Amzn-SageMaker-Target-Model"] == "m.tar.gz"
    assert first["headers"]["Content-Type"] == REQUEST.content_type
    assert len({seen["headers"].get("Host") for seen in _Handler.seen}) == 1


def test_http_connection_speaks_kserve_binary(server: str) -> None:
    connection = HTTPConnection(server, "/v2/models/m/infer", kserve=True)
    assert connection.send(REQUEST) is None
    headers = _Handler.seen[0]["headers"]
    assert headers["Inference-Header-Content-Length"] == "13"
    assert headers["Content-Type"] == "application/octet-stream"


def test_http_connection_reads_chunked_answers_and_goes_on(server: str) -> None:
    connection = HTTPConnection(server, "/chunked")
    assert connection.exchange(REQUEST)[0] == 200
    assert connection.exchange(REQUEST) == (200, b"abc" + b"x" * 4093)  # only the first 4 KiB are kept
    connection.close()


def test_http_connection_reconnects_after_the_server_closed(server: str) -> None:
    connection = HTTPConnection(server, "/close")
    assert [connection.send(REQUEST) for _ in range(3)] == [None, None, None]
    assert len(_Handler.seen) == 3


def test_http_connection_reports_errors_as_the_target_words_them(server: str) -> None:
    connection = HTTPConnection(server, "/refuse")
    error = connection.send(REQUEST)
    assert error is not None and error.startswith("HTTP 400: unexpected inference input 'BAD'")
    assert connection.send(REQUEST) is not None  # the connection is still usable after an error answer
    unreachable = HTTPConnection("http://127.0.0.1:9", "/x", timeout=2)
    refused = unreachable.send(REQUEST)
    assert refused is not None and refused.startswith("ConnectionRefusedError")


def test_errors_carry_the_models_cause_whole(server: str) -> None:
    """A ModelError from the InvokeEndpoint route: ONNX Runtime's cause, to its last word, after the status
    the model answered, through the stack's HTTP route and through boto3 alike."""
    import boto3
    from botocore.config import Config

    from mme_triton import MMEClient

    http_error = HTTPConnection(server, "/model-error").send(REQUEST)
    _, cold_error = first_answer(HTTPConnection(server, "/model-error"), REQUEST)
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=f"{server}/boto",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1}),
    )
    client = MMEClient("model-error", runtime_client=runtime, max_retries_not_ready=0)
    boto_error = InvokeEndpointConnection(client, "rob.tar.gz").send(REQUEST)

    assert http_error == cold_error == f"HTTP 424: the model answered 400: {ORT_CAUSE}"
    assert boto_error == f"ModelError: the model answered 400: {ORT_CAUSE}"


def test_first_answer_retries_not_ready(server: str) -> None:
    _Handler.not_ready = 2
    seconds, error = first_answer(HTTPConnection(server, "/not-ready"), REQUEST)
    assert error is None and seconds > 0 and len(_Handler.seen) == 3
    seconds, error = first_answer(HTTPConnection(server, "/refuse"), REQUEST)
    assert error is not None and error.startswith("HTTP 400") and len(_Handler.seen) == 4


@pytest.mark.parametrize("url", ["ftp://host/x", "127.0.0.1:8000"], ids=["scheme", "no-scheme"])
def test_http_connection_needs_an_http_url(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        HTTPConnection(url, "/x")
