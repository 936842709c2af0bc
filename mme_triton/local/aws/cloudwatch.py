"""The stack's CloudWatch metrics: what PutMetricData stores, as CloudWatch stores it.

moto's CloudWatch keeps every value as an object of its own and answers several queries unlike CloudWatch;
for the accounts of the stack's control planes, :mod:`._moto_patches` routes PutMetricData, ListMetrics,
GetMetricData and GetMetricStatistics to a :class:`MetricStore` instead (one per moto CloudWatch backend,
so per account and region). The semantics follow the CloudWatch API Reference:

- a metric is its namespace, name and *set* of dimensions: order does not matter, and a query names every
  dimension of the metric or gets nothing (no subset matches);
- data points keep their unit; a query with ``Unit`` reads only data put with that unit;
- ``Values``/``Counts`` and ``Value`` are raw values (percentiles work), ``StatisticValues`` a statistic
  set (see :mod:`._metric_cells`); ``StorageResolution`` 1 keeps seconds, 60 (the default) minutes;
- time stamps from two weeks ago to two hours ahead are accepted; data is kept as CloudWatch keeps it
  (high-resolution data three hours, then as minutes; minutes fifteen days).

ListMetrics, GetMetricData and GetMetricStatistics live in :mod:`._cloudwatch_reads`. Memory is bounded:
at most :data:`DEFAULT_MAX_CELLS` cells and :data:`DEFAULT_MAX_VALUES` raw values per store; beyond that the
oldest data points go first, with a warning in the log.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from mme_triton.local.aws._metric_cells import Cell

__all__ = [
    "DEFAULT_MAX_CELLS",
    "DEFAULT_MAX_VALUES",
    "PAST",
    "STANDARD_UNITS",
    "CloudWatchError",
    "MetricKey",
    "MetricStore",
    "seconds_of",
]

logger = logging.getLogger(__name__)

STANDARD_UNITS = frozenset(
    {
        "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
        "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
        "Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
        "Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second",
        "Count/Second", "None",
    }
)  # fmt: skip
"""CloudWatch's ``StandardUnit`` values."""

DEFAULT_MAX_CELLS = 200_000
"""Cells (one metric, unit and second or minute) a store keeps at most."""
DEFAULT_MAX_VALUES = 1_000_000
"""Distinct raw values a store keeps at most, over all its cells."""

MAX_METRIC_DATA = 1000
MAX_VALUES = 150
MAX_DIMENSIONS = 30
_VALUE_LIMIT = 2.0**360
PAST = 14 * 86400  # PutMetricData: time stamps up to two weeks old ...
_FUTURE = 2 * 3600  # ... and up to two hours ahead
HIGH_RESOLUTION_RETENTION = 3 * 3600
RETENTION = 15 * 86400
_EXPIRY_INTERVAL = 60.0

MetricKey = tuple[str, str, frozenset[tuple[str, str]]]


