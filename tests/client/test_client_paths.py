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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import botocore.auth
import numpy as np
import pytest
from botocore.credentials import CredentialProvider, RefreshableCredentials
from urllib3.exceptions import InsecureRequestWarning

from mme_triton import AsyncMMEClient, MMEClient, decode_response, encode_request
from mme_triton.errors import InferenceError, PayloadTooLargeError

if TYPE_CHECKING:
    from conftest import SageMakerFront

REGION = "eu-west-1"
NOW = datetime.datetime(2026, 12, 6, 1, 2, 3)
GOOD_INPUT = np.arange(6, dtype=np.float32).reshape(2, 3)


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
def test_read_timeout_on_a_kept_alive_connection_is_not_sent_again(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    """Only a connection that fails before any answer starts is resent on; a slow answer is a timeout."""
    client = make_client(config={"read_timeout": 0.5})  # one attempt (runtime_factory)
    client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    front.script(1.5)
    with pytest.raises(InferenceError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT})
    assert caught.value.error_code == "ReadTimeoutError"
    assert len(front.seen()) == 2


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


@pytest.mark.triton
def test_line_break_in_a_header_value_is_refused_before_anything_is_sent(
    front: SageMakerFront, make_client: Callable[..., Any]
) -> None:
    client = make_client()
    with pytest.raises(InferenceError) as caught:
        client.infer("echo.tar.gz", {"IN_FP32": GOOD_INPUT}, custom_attributes="a=b\r\nX-Injected: 1")
    assert caught.value.error_code == "HTTPClientError"
    assert front.seen() == []
