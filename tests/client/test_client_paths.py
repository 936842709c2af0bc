"""The client's own HTTP path against botocore's ``invoke_endpoint``: the same request, the same signature,
the same retries and errors, and botocore's whole call wherever the configuration needs it.

The signature tests sign the same request at the same (frozen) time both ways; the others send through the
SageMaker-shaped front to a real Triton (tests/client/conftest.py), on each path of ``client_path``.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import botocore.auth
import numpy as np
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.credentials import CredentialProvider, RefreshableCredentials
from botocore.stub import Stubber
from urllib3.exceptions import InsecureRequestWarning

from mme_triton import AsyncMMEClient, MMEClient, decode_response, encode_request
from mme_triton.client._request import Request
from mme_triton.client._wire import Wire
from mme_triton.errors import InferenceError, PayloadTooLargeError

if TYPE_CHECKING:
    from conftest import SageMakerFront

REGION = "eu-west-1"
NOW = datetime.datetime(2026, 12, 6, 1, 2, 3)
GOOD_INPUT = np.arange(6, dtype=np.float32).reshape(2, 3)


class _Body:
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield b"{}"


def _runtime(url: str = "http://127.0.0.1:9", token: str | None = None, **config: Any) -> Any:
    session = boto3.Session(
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret/example",
        aws_session_token=token,
        region_name=REGION,
    )
    return session.client("sagemaker-runtime", endpoint_url=url, config=Config(**config))


def _botocore_sends(runtime: Any, params: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The URL and headers botocore's ``invoke_endpoint`` puts on the wire for ``params`` (nothing sent)."""
    seen: dict[str, Any] = {}

    def capture(request: Any, **_: Any) -> AWSResponse:
        seen["url"] = request.url
        seen["headers"] = {
            name: value.decode() if isinstance(value, bytes) else value
            for name, value in request.headers.items()
        }
        return AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Body())

    runtime.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", capture)
    try:
        runtime.invoke_endpoint(**params)
    finally:
        runtime.meta.events.unregister("before-send.sagemaker-runtime.InvokeEndpoint", capture)
    return seen["url"], seen["headers"]


@pytest.mark.parametrize(
    ("url", "token", "extra"),
    [
        ("http://127.0.0.1:9", None, {}),
        ("https://runtime.example.com", "session-token", {}),
        ("http://127.0.0.1:9/some/prefix/", None, {"CustomAttributes": "k=v; x", "InferenceId": "id-1"}),
        ("http://localhost:8080", "t", {"TargetModel": "\u00e9cho with space.tar.gz"}),
    ],
    ids=["plain", "https-session-token", "path-prefix-and-optional-headers", "non-ascii-target-model"],
)
def test_fast_path_signs_as_botocore_signs(
    monkeypatch: pytest.MonkeyPatch, url: str, token: str | None, extra: dict[str, str]
) -> None:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: NOW)
    runtime = _runtime(url, token)
    params: dict[str, Any] = {
        "EndpointName": "my endpoint/x",
        "TargetModel": "linear.tar.gz",
        "ContentType": "application/vnd.sagemaker-triton.binary+json;json-header-size=12",
        "Body": b'{"inputs":[]}',
        **extra,
    }
    wire, refusal = Wire.of(runtime)
    assert wire is not None, refusal
    ours = wire.request(params)
    url_sent, theirs = _botocore_sends(runtime, params)
    assert ours.url == url_sent
    assert ours.headers["Authorization"] == theirs["Authorization"]
    assert ours.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/")
    telemetry = {"amz-sdk-invocation-id", "amz-sdk-request", "Content-Length"}
    assert ours.headers == {name: value for name, value in theirs.items() if name not in telemetry}


def test_fast_path_sends_unsigned_when_the_client_does() -> None:
    runtime = _runtime(signature_version=botocore.UNSIGNED)
    params = {
        "EndpointName": "ep",
        "TargetModel": "m.tar.gz",
        "ContentType": "application/json",
        "Body": b"{}",
    }
    wire, _ = Wire.of(runtime)
    assert wire is not None
    assert "Authorization" not in wire.request(params).headers
    assert "Authorization" not in _botocore_sends(runtime, params)[1]


