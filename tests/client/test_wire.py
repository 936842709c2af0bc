"""The fast path's request against botocore's own, without a server: the same URL, headers and signature
as botocore's ``invoke_endpoint`` builds for the same parameters at the same (frozen) time, over many
requests from one client (what the fast path keeps between requests, the signing key of a day and what
botocore's validator and serializer make of the parameters, never makes a request differ), and which
configurations send through botocore's whole call instead.

botocore's request is captured at ``before-send``; nothing is sent.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.auth
import numpy as np
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ParamValidationError
from botocore.stub import Stubber

from mme_triton import AsyncMMEClient, MMEClient
from mme_triton.client._request import Request
from mme_triton.client._wire import Wire

REGION = "eu-west-1"
NOW = datetime.datetime(2026, 12, 6, 1, 2, 3)


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


# -- what is kept between requests ---------------------------------------------------------------------

PARAMS: dict[str, Any] = {
    "EndpointName": "ep",
    "TargetModel": "linear.tar.gz",
    "ContentType": "application/vnd.sagemaker-triton.binary+json;json-header-size=12",
    "Body": b'{"inputs":[]}',
}
# What botocore sends and the fast path leaves out (unsigned SDK telemetry) or http.client adds.
_TELEMETRY = {"amz-sdk-invocation-id", "amz-sdk-request", "Content-Length"}


def _same_as_botocore(runtime: Any, wire: Wire, params: dict[str, Any]) -> dict[str, str]:
    ours = wire.request(params)
    url, theirs = _botocore_sends(runtime, params)
    assert ours.url == url
    assert ours.headers == {name: value for name, value in theirs.items() if name not in _TELEMETRY}
    return ours.headers


def _at(monkeypatch: pytest.MonkeyPatch, when: datetime.datetime) -> None:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when)


def test_signing_key_follows_the_day(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _runtime(token="t")
    wire, _ = Wire.of(runtime)
    assert wire is not None
    signatures = []
    for when in (NOW, NOW + datetime.timedelta(seconds=1), NOW + datetime.timedelta(days=1), NOW):
        _at(monkeypatch, when)
        signatures.append(_same_as_botocore(runtime, wire, PARAMS)["Authorization"])
    assert len(set(signatures[:3])) == 3
    assert signatures[3] == signatures[0]
    assert "/20261207/" in signatures[2]


def test_signing_key_follows_the_secret_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials that change under the client (a provider's refresh) sign with a key of their own."""
    _at(monkeypatch, NOW)
    runtime = _runtime()
    wire, _ = Wire.of(runtime)
    assert wire is not None
    first = _same_as_botocore(runtime, wire, PARAMS)["Authorization"]
    runtime._request_signer._credentials.secret_key = "another/secret"
    second = _same_as_botocore(runtime, wire, PARAMS)["Authorization"]
    assert first.split("Signature=")[0] == second.split("Signature=")[0]
    assert first != second


def test_signature_is_botocores_in_another_region(monkeypatch: pytest.MonkeyPatch) -> None:
    _at(monkeypatch, NOW)
    session = boto3.Session(aws_access_key_id="AKID", aws_secret_access_key="s", region_name="ap-south-2")
    runtime = session.client("sagemaker-runtime")  # AWS's own URL for the region
    wire, _ = Wire.of(runtime)
    assert wire is not None
    headers = _same_as_botocore(runtime, wire, PARAMS)
    assert "/ap-south-2/sagemaker/aws4_request" in headers["Authorization"]
    assert (
        wire.request(PARAMS).url
        == "https://runtime.sagemaker.ap-south-2.amazonaws.com/endpoints/ep/invocations"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"TargetModel": "other.tar.gz"},
        {"ContentType": "application/json"},
        {"CustomAttributes": "a=b"},
        {"InferenceId": "id-7"},
        {"EndpointName": "ep/with space"},
        {"Body": bytearray(b'{"inputs":[1]}')},
        {"Body": '{"inputs":["\u00e9"]}'},  # a str body is sent in UTF-8, as botocore sends it
    ],
    ids=["target", "content-type", "custom-attributes", "inference-id", "endpoint", "bytearray", "str-body"],
)
def test_request_kept_from_earlier_calls_is_the_one_botocore_builds(
    monkeypatch: pytest.MonkeyPatch, change: dict[str, Any]
) -> None:
    _at(monkeypatch, NOW)
    runtime = _runtime(token="t")
    wire, _ = Wire.of(runtime)
    assert wire is not None
    before = _same_as_botocore(runtime, wire, PARAMS)
    changed = {**PARAMS, **change}
    after = _same_as_botocore(runtime, wire, changed)
    assert after != before
    assert _same_as_botocore(runtime, wire, PARAMS) == before  # and back
    body = wire.request(changed).body
    assert body == (change["Body"].encode() if isinstance(change.get("Body"), str) else changed["Body"])


