"""Which instance type and how many: :func:`plan_capacity` simulates every type × count for one traffic
and returns a :class:`CapacityPlan` — a row of predicted figures per plan, the targets each meets or the
reason it fails, and the cheapest plan that meets them (:attr:`CapacityPlan.best`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._units import parse_duration
from mme_triton.capacity._notes import compulsory_notes
from mme_triton.capacity._rows import _COLUMNS, _INTS, PlanRow, _row
from mme_triton.capacity.profile import ModelProfile, expand
from mme_triton.capacity.simulate import DEFAULT_COPY_UTILIZATION, HOSTINGS, simulate
from mme_triton.capacity.traffic import Traffic
from mme_triton.endpoint.instance_specs import InstanceType
from mme_triton.endpoint.instance_specs import instance_type as as_instance_type

if TYPE_CHECKING:
    import os

    from matplotlib.figure import Figure

    from mme_triton.capacity.validate import Validation

__all__ = ["DEFAULT_INSTANCE_TYPES", "CapacityPlan", "PlanRow", "plan_capacity"]

logger = logging.getLogger(__name__)

DEFAULT_INSTANCE_TYPES = ("ml.c5.xlarge", "ml.m5.xlarge", "ml.g4dn.xlarge", "ml.g5.xlarge", "ml.g5.2xlarge")
"""The types :func:`plan_capacity` compares when given none: common multi-model endpoint types with a
price in the table."""


@dataclass(frozen=True, eq=False)
class CapacityPlan:
    """The plans compared: one :class:`PlanRow` per instance type and count, in the order simulated.

    Attributes:
        rows: the plans.
        targets: ``min_hit_ratio``, ``p99_s``, ``max_cost`` (``None``: not a target).
        traffic: what the traffic was (description, requests, duration, models).
        models: the model profiles, as dicts.
        seed: the routing seed.
        requests: the :class:`Traffic` itself, for :meth:`validate` (``None`` for a plan read from JSON).
        notes: what the reader should know of the traffic itself: compulsory misses too many for the
            targets, and how long a traffic would have to be for them to matter no more.
        instance_types: the types compared (a custom :class:`InstanceType` too), by name.
        routing, copy_utilization: how inference component rows were planned.
    """

    rows: tuple[PlanRow, ...]
    targets: dict[str, float | None]
    traffic: dict[str, Any]
    models: tuple[dict[str, Any], ...]
    seed: int = 0
    requests: Traffic | None = dataclasses.field(default=None, repr=False)
    notes: tuple[str, ...] = ()
    instance_types: dict[str, InstanceType] = dataclasses.field(default_factory=dict, repr=False)
    routing: str = "LEAST_OUTSTANDING_REQUESTS"
    copy_utilization: float = DEFAULT_COPY_UTILIZATION

    def instance_type(self, name: str) -> InstanceType:
        """The type of a row, by name: one the plan compared, else from the table of SageMaker's types."""
        found = self.instance_types.get(name)
        return found if found is not None else as_instance_type(name)

    def _meeting(self) -> list[PlanRow]:
        return [row for row in self.rows if row.meets_targets]

    @property
    def best_basis(self) -> str | None:
        """How :attr:`best` was chosen: ``"cost"`` (every plan meeting the targets has a price),
        ``"size"`` (one has none), ``None`` (no plan meets them)."""
        meeting = self._meeting()
        if not meeting:
            return None
        return "cost" if all(row.cost_per_hour is not None for row in meeting) else "size"

    @property
    def best(self) -> PlanRow | None:
        """The plan to choose: the cheapest (per hour) that meets the targets, then the lower p99. When a
        plan meeting them has no price, the smallest instead: fewest instances, then least memory for
        models in all, then lower p99 (:attr:`best_basis` says which). ``None`` when no plan meets the
        targets."""
        meeting = self._meeting()
        if not meeting:
            return None
        if self.best_basis == "cost":
            return min(meeting, key=lambda r: (r.cost_per_hour, r.p99_s, r.instance_count))
        return min(
            meeting, key=lambda r: (r.instance_count, r.instance_count * r.memory_budget_bytes, r.p99_s)
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON values."""
        best = self.best
        return {
            "targets": dict(self.targets),
            "traffic": dict(self.traffic),
            "models": [dict(model) for model in self.models],
            "seed": self.seed,
            "notes": list(self.notes),
            "instance_types": [kind.to_dict() for kind in self.instance_types.values()],
            "routing": self.routing,
            "copy_utilization": self.copy_utilization,
            "best": None
            if best is None
            else {
                "instance_type": best.instance_type,
                "instance_count": best.instance_count,
                "hosting": best.hosting,
                "chosen_by": self.best_basis,
            },
            "rows": [row.to_dict() for row in self.rows],
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """The plan as JSON (written to ``path`` when given); :meth:`from_json` reads it back."""
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_json(cls, source: str | Path) -> CapacityPlan:
        """A plan from :meth:`to_json`'s output: a path, or the JSON text itself.

        Raises:
            ValueError: not a plan's JSON.
        """
        text = (
            source
            if isinstance(source, str) and source.lstrip().startswith("{")
            else Path(source).read_text()
        )
        try:
            data = json.loads(text)
            rows = tuple(PlanRow(**row) for row in data["rows"])
            return cls(
                rows,
                dict(data["targets"]),
                dict(data["traffic"]),
                tuple(data["models"]),
                int(data["seed"]),
                notes=tuple(data.get("notes", ())),
                instance_types={
                    kind["name"]: InstanceType.from_dict(kind) for kind in data.get("instance_types", ())
                },
                routing=str(data.get("routing", "LEAST_OUTSTANDING_REQUESTS")),
                copy_utilization=float(data.get("copy_utilization", DEFAULT_COPY_UTILIZATION)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a capacity plan's JSON: {exc}") from None

    def to_csv(self, path: str | Path | None = None) -> str:
        """One line per plan with every :class:`PlanRow` field (empty for a missing price); written to
        ``path`` when given. :meth:`read_csv` reads it back."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow({k: "" if v is None else v for k, v in row.to_dict().items()})
        text = buffer.getvalue()
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @staticmethod
    def read_csv(path: str | Path) -> list[PlanRow]:
        """The rows of a :meth:`to_csv` file."""
        rows = []
        with Path(path).open(encoding="utf-8", newline="") as source:
            for record in csv.DictReader(source):
                values: dict[str, Any] = {}
                for key, text in record.items():
                    if key in ("instance_type", "reason", "hosting"):
                        values[key] = text
                    elif key == "meets_targets":
                        values[key] = text == "True"
                    elif text == "":
                        values[key] = None
                    else:
                        values[key] = int(text) if key in _INTS else float(text)
                rows.append(PlanRow(**values))
        return rows

    def validate(
        self, models: Mapping[str, str | os.PathLike[str]], *, stack: Any = None, **options: Any
    ) -> Validation:
        """Replay this plan's traffic on an endpoint of the chosen row's instance type (the embedded
        stack's with ``stack=``, else AWS's with ``boto3_session=``, ``role=``, ``model_data_url=``) and
        compare its CloudWatch metrics with the prediction:
        :func:`~mme_triton.capacity.validate.validate_plan` (``row=``, ``max_requests=``, ``time_scale=``,
        ... are its).

        Example::

            plan = mt.plan_capacity([linear], traffic, instance_types=["ml.c5.xlarge"])
            with LocalStack(max_models=3, metrics_period=1) as stack:
                checked = plan.validate({"linear.tar.gz": "repo/linear"}, stack=stack, time_scale=0.1)
            print(checked)                       # predicted, measured and error per figure
            checked["cache_hit_ratio"].error
        """
        from mme_triton.capacity.validate import validate_plan

        return validate_plan(self, models, stack=stack, **options)

    def plot(self) -> Figure:
        """A matplotlib figure: hit ratio and p99 latency against instance count, one line per type, the
        targets dashed. Needs matplotlib (the ``notebooks`` extra)."""
        from mme_triton.capacity._render import plot

        return plot(self)

    def __str__(self) -> str:
        from mme_triton.capacity._render import text_table

        return text_table(self)

    def _repr_html_(self) -> str:
        from mme_triton.capacity._render import html_table

        return html_table(self)


def _targets(
    min_hit_ratio: float | None, p99: float | str | None, max_cost: float | None
) -> dict[str, float | None]:
    if min_hit_ratio is not None and (
        isinstance(min_hit_ratio, bool)
        or not isinstance(min_hit_ratio, (int, float))
        or not 0 <= min_hit_ratio <= 1
    ):
        raise ValueError(f"min_hit_ratio must be between 0 and 1, got {min_hit_ratio!r}")
    p99_s = None if p99 is None else parse_duration(p99, "p99")
    if max_cost is not None and (
        isinstance(max_cost, bool)
        or not isinstance(max_cost, (int, float))
        or not math.isfinite(max_cost)
        or max_cost < 0
    ):
        raise ValueError(f"max_cost (USD per hour) must be a number >= 0, got {max_cost!r}")
    return {
        "min_hit_ratio": None if min_hit_ratio is None else float(min_hit_ratio),
        "p99_s": p99_s,
        "max_cost": None if max_cost is None else float(max_cost),
    }


def _hostings(hosting: str | Iterable[str]) -> list[str]:
    chosen = [hosting] if isinstance(hosting, str) else list(dict.fromkeys(hosting))
    if not chosen:
        raise ValueError("hosting is empty")
    for way in chosen:
        if way not in HOSTINGS:
            raise ValueError(f"hosting is one or more of {', '.join(HOSTINGS)}, got {way!r}")
    return chosen


def _counts(instance_counts: Iterable[int]) -> list[int]:
    if isinstance(instance_counts, int):
        instance_counts = [instance_counts]
    counts = list(instance_counts)
    if not counts:
        raise ValueError("instance_counts is empty")
    for value in counts:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 255:
            raise ValueError(f"an instance count is an integer from 1 to 255, got {value!r}")
    return sorted(set(counts))


def _types(instance_types: Iterable[str | InstanceType] | str | InstanceType | None) -> list[InstanceType]:
    if instance_types is None:
        instance_types = DEFAULT_INSTANCE_TYPES
    if isinstance(instance_types, (str, InstanceType)):
        instance_types = [instance_types]
    kinds = [as_instance_type(value) for value in instance_types]
    if not kinds:
        raise ValueError("instance_types is empty")
    names = [kind.name for kind in kinds]
    if len(set(names)) != len(names):
        raise ValueError(
            f"an instance type is given twice: {sorted({n for n in names if names.count(n) > 1})}"
        )
    return kinds


def plan_capacity(
    models: Sequence[ModelProfile] | ModelProfile,
    traffic: Traffic,
    *,
    instance_types: Iterable[str | InstanceType] | str | InstanceType | None = None,
    instance_counts: Iterable[int] = (1, 2, 3, 4),
    min_hit_ratio: float | None = None,
    p99: float | str | None = None,
    max_cost: float | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    hosting: str | Iterable[str] = "mme",
    routing: str = "LEAST_OUTSTANDING_REQUESTS",
    copy_utilization: float = DEFAULT_COPY_UTILIZATION,
) -> CapacityPlan:
    """Simulate ``traffic`` on every hosting × instance type × count and compare the plans.

    Parameters:
        models: the model profiles (every TargetModel of the traffic needs one).
        traffic: the requests (:meth:`Traffic.zipf`, :meth:`Traffic.uniform`, :meth:`Traffic.trace`).
        instance_types: names from :data:`~mme_triton.endpoint.instance_specs.INSTANCE_TYPES` or
            :class:`InstanceType` objects; ``None``: :data:`DEFAULT_INSTANCE_TYPES`.
        instance_counts: the instance counts to try.
        min_hit_ratio: the lowest cache-hit ratio a plan may have.
        p99: the highest p99 latency, in seconds or as ``"200ms"``.
        max_cost: the highest cost, USD per hour for the whole endpoint.
        seed: drives routing's random choices; the same arguments give the same plan.
        progress: called as ``progress(done, total)`` after each plan is simulated.
        hosting: ``"mme"`` (a multi-model endpoint), ``"inference-components"`` (one component per model,
            copies reserving memory and cores), or both (``("mme", "inference-components")``): the rows of
            each side by side, and the cheapest that meets the targets among them all.
        routing: inference components: how an endpoint routes among a model's copies
            (``LEAST_OUTSTANDING_REQUESTS`` or ``RANDOM``, its ``RoutingConfig``).
        copy_utilization: inference components: how busy each copy's reserved processors may be when the
            planner decides the copy counts.

    Raises:
        ValueError: a target out of range, an unknown instance type, an empty or out-of-range list of
            counts, a traffic model without a profile.

    Examples:
        >>> model = ModelProfile("m.tar.gz", memory_bytes=6 * 2**30, cold_start_s=8.0,
        ...                      service_time_s=0.02, copies=6)
        >>> traffic = Traffic.zipf([model], s=1.2, rate=5, duration=600, seed=0)
        >>> plan = plan_capacity([model], traffic, instance_types=["ml.g5.xlarge"],
        ...                      instance_counts=[1, 2], min_hit_ratio=0.95)
        >>> [(row.instance_count, row.meets_targets) for row in plan.rows]
        [(1, False), (2, True)]
    """
    if not isinstance(traffic, Traffic):
        raise TypeError(
            f"traffic must be a Traffic (Traffic.zipf, .uniform, .trace), got {type(traffic).__name__}"
        )
    targets = _targets(min_hit_ratio, p99, max_cost)
    counts = _counts(instance_counts)
    kinds = _types(instance_types)
    hostings = _hostings(hosting)
    profiles = [models] if isinstance(models, ModelProfile) else list(models)
    expand(profiles)
    rows = []
    total = len(hostings) * len(kinds) * len(counts)
    for way in hostings:
        for kind in kinds:
            for count in counts:
                result = simulate(
                    profiles, traffic, kind, count, seed=seed, hosting=way, routing=routing,
                    copy_utilization=copy_utilization,
                )  # fmt: skip
                rows.append(_row(result, targets))
                if progress is not None:
                    progress(len(rows), total)
                logger.info(
                    "%s, %d x %s: hit ratio %.3f, p99 %.3f s (%.2f s to simulate)",
                    way, count, kind.name, result.hit_ratio, rows[-1].p99_s, result.elapsed_s,
                )  # fmt: skip
    described = {
        "description": traffic.description,
        "requests": len(traffic),
        "duration_s": traffic.duration,
        "models": len(traffic.names),
    }
    return CapacityPlan(
        tuple(rows),
        targets,
        described,
        tuple(profile.to_dict() for profile in profiles),
        seed,
        traffic,
        notes=tuple(compulsory_notes(traffic, targets)),
        instance_types={kind.name: kind for kind in kinds},
        routing=routing,
        copy_utilization=copy_utilization,
    )
