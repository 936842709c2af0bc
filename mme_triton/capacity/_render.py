"""A capacity plan for people: a text table, an HTML table for notebooks, a matplotlib figure."""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mme_triton.capacity.plan import CapacityPlan, PlanRow

__all__ = ["html_table", "plot", "text_table"]

_HEAD = (
    "plan", "hit ratio", "loads/min", "unloads/min", "load wait p99", "p50", "p99", "errors",
    "headroom", "CPU/GPU busy", "$/hour", "$/M req", "meets targets",
)  # fmt: skip


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{size} B"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _money(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _plan_name(row: PlanRow) -> str:
    """``2 x ml.c5.xlarge``; as inference components ``2 x ml.c5.xlarge, ICs (14 copies)``."""
    name = f"{row.instance_count} x {row.instance_type}"
    if row.hosting == "inference-components":
        name += f", ICs ({row.copies} copies)"
    return name


def _cells(row: PlanRow, best: PlanRow | None) -> list[str]:
    mark = " *" if row is best else ""
    return [
        f"{_plan_name(row)}{mark}",
        f"{row.hit_ratio:.3f}",
        f"{row.loads_per_min:.1f}",
        f"{row.unloads_per_min:.1f}",
        _duration(row.load_wait_p99_s),
        _duration(row.p50_s),
        _duration(row.p99_s),
        str(row.errors),
        _bytes(row.memory_headroom_bytes),
        f"{row.processor_utilization:.0%} of {row.processors}",
        _money(row.cost_per_hour),
        _money(row.cost_per_million, 3),
        "yes" if row.meets_targets else f"no: {row.reason}",
    ]


def _targets(plan: CapacityPlan) -> str:
    given = []
    if plan.targets.get("min_hit_ratio") is not None:
        given.append(f"hit ratio >= {plan.targets['min_hit_ratio']:g}")
    if plan.targets.get("p99_s") is not None:
        given.append(f"p99 <= {_duration(float(plan.targets['p99_s'] or 0))}")
    if plan.targets.get("max_cost") is not None:
        given.append(f"cost <= ${plan.targets['max_cost']:g}/hour")
    return ", ".join(given) or "none (every plan that loses no request meets them)"


def _verdict(plan: CapacityPlan) -> str:
    best = plan.best
    if best is None:
        return "no plan meets the targets"
    if plan.best_basis == "cost":
        why = "the cheapest plan that meets the targets"
    else:
        unpriced = sorted(
            {row.instance_type for row in plan.rows if row.meets_targets and row.cost_per_hour is None}
        )
        why = f"the smallest plan that meets the targets (no price for {', '.join(unpriced)})"
    hosted = " as inference components" if best.hosting == "inference-components" else ""
    if len({row.hosting for row in plan.rows}) > 1 and not hosted:
        hosted = " as a multi-model endpoint"
    return f"best: {best.instance_count} x {best.instance_type}{hosted} (marked *), {why}"


def text_table(plan: CapacityPlan) -> str:
    """The plan as an aligned text table, the best plan marked ``*``."""
    best = plan.best
    lines = [list(_HEAD)] + [_cells(row, best) for row in plan.rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(_HEAD) - 1)]
    out = [
        f"traffic: {plan.traffic.get('description', '')}",
        f"targets: {_targets(plan)}",
        "",
    ]
    for index, line in enumerate(lines):
        cells = [line[0].ljust(widths[0])] + [
            cell.rjust(w) for cell, w in zip(line[1:-1], widths[1:], strict=True)
        ]
        out.append("  ".join([*cells, line[-1]]).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths) + "  " + "-" * len(_HEAD[-1]))
    out += ["", _verdict(plan)]
    out += [f"note: {note}" for note in plan.notes]
    return "\n".join(out)