@pytest.mark.parametrize(
    "change",
    [{"EndpointName": 7}, {"TargetModel": ["a"]}, {"Body": memoryview(b"{}")}, {"Unknown": "x"}],
    ids=["endpoint-not-str", "unhashable", "memoryview-body", "unknown-parameter"],
)
def test_parameters_botocore_refuses_are_refused_every_time(change: dict[str, Any]) -> None:
    runtime = _runtime()
    wire, _ = Wire.of(runtime)
    assert wire is not None
    wire.request(PARAMS)
    for _ in range(2):
        with pytest.raises(ParamValidationError):
            wire.request({**PARAMS, **change})
        with pytest.raises(ParamValidationError):
            runtime.invoke_endpoint(**{**PARAMS, **change})


def test_recursion_detection_header_is_read_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a Lambda function botocore passes the invocation's trace id on; it changes per invocation."""
    _at(monkeypatch, NOW)
    runtime = _runtime()
    wire, _ = Wire.of(runtime)
    assert wire is not None
    assert "X-Amzn-Trace-Id" not in _same_as_botocore(runtime, wire, PARAMS)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "scorer")
    for trace in ("Root=1-a", "Root=1-b"):
        monkeypatch.setenv("_X_AMZN_TRACE_ID", trace)
        assert _same_as_botocore(runtime, wire, PARAMS)["X-Amzn-Trace-Id"] == trace


def test_requests_of_one_kind_are_signed_by_botocore_once_and_as_botocore_signs_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the first request of a kind, the time and the body's hash go into what botocore made of it;
    each request still carries the signature botocore gives it."""
    signed_by_botocore = []
    add_auth = botocore.auth.SigV4Auth.add_auth

    def counting(self: Any, request: Any) -> None:
        signed_by_botocore.append(request.url)
        add_auth(self, request)

    runtime = _runtime(token="t")
    wire, _ = Wire.of(runtime)
    assert wire is not None
    bodies = [b"{}", b"", bytearray(b"x" * 100_000), b'{"inputs":[1]}', b"{}"]
    for second, body in enumerate(bodies):
        _at(monkeypatch, NOW + datetime.timedelta(seconds=second))
        monkeypatch.setattr(botocore.auth.SigV4Auth, "add_auth", counting)
        ours = wire.request({**PARAMS, "Body": body})
        monkeypatch.setattr(botocore.auth.SigV4Auth, "add_auth", add_auth)
        _, theirs = _botocore_sends(runtime, {**PARAMS, "Body": body})
        assert ours.headers == {name: value for name, value in theirs.items() if name not in _TELEMETRY}
    assert len(signed_by_botocore) == 1


def test_client_for_inference_components_sends_the_component_header_on_both_paths() -> None:
    """``hosting="inference-components"``: ``infer``'s first argument is a component's name, checked by the
    API's pattern and sent as ``InferenceComponentName`` by the fast path and by botocore alike."""
    inputs = {"INPUT0": np.arange(6, dtype=np.float32).reshape(2, 3)}
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
