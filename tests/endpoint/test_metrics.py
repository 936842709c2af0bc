"""``endpoint_metrics()`` reads what SageMaker publishes, the same on AWS and on the stack's CloudWatch.

The data is put the way the stack's route will put it: through an ``EndpointMetricsSink`` and PutMetricData
(``Values``/``Counts``), on a clock the test sets, then read back both with plain boto3 calls written as for
AWS and with ``endpoint_metrics``.
"""

from __future__ import annotations

import csv
import json
import time
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from mme_triton import EndpointMetrics, endpoint_metrics
from mme_triton.endpoint.handle import Endpoint
from mme_triton.errors import EndpointNotFoundError
from mme_triton.local.aws.metrics import MetricsRecorder

pytestmark = pytest.mark.moto

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def window() -> float:
    """The start of the minute five minutes ago (epoch seconds)."""
    return (int(time.time()) // 60 - 5) * 60.0


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _endpoint(sm: Any, name: str, variants: tuple[str, ...] = ("AllTraffic",)) -> None:
    container = {"Image": "img", "Mode": "MultiModel", "ModelDataUrl": "s3://bucket/models/"}
    sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer=container)
    sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {"VariantName": v, "ModelName": name, "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}
            for v in variants
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def _serve(sink: Any, clock: Clock, requests: str, capacity: int) -> dict[str, int]:
    """Play ``requests`` (one letter per TargetModel) through an LRU cache of ``capacity`` models, telling the
    sink what happened as the route will; returns what was counted by hand."""
    loaded: OrderedDict[str, None] = OrderedDict()
    counted = {"hits": 0, "misses": 0, "evictions": 0}
    for index, model in enumerate(requests):
        clock.now += 1
        hit = model in loaded
        if hit:
            loaded.move_to_end(model)
            counted["hits"] += 1
        else:
            counted["misses"] += 1
            if len(loaded) == capacity:
                loaded.popitem(last=False)
                counted["evictions"] += 1
                sink.model_unloaded(0.25)
            sink.model_downloaded(0.1)
            sink.model_loaded(0.3)
            loaded[model] = None
            sink.loaded_models(len(loaded))
        sink.invocation(
            status=200,
            cache_hit=hit,
            model_seconds=0.001 * (index + 1),
            overhead_seconds=0.0005 if hit else 0.45,
            load_wait_seconds=None if hit else 0.4 + 0.1 * counted["misses"],
        )
    return counted


def test_endpoint_metrics_reads_a_known_cache_sequence_as_boto3_does(
    plane: Any, sm: Any, window: float
) -> None:
    _endpoint(sm, "cached")
    clock = Clock(window)
    recorder = MetricsRecorder(plane.client("cloudwatch"), period=60, clock=clock)
    counted = _serve(recorder.endpoint("cached"), clock, "AABBCA", capacity=2)
    recorder.stop()
    cloudwatch = plane.client("cloudwatch")

    def statistic(name: str, stat: str, namespace: str = "AWS/SageMaker") -> float:
        [point] = cloudwatch.get_metric_statistics(
            Namespace=namespace,
            MetricName=name,
            Dimensions=[
                {"Name": "EndpointName", "Value": "cached"},
                {"Name": "VariantName", "Value": "AllTraffic"},
            ],
            StartTime=_utc(window),
            EndTime=_utc(window + 60),
            Period=60,
            Statistics=[stat],
        )["Datapoints"]
        return float(point[stat])

    metrics = endpoint_metrics(
        "cached", start=_utc(window), end=_utc(window + 120), boto3_session=plane.boto3_session()
    )
    summary = metrics.summary()

    assert counted == {"hits": 2, "misses": 4, "evictions": 2}  # A A B B C A, two models fit
    assert statistic("Invocations", "Sum") == summary["invocations"] == 6
    assert statistic("ModelCacheHit", "Average") == summary["cache_hit_ratio"] == 2 / 6
    assert statistic("ModelLoadingWaitTime", "SampleCount") == summary["cache_misses"] == 4
    assert statistic("ModelUnloadingTime", "SampleCount") == summary["unloads"] == 2
    assert (
        statistic("LoadedModelCount", "Maximum", "/aws/sagemaker/Endpoints")
        == summary["loaded_models_max"]
        == 2
    )
    assert summary["loads"] == summary["downloads"] == 4
    assert summary["load_wait_mean_s"] == pytest.approx((0.5 + 0.6 + 0.7 + 0.8) / 4)
    assert summary["load_wait_max_s"] == pytest.approx(0.8)
    assert summary["load_mean_s"] == pytest.approx(0.3)
    assert summary["unload_mean_s"] == pytest.approx(0.25)
    assert (summary["errors_4xx"], summary["errors_5xx"], summary["model_errors"]) == (0, 0, 0)
    # model latencies 1..6 ms: nearest-rank p50 is the 3rd, p99 the 6th
    assert summary["model_latency_p50_ms"] == pytest.approx(3.0)
    assert summary["model_latency_p99_ms"] == pytest.approx(6.0)
    assert summary["model_latency_mean_ms"] == pytest.approx(3.5)
    assert metrics.variants == ("AllTraffic",)


def test_endpoint_metrics_series_are_tidy_per_period(plane: Any, sm: Any, window: float) -> None:
    _endpoint(sm, "tidy")
    clock = Clock(window)
    recorder = MetricsRecorder(plane.client("cloudwatch"), period=60, clock=clock)
    sink = recorder.endpoint("tidy")
    for hit in (False, True, True):
        sink.invocation(status=200, cache_hit=hit, model_seconds=0.002, overhead_seconds=0.001)
    clock.now = window + 60
    sink.invocation(status=404, cache_hit=True, model_seconds=0.002, overhead_seconds=0.001)
    recorder.stop()

    metrics = endpoint_metrics(
        "tidy", start=_utc(window), end=_utc(window + 120), boto3_session=plane.boto3_session()
    )

    calls = metrics.series("Invocations")
    assert [(p.timestamp, p.value, p.statistic, p.unit, p.variant) for p in calls] == [
        (_utc(window), 3.0, "Sum", "None", "AllTraffic"),
        (_utc(window + 60), 1.0, "Sum", "None", "AllTraffic"),
    ]
    assert [p.value for p in metrics.series("ModelCacheHit", "Average")] == [2 / 3, 1.0]
    assert [(p.value, p.unit) for p in metrics.series("ModelCacheHit", "SampleCount")] == [
        (3.0, "Count"),
        (1.0, "Count"),
    ]
    assert [p.unit for p in metrics.series("ModelLatency", "Average")] == ["Microseconds", "Microseconds"]
    assert metrics.summary()["errors_4xx"] == 1
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.series("Invocation")


def test_endpoint_metrics_finds_loaded_model_count_where_list_metrics_shows_it(
    plane: Any, sm: Any, window: float
) -> None:
    _endpoint(sm, "gpu")
    cloudwatch = plane.client("cloudwatch")
    dimensions = [{"Name": "EndpointName", "Value": "gpu"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    cloudwatch.put_metric_data(
        Namespace="AWS/SageMaker",  # not where AWS's documentation lists it
        MetricData=[
            {
                "MetricName": "LoadedModelCount",
                "Dimensions": dimensions,
                "Timestamp": _utc(window),
                "Value": 5.0,
            }
        ],
    )

    metrics = endpoint_metrics(
        "gpu", start=_utc(window), end=_utc(window + 60), boto3_session=plane.boto3_session()
    )

    assert metrics.summary()["loaded_models_max"] == 5.0
    assert {p.namespace for p in metrics.series("LoadedModelCount")} == {"AWS/SageMaker"}


def test_endpoint_metrics_sends_batches_of_500_queries_and_follows_pages(
    plane: Any, sm: Any, window: float
) -> None:
    variants = tuple(f"v{i}" for i in range(11))
    _endpoint(sm, "wide", variants)
    clock = Clock(window)
    recorder = MetricsRecorder(plane.client("cloudwatch"), period=60, clock=clock)
    for variant in variants:
        for minute in range(3):
            clock.now = window + 60 * minute
            recorder.endpoint("wide", variant).invocation(
                status=200, cache_hit=True, model_seconds=0.001, overhead_seconds=0.001
            )
    recorder.stop()
    cloudwatch = plane.client("cloudwatch")
    sent: list[tuple[int, bool]] = []

    def small_pages(params: dict[str, Any], **_: Any) -> None:
        params["MaxDatapoints"] = 50
        sent.append((len(params["MetricDataQueries"]), "NextToken" in params))

    cloudwatch.meta.events.register("provide-client-params.cloudwatch.GetMetricData", small_pages)

    metrics = endpoint_metrics(
        "wide", start=_utc(window), end=_utc(window + 180), cloudwatch_client=cloudwatch,
        boto3_session=plane.boto3_session(),
    )  # fmt: skip

    queries = [count for count, _ in sent]
    assert max(queries) == 500 and sum(1 for _, paged in sent if not paged) == 2  # two batches
    assert any(paged for _, paged in sent)  # pages followed
    assert metrics.summary()["invocations"] == 33
    assert [p.value for p in metrics.series("Invocations", variant="v7")] == [1.0, 1.0, 1.0]


def test_endpoint_metrics_retries_a_throttled_read(plane: Any, sm: Any, window: float) -> None:
    _endpoint(sm, "throttled")
    cloudwatch = plane.client("cloudwatch")
    throttled = [1]

    def throttle(**_: Any) -> None:
        if throttled:
            throttled.pop()
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "GetMetricData")

    cloudwatch.meta.events.register("before-call.cloudwatch.GetMetricData", throttle)

    metrics = endpoint_metrics(
        "throttled", start=_utc(window), end=_utc(window + 60), cloudwatch_client=cloudwatch,
        boto3_session=plane.boto3_session(),
    )  # fmt: skip

    assert throttled == []
    assert metrics.summary()["invocations"] == 0


def test_endpoint_metrics_without_data_says_so(plane: Any, sm: Any) -> None:
    _endpoint(sm, "quiet")

    metrics = endpoint_metrics("quiet", boto3_session=plane.boto3_session())

    summary = metrics.summary()
    assert not metrics.has_data
    assert (summary["invocations"], summary["cache_hit_ratio"], summary["load_wait_mean_s"]) == (
        0,
        None,
        None,
    )
    assert "no data points" in str(metrics)
    assert metrics.end - metrics.start == timedelta(hours=1)


def test_endpoint_metrics_of_an_unknown_endpoint_raises(plane: Any) -> None:
    with pytest.raises(EndpointNotFoundError):
        endpoint_metrics("nowhere", boto3_session=plane.boto3_session())


def test_endpoint_metrics_of_a_deleted_endpoint_with_its_variant(plane: Any, window: float) -> None:
    recorder = MetricsRecorder(plane.client("cloudwatch"), period=60, clock=Clock(window))
    recorder.endpoint("gone", "blue").model_unloaded(1.0)
    recorder.stop()

    metrics = endpoint_metrics(
        "gone", variant="blue", start=_utc(window), end=_utc(window + 60), boto3_session=plane.boto3_session()
    )

    assert metrics.summary()["unloads"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"period": 7}, "period"),
        ({"period": timedelta(seconds=90)}, "period"),
        ({"start": timedelta(0)}, "before"),
    ],
    ids=["period-7", "period-90s", "empty-window"],
)
def test_endpoint_metrics_refuses_a_window_cloudwatch_cannot_read(
    plane: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        endpoint_metrics("any", variant="AllTraffic", boto3_session=plane.boto3_session(), **kwargs)


def test_endpoint_metrics_writes_csv_json_and_a_plot(
    plane: Any, sm: Any, window: float, tmp_path: Path
) -> None:
    _endpoint(sm, "written")
    clock = Clock(window)
    recorder = MetricsRecorder(plane.client("cloudwatch"), period=60, clock=clock)
    _serve(recorder.endpoint("written"), clock, "ABAB", capacity=1)
    recorder.stop()
    metrics = endpoint_metrics(
        "written", start=_utc(window), end=_utc(window + 60), boto3_session=plane.boto3_session()
    )

    rows = list(csv.DictReader(metrics.to_csv(tmp_path / "m.csv").open()))
    document = json.loads(metrics.to_json(tmp_path / "m.json").read_text())
    figure = metrics.plot(tmp_path / "m.png")
    assert figure._repr_png_().startswith(b"\x89PNG")  # a notebook cell ending with it shows the plot

    assert len(rows) == len(metrics.points) > 0
    assert {
        "endpoint", "variant", "namespace", "metric", "statistic", "timestamp", "value", "unit", "component"
    } == set(rows[0])  # fmt: skip
    assert {r["component"] for r in rows} == {""}  # a multi-model endpoint's points are its variants'
    invocations = [r for r in rows if r["metric"] == "Invocations"]
    assert [(r["statistic"], float(r["value"]), r["timestamp"]) for r in invocations] == [
        ("Sum", 4.0, _utc(window).isoformat())
    ]
    assert document["summary"] == json.loads(json.dumps(metrics.summary()))
    assert document["summary"]["cache_hit_ratio"] == 0.0 and document["summary"]["unloads"] == 3
    assert len(document["points"]) == len(rows)
    assert len(figure.axes) == 4  # three panels and the hit ratio's own axis
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_endpoint_handle_metrics_reads_with_its_session(plane: Any, sm: Any, window: float) -> None:
    _endpoint(sm, "handled")
    clock = Clock(window)
    recorder = MetricsRecorder(plane.client("cloudwatch"), period=60, clock=clock)
    _serve(recorder.endpoint("handled"), clock, "AAB", capacity=2)
    recorder.stop()
    handle = Endpoint(
        name="handled",
        arn="arn",
        status="InService",
        model_data_url="s3://bucket/models/",
        endpoint_config_name="handled",
        model_name="handled",
        region=plane.region,
        _session=plane.boto3_session(),
    )

    metrics = handle.metrics(start=_utc(window), end=_utc(window + 60))

    assert isinstance(metrics, EndpointMetrics)
    assert metrics.summary()["cache_hit_ratio"] == pytest.approx(1 / 3)
    assert (
        metrics.summary()
        == endpoint_metrics(
            "handled", start=_utc(window), end=_utc(window + 60), boto3_session=plane.boto3_session()
        ).summary()
    )


def test_endpoint_metrics_plot_spans_the_data_and_names_the_window(tmp_path: Path) -> None:
    """Twenty seconds of traffic read with a ten-minute window: the x-axis is the twenty seconds (and a
    period of room), not the window; the title says the window."""
    from matplotlib.dates import date2num

    from mme_triton.endpoint.metrics import MetricPoint

    end = datetime(2026, 1, 1, 12, 10, tzinfo=timezone.utc)
    first = end - timedelta(seconds=20)
    points = tuple(
        MetricPoint(
            metric, "AllTraffic", statistic, first + timedelta(seconds=second), value, "None", namespace
        )
        for second in range(20)
        for metric, statistic, value, namespace in (
            ("Invocations", "Sum", 5.0, "AWS/SageMaker"),
            ("ModelCacheHit", "Sum", 4.0, "AWS/SageMaker"),
            ("ModelCacheHit", "SampleCount", 5.0, "AWS/SageMaker"),
            ("LoadedModelCount", "Maximum", 2.0, "/aws/sagemaker/Endpoints"),
        )
    )
    metrics = EndpointMetrics("short", ("AllTraffic",), end - timedelta(minutes=10), end, 1, points)

    figure = metrics.plot(tmp_path / "short.png")

    low, high = figure.axes[0].get_xlim()
    assert low <= date2num(first) and high >= date2num(first + timedelta(seconds=19))
    assert (high - low) * 86400 <= 25  # the data fill the width: 20 s of data, a period of room each side
    title = figure._suptitle.get_text()
    assert "window read: 10 min (2026-01-01 12:00:00 to 12:10:00 UTC), period 1 s" in title
    assert "data: 20 s from 12:09:40" in title
