"""The stack's CloudWatch answers as CloudWatch does: each test is written as for AWS, with plain boto3 calls.

The control plane serves CloudWatch from moto, whose own metric queries ignore the namespace when dimensions
are given, depend on the order dimensions are listed in, match a subset of the dimensions, list metrics
more than once and fail or ignore percentiles; the stack answers those calls itself
(``mme_triton.local.aws.cloudwatch``). Each test uses metric names of its own on one plane per module.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError

pytestmark = pytest.mark.moto

EP = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]
NS = "Test/Stack"


@pytest.fixture(scope="module")
def cloudwatch() -> Iterator[Any]:
    """A real boto3 CloudWatch client on a control plane of this module's own."""
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane() as plane:
        yield plane.client("cloudwatch")


@pytest.fixture
def base() -> datetime:
    """The start of the minute ten minutes ago (UTC): data points are put from there on."""
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    return now - timedelta(minutes=10)


def _stat(cloudwatch: Any, name: str, start: datetime, stat: str, *, period: int = 60, **metric: Any) -> Any:
    """One GetMetricData query's values, oldest first."""
    query = {
        "Id": "q",
        "MetricStat": {
            "Metric": {
                "Namespace": metric.get("namespace", NS),
                "MetricName": name,
                "Dimensions": metric.get("dims", EP),
            },
            "Period": period,
            "Stat": stat,
        },
    }
    if "unit" in metric:
        query["MetricStat"]["Unit"] = metric["unit"]
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=[query],
        StartTime=start,
        EndTime=start + timedelta(minutes=5),
        ScanBy="TimestampAscending",
    )
    [result] = answer["MetricDataResults"]
    return result["Values"]


def test_cloudwatch_get_metric_data_reads_only_the_namespace_asked(cloudwatch: Any, base: datetime) -> None:
    for namespace, value in ((NS, 4.0), ("Other/Namespace", 1000.0)):
        cloudwatch.put_metric_data(
            Namespace=namespace,
            MetricData=[{"MetricName": "NsLatency", "Dimensions": EP, "Timestamp": base, "Value": value}],
        )

    assert _stat(cloudwatch, "NsLatency", base, "Sum") == [4.0]
    assert _stat(cloudwatch, "NsLatency", base, "Sum", namespace="Other/Namespace") == [1000.0]


def test_cloudwatch_dimensions_match_in_any_order(cloudwatch: Any, base: datetime) -> None:
    cloudwatch.put_metric_data(
        Namespace=NS,
        MetricData=[{"MetricName": "Ordered", "Dimensions": EP, "Timestamp": base, "Value": 3.0}],
    )

    assert _stat(cloudwatch, "Ordered", base, "Sum", dims=EP[::-1]) == [3.0]
    statistics = cloudwatch.get_metric_statistics(
        Namespace=NS,
        MetricName="Ordered",
        Dimensions=EP[::-1],
        StartTime=base,
        EndTime=base + timedelta(minutes=1),
        Period=60,
        Statistics=["Sum"],
    )
    assert [point["Sum"] for point in statistics["Datapoints"]] == [3.0]


def test_cloudwatch_get_metric_statistics_needs_the_exact_dimension_set(
    cloudwatch: Any, base: datetime
) -> None:
    data = [
        {"MetricName": "Exact", "Dimensions": EP, "Timestamp": base, "Values": [1, 2, 3]},
        {"MetricName": "Exact", "Dimensions": EP[:1], "Timestamp": base, "Value": 500},
    ]
    cloudwatch.put_metric_data(Namespace=NS, MetricData=data)

    def statistics(dimensions: list[dict[str, str]]) -> list[tuple[float, float]]:
        answer = cloudwatch.get_metric_statistics(
            Namespace=NS,
            MetricName="Exact",
            Dimensions=dimensions,
            StartTime=base,
            EndTime=base + timedelta(minutes=1),
            Period=60,
            Statistics=["SampleCount", "Sum"],
        )
        return [(point["SampleCount"], point["Sum"]) for point in answer["Datapoints"]]

    assert statistics(EP) == [(3.0, 6.0)]
    assert statistics(EP[:1]) == [(1.0, 500.0)]
    assert statistics([EP[1]]) == []  # VariantName alone was never published
    assert statistics([]) == []


