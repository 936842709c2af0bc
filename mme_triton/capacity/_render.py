"""A capacity plan for people: a text table, an HTML table for notebooks, a matplotlib figure."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

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


def _cells(row: PlanRow, best: PlanRow | None) -> list[str]:
    mark = " *" if row is best else ""
    return [
        f"{row.instance_count} x {row.instance_type}{mark}",
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
    return f"best: {best.instance_count} x {best.instance_type} (marked *), {why}"


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


def plot(plan: CapacityPlan) -> Figure:
    """Hit ratio and p99 against instance count, one line per instance type; targets dashed."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), layout="constrained")
    hit_axes, p99_axes = figure.subplots(1, 2)
    kinds = list(dict.fromkeys(row.instance_type for row in plan.rows))
    for kind in kinds:
        rows = [row for row in plan.rows if row.instance_type == kind]
        counts = [row.instance_count for row in rows]
        hit_axes.plot(counts, [row.hit_ratio for row in rows], marker="o", label=kind)
        p99_axes.plot(counts, [row.p99_s for row in rows], marker="o", label=kind)
    if plan.targets.get("min_hit_ratio") is not None:
        hit_axes.axhline(
            float(plan.targets["min_hit_ratio"] or 0), linestyle="--", color="grey", label="target"
        )
    if plan.targets.get("p99_s") is not None:
        p99_axes.axhline(float(plan.targets["p99_s"] or 0), linestyle="--", color="grey", label="target")
    best = plan.best
    if best is not None:
        hit_axes.plot([best.instance_count], [best.hit_ratio], marker="*", markersize=14, color="black")
        p99_axes.plot([best.instance_count], [best.p99_s], marker="*", markersize=14, color="black")
    hit_axes.set(xlabel="instances", ylabel="cache-hit ratio", title="Cache-hit ratio", ylim=(0, 1.02))
    p99_axes.set(xlabel="instances", ylabel="p99 latency (s, log scale)", title="p99 latency", yscale="log")
    counts = sorted({row.instance_count for row in plan.rows})
    for axes in (hit_axes, p99_axes):
        axes.set_xticks(counts)
        axes.grid(True, alpha=0.3)
    p99_axes.legend(loc="best", fontsize="small")
    return figure
