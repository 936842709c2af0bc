"""A plan checked against a real endpoint: its traffic replayed, the endpoint's CloudWatch metrics compared.

:func:`validate_plan` (also :meth:`CapacityPlan.validate <mme_triton.capacity.plan.CapacityPlan.validate>`)
deploys the models of a plan on an endpoint of the plan's instance type — the embedded stack, or AWS —,
sends the plan's requests in their timing (compressed by ``time_scale``), reads the endpoint's own
metrics with :func:`~mme_triton.endpoint.metrics.endpoint_metrics` and the client's latencies, and
compares them with the simulation of the requests as they were sent. The result, a :class:`Validation`,
has per figure the prediction, the measurement and the error, and a second prediction made with the load
and service times the endpoint itself reported: when the first is off and the second is not, the
profile's times, not the model of an instance, are what is wrong (its notes say so).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mme_triton.capacity import _predict
from mme_triton.capacity._replay import ComponentSpec, Replay, replay
from mme_triton.capacity.profile import ModelProfile, expand
from mme_triton.capacity.simulate import simulate
from mme_triton.capacity.traffic import Traffic
from mme_triton.endpoint.instance_specs import instance_type as as_instance_type

if TYPE_CHECKING:
    import os

    from mme_triton.capacity.plan import CapacityPlan, PlanRow

__all__ = ["Comparison", "Validation", "validate_plan"]

HIT_RATIO_TOLERANCE = 0.05
"""How far the predicted cache-hit ratio may be from the measured one (absolute)."""
P99_TOLERANCE = 0.30
"""How far the predicted p99 latency may be from the measured one (relative)."""


@dataclass(frozen=True)
class Comparison:
    """One figure: predicted, measured, and the error (``predicted - measured``; relative to the measured
    value for times and counts, absolute for the hit ratio). ``calibrated`` is the prediction made with
    the endpoint's own load and service times. ``tolerance`` is ``None`` for a figure only reported."""

    figure: str
    predicted: float | None
    measured: float | None
    calibrated: float | None = None
    tolerance: float | None = None
    relative: bool = True

    def _error(self, predicted: float | None) -> float | None:
        if predicted is None or self.measured is None:
            return None
        if not self.relative:
            return predicted - self.measured
        if self.measured == 0:
            return 0.0 if predicted == 0 else math.inf
        return (predicted - self.measured) / self.measured

    @property
    def error(self) -> float | None:
        """The prediction's error; ``None`` when either side is missing."""
        return self._error(self.predicted)

    @property
    def calibrated_error(self) -> float | None:
        """The calibrated prediction's error."""
        return self._error(self.calibrated)

    @property
    def within(self) -> bool | None:
        """Whether the error is within the tolerance (``None``: no tolerance, or nothing to compare)."""
        error = self.error
        if self.tolerance is None or error is None:
            return None
        return abs(error) <= self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "error": self.error,
            "calibrated_error": self.calibrated_error,
            "within": self.within,
        }