def test_request_can_name_an_inference_component_instead_of_a_target_model() -> None:
    """The request names its target by an InvokeEndpoint parameter: both paths serialize it by the
    service model, so a request for an inference component travels without code of its own."""
    request = Request(
        target="my-component", outputs=None, binary=True, binary_outputs=None, copy=False,
        parameters=None, request_id=None, custom_attributes=None, inference_id=None,
        target_param="InferenceComponentName",
    )  # fmt: skip
    params = request.params("ep", b"{}", "application/json")
    assert request.target_model is None
    wire, _ = Wire.of(_runtime())
    assert wire is not None
    headers = wire.request(params).headers
    assert headers["X-Amzn-SageMaker-Inference-Component"] == "my-component"
    assert not any("target-model" in name.lower() for name in headers)


# -- which path a configuration takes ----------------------------------------------------------------


def _hooked(event: str) -> Any:
    runtime = _runtime()
    runtime.meta.events.register(event, lambda **_: None)
    return runtime


def _session_hooked() -> Any:
    session = boto3.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name=REGION)
    session.events.register("before-call", lambda **_: None)
    return session.client("sagemaker-runtime", endpoint_url="http://127.0.0.1:9")


def _stubbed() -> Any:
    runtime = _runtime()
    Stubber(runtime).activate()
    return runtime


def _instrumented() -> Any:
    runtime = _runtime()
    original = runtime._make_api_call
    runtime._make_api_call = lambda *args, **kwargs: original(*args, **kwargs)
    return runtime


@pytest.mark.parametrize(
    ("make_runtime", "fast"),
    [
        (_runtime, True),
        (lambda: _runtime(retries={"mode": "legacy"}), True),
        (lambda: _runtime(retries={"mode": "standard", "total_max_attempts": 5}), True),
        (lambda: _hooked("before-send.sagemaker-runtime.InvokeEndpoint"), False),
        (lambda: _hooked("before-call"), False),
        (lambda: _hooked("needs-retry.sagemaker-runtime"), False),
        (_session_hooked, False),
        (_stubbed, False),
        (lambda: _runtime(retries={"mode": "adaptive"}), False),
        (lambda: _runtime(proxies={"http": "http://127.0.0.1:3128"}), False),
        (_instrumented, False),
    ],
    ids=[
        "plain",
        "legacy-retries",
        "standard-retries",
        "before-send-hook",
        "before-call-hook",
        "needs-retry-hook",
        "session-hook",
        "stubber",
        "adaptive-retries",
        "proxy",
        "instrumented",
    ],
)
def test_client_takes_botocore_where_the_configuration_needs_it(
    make_runtime: Callable[[], Any], fast: bool
) -> None:
    assert MMEClient("ep", runtime_client=make_runtime()).fast_path is fast
    assert AsyncMMEClient("ep", runtime_client=make_runtime()).fast_path is fast


def test_client_notices_a_hook_registered_after_it_was_made() -> None:
    runtime = _runtime()
    client = MMEClient("ep", runtime_client=runtime)
    assert client.fast_path

    def hook(**_: Any) -> None:
        pass

    runtime.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", hook)
    assert not client.fast_path
    runtime.meta.events.unregister("before-send.sagemaker-runtime.InvokeEndpoint", hook)
    assert client.fast_path


def test_client_fast_path_can_be_turned_off() -> None:
    assert not MMEClient("ep", runtime_client=_runtime(), fast_path=False).fast_path


# -- against the front ---------------------------------------------------------------------------------


@pytest.mark.triton
def test_botocore_hooks_see_every_request_of_a_hooked_client(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    runtime = runtime_factory(front.url)
    sent: list[str] = []
    runtime.meta.events.register(
        "before-send.sagemaker-runtime.InvokeEndpoint", lambda request, **_: sent.append(request.url)
    )
    out = MMEClient(front.endpoint, runtime_client=runtime).infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
    assert len(sent) == len(front.seen()) == 1


@pytest.mark.triton
def test_fast_path_puts_on_the_wire_what_botocore_puts(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    for fast in (True, False):
        client = MMEClient(front.endpoint, runtime_client=runtime_factory(front.url), fast_path=fast)
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT}, custom_attributes="a=b", inference_id="i-1")
    ours, theirs = front.seen()
    assert ours.body == theirs.body
    assert ours.content_type == theirs.content_type
    varying = {"x-amz-date", "authorization", "amz-sdk-invocation-id", "amz-sdk-request"}
    assert {k: v for k, v in ours.headers.items() if k not in varying} == {
        k: v for k, v in theirs.headers.items() if k not in varying | {"amz-sdk-request"}
    }
    scope = [seen.headers["authorization"].split("Signature=")[0] for seen in (ours, theirs)]
    assert scope[0] == scope[1]


