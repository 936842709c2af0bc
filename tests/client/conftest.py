"""Fixtures for the client tests: a real Triton, the models it serves, and a SageMaker-shaped front for it.

``SageMakerFront`` plays the part of SageMaker's runtime service: it answers boto3's
``POST /endpoints/<name>/invocations`` on 127.0.0.1, forwards the body to a real Triton's SageMaker
front-end (``/models/<hash>/invoke``) and wraps Triton's answers into the error shapes AWS returns
(``x-amzn-ErrorType`` header and JSON body). boto3's ``sagemaker-runtime`` client points at it through
``endpoint_url``, so botocore's own parser reads every answer.

The front's error answers are the embedded stack's own (:mod:`mme_triton.local.route.responses`, standard
library only). Heavy imports (onnx, moto, the Triton wheel) happen inside the fixtures that need them;
the tests that use those fixtures are marked ``triton`` or ``moto``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from mme_triton.client import _json
from mme_triton.client.datatypes import DATATYPES
from mme_triton.local.route import responses
from mme_triton.local.route.responses import RuntimeResponse

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
ENDPOINT = "client-test-endpoint"
FAKE_CREDENTIALS: dict[str, Any] = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

# The echo model has one optional input IN_<dt> and output OUT_<dt> per Triton datatype.
_ECHO_MODEL_PY = """\
import triton_python_backend_utils as pb_utils

DATATYPES = {datatypes!r}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for datatype in DATATYPES:
                tensor = pb_utils.get_input_tensor_by_name(request, "IN_" + datatype)
                if tensor is None:
                    continue
                if datatype == "BF16":
                    # numpy has no bfloat16: hand the tensor through DLPack untouched
                    outputs.append(pb_utils.Tensor.from_dlpack("OUT_" + datatype, tensor.to_dlpack()))
                else:
                    outputs.append(pb_utils.Tensor("OUT_" + datatype, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""

LINEAR_WEIGHTS = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.125, 3.0, -1.25]]
LINEAR_BIAS = [0.1, -0.2, 0.3]
LINEAR_MAX_BATCH_SIZE = 8


def _config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


def write_echo_model(root: Path) -> Path:
    """An identity python-backend model: every ``IN_<dt>`` (2-D, any size) comes back as ``OUT_<dt>``."""
    model = root / "echo"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(_ECHO_MODEL_PY.format(datatypes=DATATYPES))
    inputs = ",\n".join(
        f'  {{ name: "IN_{dt}" data_type: {_config_type(dt)} dims: [-1, -1] optional: true }}'
        for dt in DATATYPES
    )
    outputs = ",\n".join(
        f'  {{ name: "OUT_{dt}" data_type: {_config_type(dt)} dims: [-1, -1] }}' for dt in DATATYPES
    )
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\n"
        "instance_group [{ kind: KIND_CPU count: 1 }]\n"
    )
    return root


def write_linear_model(root: Path) -> Path:
    """An ONNX model ``OUTPUT0 = INPUT0 @ W + b`` (FP32 [-1, 4] -> [-1, 3], ``max_batch_size`` 8)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model_dir = root / "linear"
    (model_dir / "1").mkdir(parents=True)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["INPUT0", "W"], ["XW"]),
            helper.make_node("Add", ["XW", "B"], ["OUTPUT0"]),
        ],
        "linear",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 3])],
        initializer=[
            numpy_helper.from_array(np.array(LINEAR_WEIGHTS, dtype=np.float32), "W"),
            numpy_helper.from_array(np.array(LINEAR_BIAS, dtype=np.float32), "B"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(model_dir / "1" / "model.onnx"))
    (model_dir / "config.pbtxt").write_text(
        f'platform: "onnxruntime_onnx"\nmax_batch_size: {LINEAR_MAX_BATCH_SIZE}\n'
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]\n'
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [3] }]\n'
        "instance_group [{ kind: KIND_CPU count: 1 }]\n"
    )
    return root


@dataclass
class ServedModels:
    """A running Triton and the TargetModels it serves, by TargetModel -> model hash."""

    server: Any  # mme_triton.local.triton.server.TritonServer
    hashes: dict[str, str]


@pytest.fixture(scope="session")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedModels]:
    """A real Triton (SageMaker front-end, multi-model mode) serving ``echo.tar.gz`` and ``linear.tar.gz``."""
    from mme_triton.local.triton.server import TritonServer

    echo_dir = write_echo_model(tmp_path_factory.mktemp("echo"))
    linear_dir = write_linear_model(tmp_path_factory.mktemp("linear"))
    server = TritonServer(workdir=tmp_path_factory.mktemp("triton"))
    server.start()
    try:
        hashes = {"echo.tar.gz": "echohash", "linear.tar.gz": "linearhash"}
        server.load(hashes["echo.tar.gz"], echo_dir, "echo.tar.gz")
        server.load(hashes["linear.tar.gz"], linear_dir, "linear.tar.gz")
        yield ServedModels(server=server, hashes=hashes)
    finally:
        server.stop()


# -- a SageMaker-shaped front for the real Triton ------------------------------------------------------


@dataclass(frozen=True)
class SeenRequest:
    """What the front received for one InvokeEndpoint call."""

    endpoint: str
    target_model: str | None
    content_type: str
    headers: dict[str, str]
    body: bytes

    def header_json(self) -> dict[str, Any]:
        """The request's JSON part (the whole body, or the header of a binary-tensor body)."""
        match = re.search(r"json-header-size=(\d+)", self.content_type)
        size = int(match.group(1)) if match else len(self.body)
        document: dict[str, Any] = json.loads(self.body[:size])
        return document

    def rows(self) -> int:
        """Dimension 0 of the request's first input."""
        return int(self.header_json()["inputs"][0]["shape"][0])