def test_cloudwatch_list_metrics_lists_each_metric_once(cloudwatch: Any, base: datetime) -> None:
    namespace = "Test/List"
    for value in (1.0, 2.0, 3.0):
        cloudwatch.put_metric_data(
            Namespace=namespace,
            MetricData=[
                {"MetricName": "Listed", "Dimensions": EP, "Timestamp": base, "Value": value},
                {"MetricName": "Listed", "Dimensions": EP[:1], "Timestamp": base, "Value": value},
                {
                    "MetricName": "Other",
                    "Dimensions": [{"Name": "EndpointName", "Value": "b"}],
                    "Value": value,
                },
            ],
        )

    def listed(**filters: Any) -> list[tuple[str, list[tuple[str, str]]]]:
        metrics = cloudwatch.list_metrics(Namespace=namespace, **filters)["Metrics"]
        return sorted(
            (m["MetricName"], sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics
        )

    assert listed() == [
        ("Listed", [("EndpointName", "ep")]),
        ("Listed", [("EndpointName", "ep"), ("VariantName", "AllTraffic")]),
        ("Other", [("EndpointName", "b")]),
    ]
    assert listed(Dimensions=[{"Name": "VariantName"}]) == [
        ("Listed", [("EndpointName", "ep"), ("VariantName", "AllTraffic")])
    ]
    assert listed(Dimensions=[{"Name": "EndpointName", "Value": "b"}]) == [("Other", [("EndpointName", "b")])]
    assert listed(MetricName="Other", RecentlyActive="PT3H") == [("Other", [("EndpointName", "b")])]
    assert cloudwatch.list_metrics(Namespace="Test/Nothing")["Metrics"] == []


def test_cloudwatch_list_metrics_pages_of_500(cloudwatch: Any) -> None:
    namespace = "Test/Pages"
    data = [{"MetricName": f"m{i:04d}", "Value": 1.0} for i in range(700)]
    cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[:600])
    cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[600:])

    first = cloudwatch.list_metrics(Namespace=namespace)
    second = cloudwatch.list_metrics(Namespace=namespace, NextToken=first["NextToken"])
    pages = list(cloudwatch.get_paginator("list_metrics").paginate(Namespace=namespace))

    assert (len(first["Metrics"]), len(second["Metrics"]), "NextToken" in second) == (500, 200, False)
    names = [m["MetricName"] for m in first["Metrics"] + second["Metrics"]]
    assert sorted(names) == [d["MetricName"] for d in data]
    assert sum(len(page["Metrics"]) for page in pages) == 700


def test_cloudwatch_percentiles_come_from_the_raw_values(cloudwatch: Any, base: datetime) -> None:
    data = [
        {"MetricName": "Ranked", "Dimensions": EP, "Timestamp": base, "Values": list(range(1, 51))},
        {"MetricName": "Ranked", "Dimensions": EP, "Timestamp": base, "Values": list(range(51, 101))},
        {
            "MetricName": "Counted",
            "Dimensions": EP,
            "Timestamp": base,
            "Values": [10, 20, 30],
            "Counts": [50, 45, 5],
        },
    ]
    cloudwatch.put_metric_data(
        Namespace=NS,
        MetricData=data,
    )

    ranked = {
        stat: _stat(cloudwatch, "Ranked", base, stat) for stat in ("p0", "p50", "p90", "p99", "p99.5", "p100")
    }
    counted = {stat: _stat(cloudwatch, "Counted", base, stat) for stat in ("p50", "p95", "p95.5")}
    statistics = cloudwatch.get_metric_statistics(
        Namespace=NS,
        MetricName="Counted",
        Dimensions=EP,
        StartTime=base,
        EndTime=base + timedelta(minutes=1),
        Period=60,
        ExtendedStatistics=["p50", "p95", "p99"],
    )

    # nearest rank: the smallest value with at least NN% of the samples at or below it
    assert ranked == {
        "p0": [1.0],
        "p50": [50.0],
        "p90": [90.0],
        "p99": [99.0],
        "p99.5": [100.0],
        "p100": [100.0],
    }
    assert counted == {"p50": [10.0], "p95": [20.0], "p95.5": [30.0]}
    [point] = statistics["Datapoints"]
    assert point["ExtendedStatistics"] == {"p50": 10.0, "p95": 20.0, "p99": 30.0}
    assert "Sum" not in point


