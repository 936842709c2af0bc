"""A plan's row: the predicted figures of one hosting, instance type and count, and the targets it misses."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mme_triton.capacity.simulate import SimulationResult

__all__ = ["PlanRow"]


@dataclass(frozen=True)
class PlanRow:
    """The predicted figures of one plan: ``instance_count`` instances of ``instance_type``.

    Times are in seconds, memory in bytes, costs in USD (``None`` without a price). ``meets_targets`` is
    False with the reasons in ``reason`` (empty when it meets them). ``memory_headroom_bytes`` is what the
    fullest instance never used of its memory for models; ``busy_executions`` the mean number of
    executions running at once per instance, at full speed; ``processors`` what they share on each
    instance (its vCPUs, or its GPUs on a GPU type) and ``processor_utilization`` the busiest instance's
    work over what its processors can do (above 1.0 the plan fails: its executions queue without end).
    ``hosting`` is ``"mme"`` or ``"inference-components"``; for the latter ``copies`` is the component
    copies the plan runs (every model's, placed on the instances), its hit ratio 1.0 (copies stay loaded),
    its memory figures the instances' host memory for copies, and its processor utilization the busiest
    copy's over the cores (or GPUs) it reserves.
    """

    instance_type: str
    instance_count: int
    requests: int
    hit_ratio: float
    misses: int
    loads: int
    unloads: int
    loads_per_min: float
    unloads_per_min: float
    load_wait_mean_s: float
    load_wait_p99_s: float
    load_wait_max_s: float
    p50_s: float
    p99_s: float
    errors: int
    memory_budget_bytes: int
    memory_headroom_bytes: int
    loaded_models_max: int
    busy_executions: float
    processors: int
    processor_utilization: float
    cost_per_hour: float | None
    cost_per_million: float | None
    meets_targets: bool
    reason: str
    hosting: str = "mme"
    copies: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON values."""
        return dataclasses.asdict(self)


_COLUMNS = [f.name for f in dataclasses.fields(PlanRow)]
_INTS = {"instance_count", "requests", "misses", "loads", "unloads", "errors", "memory_budget_bytes"}
_INTS |= {"memory_headroom_bytes", "loaded_models_max", "processors", "copies"}


def _row(result: SimulationResult, targets: dict[str, float | None]) -> PlanRow:
    kind = result.instance_type
    budget = kind.memory_budget_bytes
    if result.hosting == "inference-components":
        from mme_triton.capacity._components import capacity_bytes

        budget = capacity_bytes(kind)
    minutes = result.duration_s / 60.0
    waits = result.load_wait_stats()
    cost = None if kind.price_per_hour is None else kind.price_per_hour * result.instance_count
    per_million = None
    if cost is not None and result.requests:
        per_million = cost * result.duration_s / 3600.0 / result.requests * 1e6
    row = PlanRow(
        instance_type=kind.name,
        instance_count=result.instance_count,
        requests=result.requests,
        hit_ratio=result.hit_ratio,
        misses=result.misses,
        loads=result.loads,
        unloads=result.unloads,
        loads_per_min=result.loads / minutes,
        unloads_per_min=result.unloads / minutes,
        load_wait_mean_s=waits["mean"],
        load_wait_p99_s=waits["p99"],
        load_wait_max_s=waits["max"],
        p50_s=result.latency_percentile(50),
        p99_s=result.latency_percentile(99),
        errors=result.failed,
        memory_budget_bytes=budget,
        memory_headroom_bytes=budget - max(result.peak_bytes, default=0),
        loaded_models_max=max(result.peak_models, default=0),
        busy_executions=sum(result.busy_s) / result.duration_s / result.instance_count,
        processors=result.processors,
        processor_utilization=result.processor_utilization,
        cost_per_hour=cost,
        cost_per_million=per_million,
        meets_targets=True,
        reason="",
        hosting=result.hosting,
        copies=sum(result.copies.values()) if result.copies is not None else None,
    )
    reasons = _failures(row, result, targets)
    return dataclasses.replace(row, meets_targets=not reasons, reason="; ".join(reasons))


def _failures(row: PlanRow, result: SimulationResult, targets: dict[str, float | None]) -> list[str]:
    reasons = []
    if result.placement_failure is not None:
        reasons.append(result.placement_failure)
    if result.hosting == "mme" and result.instance_type.gpus > 1:
        reasons.append(
            f"a multi-model endpoint takes single-GPU instance types; {row.instance_type} has "
            f"{result.instance_type.gpus} GPUs"
        )
    if row.processor_utilization > 1.0 and result.hosting == "inference-components":
        reasons.append(
            f"a copy's reserved processors {row.processor_utilization:.0%} busy: its executions queue "
            "without end"
        )
    elif row.processor_utilization > 1.0:
        what = "GPUs" if result.instance_type.is_gpu else "vCPUs"
        reasons.append(
            f"processors {row.processor_utilization:.0%} busy: the executions need "
            f"{row.processor_utilization * row.processors:.1f} of the {row.processors} {what} of an instance"
        )
    if result.failed:
        causes = ", ".join(f"{name} {count}" for name, count in result.errors.items() if count)
        reasons.append(f"{result.failed} requests failed ({causes})")
    min_hit_ratio, p99, max_cost = targets["min_hit_ratio"], targets["p99_s"], targets["max_cost"]
    if min_hit_ratio is not None and row.hit_ratio < min_hit_ratio:
        reasons.append(f"hit ratio {row.hit_ratio:.3f} < {min_hit_ratio:g}")
    if p99 is not None and row.p99_s > p99:
        reasons.append(f"p99 {_seconds(row.p99_s)} > {_seconds(p99)}")
    if max_cost is not None:
        if row.cost_per_hour is None:
            reasons.append(f"no price for {row.instance_type} to compare with max_cost")
        elif row.cost_per_hour > max_cost:
            reasons.append(f"${row.cost_per_hour:.2f}/h > ${max_cost:.2f}/h")
    return reasons


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