class CloudWatchError(Exception):
    """An error CloudWatch answers a request with: ``code`` (``InvalidParameterValue`` ...) and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def seconds_of(value: Any, what: str) -> float:
    """A time stamp from a request (a datetime, naive meaning UTC; epoch seconds; ISO 8601) as epoch seconds.

    Raises:
        CloudWatchError: ``InvalidParameterValue`` for anything else.
    """
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return seconds_of(datetime.fromisoformat(value.replace("Z", "+00:00")), what)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                pass
    raise CloudWatchError("InvalidParameterValue", f"The parameter {what} is not a valid timestamp.")


def _number(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise CloudWatchError(
            "InvalidParameterValue", f"The value {value!r} for parameter {what} is invalid."
        ) from None
    if not math.isfinite(number) or abs(number) > _VALUE_LIMIT:
        raise CloudWatchError(
            "InvalidParameterValue", f"The value {value!r} for parameter {what} is invalid."
        )
    return number


def _text(value: Any, what: str, *, limit: int) -> str:
    if not isinstance(value, str) or not value or len(value) > limit or not value.isascii():
        raise CloudWatchError(
            "InvalidParameterValue",
            f"The parameter {what} must be 1 to {limit} ASCII characters, got {value!r}.",
        )
    if any(ord(char) < 32 or ord(char) == 127 for char in value) or not value.strip():
        raise CloudWatchError(
            "InvalidParameterValue", f"The value {value!r} for parameter {what} is invalid."
        )
    return value


def check_unit(unit: Any, what: str) -> str | None:
    """``unit`` when it is one of :data:`STANDARD_UNITS` (or ``None``).

    Raises:
        CloudWatchError: ``InvalidParameterValue`` for another unit.
    """
    if unit is None:
        return None
    if unit not in STANDARD_UNITS:
        raise CloudWatchError(
            "InvalidParameterValue", f"The value {unit!r} for parameter {what} is not a StandardUnit."
        )
    return str(unit)


def dimensions_of(items: Any, what: str) -> tuple[tuple[str, str], ...]:
    """A request's ``Dimensions`` as ``((name, value), ...)``, checked as PutMetricData checks them."""
    dimensions = list(items or [])
    if len(dimensions) > MAX_DIMENSIONS:
        raise CloudWatchError(
            "InvalidParameterValue",
            f"The collection {what} must not have more than {MAX_DIMENSIONS} members.",
        )
    result: list[tuple[str, str]] = []
    for index, item in enumerate(dimensions, start=1):
        name = _text(item.get("Name"), f"{what}.member.{index}.Name", limit=255)
        if name.startswith(":"):
            raise CloudWatchError(
                "InvalidParameterValue", f"The parameter {what}.member.{index}.Name cannot start with ':'."
            )
        value = _text(item.get("Value"), f"{what}.member.{index}.Value", limit=1024)
        result.append((name, value))
    names = [name for name, _ in result]
    if len(set(names)) != len(names):
        raise CloudWatchError(
            "InvalidParameterValue", f"The collection {what} must not contain duplicate dimension names."
        )
    return tuple(result)


def metric_key(namespace: str, name: str, dimensions: Sequence[tuple[str, str]]) -> MetricKey:
    return (namespace, name, frozenset(dimensions))


@dataclass
class Metric:
    """One metric: its identity, its dimensions as first published, and its cells by unit and time."""

    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    fine: dict[str, dict[int, Cell]] = field(default_factory=dict)  # unit -> second -> cell
    coarse: dict[str, dict[int, Cell]] = field(default_factory=dict)  # unit -> minute -> cell
    last_put: float = 0.0

    def cells(self) -> Iterator[tuple[str, int, Cell]]:
        for table in (self.fine, self.coarse):
            for unit, cells in table.items():
                for moment, cell in cells.items():
                    yield unit, moment, cell

    def describe(self) -> dict[str, Any]:
        return {
            "Namespace": self.namespace,
            "MetricName": self.name,
            "Dimensions": [{"Name": name, "Value": value} for name, value in self.dimensions],
        }


