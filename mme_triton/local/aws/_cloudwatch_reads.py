"""ListMetrics, GetMetricStatistics and GetMetricData on a
:class:`~mme_triton.local.aws.cloudwatch.MetricStore`, as the CloudWatch API Reference describes them.

- ListMetrics lists each metric once, 500 to a page, filtered by namespace, name and dimension filters
  (a metric with more dimensions than the filters name matches), ``RecentlyActive=PT3H`` honoured. A new
  metric is listed at once (CloudWatch can take up to fifteen minutes).
- ``StartTime`` is rounded down as CloudWatch rounds it (to the minute for periods of a minute or more when it
  is less than fifteen days ago, five minutes up to 63 days, an hour before; to a multiple of the period for
  periods of 1, 5, 10, 20 or 30 seconds); ``EndTime`` is exclusive. Each period is stamped with its start.
  Sub-minute periods read only the last three hours.
- Periods: 1, 5, 10, 20, 30 or a multiple of 60 seconds. Statistics: ``SampleCount``, ``Average``, ``Sum``,
  ``Minimum``, ``Maximum`` and percentiles ``p0``-``p100`` (``pNN.NN``), computed from the raw values
  (:mod:`._metric_cells`); a period whose percentile is not available has no value for it.
- GetMetricStatistics: either ``Statistics`` or ``ExtendedStatistics``; at most 1,440 periods; without
  ``Unit``, one data point per period and unit. Label: the metric name.
- GetMetricData: up to 500 ``MetricStat`` queries (metric math and Metrics Insights are not supported: a
  clear ``InvalidParameterValue``); without ``Unit``, all units together; ``ScanBy`` (newest first by
  default), ``MaxDatapoints`` (100,800 by default) and ``NextToken``: a page holds the first
  ``MaxDatapoints`` data points over all queries in ``ScanBy`` order, a result with more to come says
  ``PartialData``. The default label is the metric name; a ``Label`` is returned as given.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from mme_triton.local.aws._metric_cells import STATISTICS, Cell, parse_percentile
from mme_triton.local.aws.cloudwatch import (
    HIGH_RESOLUTION_RETENTION,
    PAST,
    CloudWatchError,
    Metric,
    MetricStore,
    check_unit,
    dimensions_of,
    metric_key,
    seconds_of,
)

__all__ = ["check_period", "get_metric_data", "get_metric_statistics", "list_metrics", "round_start"]

MAX_QUERIES = 500
MAX_DIMENSION_FILTERS = 10
LIST_PAGE_SIZE = 500
_RECENTLY_ACTIVE = 3 * 3600
MAX_STATISTICS_DATAPOINTS = 1440
DEFAULT_MAX_DATAPOINTS = 100_800
_SUB_MINUTE_PERIODS = (1, 5, 10, 20, 30)
_QUERY_ID = re.compile(r"[a-z][A-Za-z0-9_]*")
_SCAN_BY = ("TimestampDescending", "TimestampAscending")


def check_period(value: Any, what: str) -> int:
    """A period in seconds CloudWatch accepts: 1, 5, 10, 20, 30 or a multiple of 60.

    Raises:
        CloudWatchError: ``InvalidParameterValue`` for another value.
    """
    try:
        period = float(value)
    except (TypeError, ValueError):
        period = math.nan
    if not period.is_integer() or not (period in _SUB_MINUTE_PERIODS or (period >= 60 and period % 60 == 0)):
        raise CloudWatchError(
            "InvalidParameterValue",
            f"The parameter {what} must be 1, 5, 10, 20, 30 or a multiple of 60 seconds, got {value!r}.",
        )
    return int(period)


def round_start(start: float, period: int, now: float) -> int:
    """``StartTime`` rounded down as CloudWatch rounds it for ``period`` (see the module docstring)."""
    if period < 60:
        return int(start // period * period)
    age = now - start
    step = 60 if age < 15 * 86400 else 300 if age < 63 * 86400 else 3600
    return int(start // step * step)


def _when(slot: int) -> datetime:
    return datetime.fromtimestamp(slot, tz=timezone.utc)


def _metric(metric: Mapping[str, Any] | None, what: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    metric = metric or {}
    prefix = f"{what}." if what else ""
    namespace = metric.get("Namespace")
    name = metric.get("MetricName")
    if not namespace or not name:
        raise CloudWatchError(
            "InvalidParameterValue", f"The parameters {prefix}Namespace and {prefix}MetricName are required."
        )
    return str(namespace), str(name), dimensions_of(metric.get("Dimensions"), f"{prefix}Dimensions")


def _window(params: Mapping[str, Any]) -> tuple[float, float]:
    if params.get("StartTime") is None or params.get("EndTime") is None:
        raise CloudWatchError("MissingParameter", "The parameters StartTime and EndTime are required.")
    return seconds_of(params["StartTime"], "StartTime"), seconds_of(params["EndTime"], "EndTime")


def get_metric_statistics(store: MetricStore, params: Mapping[str, Any]) -> dict[str, Any]:
    """Answer GetMetricStatistics.

    Raises:
        CloudWatchError: an invalid request.
    """
    namespace, name, dimensions = _metric(params, "")
    start, end = _window(params)
    period = check_period(params.get("Period"), "Period")
    statistics = list(params.get("Statistics") or [])
    extended = list(params.get("ExtendedStatistics") or [])
    if bool(statistics) == bool(extended):
        raise CloudWatchError(
            "InvalidParameterCombination",
            "Must specify either Statistics or ExtendedStatistics, but not both.",
        )
    for index, statistic in enumerate(statistics, start=1):
        if statistic not in STATISTICS:
            raise CloudWatchError(
                "InvalidParameterValue",
                f"The parameter Statistics.member.{index} must be a value in the set "
                f"[ {', '.join(STATISTICS)} ].",
            )
    for index, statistic in enumerate(extended, start=1):
        if parse_percentile(statistic) is None:
            raise CloudWatchError(
                "InvalidParameterValue",
                f"The value {statistic} for parameter ExtendedStatistics.member.{index} is not supported: "
                "percentiles p0.0 to p100 are.",
            )
    if len(statistics) > len(STATISTICS) or len(extended) > 10:
        raise CloudWatchError("InvalidParameterValue", "At most 5 Statistics or 10 ExtendedStatistics.")
    unit = check_unit(params.get("Unit"), "Unit")
    if start >= end:
        raise CloudWatchError(
            "InvalidParameterValue", "The parameter StartTime must be less than the parameter EndTime."
        )
    now = store.clock()
    first = round_start(start, period, now)
    requested = math.ceil((end - first) / period)
    if requested > MAX_STATISTICS_DATAPOINTS:
        raise CloudWatchError(
            "InvalidParameterCombination",
            f"You have requested up to {requested:,} datapoints, which exceeds the limit of 1,440. You may "
            "reduce the datapoints requested by increasing Period, or decreasing the time range.",
        )
    since = now - HIGH_RESOLUTION_RETENTION if period < 60 else None
    periods = store.aggregate(
        metric_key(namespace, name, dimensions),
        unit,
        first,
        end,
        period,
        since=since,
        with_values=bool(extended),
    )
    datapoints: list[dict[str, Any]] = []
    for cell_unit, cells in sorted(periods.items()):
        for slot, cell in sorted(cells.items()):
            point: dict[str, Any] = {"Timestamp": _when(slot), "Unit": cell_unit}
            for statistic in statistics:
                point[statistic] = cell.statistic(statistic)
            values = {p: v for p in extended if (v := cell.statistic(p)) is not None}
            if values:
                point["ExtendedStatistics"] = values
            datapoints.append(point)
    datapoints.sort(key=lambda point: (point["Timestamp"], point["Unit"]))
    return {"Label": name, "Datapoints": datapoints}


def _query(
    store: MetricStore, query: Mapping[str, Any], index: int, start: float, end: float, now: float
) -> list[tuple[int, float]]:
    """One MetricStat query: its ``(period start, value)`` pairs, oldest first."""
    what = f"MetricDataQueries.member.{index}.MetricStat"
    stat_query = query["MetricStat"]
    namespace, name, dimensions = _metric(stat_query.get("Metric"), f"{what}.Metric")
    period = check_period(stat_query.get("Period", query.get("Period")), f"{what}.Period")
    stat = str(stat_query.get("Stat") or "")
    if stat not in STATISTICS and parse_percentile(stat) is None:
        raise CloudWatchError(
            "InvalidParameterValue",
            f"The value {stat!r} for parameter {what}.Stat is not supported by the embedded stack's "
            f"CloudWatch: {', '.join(STATISTICS)} and percentiles pNN.NN are.",
        )
    unit = check_unit(stat_query.get("Unit"), f"{what}.Unit")
    first = round_start(start, period, now)
    since = now - HIGH_RESOLUTION_RETENTION if period < 60 else None
    percentile = stat not in STATISTICS
    periods = store.aggregate(
        metric_key(namespace, name, dimensions), unit, first, end, period, since=since, with_values=percentile
    )
    merged: dict[int, Cell] = {}
    for cells in periods.values():
        for slot, cell in cells.items():
            merged.setdefault(slot, Cell()).merge(cell, with_values=percentile)
    points = [(slot, merged[slot].statistic(stat)) for slot in sorted(merged)]
    return [(slot, value) for slot, value in points if value is not None]


def get_metric_data(store: MetricStore, params: Mapping[str, Any]) -> dict[str, Any]:
    """Answer GetMetricData (``MetricStat`` queries).

    Raises:
        CloudWatchError: an invalid request or ``NextToken``.
    """
    queries = list(params.get("MetricDataQueries") or [])
    if not queries:
        raise CloudWatchError("MissingParameter", "The parameter MetricDataQueries is required.")
    start, end = _window(params)
    if start > end:
        raise CloudWatchError("ValidationError", "The parameter EndTime must be greater than StartTime.")
    if start == end:
        raise CloudWatchError("ValidationError", "The parameter StartTime must not equal parameter EndTime.")
    scan_by = params.get("ScanBy") or "TimestampDescending"
    if scan_by not in _SCAN_BY:
        raise CloudWatchError(
            "InvalidParameterValue", f"The parameter ScanBy must be one of {', '.join(_SCAN_BY)}."
        )
    limit = params.get("MaxDatapoints")
    limit = DEFAULT_MAX_DATAPOINTS if limit is None else int(limit)
    if limit < 1:
        raise CloudWatchError("InvalidParameterValue", "The parameter MaxDatapoints must be at least 1.")
    limit = min(limit, DEFAULT_MAX_DATAPOINTS)
    messages = []
    if len(queries) > MAX_QUERIES:
        messages.append({"Code": "MaxMetricsExceeded", "Value": "Maximum number of allowed metrics exceeded"})
        queries = queries[:MAX_QUERIES]
    seen: set[str] = set()
    for index, query in enumerate(queries, start=1):
        query_id = str(query.get("Id") or "")
        if not _QUERY_ID.fullmatch(query_id) or len(query_id) > 255:
            raise CloudWatchError(
                "ValidationError",
                f"Invalid metric Id {query_id!r} (MetricDataQueries.member.{index}.Id): letters, digits and "
                "underscores, starting with a lowercase letter.",
            )
        if query_id in seen:
            raise CloudWatchError("ValidationError", f"The metric Id {query_id!r} is used more than once.")
        seen.add(query_id)
        if ("MetricStat" in query) == ("Expression" in query):
            raise CloudWatchError(
                "ValidationError",
                f"MetricDataQueries.member.{index} must specify either MetricStat or Expression, not both.",
            )
        if "Expression" in query:
            raise CloudWatchError(
                "InvalidParameterValue",
                f"MetricDataQueries.member.{index}.Expression: the embedded stack's CloudWatch answers "
                "MetricStat queries; metric math and Metrics Insights are not supported.",
            )
    now = store.clock()
    returned = [(i, q) for i, q in enumerate(queries, start=1) if q.get("ReturnData", True) is not False]
    series = [_query(store, query, index, start, end, now) for index, query in returned]
    digest = hashlib.sha256(
        json.dumps([queries, start, end, scan_by], sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    descending = scan_by == "TimestampDescending"

    def order(slot: int, position: int) -> tuple[int, int]:
        return (-slot if descending else slot, position)

    after = _decode_data_token(params.get("NextToken"), digest)
    items = sorted(
        (order(slot, position), position, slot, value)
        for position, points in enumerate(series)
        for slot, value in points
        if after is None or order(slot, position) > after
    )
    page, rest = items[:limit], items[limit:]
    pending = {position for _, position, _, _ in rest}
    results = []
    for position, (_, query) in enumerate(returned):
        mine = [(slot, value) for _, p, slot, value in page if p == position]
        results.append(
            {
                "Id": query["Id"],
                "Label": query.get("Label") or query["MetricStat"]["Metric"]["MetricName"],
                "Timestamps": [_when(slot) for slot, _ in mine],
                "Values": [value for _, value in mine],
                "StatusCode": "PartialData" if position in pending else "Complete",
            }
        )
    answer: dict[str, Any] = {"MetricDataResults": results, "Messages": messages}
    if rest:
        last_order = page[-1][0]
        answer["NextToken"] = encode_token({"d": digest, "o": list(last_order)})
    return answer


def _decode_data_token(token: Any, digest: str) -> tuple[int, int] | None:
    if token is None:
        return None
    try:
        value = decode_token(str(token))
        if value["d"] != digest:
            raise ValueError("the token belongs to another request")
        first, second = value["o"]
        return (int(first), int(second))
    except (ValueError, TypeError, KeyError) as exc:
        raise CloudWatchError("InvalidNextToken", "The service cannot find the token you provided.") from exc


# -- ListMetrics ---------------------------------------------------------------------------------


def list_metrics(store: MetricStore, params: Mapping[str, Any]) -> dict[str, Any]:
    """Answer ListMetrics: each matching metric once, sorted, 500 to a page.

    Raises:
        CloudWatchError: an invalid filter or ``NextToken``.
    """
    namespace = params.get("Namespace")
    name = params.get("MetricName")
    filters = list(params.get("Dimensions") or [])
    if len(filters) > MAX_DIMENSION_FILTERS:
        raise CloudWatchError(
            "InvalidParameterValue",
            f"The collection Dimensions must not have more than {MAX_DIMENSION_FILTERS} members.",
        )
    wanted = [(f.get("Name"), f.get("Value")) for f in filters]
    recently = params.get("RecentlyActive")
    if recently is not None and recently != "PT3H":
        raise CloudWatchError(
            "InvalidParameterValue", "The parameter RecentlyActive accepts only the value PT3H."
        )
    after = _decode_list_token(params.get("NextToken"))
    now = store.clock()
    with store.lock:
        found = []
        for metric in store.metrics.values():
            if (namespace and metric.namespace != namespace) or (name and metric.name != name):
                continue
            if metric.last_put < now - (_RECENTLY_ACTIVE if recently else PAST):
                continue
            own = dict(metric.dimensions)
            if any(dim not in own or (value is not None and own[dim] != value) for dim, value in wanted):
                continue
            found.append((_sort_key(metric), metric.describe()))
    found.sort(key=lambda item: item[0])
    if after is not None:
        found = [item for item in found if item[0] > after]
    page = found[:LIST_PAGE_SIZE]
    answer: dict[str, Any] = {"Metrics": [described for _, described in page]}
    if len(found) > LIST_PAGE_SIZE:
        answer["NextToken"] = _encode_token(page[-1][0])
    return answer


def _sort_key(metric: Metric) -> list[Any]:
    return [metric.namespace, metric.name, [list(pair) for pair in sorted(metric.dimensions)]]


def _encode_token(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()


def decode_token(token: str) -> Any:
    """What :func:`_encode_token` encoded.

    Raises:
        ValueError: not a token this store handed out.
    """
    try:
        return json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, UnicodeError, json.JSONDecodeError) as exc:
        raise ValueError(str(exc)) from exc


def _decode_list_token(token: Any) -> list[Any] | None:
    if token is None:
        return None
    try:
        value = decode_token(str(token))
        if not isinstance(value, list) or len(value) != 3:
            raise ValueError("not a ListMetrics token")
        namespace, name, dimensions = value
        return [namespace, name, [list(pair) for pair in dimensions]]
    except (ValueError, TypeError) as exc:
        raise CloudWatchError("InvalidParameterValue", "Request parameter NextToken is invalid") from exc


def encode_token(value: Any) -> str:
    """A pagination token carrying ``value`` (JSON-able)."""
    return _encode_token(value)