class SageMakerFront:
    """``InvokeEndpoint`` for one endpoint, answered by a real Triton; errors in AWS's shapes.

    ``script`` queues answers given before forwarding (``RuntimeResponse`` values, or ``None`` to forward one
    request normally), to play ``ModelNotReadyException``, throttling and the like; a number stalls that
    many seconds before answering (a read timeout). :meth:`drop_connections` closes the kept-alive
    connections from the server's side, as a load balancer closes idle ones.
    """

    account_id = ACCOUNT_ID

    def __init__(
        self, served: ServedModels, endpoint: str = ENDPOINT, tls: ssl.SSLContext | None = None
    ) -> None:
        self.served = served
        self.endpoint = endpoint
        self.requests: list[SeenRequest] = []
        self._script: collections.deque[RuntimeResponse | float | None] = collections.deque()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        #: connections accepted so far
        self.accepted = 0
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                status, headers, answer = front.answer(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # 64 connections at once; at the default 5, SYNs wait out retries

            def get_request(self) -> tuple[socket.socket, Any]:
                sock, address = super().get_request()
                with front._lock:
                    front._sockets.append(sock)
                    front.accepted += 1
                return sock, address

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._scheme = "http"
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
            self._scheme = "https"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    # The error answers are the embedded stack's own (mme_triton.local.route.responses), so the client is
    # tested against the same shapes the stack's runtime sends.

    @staticmethod
    def aws_error(status: int, code: str, message: str) -> RuntimeResponse:
        return responses.error_response(status, code, {"Message": message})

    @staticmethod
    def validation_error(message: str) -> RuntimeResponse:
        return responses.validation_error(message)

    @staticmethod
    def model_not_ready(target_model: str) -> RuntimeResponse:
        return responses.model_not_ready(target_model, 60.0)

    @staticmethod
    def model_error(endpoint: str, status: int, original: str) -> RuntimeResponse:
        """A ``ModelError`` (424) carrying the container's status and body, worded as SageMaker words it."""
        return responses.model_error(
            status, original.encode(), endpoint_name=endpoint, region=REGION, account_id=ACCOUNT_ID
        )

    def script(self, *answers: RuntimeResponse | float | None) -> None:
        with self._lock:
            self._script.extend(answers)

    def drop_connections(self) -> None:
        """Close every connection the front has accepted, from its side (idle kept-alive ones included)."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by its handler
                sock.shutdown(socket.SHUT_RDWR)

    def seen(self) -> list[SeenRequest]:
        with self._lock:
            return list(self.requests)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def answer(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        lowered = {name.lower(): value for name, value in headers.items()}
        match = re.fullmatch(r"/endpoints/([^/]+)/invocations", path)
        if match is None:
            return 404, {"Content-Type": "text/plain"}, b"not found"
        endpoint = match.group(1)
        target = lowered.get("x-amzn-sagemaker-target-model")
        if target is not None:  # http.server reads header bytes as latin-1; botocore sends UTF-8
            target = target.encode("latin-1").decode("utf-8", "replace")
        content_type = lowered.get("content-type", "application/octet-stream")
        with self._lock:
            self.requests.append(SeenRequest(endpoint, target, content_type, lowered, body))
            scripted = self._script.popleft() if self._script else None
        if isinstance(scripted, float | int):
            time.sleep(scripted)
            scripted = None
        if scripted is not None:
            return self._error(scripted)
        if endpoint != self.endpoint:
            return self._error(
                self.validation_error(f"Endpoint {endpoint} of account {ACCOUNT_ID} not found.")
            )
        if target is None or target not in self.served.hashes:
            return self._error(
                self.validation_error(
                    f"Failed to download model data(bucket: models, key: mme/{target}). Please ensure that "
                    "there is an object located at the URL and that the role passed to CreateModel has "
                    "permissions to download the model."
                )
            )
        status, triton_headers, answer = self.served.server.invoke(
            self.served.hashes[target], target, body, content_type
        )
        if status == 200:
            return 200, {"Content-Type": triton_headers.get("content-type", "application/json")}, answer
        return self._error(self.model_error(endpoint, status, answer.decode("utf-8", "replace")))

    @staticmethod
    def _error(error: RuntimeResponse) -> tuple[int, dict[str, str], bytes]:
        headers = {name: value for name, value in error.headers if name.lower() != "content-length"}
        return error.status, headers, error.body


@pytest.fixture
def front(triton: ServedModels) -> Iterator[SageMakerFront]:
    """A fresh SageMaker-shaped front (empty script and request log) for the shared Triton."""
    server = SageMakerFront(triton)
    try:
        yield server
    finally:
        server.close()


class AwaitedClient:
    """An ``AsyncMMEClient`` driven from the test's thread on an event loop of its own, so that the tests
    written for ``MMEClient`` run unchanged against it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.client, name)
        if not asyncio.iscoroutinefunction(found):
            return found
        return lambda *args, **kwargs: self._loop.run_until_complete(found(*args, **kwargs))

    def close(self) -> None:
        self._loop.run_until_complete(self.client.close())
        self._loop.close()