@dataclass(frozen=True, eq=False)
class Validation:
    """What :func:`validate_plan` found: one :class:`Comparison` per figure, and why they may differ.

    Attributes:
        instance_type, instance_count: the plan validated (the replay runs on that many instances).
        endpoint_name: the endpoint the requests went to.
        requests: requests sent; ``failed``: those that got an error.
        time_scale: the factor the request times were multiplied by.
        in_flight_max: the most requests that were in flight together.
        hosting: ``"mme"``, or ``"inference-components"`` for a row planned as components (deployed with
            :func:`~mme_triton.deploy_inference_components`, each model's copies as planned).
        budget: the memory budget the prediction assumed, in words.
        comparisons: the figures.
        predicted, calibrated, measured: the simulation's summary, the calibrated one, the endpoint's
            metrics summary (``EndpointMetrics.summary()``) with the client's ``p50_s``/``p99_s``.
        notes: what the reader should know (a budget other than the plan's, timings far from the
            profile's).
    """

    instance_type: str
    instance_count: int
    endpoint_name: str
    requests: int
    failed: int
    time_scale: float
    budget: str
    comparisons: tuple[Comparison, ...]
    predicted: dict[str, Any]
    calibrated: dict[str, Any] | None
    measured: dict[str, Any]
    notes: tuple[str, ...] = ()
    in_flight_max: int = 1
    hosting: str = "mme"

    def __getitem__(self, figure: str) -> Comparison:
        for comparison in self.comparisons:
            if comparison.figure == figure:
                return comparison
        raise KeyError(f"no figure {figure!r}; the figures are {[c.figure for c in self.comparisons]}")

    @property
    def ok(self) -> bool:
        """Every figure with a tolerance is within it."""
        return all(c.within is not False for c in self.comparisons)

    def to_dict(self) -> dict[str, Any]:
        """Everything, as JSON values."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["comparisons"] = [c.to_dict() for c in self.comparisons]
        fields["notes"] = list(self.notes)
        return {**fields, "ok": self.ok}

    def __str__(self) -> str:
        header = (
            f"validation of {self.instance_count} x {self.instance_type}"
            + (" as inference components" if self.hosting == "inference-components" else "")
            + f" on {self.endpoint_name}: "
            f"{self.requests} requests ({self.failed} failed, at most {self.in_flight_max} in flight), "
            f"time x{self.time_scale:g}, {self.budget}"
        )
        rows = [("figure", "predicted", "measured", "error", "calibrated", "error", "ok")]
        for c in self.comparisons:
            ok = {None: "", True: "yes", False: "NO"}[c.within]
            rows.append(
                (
                    c.figure,
                    _show(c.predicted),
                    _show(c.measured),
                    _show_error(c.error, c.relative),
                    _show(c.calibrated),
                    _show_error(c.calibrated_error, c.relative),
                    ok,
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [header] + [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        ]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(line.rstrip() for line in lines)


def _show(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:.3f}"


def _show_error(error: float | None, relative: bool) -> str:
    if error is None:
        return "-"
    return f"{error:+.0%}" if relative else f"{error:+.3f}"


def _compare(
    predicted: Mapping[str, Any], calibrated: Mapping[str, Any] | None, measured: Mapping[str, Any]
) -> tuple[Comparison, ...]:
    def figure(name: str, key: str, measured_key: str | None = None, **options: Any) -> Comparison:
        value = measured.get(measured_key or key)
        return Comparison(
            name,
            predicted.get(key),
            value,
            None if calibrated is None else calibrated.get(key),
            **options,
        )

    return (
        figure("cache_hit_ratio", "cache_hit_ratio", tolerance=HIT_RATIO_TOLERANCE, relative=False),
        figure("loads", "loads"),
        figure("unloads", "unloads"),
        figure("load_wait_mean_s", "load_wait_mean_s"),
        figure("p50_s", "p50_s"),
        figure("p99_s", "p99_s", tolerance=P99_TOLERANCE),
        figure("model_latency_p99_s", "model_latency_p99_s"),
    )


def _utilization(result: Any, scheduled: list[float]) -> float:
    """The replay's work over what the instance's processors can do while it is sent."""
    span = (scheduled[-1] - scheduled[0]) if len(scheduled) > 1 else 0.0
    return max(result.busy_s, default=0.0) / (result.processors * span) if span > 0 else 0.0


# -- the entry point -------------------------------------------------------------------------------------


def _choose_row(plan: CapacityPlan, row: PlanRow | tuple[str, int] | int | None) -> PlanRow:
    if row is None:
        chosen = plan.best
        if chosen is None:
            raise ValueError("no plan meets the targets: say which to validate (row=)")
        return chosen
    if isinstance(row, bool):
        raise TypeError("row is a PlanRow, (instance_type, count) or an index")
    if isinstance(row, int):
        return plan.rows[row]
    if isinstance(row, tuple):
        for candidate in plan.rows:
            if (candidate.instance_type, candidate.instance_count) == row:
                return candidate
        raise ValueError(f"the plan has no row {row!r}")
    return row


def validate_plan(
    plan: CapacityPlan,
    models: Mapping[str, str | os.PathLike[str]],
    *,
    row: PlanRow | tuple[str, int] | int | None = None,
    traffic: Traffic | None = None,
    stack: Any = None,
    boto3_session: Any = None,
    role: str | None = None,
    model_data_url: str | None = None,
    endpoint_name: str | None = None,
    max_requests: int | None = None,
    time_scale: float = 1.0,
    concurrency: int = 1,
    warm: bool = False,
    endpoint_instance_type: str | None = None,
    max_models: int | None = None,
    memory_budget: int | None = None,
    metrics_period: int | None = None,
    metrics_timeout: float = 180.0,
    keep: bool = False,
) -> Validation:
    """Replay ``plan``'s traffic on an endpoint of the chosen row's instance type; compare with the plan.

    Parameters:
        plan: the plan (its models and traffic; a plan read from JSON needs ``traffic=``).
        models: for each model profile of the plan, by its name, the model directory it was profiled
            from. It is packaged once; each copy the replay names is uploaded as the same archive under
            its own TargetModel.
        row: the plan to validate: a :class:`~mme_triton.capacity.plan.PlanRow`, ``(instance_type,
            count)`` or an index of ``plan.rows``; default: :attr:`CapacityPlan.best`.
        traffic: the requests; default: the traffic the plan was made from.
        stack: a running :class:`~mme_triton.local.LocalStack`: its session, role and bucket are used and
            its ``max_models``/``memory_budget`` are the budget predicted with. Without it, give
            ``boto3_session``, ``role`` and ``model_data_url`` (AWS, or a stack's session): the budget is
            then the instance type's memory for models, as on SageMaker.
        endpoint_name: default ``validate-<instance type>``.
        max_requests: replay only the first this many requests.
        time_scale: multiply the request times by this (``0.1``: ten times faster).
        concurrency: requests in flight at most; with 1 (the default) the requests go one after the
            other, later than their time when the one before is slow, so each request finds the cache as
            the requests before it left it. Above 1 the requests go at their times (open loop), as many in
            flight as arrive, up to ``concurrency``: the executions share the instance's processors as the
            plan's model says.
        warm: load every model the replay names first (one request each, one after the other, neither
            sent in the replay nor counted: the metrics are read from after them), so the replay measures
            the steady state rather than the first loads; the prediction starts from the same models
            loaded.
        endpoint_instance_type: the SageMaker instance type to deploy the endpoint with; default the row's.
            Needed when the plan was made for a type of your own (``InstanceType.this_machine()``: the
            machine the embedded stack runs on), which is then what the prediction assumes.
        max_models, memory_budget: the budget the endpoint applies, when it is not the instance type's
            memory for models and no ``stack=`` says it: a stack started with ``max_models=`` reached through
            its session (a notebook's ``notebook_stack(max_models=3)``). ``max_models`` counts models
            (every model then weighs the same), ``memory_budget`` is bytes.
        metrics_period: the period to read the metrics with; default: the stack's ``metrics_period``,
            else 60.
        metrics_timeout: seconds to wait for the endpoint's metrics to count every request sent.
        keep: leave the endpoint and the uploaded models in place.

    The endpoint has the row's instance count, and the stack routes among its instances by the rules the
    simulation follows (:mod:`mme_triton._multimodel`). Predictions are re-made by simulating the requests
    at the times they were actually sent, on that many instances of the budget the endpoint applies; the
    plan's row itself is for the whole traffic and is not compared.

    Raises:
        ValueError: no row to validate, a model profile without a model directory, no traffic, a stack
            and no session missing together.
    """
    from mme_triton.capacity.plan import CapacityPlan

    if not isinstance(plan, CapacityPlan):
        raise TypeError(f"expected a CapacityPlan, got {type(plan).__name__}")
    chosen = chosen_row = _choose_row(plan, row)
    traffic = traffic if traffic is not None else plan.requests
    if traffic is None:
        raise ValueError("the plan does not carry its traffic (read from JSON?): give traffic=")
    if not time_scale > 0:
        raise ValueError(f"time_scale must be > 0, got {time_scale!r}")
    profiles = [ModelProfile.from_dict(model) for model in plan.models]
    missing = [p.name for p in profiles if p.name not in models]
    if missing:
        raise ValueError(f"give the model directory of {missing} in models= (profile name -> directory)")
    kind = plan.instance_type(chosen.instance_type)
    deployed_type = endpoint_instance_type or chosen.instance_type
    try:
        as_instance_type(deployed_type)
    except ValueError:
        raise ValueError(
            f"the plan's instance type {chosen.instance_type!r} is not one SageMaker deploys: give "
            "endpoint_instance_type= (e.g. 'ml.m5.xlarge') to deploy the replay's endpoint with"
        ) from None
    notes: list[str] = []
    rows = traffic.rows()
    if max_requests is not None:
        rows = rows[:max_requests]
    if not rows:
        raise ValueError("no request to replay")
    sim_kind, sim_profiles, budget, budget_notes = _predict.budget(
        kind, profiles, stack=stack, max_models=max_models, memory_budget=memory_budget
    )
    notes += budget_notes
    by_name = expand(profiles)
    sources = {name: models[profile.name] for name, profile in by_name.items()}
    components = hosting = None
    warmed = sorted({name for _, name in rows}) if warm else []
    if chosen.hosting == "inference-components":
        components, hosting = _components(plan, profiles, traffic, kind, chosen.instance_count, by_name)
        warmed = []  # a component's copies are loaded before it is in service
        notes.append(
            f"hosted as inference components: {sum(hosting['copies'].values())} copies placed as planned; "
            "hit ratio, loads and unloads play no part"
        )
    done: Replay = replay(
        rows,
        sources,
        {name: profile.name for name, profile in by_name.items()},
        instance_type=deployed_type,
        instance_count=chosen.instance_count,
        warm=warmed,
        components=components,
        routing=plan.routing if components is not None else None,
        stack=stack,
        boto3_session=boto3_session,
        role=role,
        model_data_url=model_data_url,
        endpoint_name=endpoint_name or f"validate-{chosen.instance_type.replace('.', '-')}",
        time_scale=time_scale,
        concurrency=concurrency,
        metrics_period=metrics_period,
        metrics_timeout=metrics_timeout,
        keep=keep,
    )
    if concurrency == 1:
        scheduled = [(moment - rows[0][0]) * time_scale for moment, _ in rows]
    else:  # open loop: the requests as they were sent
        scheduled = list(done.sent_s)

    def predict(chosen: list[ModelProfile]) -> dict[str, Any]:
        result = _predict.serve(
            chosen,
            scheduled,
            done.targets,
            sim_kind,
            closed=concurrency == 1,
            warm=warmed,
            instances=chosen_row.instance_count,
            hosting=hosting,
        )
        return {**_predict.summary(result), "processor_utilization": _utilization(result, scheduled)}

    predicted = predict(sim_profiles)
    measured = {**done.metrics, "p50_s": done.percentile(50), "p99_s": done.percentile(99)}
    if measured.get("model_latency_p99_ms") is not None:
        measured["model_latency_p99_s"] = measured["model_latency_p99_ms"] / 1000
    sequential = concurrency == 1
    calibrated_profiles = _predict.calibrated(sim_profiles, done.metrics, service=sequential)
    calibrated = None
    if calibrated_profiles is not None:
        calibrated = predict(calibrated_profiles)
    notes += _predict.timing_notes(sim_profiles, done.metrics, service=sequential)
    if not sequential:
        notes.append(
            "requests in flight together: the calibrated prediction takes the endpoint's load and unload "
            "times, not its ModelLatency (which holds the queueing and the shared processors the "
            "prediction adds itself)"
        )
    if done.failed:
        notes.append(f"{done.failed} requests failed on the endpoint: {done.first_error}")
    return Validation(
        instance_type=chosen.instance_type,
        instance_count=chosen.instance_count,
        endpoint_name=done.endpoint_name,
        requests=len(done.sent_s),
        failed=done.failed,
        time_scale=time_scale,
        budget=budget,
        comparisons=_compare(predicted, calibrated, measured),
        predicted=predicted,
        calibrated=calibrated,
        measured=measured,
        notes=tuple(notes),
        in_flight_max=done.in_flight_max,
        hosting=chosen.hosting,
    )


def _components(
    plan: CapacityPlan, profiles: list[ModelProfile], traffic: Traffic, kind: Any, count: int,
    by_name: Mapping[str, ModelProfile],
) -> tuple[dict[str, ComponentSpec], dict[str, Any]]:  # fmt: skip
    """Each model's component as the plan planned it (the copies of the whole traffic), and the hosting
    options its prediction takes."""
    planned = simulate(
        profiles, traffic, kind, count, seed=plan.seed, hosting="inference-components",
        routing=plan.routing, copy_utilization=plan.copy_utilization,
    )  # fmt: skip
    if planned.placement_failure is not None:
        raise ValueError(f"the row cannot be deployed as planned: {planned.placement_failure}")
    copies = dict(planned.copies or {})
    specs = {
        name: ComponentSpec(by_name[name].component_memory, by_name[name].component_cpus, copies[name])
        for name in copies
    }
    return specs, {"hosting": "inference-components", "routing": plan.routing, "copies": copies}