def html_table(plan: CapacityPlan) -> str:
    """The plan as an HTML table for notebooks, the best plan's row in bold."""
    best = plan.best
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in _HEAD)
    body = []
    for row in plan.rows:
        style = ' style="font-weight: bold"' if row is best else ""
        cells = "".join(f"<td>{html.escape(cell)}</td>" for cell in _cells(row, best))
        body.append(f"<tr{style}>{cells}</tr>")
    return (
        f"<div><p>traffic: {html.escape(str(plan.traffic.get('description', '')))}<br>"
        f"targets: {html.escape(_targets(plan))}<br>{html.escape(_verdict(plan))}</p>"
        + "".join(f"<p>note: {html.escape(note)}</p>" for note in plan.notes)
        + f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


@dataclass(frozen=True)
class _Panel:
    """One panel of the plan's figure: a figure of each plan against its instance count."""

    title: str
    ylabel: str
    value: Callable[[PlanRow], float | None]
    target: float | None = None
    """Drawn as a dashed line."""
    log: bool = False
    limits: tuple[float, float] | None = None


def _panels(plan: CapacityPlan) -> list[_Panel]:
    """The panels, left to right; a new figure of the plans is one more entry."""
    cost_title = "Cost"
    if plan.best_basis == "cost":
        cost_title += " (the winner: the cheapest meeting the targets)"
    min_hit_ratio = _number(plan.targets.get("min_hit_ratio"))
    # from a little under the lowest ratio (or target): the differences that matter are near 1
    lowest = min(
        [row.hit_ratio for row in plan.rows] + ([min_hit_ratio] if min_hit_ratio is not None else [])
    )
    return [
        _Panel(
            "Cache-hit ratio", "cache-hit ratio", lambda row: row.hit_ratio, min_hit_ratio,
            limits=(max(0.0, lowest - 0.05), 1.01),
        ),
        _Panel(
            "p99 latency", "p99 latency (s, log scale)", lambda row: row.p99_s,
            _number(plan.targets.get("p99_s")), log=True,
        ),
        _Panel(
            "Processors busy (busiest instance; ICs: busiest copy)",
            "work / capacity (above 1: queues without end)",
            lambda row: row.processor_utilization, 1.0,
        ),
        _Panel("\n".join(textwrap.wrap(cost_title, 40)), "$ per hour", lambda row: row.cost_per_hour,
               _number(plan.targets.get("max_cost"))),
    ]  # fmt: skip


def _number(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
_LINES: tuple[Any, ...] = ("-", "--", "-.", ":")


def plot(plan: CapacityPlan) -> Figure:
    """One panel per figure of :func:`_panels` against the instance count, one line per instance type.

    Instance types with the same results would draw over each other: each type's points are shifted a
    little sideways, with a marker and line style of its own, and the legend says which types have the
    same hit ratio and p99. The best plan is starred; targets are dashed; the legend sits right of the
    panels, off the data.
    """
    from matplotlib.lines import Line2D

    from mme_triton._figure import NotebookFigure as Figure

    panels = _panels(plan)
    figure = Figure(figsize=(4.2 * len(panels) + 2.2, 4.2), layout="constrained")
    axes_row = figure.subplots(1, len(panels), squeeze=False)[0]
    several = len({row.hosting for row in plan.rows}) > 1

    def key(row: PlanRow) -> str:
        if not several:
            return row.instance_type
        return f"{row.instance_type} ({'ICs' if row.hosting == 'inference-components' else 'MME'})"

    kinds = list(dict.fromkeys(key(row) for row in plan.rows))
    rows = {kind: [row for row in plan.rows if key(row) == kind] for kind in kinds}
    labels = _kind_labels(rows)
    best = plan.best
    counts = sorted({row.instance_count for row in plan.rows})
    for axes, panel in zip(axes_row, panels, strict=True):
        starred: list[tuple[float, float]] = []
        for index, kind in enumerate(kinds):
            shift = (index - (len(kinds) - 1) / 2) * min(0.12, 0.6 / max(1, len(kinds)))
            points = [
                (row.instance_count + shift, value, row)
                for row in rows[kind]
                if (value := panel.value(row)) is not None
            ]
            if not points:
                continue
            axes.plot(
                [x for x, _, _ in points], [y for _, y, _ in points], marker=_MARKERS[index % len(_MARKERS)],
                linestyle=_LINES[index % len(_LINES)], color=f"C{index % 10}", label=labels[kind],
            )  # fmt: skip
            starred += [(x, y) for x, y, row in points if row is best]
        for x, y in starred:
            axes.plot([x], [y], marker="*", markersize=16, color="black", linestyle="none")
        if panel.target is not None:
            axes.axhline(panel.target, linestyle="--", color="grey")
        if not axes.get_lines():
            axes.text(0.5, 0.5, "no data (no prices)", ha="center", va="center", transform=axes.transAxes)
        axes.set(xlabel="instances", ylabel=panel.ylabel)
        axes.set_title(panel.title, fontsize=10)
        if panel.log:
            axes.set_yscale("log")
        if panel.limits is not None:
            axes.set_ylim(*panel.limits)
        axes.set_xticks(counts)
        axes.set_xlim(counts[0] - 0.5, counts[-1] + 0.5)
        axes.grid(True, alpha=0.3)
    handles = [
        Line2D([], [], marker=_MARKERS[i % len(_MARKERS)], linestyle=_LINES[i % len(_LINES)],
               color=f"C{i % 10}", label=labels[kind])
        for i, kind in enumerate(kinds)
    ]  # fmt: skip
    handles.append(Line2D([], [], linestyle="--", color="grey", label="target"))
    if best is not None:
        handles.append(
            Line2D([], [], marker="*", markersize=12, color="black", linestyle="none", label="best plan")
        )
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    figure.suptitle(f"{_verdict(plan)}; targets: {_targets(plan)}", fontsize=10)
    return figure


def _kind_labels(rows: dict[str, list[PlanRow]]) -> dict[str, str]:
    """Each instance type's legend label; a type whose hit ratios and p99s equal an earlier type's says so
    (their lines would otherwise lie on top of each other)."""
    labels: dict[str, str] = {}
    seen: dict[tuple[object, ...], str] = {}
    for kind, kind_rows in rows.items():
        results = tuple((row.instance_count, row.hit_ratio, row.p99_s) for row in kind_rows)
        same = seen.setdefault(results, kind)
        labels[kind] = kind if same == kind else f"{kind} (hit ratio, p99 as {same})"
    return labels
