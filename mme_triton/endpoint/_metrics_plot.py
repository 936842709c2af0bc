"""``EndpointMetrics.plot()``: three panels over time, drawn with matplotlib (imported here only).

1. invocations per period (bars) and the cache-hit ratio (a line on its own 0-1 axis);
2. the wait for model loads: the mean and the longest wait per period, in seconds;
3. the loaded models: the mean and the most per period.

The x-axis spans the data (a period's width of room on each side), not the requested window: a run of a
minute read with the default ten-minute window would otherwise sit in a sliver at the right edge. The title
says the window that was read, and the span the data covers. The figure is a ``matplotlib.figure.Figure``
made without pyplot, so no window or GUI backend is involved; notebooks display it, and ``path`` saves it
(the format from the file name).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mme_triton.endpoint.metrics import EndpointMetrics, MetricPoint

__all__ = ["plot_metrics"]


# Legends go beside their panel, right of it, never over its data.
_BESIDE: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.08, 1.0), "borderaxespad": 0.0}


def _from_zero(axis: Any, values: list[float]) -> None:
    """A y-axis from 0 with room above the highest value, so a flat line does not sit on the frame."""
    axis.set_ylim(0, max([*values, 0.0]) * 1.15 or 1.0)


def _mean_over_variants(metrics: EndpointMetrics, metric: str) -> list[tuple[Any, float]]:
    totals = dict(total_series(metrics.series(metric, "Sum")))
    counts = dict(total_series(metrics.series(metric, "SampleCount")))
    return [(t, totals.get(t, 0.0) / c) for t, c in sorted(counts.items()) if c]


def _data_range(metrics: EndpointMetrics) -> tuple[datetime, datetime]:
    """The x-range: the first to the last data point with a period of room on each side (a bar is centred
    on its period's timestamp); the window itself when there is no data."""
    times = [point.timestamp for point in metrics.points]
    if not times:
        return metrics.start, metrics.end
    period = timedelta(seconds=metrics.period)
    return min(times) - period, max(times) + period


def _duration(seconds: float) -> str:
    """``"45 s"``, ``"10 min"``, ``"1 h 30 min"``."""
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _window_text(metrics: EndpointMetrics) -> str:
    window = (metrics.end - metrics.start).total_seconds()
    text = (
        f"window read: {_duration(window)} ({metrics.start:%Y-%m-%d %H:%M:%S} to "
        f"{metrics.end:%H:%M:%S} UTC), period {_duration(metrics.period)}"
    )
    times = [point.timestamp for point in metrics.points]
    if not times:
        return f"{text}; no data"
    span = (max(times) - min(times)).total_seconds() + metrics.period
    return f"{text}; data: {_duration(span)} from {min(times):%H:%M:%S}"


def plot_metrics(metrics: EndpointMetrics, path: str | Path | None = None) -> Any:
    """The figure (see the module docstring); saved to ``path`` when given."""
    try:
        from mme_triton._figure import NotebookFigure as Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("EndpointMetrics.plot() needs matplotlib: pip install matplotlib") from exc

    figure = Figure(figsize=(10, 8), layout="constrained")
    calls, waits, loaded = figure.subplots(3, 1, sharex=True)
    width = metrics.period / 86400 * 0.8  # bar width in days, matplotlib's unit for dates

    invocations = total_series(metrics.series("Invocations", "Sum"))
    if invocations:
        calls.bar([t for t, _ in invocations], [v for _, v in invocations], width=width, color="tab:blue")
    calls.set_ylabel("invocations")
    ratio_axis = calls.twinx()
    ratio = hit_ratio_series(metrics)
    if ratio:
        ratio_axis.plot([t for t, _ in ratio], [v for _, v in ratio], color="tab:orange", marker=".")
    ratio_axis.set_ylim(0, 1.05)
    ratio_axis.set_ylabel("cache-hit ratio", color="tab:orange")

    mean_wait = _mean_over_variants(metrics, "ModelLoadingWaitTime")
    most: dict[Any, float] = {}
    for point in metrics.series("ModelLoadingWaitTime", "Maximum"):
        most[point.timestamp] = max(point.value, most.get(point.timestamp, point.value))
    longest = sorted(most.items())
    if mean_wait:
        waits.plot([t for t, _ in mean_wait], [v / 1e6 for _, v in mean_wait], marker=".", label="mean")
    if longest:
        waits.plot(
            [t for t, _ in longest], [v / 1e6 for _, v in longest], marker="x", linestyle=":", label="max"
        )
    if mean_wait or longest:
        waits.legend(**_BESIDE)
        _from_zero(waits, [v / 1e6 for _, v in mean_wait + longest])
    waits.set_ylabel("load wait (s)")

    for statistic, style in (("Average", "-"), ("Maximum", ":")):
        points = metrics.series("LoadedModelCount", statistic)
        if points:
            loaded.step(
                [p.timestamp for p in points], [p.value for p in points], where="post", linestyle=style,
                label=statistic.lower(),
            )  # fmt: skip
    if metrics.series("LoadedModelCount"):
        loaded.legend(**_BESIDE)
        _from_zero(loaded, [p.value for p in metrics.series("LoadedModelCount")])
    loaded.set_ylabel("loaded models")
    loaded.set_xlim(*_data_range(metrics))
    loaded.set_xlabel("UTC")
    for axis in (calls, waits, loaded):
        axis.grid(True, alpha=0.3)

    summary = metrics.summary()
    ratio_text = f"{summary['cache_hit_ratio']:.0%}" if summary["cache_hit_ratio"] is not None else "-"
    figure.suptitle(
        f"{metrics.endpoint_name}: {summary['invocations']} invocations, cache-hit ratio {ratio_text}, "
        f"{summary['loads']} loads, {summary['unloads']} unloads\n{_window_text(metrics)}",
    )
    if path is not None:
        figure.savefig(Path(path))
    return figure


def hit_ratio_series(metrics: EndpointMetrics) -> list[tuple[datetime, float]]:
    """The cache-hit ratio per period over every variant (hits / requests), oldest first."""
    hits: dict[datetime, float] = {}
    counts: dict[datetime, float] = {}
    for point in metrics.series("ModelCacheHit", "Sum"):
        hits[point.timestamp] = hits.get(point.timestamp, 0.0) + point.value
    for point in metrics.series("ModelCacheHit", "SampleCount"):
        counts[point.timestamp] = counts.get(point.timestamp, 0.0) + point.value
    return [(t, hits.get(t, 0.0) / c) for t, c in sorted(counts.items()) if c]


def total_series(points: Iterable[MetricPoint]) -> list[tuple[datetime, float]]:
    """Values summed over variants per timestamp, oldest first."""
    totals: dict[datetime, float] = {}
    for point in points:
        totals[point.timestamp] = totals.get(point.timestamp, 0.0) + point.value
    return sorted(totals.items())