def test_cloudwatch_statistics_add_values_and_statistic_sets(cloudwatch: Any, base: datetime) -> None:
    data = [
        {"MetricName": "Mixed", "Dimensions": EP, "Timestamp": base, "Value": 7.0},
        {"MetricName": "Mixed", "Dimensions": EP, "Timestamp": base, "Values": [1.0, 3.0], "Counts": [2, 4]},
        {
            "MetricName": "Mixed",
            "Dimensions": EP,
            "Timestamp": base + timedelta(seconds=30),
            "StatisticValues": {"SampleCount": 3, "Sum": 30.0, "Minimum": 0.5, "Maximum": 20.0},
        },
    ]
    cloudwatch.put_metric_data(Namespace=NS, MetricData=data)

    answer = cloudwatch.get_metric_statistics(
        Namespace=NS,
        MetricName="Mixed",
        Dimensions=EP,
        StartTime=base,
        EndTime=base + timedelta(minutes=1),
        Period=60,
        Statistics=["SampleCount", "Sum", "Average", "Minimum", "Maximum"],
    )

    [point] = answer["Datapoints"]
    # 7 + 2*1 + 4*3 + 30 = 51 over 1 + 2 + 4 + 3 = 10 samples
    assert (point["SampleCount"], point["Sum"], point["Average"]) == (10.0, 51.0, 5.1)
    assert (point["Minimum"], point["Maximum"], point["Unit"]) == (0.5, 20.0, "None")
    assert answer["Label"] == "Mixed"
    assert point["Timestamp"] == base


def test_cloudwatch_percentiles_of_statistic_sets_only_for_copies_of_one_value(
    cloudwatch: Any, base: datetime
) -> None:
    copies = {"SampleCount": 4, "Sum": 20.0, "Minimum": 5.0, "Maximum": 5.0}
    spread = {"SampleCount": 2, "Sum": 10.0, "Minimum": 1.0, "Maximum": 9.0}
    cloudwatch.put_metric_data(
        Namespace=NS,
        MetricData=[
            {"MetricName": "Copies", "Dimensions": EP, "Timestamp": base, "StatisticValues": copies},
            {"MetricName": "Copies", "Dimensions": EP, "Timestamp": base, "Values": [1.0]},
            {"MetricName": "Spread", "Dimensions": EP, "Timestamp": base, "StatisticValues": spread},
            {"MetricName": "Negative", "Dimensions": EP, "Timestamp": base, "Values": [-1.0, 2.0]},
        ],
    )

    assert _stat(cloudwatch, "Copies", base, "p50") == [5.0]
    assert _stat(cloudwatch, "Copies", base, "p10") == [1.0]
    assert _stat(cloudwatch, "Spread", base, "p50") == []  # no raw values: no percentile
    assert _stat(cloudwatch, "Spread", base, "Average") == [5.0]
    assert _stat(cloudwatch, "Negative", base, "p50") == []  # a negative value: no percentiles
    assert _stat(cloudwatch, "Negative", base, "Sum") == [1.0]


def test_cloudwatch_units_are_kept_apart(cloudwatch: Any, base: datetime) -> None:
    cloudwatch.put_metric_data(
        Namespace=NS,
        MetricData=[
            {
                "MetricName": "Timed",
                "Dimensions": EP,
                "Timestamp": base,
                "Value": 1500.0,
                "Unit": "Microseconds",
            },
            {
                "MetricName": "Timed",
                "Dimensions": EP,
                "Timestamp": base,
                "Value": 2.0,
                "Unit": "Milliseconds",
            },
        ],
    )

    def statistics(**unit: str) -> list[tuple[str, float]]:
        answer = cloudwatch.get_metric_statistics(
            Namespace=NS,
            MetricName="Timed",
            Dimensions=EP,
            StartTime=base,
            EndTime=base + timedelta(minutes=1),
            Period=60,
            Statistics=["Sum"],
            **unit,
        )
        return sorted((point["Unit"], point["Sum"]) for point in answer["Datapoints"])

    assert statistics() == [("Microseconds", 1500.0), ("Milliseconds", 2.0)]
    assert statistics(Unit="Milliseconds") == [("Milliseconds", 2.0)]
    assert statistics(Unit="Seconds") == []
    assert _stat(cloudwatch, "Timed", base, "SampleCount") == [2.0]
    assert _stat(cloudwatch, "Timed", base, "Sum", unit="Microseconds") == [1500.0]