class MetricStore:
    """The metrics of one account and region of the stack's CloudWatch (thread-safe).

    Parameters:
        clock: the current time in epoch seconds (``time.time``).
        max_cells, max_values: the memory bounds (see the module docstring).
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        max_cells: int = DEFAULT_MAX_CELLS,
        max_values: int = DEFAULT_MAX_VALUES,
    ) -> None:
        self.clock = clock
        self.max_cells = max_cells
        self.max_values = max_values
        self.lock = threading.RLock()
        self.metrics: dict[MetricKey, Metric] = {}
        self._cells = 0
        self._values = 0
        self._expired_at = 0.0

    # -- PutMetricData -------------------------------------------------------------------------------

    def put_metric_data(self, params: Mapping[str, Any]) -> None:
        """Store a PutMetricData request; every datum is checked before any is stored.

        Raises:
            CloudWatchError: an invalid request (nothing stored).
        """
        namespace = _text(params.get("Namespace"), "Namespace", limit=255)
        if namespace.startswith(":"):
            raise CloudWatchError("InvalidParameterValue", "The parameter Namespace cannot start with ':'.")
        data = list(params.get("MetricData") or [])
        if not data:
            raise CloudWatchError("MissingParameter", "The parameter MetricData is required.")
        if len(data) > MAX_METRIC_DATA:
            raise CloudWatchError(
                "InvalidParameterValue",
                f"The collection MetricData must not have more than {MAX_METRIC_DATA} members.",
            )
        now = self.clock()
        checked = [self._check_datum(datum, f"MetricData.member.{i}", now) for i, datum in enumerate(data, 1)]
        with self.lock:
            for name, dimensions, unit, moment, fine, add in checked:
                key = metric_key(namespace, name, dimensions)
                metric = self.metrics.get(key)
                if metric is None:
                    metric = self.metrics[key] = Metric(namespace, name, dimensions)
                metric.last_put = now
                table = metric.fine if fine else metric.coarse
                cells = table.setdefault(unit, {})
                slot = int(moment) if fine else int(moment // 60) * 60
                cell = cells.get(slot)
                if cell is None:
                    cell = cells[slot] = Cell()
                    self._cells += 1
                before = len(cell.values)
                add(cell)
                self._values += len(cell.values) - before
            self._keep_bounds(now)

    def _check_datum(
        self, datum: Mapping[str, Any], what: str, now: float
    ) -> tuple[str, tuple[tuple[str, str], ...], str, float, bool, Callable[[Cell], None]]:
        name = _text(datum.get("MetricName"), f"{what}.MetricName", limit=255)
        dimensions = dimensions_of(datum.get("Dimensions"), f"{what}.Dimensions")
        unit = check_unit(datum.get("Unit"), f"{what}.Unit") or "None"
        moment = (
            now if datum.get("Timestamp") is None else seconds_of(datum["Timestamp"], f"{what}.Timestamp")
        )
        if not now - PAST <= moment <= now + _FUTURE:
            raise CloudWatchError(
                "InvalidParameterValue",
                f"The parameter {what}.Timestamp must specify a time no more than two weeks in the past "
                "and no more than two hours in the future.",
            )
        resolution = int(_number(datum.get("StorageResolution", 60), f"{what}.StorageResolution"))
        if resolution not in (1, 60):
            raise CloudWatchError(
                "InvalidParameterValue", f"The parameter {what}.StorageResolution must be 1 or 60."
            )
        given = [key for key in ("Value", "Values", "StatisticValues") if datum.get(key) not in (None, [])]
        if len(given) > 1:
            raise CloudWatchError(
                "InvalidParameterCombination",
                f"The parameters {what}.{given[0]} and {what}.{given[1]} are mutually exclusive and you "
                "have specified both.",
            )
        if not given:
            raise CloudWatchError(
                "InvalidParameterCombination",
                f"One of the parameters {what}.Value, {what}.Values or {what}.StatisticValues is required.",
            )
        add: Callable[[Cell], None]
        if given[0] == "Value":
            value = _number(datum["Value"], f"{what}.Value")

            def add(cell: Cell) -> None:
                cell.add_values([(value, 1.0)])

        elif given[0] == "Values":
            values = [_number(v, f"{what}.Values") for v in datum["Values"]]
            counts_given = datum.get("Counts")
            counts = (
                [1.0] * len(values)
                if not counts_given
                else [_number(c, f"{what}.Counts") for c in counts_given]
            )
            if len(values) > MAX_VALUES:
                raise CloudWatchError(
                    "InvalidParameterValue",
                    f"The collection {what}.Values must not have more than {MAX_VALUES} members.",
                )
            if len(counts) != len(values):
                raise CloudWatchError(
                    "InvalidParameterValue",
                    f"The parameters {what}.Values and {what}.Counts must be of the same size.",
                )
            if any(count < 0 for count in counts):
                raise CloudWatchError(
                    "InvalidParameterValue", f"The parameter {what}.Counts must not be negative."
                )
            pairs = list(zip(values, counts, strict=True))

            def add(cell: Cell) -> None:
                cell.add_values(pairs)

        else:
            stats = datum["StatisticValues"]
            count, total, low, high = (
                _number(stats.get(k), f"{what}.StatisticValues.{k}")
                for k in ("SampleCount", "Sum", "Minimum", "Maximum")
            )
            if count <= 0 or low > high:
                raise CloudWatchError(
                    "InvalidParameterValue",
                    f"The parameter {what}.StatisticValues must have SampleCount > 0 and Minimum <= Maximum.",
                )

            def add(cell: Cell) -> None:
                cell.add_statistics(count, total, low, high)

        return name, dimensions, unit, moment, resolution == 1, add

    # -- bounds --------------------------------------------------------------------------------------

    def _keep_bounds(self, now: float) -> None:
        if now - self._expired_at >= _EXPIRY_INTERVAL:
            self._expired_at = now
            self._expire(now)
        if self._cells > self.max_cells or self._values > self.max_values:
            self._evict_oldest()

    def _expire(self, now: float) -> None:
        """Drop what CloudWatch no longer keeps; high-resolution data older than three hours becomes
        minutes."""
        for key, metric in list(self.metrics.items()):
            for unit, cells in metric.fine.items():
                for moment in [m for m in cells if m < now - HIGH_RESOLUTION_RETENTION]:
                    cell = cells.pop(moment)
                    minute = metric.coarse.setdefault(unit, {})
                    target = minute.get(moment // 60 * 60)
                    self._values -= len(cell.values)
                    if target is None:
                        minute[moment // 60 * 60] = cell
                        self._values += len(cell.values)
                    else:
                        before = len(target.values)
                        target.merge(cell)
                        self._values += len(target.values) - before
                        self._cells -= 1
            for cells in metric.coarse.values():
                for moment in [m for m in cells if m < now - RETENTION]:
                    self._values -= len(cells.pop(moment).values)
                    self._cells -= 1
            metric.fine = {unit: cells for unit, cells in metric.fine.items() if cells}
            metric.coarse = {unit: cells for unit, cells in metric.coarse.items() if cells}
            if not metric.fine and not metric.coarse and metric.last_put < now - PAST:
                del self.metrics[key]

    def _evict_oldest(self) -> None:
        everything = sorted(
            (
                (moment, key, unit, table is self.metrics[key].fine)
                for key in self.metrics
                for table in (self.metrics[key].fine, self.metrics[key].coarse)
                for unit, cells in table.items()
                for moment in cells
            ),
            key=lambda item: item[0],
        )
        dropped = 0
        for moment, key, unit, fine in everything:
            if self._cells <= self.max_cells * 0.9 and self._values <= self.max_values * 0.9:
                break
            metric = self.metrics[key]
            cells = (metric.fine if fine else metric.coarse)[unit]
            self._values -= len(cells.pop(moment).values)
            self._cells -= 1
            dropped += 1
        logger.warning(
            "the stack's CloudWatch holds more than %d data cells or %d raw values: dropped the %d oldest",
            self.max_cells,
            self.max_values,
            dropped,
        )

    # -- reading -------------------------------------------------------------------------------------

    def aggregate(
        self,
        key: MetricKey,
        unit: str | None,
        start: int,
        end: float,
        period: int,
        *,
        since: float | None = None,
        with_values: bool = False,
    ) -> dict[str, dict[int, Cell]]:
        """The metric's data points in ``[start, end)`` merged per unit and period (keyed by the period's
        start); only data put with ``unit`` when given; only cells from ``since`` on when given."""
        with self.lock:
            metric = self.metrics.get(key)
            if metric is None:
                return {}
            result: dict[str, dict[int, Cell]] = {}
            for cell_unit, moment, cell in metric.cells():
                if (unit is not None and cell_unit != unit) or not start <= moment < end:
                    continue
                if since is not None and moment < since:
                    continue
                slot = start + (moment - start) // period * period
                periods = result.setdefault(cell_unit, {})
                merged = periods.get(slot)
                if merged is None:
                    merged = periods[slot] = Cell()
                merged.merge(cell, with_values=with_values)
            return result
