"""The report's figure (matplotlib, imported here only): the chart model-analyzer users know, and cold starts.

The title names the model(s) profiled, the target and what the winner was chosen by. Left: throughput
against p99 latency, one line per candidate through its load levels (concurrency or rate labelled at each
point; where several candidates' points with the same label fall together, the label is written once);
up and to the left is better, the winner's point is starred. The axes span the measurements: a latency
budget within them is a dashed vertical line, one beyond them is named in the panel's title instead of
stretching the axis. Right: the cold start of each candidate, split into download, extract and load
where the target reports them (the rest of the bar is the first inference and the route's overhead), each
bar's parts written beside it in seconds, since a download of milliseconds is too thin to see next to a
load of seconds. The legends sit under their panels, off the data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mme_triton.profile.report import CandidateResult, ProfileReport

__all__ = ["plot_report"]

_LABEL_SIZE = 7  # points: the level labels and the cold-start figures
_PARTS = (("download_s", "download"), ("extract_s", "extract"), ("load_s", "load"))


def plot_report(report: ProfileReport, path: str | os.PathLike[str] | None = None) -> Figure:
    """The figure of ``report`` (saved to ``path`` when given). Needs matplotlib (the ``notebooks`` extra)."""
    try:
        from mme_triton._figure import NotebookFigure as Figure
    except ImportError as exc:  # pragma: no cover - matplotlib comes with the dev and notebooks extras
        raise ImportError("report.plot() needs matplotlib: pip install matplotlib") from exc

    measured = [result for result in report.results if result.cold_start_s is not None]
    height = max(4.8, 2.6 + 0.45 * len(measured))
    figure = Figure(figsize=(13, height), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=(3, 2))
    _latency_throughput(left, report)
    _cold_starts(right, measured)
    figure.suptitle(_title(report))
    if path is not None:
        figure.savefig(path)
    return figure


def _title(report: ProfileReport) -> str:
    models = list(dict.fromkeys(Path(result.model_dir).name for result in report.results))
    shown = ", ".join(models[:4]) + (f" and {len(models) - 4} more" if len(models) > 4 else "")
    chosen = report.constraints.describe()
    return (
        f"profile of {shown or 'no model'}: {len(report.results)} candidate(s) on {report.target}, "
        f"highest {report.objective}" + (f" with {chosen}" if chosen else "")
    )


def _latency_throughput(axes: Any, report: ProfileReport) -> None:
    best, best_level = report.best, report.best_level
    points: list[tuple[float, float, str, bool]] = []
    for result in report.results:
        levels = [level for level in result.levels if level.stable and level.p99_ms is not None]
        if not levels:
            continue
        xs = [float(level.p99_ms or 0.0) for level in levels]
        ys = [float(level.throughput_per_s or 0.0) for level in levels]
        (line,) = axes.plot(xs, ys, marker="o", label=result.name)
        for level, x, y in zip(levels, xs, ys, strict=True):
            won = result is best and level is best_level
            points.append((x, y, level.load, won))
            if won:
                axes.plot([x], [y], marker="*", markersize=18, color=line.get_color(), linestyle="none")
    title = "throughput against p99 latency, per load level"
    budget = report.constraints.latency_budget_ms
    highest_x = max((x for x, _, _, _ in points), default=1.0)
    highest_y = max((y for _, y, _, _ in points), default=1.0)
    axes.set_xlim(0, highest_x * 1.12 or 1.0)
    axes.set_ylim(0, highest_y * 1.15 or 1.0)
    if budget is not None:
        if budget <= highest_x * 1.12:
            axes.axvline(budget, linestyle="--", color="grey", label=f"p99 budget {budget:g} ms")
        else:
            title += f"\n(p99 budget {budget:g} ms: beyond every measurement, right of the axis)"
    _label_points(axes, points)
    axes.set_xlabel("p99 latency (ms)")
    axes.set_ylabel("throughput (inferences/s)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    if handles:
        axes.legend(
            handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14),
            ncol=min(3, len(handles)), frameon=False,
        )  # fmt: skip


def _label_points(axes: Any, points: Sequence[tuple[float, float, str, bool]]) -> None:
    """Write each point's load label beside it, inside the axes, where it overlaps neither another label
    nor a point; a label equal to one already written for a point a few pixels away is left out
    (candidates measured alike). Positions are worked out in pixels before the layout settles, so they
    are close, not exact."""
    dpi = axes.figure.dpi
    char_width, text_height = _LABEL_SIZE * 0.6 * dpi / 72, _LABEL_SIZE * 1.2 * dpi / 72
    markers = [tuple(axes.transData.transform((x, y))) for x, y, _, _ in points]
    boxes: list[tuple[float, float, float, float]] = []  # pixel boxes of the labels written
    written: list[tuple[float, float, str]] = []  # the points labelled, and their label
    frame = axes.bbox

    def free(box: tuple[float, float, float, float]) -> bool:
        inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
        clear_of_points = not any(
            box[0] - 3 < mx < box[2] + 3 and box[1] - 3 < my < box[3] + 3 for mx, my in markers
        )
        return inside and clear_of_points and not any(_overlaps(box, other) for other in boxes)

    for (x, y, text, won), (px, py) in zip(points, markers, strict=True):
        if any(t == text and abs(wx - px) < 10 and abs(wy - py) < 10 for wx, wy, t in written):
            continue
        width = char_width * len(text)
        room = (9 if won else 4) * dpi / 72  # clear of the marker (of the winner's star)
        # above-left and below-right first: a line through its load levels rises to the right
        offsets = [(-room - width, room), (room, -room - text_height), (room, room),
                   (-room - width, -room - text_height), (-width / 2, room + text_height)]  # fmt: skip
        dx, dy = next(
            (
                (dx, dy)
                for dx, dy in offsets
                if free((px + dx, py + dy, px + dx + width, py + dy + text_height))
            ),
            offsets[2],
        )
        boxes.append((px + dx, py + dy, px + dx + width, py + dy + text_height))
        written.append((px, py, text))
        axes.annotate(
            text, (x, y), textcoords="offset points", xytext=(dx * 72 / dpi, dy * 72 / dpi),
            fontsize=_LABEL_SIZE, ha="left", va="bottom",
        )  # fmt: skip


def _overlaps(one: Sequence[float], two: Sequence[float]) -> bool:
    return one[0] < two[2] and two[0] < one[2] and one[1] < two[3] and two[1] < one[3]


def _cold_starts(axes: Any, measured: list[CandidateResult]) -> None:
    names = [result.name for result in measured]
    positions = list(range(len(measured)))
    bottom = [0.0] * len(measured)
    for part, label in _PARTS:
        values = [getattr(result, part) or 0.0 for result in measured]
        if any(values):
            axes.barh(positions, values, left=bottom, label=label)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    rest = [max(0.0, (result.cold_start_s or 0.0) - b) for result, b in zip(measured, bottom, strict=True)]
    parts = any(bottom)
    rest_label = "first inference and overhead" if parts else "cold start (the target reports no parts)"
    axes.barh(positions, rest, left=bottom, label=rest_label, color="lightgrey")
    longest = max((result.cold_start_s or 0.0 for result in measured), default=0.0)
    if parts:
        axes.set_xlim(0, longest * 1.05 or 1.0)
        _parts_table(axes, measured)
    else:  # the total alone, at the end of each bar
        axes.set_xlim(0, longest * 1.15 or 1.0)
        for position, result in zip(positions, measured, strict=True):
            axes.annotate(
                f"{result.cold_start_s or 0.0:.2f} s", (result.cold_start_s or 0.0, position),
                textcoords="offset points", xytext=(3, 0), va="center", fontsize=_LABEL_SIZE,
            )  # fmt: skip
    axes.set_yticks(positions, names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("cold start (s)")
    axes.set_title("cold start per candidate", fontsize=10)
    if measured:
        axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)


def _parts_table(axes: Any, measured: list[CandidateResult]) -> None:
    """The figures of each bar in a column beside the panel, level with its bar: the cold start and the
    parts the target reported, in seconds (a header names the columns)."""
    columns = [(part, label) for part, label in _PARTS if any(getattr(r, part) for r in measured)]
    text = {"fontsize": _LABEL_SIZE, "family": "monospace", "annotation_clip": False}
    header = "total s" + "".join(f"{label:>10}" for _, label in columns)
    axes.annotate(
        header, (1.0, 1.0), xycoords="axes fraction", textcoords="offset points", xytext=(8, 2),
        va="bottom", **text,
    )  # fmt: skip
    for position, result in enumerate(measured):
        row = f"{result.cold_start_s or 0.0:7.2f}" + "".join(
            f"{_seconds(getattr(result, part)):>10}" for part, _ in columns
        )
        axes.annotate(
            row, (1.0, position), xycoords=("axes fraction", "data"), textcoords="offset points",
            xytext=(8, 0), va="center", **text,
        )  # fmt: skip


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 0.1 else f"{value:.2f}"