CLIENT_PATHS = ["fast", "botocore", "async"]


@pytest.fixture(params=CLIENT_PATHS)
def client_path(request: pytest.FixtureRequest) -> str:
    """Which client and path a test runs with: ``MMEClient`` on its fast path, ``MMEClient`` through
    botocore's ``invoke_endpoint`` (``fast_path=False``), ``AsyncMMEClient``."""
    path: str = request.param
    return path


@pytest.fixture
def make_client(
    front: SageMakerFront, runtime_factory: Callable[..., Any], client_path: str
) -> Iterator[Callable[..., Any]]:
    """``make_client(endpoint_name=None, config={}, runtime=None, **options)``: a client of
    ``client_path`` for the front (``config`` goes to the botocore client it makes, unless ``runtime``
    is a ready one; the options go to the client)."""
    from mme_triton.client.aio import AsyncMMEClient
    from mme_triton.client.client import MMEClient

    made: list[Any] = []

    def make(
        endpoint_name: str | None = None,
        config: dict[str, Any] | None = None,
        runtime: Any = None,
        **options: Any,
    ) -> Any:
        if runtime is None:
            runtime = runtime_factory(front.url, **{"max_pool_connections": 16, **(config or {})})
        name = endpoint_name or front.endpoint
        client: Any
        if client_path == "async":
            client = AwaitedClient(AsyncMMEClient(name, runtime_client=runtime, **options))
        else:
            client = MMEClient(name, runtime_client=runtime, fast_path=client_path == "fast", **options)
        assert client.fast_path is (client_path != "botocore")
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate (and its key) for 127.0.0.1, in one PEM file: a CA bundle of its own."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = tmp_path_factory.mktemp("tls") / "front.pem"
    path.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return path


