"""The report's figure (matplotlib, imported here only): the chart model-analyzer users know, and cold starts.

Left: throughput against p99 latency, one line per candidate through its load levels (concurrency or
rate labelled at each point); up and to the left is better, the winner's point is starred, a latency budget
is a dashed vertical line. Right: the cold start of each candidate, split into download, extract and load
where the target reports them (the rest of the bar is the first inference and the route's overhead).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mme_triton.profile.report import ProfileReport

__all__ = ["plot_report"]


def plot_report(report: ProfileReport, path: str | os.PathLike[str] | None = None) -> Figure:
    """The figure of ``report`` (saved to ``path`` when given). Needs matplotlib (the ``notebooks`` extra)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib comes with the dev and notebooks extras
        raise ImportError("report.plot() needs matplotlib: pip install matplotlib") from exc

    figure = Figure(figsize=(12, 4.8), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=(3, 2))
    _latency_throughput(left, report)
    _cold_starts(right, report)
    if path is not None:
        figure.savefig(path)
    return figure


def _latency_throughput(axes: Any, report: ProfileReport) -> None:
    best, best_level = report.best, report.best_level
    for result in report.results:
        levels = [level for level in result.levels if level.stable and level.p99_ms is not None]
        if not levels:
            continue
        xs = [level.p99_ms for level in levels]
        ys = [level.throughput_per_s for level in levels]
        (line,) = axes.plot(xs, ys, marker="o", label=result.name)
        for level, x, y in zip(levels, xs, ys, strict=True):
            axes.annotate(level.load, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
            if result is best and level is best_level:
                axes.plot([x], [y], marker="*", markersize=18, color=line.get_color(), linestyle="none")
    budget = report.constraints.latency_budget_ms
    if budget is not None:
        axes.axvline(budget, linestyle="--", color="grey", label=f"p99 budget {budget:g} ms")
    axes.set_xlabel("p99 latency (ms)")
    axes.set_ylabel("throughput (inferences/s)")
    axes.set_title("throughput against p99 latency, per load level")
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7)


def _cold_starts(axes: Any, report: ProfileReport) -> None:
    measured = [result for result in report.results if result.cold_start_s is not None]
    names = [result.name for result in measured]
    positions = list(range(len(measured)))
    bottom = [0.0] * len(measured)
    for part, label in (("download_s", "download"), ("extract_s", "extract"), ("load_s", "load")):
        values = [getattr(result, part) or 0.0 for result in measured]
        if any(values):
            axes.barh(positions, values, left=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    rest = [max(0.0, (result.cold_start_s or 0.0) - b) for result, b in zip(measured, bottom, strict=True)]
    axes.barh(positions, rest, left=bottom, label="first inference and overhead", color="lightgrey")
    axes.set_yticks(positions, names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("cold start (s)")
    axes.set_title("cold start per candidate")
    if measured:
        axes.legend(fontsize=7)