@pytest.mark.triton
def test_fast_path_signs_with_credentials_its_provider_refreshes(
    front: SageMakerFront, make_client: Callable[..., Any], client_path: str
) -> None:
    refreshed_on: list[str] = []

    def refresh() -> dict[str, str]:
        refreshed_on.append(threading.current_thread().name)
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        return {"access_key": "NEWKEY", "secret_key": "new", "token": "t2", "expiry_time": later.isoformat()}

    soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)
    credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": "OLDKEY", "secret_key": "old", "token": "t1", "expiry_time": soon.isoformat()},
        refresh_using=refresh,
        method="test",
    )

    class Provider(CredentialProvider):
        METHOD = "test"

        def load(self) -> RefreshableCredentials:
            return credentials

    core = botocore.session.Session()
    core.get_component("credential_provider").insert_before("env", Provider())
    session = boto3.Session(botocore_session=core, region_name=REGION)
    runtime = session.client("sagemaker-runtime", endpoint_url=front.url)
    client = make_client(runtime=runtime)
    out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
    (seen,) = front.seen()
    assert "Credential=NEWKEY/" in seen.headers["authorization"]
    assert seen.headers["x-amz-security-token"] == "t2"
    assert len(refreshed_on) == 1
    if client_path == "async":  # the provider's call does not block the event loop
        assert refreshed_on[0] != threading.current_thread().name