def test_cloudwatch_periods_are_stamped_with_their_start(cloudwatch: Any, base: datetime) -> None:
    data = [
        {"MetricName": "Stamped", "Dimensions": EP, "Timestamp": base + timedelta(seconds=s), "Value": v}
        for s, v in ((5, 1.0), (70, 2.0), (130, 4.0), (250, 8.0))
    ]
    cloudwatch.put_metric_data(Namespace=NS, MetricData=data)

    answer = cloudwatch.get_metric_statistics(
        Namespace=NS,
        MetricName="Stamped",
        Dimensions=EP,
        StartTime=base + timedelta(seconds=34),  # rounded down to the minute
        EndTime=base + timedelta(minutes=5),
        Period=120,
        Statistics=["Sum"],
    )

    points = sorted((point["Timestamp"], point["Sum"]) for point in answer["Datapoints"])
    assert points == [(base, 3.0), (base + timedelta(minutes=2), 4.0), (base + timedelta(minutes=4), 8.0)]


def test_cloudwatch_high_resolution_data_reads_by_the_second(cloudwatch: Any, base: datetime) -> None:
    data = [
        {
            "MetricName": "Fine",
            "Dimensions": EP,
            "Timestamp": base + timedelta(seconds=s),
            "Value": float(s),
            "StorageResolution": 1,
        }
        for s in (1, 1, 2, 7, 61)
    ]
    data.append(
        {"MetricName": "Coarse", "Dimensions": EP, "Timestamp": base + timedelta(seconds=7), "Value": 1.0}
    )
    cloudwatch.put_metric_data(Namespace=NS, MetricData=data)

    by_second = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "fine",
                "MetricStat": {
                    "Metric": {"Namespace": NS, "MetricName": "Fine", "Dimensions": EP},
                    "Period": 1,
                    "Stat": "Sum",
                },
            },
            {
                "Id": "coarse",
                "MetricStat": {
                    "Metric": {"Namespace": NS, "MetricName": "Coarse", "Dimensions": EP},
                    "Period": 5,
                    "Stat": "Sum",
                },
            },
        ],
        StartTime=base,
        EndTime=base + timedelta(minutes=2),
        ScanBy="TimestampAscending",
    )["MetricDataResults"]

    fine, coarse = by_second
    assert [(t - base).total_seconds() for t in fine["Timestamps"]] == [1.0, 2.0, 7.0, 61.0]
    assert fine["Values"] == [2.0, 2.0, 7.0, 61.0]
    # data put at the default (minute) resolution is stored by the minute
    assert [(t - base).total_seconds() for t in coarse["Timestamps"]] == [0.0]
    assert _stat(cloudwatch, "Fine", base, "Sum") == [11.0, 61.0]


def _queries(*names: str) -> list[dict[str, Any]]:
    return [
        {"Id": f"q{i}", "MetricStat": {"Metric": {"Namespace": NS, "MetricName": name, "Dimensions": EP},
                                       "Period": 60, "Stat": "Sum"}}
        for i, name in enumerate(names)
    ]  # fmt: skip


