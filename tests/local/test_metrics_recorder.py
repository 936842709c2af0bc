"""The stack's metrics recorder: samples in, PutMetricData out once a window ends, read back as from AWS.

Most tests move the recorder's clock by hand and call what its thread calls (``publish_due``), so they say
exactly which window is published when; one lets the thread run with ``metrics_period=1``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from mme_triton.local.aws.metrics import EndpointMetricsSink, MetricsRecorder, check_metrics_period

pytestmark = pytest.mark.moto

SM = "AWS/SageMaker"
EP = {"EndpointName": "ep", "VariantName": "AllTraffic"}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def plane() -> Iterator[Any]:
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane() as control_plane:
        yield control_plane


@pytest.fixture
def cloudwatch(plane: Any) -> Any:
    return plane.client("cloudwatch")


@pytest.fixture
def window() -> float:
    """The start of the minute five minutes ago, in epoch seconds."""
    return (int(time.time()) // 60 - 5) * 60.0


def _dims(endpoint: str) -> list[dict[str, str]]:
    return [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]


def _statistics(
    cloudwatch: Any,
    name: str,
    endpoint: str,
    start: float,
    *,
    period: int = 60,
    namespace: str = SM,
    **stats: Any,
) -> list[dict[str, Any]]:
    kwargs = stats or {"Statistics": ["SampleCount", "Sum", "Minimum", "Maximum"]}
    answer = cloudwatch.get_metric_statistics(
        Namespace=namespace,
        MetricName=name,
        Dimensions=_dims(endpoint),
        StartTime=datetime.fromtimestamp(start, tz=timezone.utc),
        EndTime=datetime.fromtimestamp(start, tz=timezone.utc) + timedelta(minutes=10),
        Period=period,
        **kwargs,
    )
    return sorted(answer["Datapoints"], key=lambda point: point["Timestamp"])


@pytest.mark.parametrize(("seconds", "period"), [(1, 1), (30, 30), (60, 60), (300.0, 300)])
def test_check_metrics_period_takes_what_cloudwatch_reads(seconds: float, period: int) -> None:
    assert check_metrics_period(seconds) == period


@pytest.mark.parametrize("seconds", [0, 2, 7, 61, 90, 1.5])
def test_check_metrics_period_refuses_other_periods(seconds: float) -> None:
    with pytest.raises(ValueError, match="metrics_period"):
        check_metrics_period(seconds)


def test_recorder_publishes_a_window_once_it_has_ended(cloudwatch: Any, window: float) -> None:
    clock = Clock(window + 10)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    recorder.record(SM, "ModelLatency", 100.0, unit="Microseconds", dimensions=dict(EP, EndpointName="due"))
    recorder.record(SM, "ModelLatency", 300.0, unit="Microseconds", dimensions=dict(EP, EndpointName="due"))

    clock.now = window + 59.9
    assert recorder.publish_due() == 0
    assert _statistics(cloudwatch, "ModelLatency", "due", window) == []

    clock.now = window + 60
    assert recorder.publish_due() == 1
    [point] = _statistics(cloudwatch, "ModelLatency", "due", window)
    assert point["Timestamp"] == datetime.fromtimestamp(window, tz=timezone.utc)
    assert (point["SampleCount"], point["Sum"], point["Minimum"], point["Maximum"]) == (
        2.0,
        400.0,
        100.0,
        300.0,
    )
    assert point["Unit"] == "Microseconds"
    assert recorder.publish_due() == 0  # nothing twice


def test_recorder_stop_publishes_the_current_window(cloudwatch: Any, window: float) -> None:
    clock = Clock(window + 5)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    recorder.endpoint("at-stop").model_unloaded(2.5)

    assert recorder.stop() == 1

    [point] = _statistics(cloudwatch, "ModelUnloadingTime", "at-stop", window)
    assert (point["SampleCount"], point["Sum"]) == (1.0, 2_500_000.0)


def test_recorder_sends_many_values_in_several_data_and_percentiles_stay_exact(
    cloudwatch: Any, window: float
) -> None:
    clock = Clock(window)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    dimensions = dict(EP, EndpointName="many")
    for value in range(1, 1001):  # 1000 distinct values: 7 data of at most 150
        recorder.record(SM, "ModelLatency", float(value), unit="Microseconds", dimensions=dimensions)

    assert recorder.flush() == 7

    [point] = _statistics(cloudwatch, "ModelLatency", "many", window)
    assert (point["SampleCount"], point["Sum"]) == (1000.0, 500500.0)
    [ranked] = _statistics(
        cloudwatch, "ModelLatency", "many", window, ExtendedStatistics=["p50", "p99", "p99.9"]
    )
    assert ranked["ExtendedStatistics"] == {"p50": 500.0, "p99": 990.0, "p99.9": 999.0}


def test_recorder_gauge_gives_one_sample_per_window(cloudwatch: Any, window: float) -> None:
    clock = Clock(window + 1)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    sink = recorder.endpoint("gauged")
    sink.loaded_models(1)
    clock.now = window + 30
    sink.loaded_models(2)  # what holds at the end of the window is its sample
    clock.now = window + 61
    recorder.publish_due()
    clock.now = window + 121
    recorder.publish_due()  # 2 held through the second window
    clock.now = window + 125
    sink.loaded_models(3)
    clock.now = window + 181
    recorder.publish_due()
    sink.close()  # the endpoint is gone: no more samples
    clock.now = window + 241
    recorder.publish_due()

    points = _statistics(
        cloudwatch, "LoadedModelCount", "gauged", window, namespace="/aws/sagemaker/Endpoints"
    )
    assert [(p["Timestamp"] - points[0]["Timestamp"], p["SampleCount"], p["Sum"]) for p in points] == [
        (timedelta(0), 1.0, 2.0),
        (timedelta(minutes=1), 1.0, 2.0),
        (timedelta(minutes=2), 1.0, 3.0),
    ]


def test_recorder_hooks_sample_before_each_window(cloudwatch: Any, window: float) -> None:
    clock = Clock(window + 1)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    sink = recorder.endpoint("hooked")
    readings = iter([150.0, 250.0])
    sink.on_publish(lambda s: s.utilization(cpu_percent=next(readings), memory_percent=12.5))
    clock.now = window + 60
    recorder.publish_due()
    clock.now = window + 120
    recorder.publish_due()

    cpu = _statistics(cloudwatch, "CPUUtilization", "hooked", window, namespace="/aws/sagemaker/Endpoints")
    memory = _statistics(
        cloudwatch, "MemoryUtilization", "hooked", window, namespace="/aws/sagemaker/Endpoints"
    )
    assert [(p["Sum"], p["Unit"]) for p in cpu] == [(150.0, "Percent"), (250.0, "Percent")]
    assert [p["Sum"] for p in memory] == [12.5, 12.5]


def test_sink_invocation_publishes_sagemakers_metrics(cloudwatch: Any, window: float) -> None:
    clock = Clock(window + 2)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    sink: EndpointMetricsSink = recorder.endpoint("calls")
    sink.invocation(
        status=200, cache_hit=False, model_seconds=0.004, overhead_seconds=0.5, load_wait_seconds=0.49
    )
    sink.invocation(status=200, cache_hit=True, model_seconds=0.002, overhead_seconds=0.001, instances=2)
    sink.invocation(status=400, cache_hit=True, model_seconds=0.001, overhead_seconds=0.001)
    sink.invocation(status=503, cache_hit=True, model_seconds=0.001, overhead_seconds=0.001)
    sink.invocation(
        status=None, cache_hit=False, model_seconds=None, overhead_seconds=60.0, load_wait_seconds=60.0
    )
    recorder.stop()

    def sums(name: str) -> tuple[float, float]:
        [point] = _statistics(cloudwatch, name, "calls", window)
        return point["SampleCount"], point["Sum"]

    assert sums("Invocations") == (5.0, 5.0)
    assert sums("InvocationsPerInstance") == (5.0, 4.5)
    assert sums("Invocation4XXErrors") == (5.0, 1.0)
    assert sums("Invocation5XXErrors") == (5.0, 1.0)
    assert sums("InvocationModelErrors") == (5.0, 3.0)  # 400, 503 and no answer
    assert sums("ModelCacheHit") == (5.0, 3.0)
    assert sums("ModelLatency") == (4.0, 8000.0)
    assert sums("ModelLoadingWaitTime") == (2.0, 60_490_000.0)
    assert sums("OverheadLatency")[0] == 5.0


def test_route_records_no_load_wait_for_a_miss_whose_model_never_came(cloudwatch: Any, window: float) -> None:
    """ModelLoadingWaitTime is a request's wait for its model "in order to perform inference": a miss that
    was served, and one that gave up on a load still under way, waited; a TargetModel not in S3 (a 4xx)
    waited for nothing, and counts as a miss and an error only."""
    from mme_triton.local.route.metrics import record_invocation
    from mme_triton.local.route.responses import model_data_not_found, model_not_ready, success

    recorder = MetricsRecorder(cloudwatch, period=60, clock=Clock(window + 2))
    sink: EndpointMetricsSink = recorder.endpoint("waits")
    now = time.monotonic()
    served = {"started": now - 1.0, "acquired": now - 0.2, "sent": now - 0.2, "answered": now - 0.1}
    record_invocation(sink, success(b"{}", "application/json", "AllTraffic"), served)
    record_invocation(sink, model_not_ready("big.tar.gz", 60.0), {"started": now - 60.0})
    for _ in range(3):
        record_invocation(sink, model_data_not_found("bucket", "prefix/resnet"), {"started": now - 0.01})
    hit = {"started": now - 0.01, "hit": 1.0, "sent": now - 0.01, "answered": now}
    record_invocation(sink, success(b"{}", "application/json", "AllTraffic"), hit)
    recorder.stop()

    def point(name: str) -> dict[str, Any]:
        [found] = _statistics(cloudwatch, name, "waits", window)
        return found

    wait = point("ModelLoadingWaitTime")
    assert wait["SampleCount"] == 2.0
    assert wait["Minimum"] == pytest.approx(0.8e6, abs=1e3) and wait["Maximum"] == pytest.approx(
        60e6, abs=1e3
    )
    assert (point("ModelCacheHit")["SampleCount"], point("ModelCacheHit")["Sum"]) == (6.0, 1.0)
    assert point("Invocation4XXErrors")["Sum"] == 4.0  # the not-ready answer (429) and the three 400s


def test_recorder_keeps_data_for_the_next_try_when_cloudwatch_cannot_be_reached(
    plane: Any, window: float, caplog: pytest.LogCaptureFixture
) -> None:
    from botocore.config import Config

    cloudwatch = plane.client(
        "cloudwatch", config=Config(retries={"mode": "standard", "total_max_attempts": 1})
    )
    failures = [1]

    def unreachable(**kwargs: Any) -> None:
        if failures:
            failures.pop()
            raise EndpointConnectionError(endpoint_url=plane.url)

    cloudwatch.meta.events.register("before-send.cloudwatch.PutMetricData", unreachable)
    clock = Clock(window + 3)
    recorder = MetricsRecorder(cloudwatch, period=60, clock=clock)
    recorder.endpoint("retried").model_loaded(1.0)

    assert recorder.flush() == 0
    assert "kept for the next try" in caplog.text
    assert recorder.flush() == 1
    [point] = _statistics(cloudwatch, "ModelLoadingTime", "retried", window)
    assert (point["SampleCount"], point["Sum"]) == (1.0, 1_000_000.0)


def test_recorder_thread_publishes_every_second_without_being_asked(cloudwatch: Any) -> None:
    recorder = MetricsRecorder(cloudwatch, period=1).start()
    try:
        start = time.time() - 2
        recorder.endpoint("threaded").invocation(
            status=200, cache_hit=True, model_seconds=0.1, overhead_seconds=0.0
        )
        deadline = time.monotonic() + 30
        points: list[dict[str, Any]] = []
        while not points and time.monotonic() < deadline:
            time.sleep(0.2)
            points = _statistics(cloudwatch, "Invocations", "threaded", start, period=1)
    finally:
        recorder.stop()

    assert [(p["SampleCount"], p["Sum"]) for p in points] == [(1.0, 1.0)]