@pytest.fixture
def tls_front(triton: ServedModels, certificate: Path) -> Iterator[SageMakerFront]:
    """The front on HTTPS (``certificate``), as SageMaker's runtime answers."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate)
    server = SageMakerFront(triton, tls=context)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def runtime_factory() -> Callable[..., Any]:
    """Build real boto3 ``sagemaker-runtime`` clients for a given ``endpoint_url``."""
    import boto3
    from botocore.config import Config

    def make(endpoint_url: str, *, verify: Any = None, **config: Any) -> Any:
        settings: dict[str, Any] = {
            "retries": {"mode": "standard", "total_max_attempts": 1},
            "read_timeout": 70,
        }
        settings.update(config)
        return boto3.client(
            "sagemaker-runtime",
            endpoint_url=endpoint_url,
            region_name=REGION,
            config=Config(**settings),
            verify=verify,
            **FAKE_CREDENTIALS,
        )

    return make


# -- codec samples -----------------------------------------------------------------------------------

# One sample per Triton datatype, with the values most likely to break an encoder: extremes of each
# integer range, float subnormals and huge values, negative zero, empty and non-ASCII strings.
SAMPLES: dict[str, np.ndarray[Any, Any]] = {
    "BOOL": np.array([[True, False, True], [False, False, True]]),
    "UINT8": np.array([0, 1, 255], dtype=np.uint8),
    "UINT16": np.array([0, 1, 65535], dtype=np.uint16),
    "UINT32": np.array([0, 1, 2**32 - 1], dtype=np.uint32),
    "UINT64": np.array([0, 1, 2**64 - 1], dtype=np.uint64),
    "INT8": np.array([-128, 0, 127], dtype=np.int8),
    "INT16": np.array([-(2**15), 0, 2**15 - 1], dtype=np.int16),
    "INT32": np.array([[-(2**31), 0], [7, 2**31 - 1]], dtype=np.int32),
    "INT64": np.array([-(2**63), -1, 2**63 - 1], dtype=np.int64),
    "FP16": np.array([-0.0, 1.5, 65504.0, 6e-8], dtype=np.float16),
    "FP32": np.array([[0.1, -0.0, 3.4028235e38], [1e-45, -2.5, 16777217.0]], dtype=np.float32),
    "FP64": np.array([0.1, -0.0, 1.7976931348623157e308, 5e-324, 1 / 3], dtype=np.float64),
    "BF16": np.array([1.0, -2.5, 3.0e38, 0.1], dtype=ml_dtypes.bfloat16),
    "BYTES": np.array([[b"", b"abc"], [b"\xc3\xa9t\xc3\xa9", b"with\x00nul"]], dtype=np.object_),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``sample_datatype`` runs the test once per Triton datatype, ``json_datatype`` once per JSON one."""
    if "sample_datatype" in metafunc.fixturenames:
        metafunc.parametrize("sample_datatype", list(SAMPLES), ids=list(SAMPLES))
    if "json_datatype" in metafunc.fixturenames:
        names = [name for name in SAMPLES if name not in ("FP16", "BF16")]
        metafunc.parametrize("json_datatype", names, ids=names)


@pytest.fixture
def sample(sample_datatype: str) -> np.ndarray[Any, Any]:
    """The sample tensor of ``sample_datatype`` (a fresh copy)."""
    return SAMPLES[sample_datatype].copy()


@pytest.fixture
def json_sample(json_datatype: str) -> np.ndarray[Any, Any]:
    """The sample tensor of ``json_datatype``: every datatype Triton accepts as JSON (not FP16, BF16)."""
    return SAMPLES[json_datatype].copy()


@pytest.fixture
def samples() -> dict[str, np.ndarray[Any, Any]]:
    """Every sample tensor, keyed by datatype."""
    return {name: array.copy() for name, array in SAMPLES.items()}


@pytest.fixture(params=["simdjson", "orjson", "json"])
def json_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with each JSON path: pysimdjson reading (orjson writing), orjson, the standard library."""
    if request.param in ("simdjson", "orjson"):
        pytest.importorskip("orjson")
    if request.param == "simdjson":
        pytest.importorskip("simdjson")
    monkeypatch.setattr(_json, "use_orjson", request.param in ("simdjson", "orjson"))
    monkeypatch.setattr(_json, "use_simdjson", request.param == "simdjson")
    yield request.param


@pytest.fixture
def same_tensor() -> Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any]], None]:
    """An assertion: same shape, same dtype and the same bits."""
    return _assert_same_tensor


def _assert_same_tensor(actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> None:
    """Same shape, same dtype (native order) and the same values bit for bit (NaN and -0.0 included)."""
    assert actual.shape == expected.shape
    if expected.dtype == np.object_:
        assert actual.dtype == np.object_
        assert actual.tolist() == expected.tolist()
        return
    assert actual.dtype == expected.dtype.newbyteorder("=")
    native = np.ascontiguousarray(expected, dtype=actual.dtype)
    assert np.ascontiguousarray(actual).tobytes() == native.tobytes()
