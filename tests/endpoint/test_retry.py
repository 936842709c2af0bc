"""Retries of the endpoint stage: which failures are transient, the read loop, the poll schedule."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
    SSLError,
)

from mme_triton._sagemaker import is_transient
from mme_triton.endpoint._retry import (
    CONTROL_PLANE_MAX_ATTEMPTS,
    READ_BACKOFF_CAP,
    Deadline,
    control_plane_config,
    poll_delays,
    read,
    read_backoff,
)


def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "DescribeEndpoint",
    )


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        pytest.param(_client_error("ThrottlingException", 400), True, id="throttling"),
        pytest.param(_client_error("TooManyRequestsException", 400), True, id="too-many-requests"),
        pytest.param(_client_error("InternalFailure", 500), True, id="internal-failure"),
        pytest.param(_client_error("ServiceUnavailable", 503), True, id="unavailable"),
        pytest.param(_client_error("SomethingElse", 502), True, id="bad-gateway"),
        pytest.param(_client_error("RequestTimeout", 408), True, id="request-timeout"),
        pytest.param(EndpointConnectionError(endpoint_url="https://x"), True, id="connection-refused"),
        pytest.param(ConnectTimeoutError(endpoint_url="https://x"), True, id="connect-timeout"),
        pytest.param(ConnectionClosedError(endpoint_url="https://x"), True, id="connection-closed"),
        pytest.param(ReadTimeoutError(endpoint_url="https://x"), True, id="read-timeout"),
        pytest.param(_client_error("ValidationException", 400), False, id="validation"),
        pytest.param(_client_error("AccessDeniedException", 403), False, id="access-denied"),
        pytest.param(SSLError(endpoint_url="https://x", error="bad certificate"), False, id="tls"),
        pytest.param(RuntimeError("not from AWS"), False, id="other"),
    ],
)
def test_is_transient_classifies_errors(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


class _Flaky:
    """A callable that fails ``failures`` times with ``error``, then answers."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return {"answer": kwargs}


def test_read_retries_transient_failures_until_it_succeeds() -> None:
    flaky = _Flaky(4, _client_error("ThrottlingException", 400))
    assert read(flaky, deadline=Deadline(30), what="flaky", Name="x") == {"answer": {"Name": "x"}}
    assert flaky.calls == 5


def test_read_raises_other_errors_at_once() -> None:
    flaky = _Flaky(1, _client_error("ValidationException", 400))
    with pytest.raises(ClientError, match="ValidationException"):
        read(flaky, deadline=Deadline(30), what="flaky")
    assert flaky.calls == 1


def test_read_gives_up_with_the_last_error_at_the_deadline() -> None:
    flaky = _Flaky(10**6, EndpointConnectionError(endpoint_url="https://x"))
    with pytest.raises(EndpointConnectionError):
        read(flaky, deadline=Deadline(0.3), what="flaky")
    assert flaky.calls >= 2  # it was tried again before the deadline


def test_read_after_the_deadline_still_tries_once() -> None:
    deadline = Deadline(0.01)
    time.sleep(0.02)
    assert read(_Flaky(0, RuntimeError()), deadline=deadline, what="ok") == {"answer": {}}


@pytest.mark.parametrize("attempt", [0, 1, 5, 40, 1023, 1024, 10**6], ids=str)
def test_read_backoff_stays_within_the_cap_however_many_attempts(attempt: int) -> None:
    # 2**1024 as a float overflows: a read throttled for about 2 h used to end in OverflowError
    pause = read_backoff(attempt)
    assert 0 < pause <= READ_BACKOFF_CAP
    if attempt >= 40:
        assert pause >= READ_BACKOFF_CAP / 2


def test_poll_delays_start_quickly_and_grow_to_the_interval() -> None:
    delays = poll_delays(15)
    first = [next(delays) for _ in range(12)]
    assert 0.25 <= first[0] <= 0.5
    assert max(first) <= 15
    assert first[-1] > first[0]  # grew
    assert all(delay > 0 for delay in first)


@pytest.mark.parametrize("interval", [0.05, 0.3, 2.0], ids=["tiny", "short", "long"])
def test_poll_delays_never_exceed_the_interval(interval: float) -> None:
    delays = poll_delays(interval)
    assert all(next(delays) <= interval for _ in range(30))


def test_deadline_counts_down() -> None:
    deadline = Deadline(60)
    assert not deadline.passed()
    assert 0 < deadline.remaining() <= 60
    assert Deadline(0).passed() and Deadline(0).remaining() == 0


def test_control_plane_config_uses_standard_mode_with_more_attempts() -> None:
    config = control_plane_config()
    assert config.retries == {"mode": "standard", "total_max_attempts": CONTROL_PLANE_MAX_ATTEMPTS}
    assert CONTROL_PLANE_MAX_ATTEMPTS > 3  # botocore's default
    assert READ_BACKOFF_CAP <= 20  # no longer than botocore's own cap