def test_cloudwatch_get_metric_data_pages_by_max_datapoints(cloudwatch: Any, base: datetime) -> None:
    data = [
        {
            "MetricName": name,
            "Dimensions": EP,
            "Timestamp": base + timedelta(minutes=m),
            "Value": float(10 * k + m),
        }
        for k, name in enumerate(("PagedA", "PagedB"))
        for m in range(5)
    ]
    cloudwatch.put_metric_data(Namespace=NS, MetricData=data)
    request = {"MetricDataQueries": _queries("PagedA", "PagedB"), "StartTime": base,
               "EndTime": base + timedelta(minutes=5)}  # fmt: skip

    pages = []
    token: dict[str, str] = {}
    while True:
        page = cloudwatch.get_metric_data(**request, MaxDatapoints=3, **token)
        pages.append(page)
        if "NextToken" not in page:
            break
        token = {"NextToken": page["NextToken"]}
    paginated = list(cloudwatch.get_paginator("get_metric_data").paginate(**request, MaxDatapoints=4))

    assert len(pages) == 4  # 10 data points, 3 to a page
    first = pages[0]["MetricDataResults"]
    # newest first (ScanBy's default), over both queries
    assert [r["Values"] for r in first] == [[4.0, 3.0], [14.0]]
    assert [r["StatusCode"] for r in first] == ["PartialData", "PartialData"]
    assert [r["StatusCode"] for r in pages[-1]["MetricDataResults"]] == ["Complete", "Complete"]
    for position, expected in enumerate(([4.0, 3.0, 2.0, 1.0, 0.0], [14.0, 13.0, 12.0, 11.0, 10.0])):
        assert [v for p in pages for v in p["MetricDataResults"][position]["Values"]] == expected
        assert [v for p in paginated for v in p["MetricDataResults"][position]["Values"]] == expected
    ascending = cloudwatch.get_metric_data(**request, ScanBy="TimestampAscending")["MetricDataResults"]
    assert ascending[0]["Values"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert ascending[0]["Timestamps"][0] == base


def test_cloudwatch_get_metric_data_labels_and_return_data(cloudwatch: Any, base: datetime) -> None:
    cloudwatch.put_metric_data(
        Namespace=NS,
        MetricData=[{"MetricName": "Labelled", "Dimensions": EP, "Timestamp": base, "Value": 1.0}],
    )
    queries = _queries("Labelled", "Labelled", "Labelled")
    queries[1]["Label"] = "hits per minute"
    queries[2]["ReturnData"] = False

    results = cloudwatch.get_metric_data(
        MetricDataQueries=queries, StartTime=base, EndTime=base + timedelta(minutes=1)
    )["MetricDataResults"]

    assert [(r["Id"], r["Label"], r["Values"]) for r in results] == [
        ("q0", "Labelled", [1.0]),
        ("q1", "hits per minute", [1.0]),
    ]


def test_cloudwatch_answers_nothing_for_what_was_never_put(cloudwatch: Any, base: datetime) -> None:
    results = cloudwatch.get_metric_data(
        MetricDataQueries=_queries("NeverPut"), StartTime=base, EndTime=base + timedelta(minutes=1)
    )
    statistics = cloudwatch.get_metric_statistics(
        Namespace=NS,
        MetricName="NeverPut",
        Dimensions=EP,
        StartTime=base,
        EndTime=base + timedelta(minutes=1),
        Period=60,
        Statistics=["Average"],
    )

    [result] = results["MetricDataResults"]
    assert (result["Values"], result["Timestamps"], result["StatusCode"]) == ([], [], "Complete")
    assert "NextToken" not in results
    assert statistics["Datapoints"] == []


def test_cloudwatch_put_metric_data_stores_all_or_nothing(cloudwatch: Any, base: datetime) -> None:
    data = [
        {"MetricName": "Atomic", "Dimensions": EP, "Timestamp": base, "Value": 1.0},
        {"MetricName": "Atomic", "Dimensions": EP, "Timestamp": base, "Values": [1.0], "Counts": [1, 2]},
    ]

    with pytest.raises(ClientError) as caught:
        cloudwatch.put_metric_data(Namespace=NS, MetricData=data)

    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "Counts" in caught.value.response["Error"]["Message"]
    assert _stat(cloudwatch, "Atomic", base, "SampleCount") == []


def _put(**datum: Any) -> tuple[str, Any]:
    def build() -> dict[str, Any]:
        item = {"MetricName": "x", **datum}
        if item.get("Timestamp") == "three weeks ago":
            item["Timestamp"] = datetime.now(timezone.utc) - timedelta(weeks=3)
        return {"Namespace": NS, "MetricData": [item]}

    return "put_metric_data", build


def _statistics_of(hours: float = 1, **kwargs: Any) -> tuple[str, Any]:
    def build() -> dict[str, Any]:
        start = datetime.now(timezone.utc) - timedelta(hours=2)
        end = start + timedelta(hours=hours, seconds=1 if hours > 0 else 0)
        request = {"Namespace": NS, "MetricName": "x", "StartTime": start, "EndTime": end, "Period": 60}
        return {**request, **kwargs}

    return "get_metric_statistics", build


def _data_of(
    hours: float = 1, stat: str = "Sum", expression: str | None = None, **kwargs: Any
) -> tuple[str, Any]:
    def build() -> dict[str, Any]:
        start = datetime.now(timezone.utc) - timedelta(hours=2)
        metric = {"Metric": {"Namespace": NS, "MetricName": "x"}, "Period": 60, "Stat": stat}
        query = {"Id": "q", "Expression": expression} if expression else {"Id": "q", "MetricStat": metric}
        window = {"StartTime": start, "EndTime": start + timedelta(hours=hours)}
        return {"MetricDataQueries": [query], **window, **kwargs}

    return "get_metric_data", build


TWO_A = [{"Name": "a", "Value": "1"}, {"Name": "a", "Value": "2"}]


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        pytest.param(_put(Value=1, Values=[1]), "InvalidParameterCombination", id="value-and-values"),
        pytest.param(_put(Values=list(range(151))), "InvalidParameterValue", id="151-values"),
        pytest.param(_put(Value=1, Unit="Furlongs"), "InvalidParameterValue", id="unit"),
        pytest.param(_put(Value=1, StorageResolution=10), "InvalidParameterValue", id="storage-resolution"),
        pytest.param(
            _put(Value=1, Timestamp="three weeks ago"), "InvalidParameterValue", id="three-weeks-old"
        ),
        pytest.param(_put(), "InvalidParameterCombination", id="no-value"),
        pytest.param(_put(Value=1, Dimensions=TWO_A), "InvalidParameterValue", id="duplicate-dimension"),
        pytest.param(
            _statistics_of(Statistics=["Sum"], ExtendedStatistics=["p99"]),
            "InvalidParameterCombination",
            id="statistics-and-extended",
        ),
        pytest.param(_statistics_of(Statistics=["Median"]), "InvalidParameterValue", id="statistic"),
        pytest.param(_statistics_of(ExtendedStatistics=["p101"]), "InvalidParameterValue", id="p101"),
        pytest.param(_statistics_of(Statistics=["Sum"], Period=7), "InvalidParameterValue", id="period-7"),
        pytest.param(
            _statistics_of(Statistics=["Sum"], Period=1), "InvalidParameterCombination", id="3601-datapoints"
        ),
        pytest.param(_statistics_of(-1, Statistics=["Sum"]), "InvalidParameterValue", id="end-before-start"),
        pytest.param(_data_of(stat="tm90"), "InvalidParameterValue", id="trimmed-mean"),
        pytest.param(_data_of(expression="SUM(METRICS())"), "InvalidParameterValue", id="expression"),
        pytest.param(_data_of(NextToken="not-a-token"), "InvalidNextToken", id="next-token"),
        pytest.param(_data_of(0), "ValidationError", id="start-equals-end"),
    ],
)
def test_cloudwatch_refuses_what_cloudwatch_refuses(
    cloudwatch: Any, request_: tuple[str, Any], code: str
) -> None:
    call, build = request_

    with pytest.raises(ClientError) as caught:
        getattr(cloudwatch, call)(**build())

    assert caught.value.response["Error"]["Code"] == code
    assert caught.value.response["Error"]["Message"]


def test_cloudwatch_average_is_exact_over_many_requests(cloudwatch: Any, base: datetime) -> None:
    # what the stack publishes for a cache: 1 per hit, 0 per miss; its Average is the hit ratio
    hits = [1.0] * 37 + [0.0] * 13
    cloudwatch.put_metric_data(
        Namespace=NS,
        MetricData=[
            {
                "MetricName": "Hit",
                "Dimensions": EP,
                "Timestamp": base,
                "Values": [1.0, 0.0],
                "Counts": [37, 13],
            }
        ],
    )

    assert _stat(cloudwatch, "Hit", base, "Average") == [sum(hits) / len(hits)]
    assert _stat(cloudwatch, "Hit", base, "SampleCount") == [50.0]
    assert math.isclose(_stat(cloudwatch, "Hit", base, "Sum")[0], 37.0)