@pytest.mark.triton
def test_read_timeout_is_retried_as_botocore_retries_it(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(1.5)
    retries = {"mode": "standard", "total_max_attempts": 2}
    client = make_client(config={"read_timeout": 0.5, "retries": retries})
    out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
    assert len(front.seen()) == 2


@pytest.mark.triton
def test_read_timeout_after_the_retries_raises_inference_error(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    front.script(1.5)
    client = make_client(config={"read_timeout": 0.5})  # one attempt (runtime_factory)
    with pytest.raises(InferenceError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.error_code == "ReadTimeoutError"
    assert caught.value.target_model == "echo.tar.gz"


@pytest.mark.triton
def test_refused_connection_raises_what_botocore_raises(
    make_client: Callable[..., Any], runtime_factory: Callable[..., Any]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    client = make_client(runtime=runtime_factory(f"http://127.0.0.1:{closed}"))
    with pytest.raises(InferenceError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.error_code == "EndpointConnectionError"
    assert f"127.0.0.1:{closed}" in caught.value.message


@pytest.mark.triton
def test_idle_connection_the_server_closed_is_not_a_failure(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    client = make_client()  # one attempt: a connection failure would raise
    for value in (1.0, 2.0):
        front.drop_connections()
        out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT * value})
        np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT * value)
    assert len(front.seen()) == 2


@pytest.mark.triton
def test_infer_raw_is_infer_without_the_codec(front: SageMakerFront, make_client: Callable[..., Any]) -> None:
    client = make_client()
    body, content_type = encode_request({"IN_INT32": np.array([[1, -2, 3]], np.int32)})
    answer, answer_type = client.infer_raw("echo.tar.gz", body, content_type, inference_id="raw-1")
    assert isinstance(answer, bytes)
    assert answer_type.startswith("application/vnd.sagemaker-triton.binary+json")
    np.testing.assert_array_equal(decode_response(answer, answer_type)["OUT_INT32"], [[1, -2, 3]])
    (seen,) = front.seen()
    assert seen.body == bytes(body)
    assert seen.headers["x-amzn-sagemaker-inference-id"] == "raw-1"


@pytest.mark.triton
def test_infer_raw_refuses_what_invoke_endpoint_would(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    client = make_client()
    with pytest.raises(PayloadTooLargeError):
        client.infer_raw("echo.tar.gz", bytes(6 * 2**20 + 1), "application/octet-stream")
    with pytest.raises(ValueError, match="content_type"):
        client.infer_raw("echo.tar.gz", b"{}", "")
    with pytest.raises(ValueError, match="TargetModel"):
        client.infer_raw(" echo.tar.gz", b"{}", "application/json")
    assert front.seen() == []


@pytest.mark.triton
@pytest.mark.parametrize("verify", ["bundle", "off", "default"])
def test_tls_is_verified_as_botocore_verifies_it(
    tls_front: SageMakerFront,
    make_client: Callable[..., Any],
    runtime_factory: Callable[..., Any],
    certificate: Path,
    verify: str,
) -> None:
    """Over HTTPS, as to SageMaker: the client's CA bundle is trusted, ``verify=False`` trusts anything,
    and the default bundle refuses a certificate it does not know, with botocore's SSLError."""
    setting = {"bundle": str(certificate), "off": False, "default": None}[verify]
    if verify == "off":
        with pytest.warns(InsecureRequestWarning):
            client = make_client(runtime=runtime_factory(tls_front.url, verify=False))
            out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
        np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
        return
    client = make_client(runtime=runtime_factory(tls_front.url, verify=setting))
    if verify == "default":
        with pytest.raises(InferenceError) as caught:
            client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
        assert caught.value.error_code == "SSLError"
        assert tls_front.seen() == []
        return
    out = client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    np.testing.assert_array_equal(out["OUT_FP32"], GOOD_INPUT)
    assert [seen.target_model for seen in tls_front.seen()] == ["echo.tar.gz"]


# -- asyncio ----------------------------------------------------------------------------------------


@pytest.mark.triton
def test_async_client_keeps_many_requests_apart_on_one_loop(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    async def main() -> list[np.ndarray[Any, Any]]:
        runtime = runtime_factory(front.url, max_pool_connections=64)
        async with AsyncMMEClient(front.endpoint, runtime_client=runtime) as client:
            calls = [
                client.infer("echo.tar.gz", {"IN_INT64": np.full((1, 3), index, np.int64)})
                for index in range(64)
            ]
            return [out["OUT_INT64"] for out in await asyncio.gather(*calls)]

    answers = asyncio.run(main())
    assert [answer.tolist() for answer in answers] == [[[index] * 3] for index in range(64)]
    assert len(front.seen()) == 64


@pytest.mark.triton
def test_async_client_serves_the_loop_it_was_first_used_on(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    client = AsyncMMEClient(front.endpoint, runtime_client=runtime_factory(front.url))
    first = asyncio.new_event_loop()
    try:
        first.run_until_complete(client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT}))
        with pytest.raises(RuntimeError, match="one client per loop"):
            asyncio.run(client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT}))
    finally:
        first.run_until_complete(client.close())
        first.close()


@pytest.mark.moto
def test_client_takes_botocore_while_motos_mock_is_on() -> None:
    """Importing moto registers its stubber on every client; it answers only inside ``mock_aws``, and so
    only there do the calls go through botocore (to be answered by moto)."""
    import moto

    session = boto3.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name=REGION)
    client = MMEClient("ep", runtime_client=session.client("sagemaker-runtime"))  # AWS's own URL
    assert client.fast_path
    with moto.mock_aws():
        assert not client.fast_path
        answer, _ = client.infer_raw("m.tar.gz", b"{}", "application/json")
        assert answer  # moto's canned answer for InvokeEndpoint
    assert client.fast_path


def test_client_for_inference_components_sends_the_component_header_on_both_paths() -> None:
    """``hosting="inference-components"``: ``infer``'s first argument is a component's name, checked by the
    API's pattern and sent as ``InferenceComponentName`` by the fast path and by botocore alike."""
    inputs = {"INPUT0": GOOD_INPUT}
    client = MMEClient("ep", runtime_client=_runtime(), hosting="inference-components")
    assert client.hosting == "inference-components" and client.fast_path
    settings = dict.fromkeys(
        ("binary_outputs", "parameters", "request_id", "custom_attributes", "inference_id"), None
    )
    plan = client._plan("linear", inputs, None, binary=True, split_batches=False, copy=False, **settings)
    params = plan.request.params("ep", *plan.bodies[0])
    assert (plan.request.inference_component, plan.request.target_model) == ("linear", None)
    wire, _ = Wire.of(_runtime())
    assert wire is not None
    fast = wire.request(params).headers
    _, botocore = _botocore_sends(_runtime(), params)
    for headers in (fast, botocore):
        assert headers["X-Amzn-SageMaker-Inference-Component"] == "linear"
        assert not any("target-model" in name.lower() for name in headers)
    with pytest.raises(ValueError, match="cannot name an inference component"):
        client.infer("linear.tar.gz", inputs)
    with pytest.raises(ValueError, match="not a valid TargetModel"):
        MMEClient("ep", runtime_client=_runtime()).infer(" linear", inputs)
    with pytest.raises(ValueError, match="hosting must be one of"):
        MMEClient("ep", runtime_client=_runtime(), hosting="components")  # type: ignore[arg-type]
