"""Application Auto Scaling, evaluated: the stack scales inference components on its own metrics.

moto stores scalable targets, scaling policies and CloudWatch alarms but never acts on them. An
:class:`AutoScaler` runs beside the stack's metrics recorder and, every ``period`` seconds (the recorder's,
60 as on AWS, or as short as 1 for tests), evaluates for each component registered as a scalable target
(``inference-component/<name>``, ``sagemaker:inference-component:DesiredCopyCount``) of the plane's account:

- **target tracking** on ``SageMakerInferenceComponentInvocationsPerCopy`` (the ``InvocationsPerCopy`` Sum of
  each period): it scales out when the last 3 datapoints are above ``TargetValue`` and scales in when the last
  15 are below 90% of it (the datapoints and thresholds of the alarms Application Auto Scaling creates for a
  target tracking policy), to ``ceil(copies x metric / TargetValue)``; ``ScaleOutCooldown`` and
  ``ScaleInCooldown`` (300 s by default) after a scaling of the same direction (and scale-in after any),
  ``DisableScaleIn``, and the target's ``SuspendedState`` hold. A period with no request counts as 0 once the
  component has copies (SageMaker's component scales in to zero on an idle period): a component with no copy
  has no metric, and target tracking cannot bring it back;
- **step scaling** policies fired by a CloudWatch alarm (``PutMetricAlarm`` with the policy's ARN among its
  ``AlarmActions``): the alarm's ``Statistic`` over each of its last ``EvaluationPeriods`` complete periods
  of ``Period`` seconds, against its ``Threshold`` and ``ComparisonOperator``, ``DatapointsToAlarm`` of them
  breaching (``TreatMissingData``: a missing datapoint is not breaching, unless ``breaching``). The alarm's
  state (``DescribeAlarms``) follows. While it is in ``ALARM`` the policy runs at most once per ``Cooldown``
  (300 s by default): its ``StepAdjustments`` by the breach (the metric less the threshold), as
  ``ChangeInCapacity``, ``ExactCapacity`` or ``PercentChangeInCapacity``. With the alarm on
  ``NoCapacityInvocationFailures`` this brings a component scaled to zero back on the next request's
  failure, as AWS's "Scale an endpoint to zero instances" describes.

When several policies act at once the largest capacity wins (Application Auto Scaling's rule), within the
target's ``[MinCapacity, MaxCapacity]``; the change is ``UpdateInferenceComponentRuntimeConfig``'s (the
component goes ``Updating``; a component that is not ``InService`` waits).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mme_triton._inference_components import (
    COMPONENT_METRIC_DIMENSIONS,
    COPY_COUNT_DIMENSION,
    INVOCATIONS_PER_COPY,
    component_of_resource_id,
)
from mme_triton._sagemaker import METRICS_NAMESPACE

__all__ = ["AutoScaler"]

logger = logging.getLogger(__name__)

SCALE_OUT_DATAPOINTS = 3
SCALE_IN_DATAPOINTS = 15
SCALE_IN_RATIO = 0.9
DEFAULT_COOLDOWN = 300.0

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": lambda value, threshold: value >= threshold,
    "GreaterThanThreshold": lambda value, threshold: value > threshold,
    "LessThanThreshold": lambda value, threshold: value < threshold,
    "LessThanOrEqualToThreshold": lambda value, threshold: value <= threshold,
}


@dataclass
class _History:
    """When a component last scaled out and in, and when each step policy last ran."""

    scaled_out: float = -math.inf
    scaled_in: float = -math.inf
    policies: dict[str, float] = field(default_factory=dict)


class AutoScaler:
    """Evaluates the scaling policies of a control plane's account (see the module's docstring).

    Parameters:
        account_id, region: the plane's account and region.
        period: seconds between evaluations, and the period of target tracking's datapoints.
        clock: epoch seconds (``time.time``).
    """

    def __init__(
        self, account_id: str, region: str, *, period: float = 60.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.account_id = account_id
        self.region = region
        self.period = float(period)
        self.clock = clock
        self._history: dict[str, _History] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> AutoScaler:
        """Evaluate in a background thread, shortly after each period's metrics are published."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="mme-triton-autoscaling", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=30)

    def _run(self) -> None:
        # after the recorder's publication (its grace is 5% of a period, at most 1 s)
        offset = min(0.2 * self.period, 2.0)
        while True:
            now = self.clock()
            wait = (now // self.period + 1) * self.period + offset - now
            if self._stop.wait(max(wait, 0.01)):
                return
            try:
                self.evaluate()
            except Exception:
                logger.exception("evaluating the scaling policies failed")

    # -- one evaluation ------------------------------------------------------------------------------

    def evaluate(self) -> dict[str, int]:
        """Evaluate every policy now; returns the copy counts set (component -> copies)."""
        from moto.applicationautoscaling.models import applicationautoscaling_backends
        from moto.cloudwatch.models import cloudwatch_backends
        from moto.sagemaker.models import sagemaker_backends

        from mme_triton.local.aws._components import store_of
        from mme_triton.local.aws._moto_patches import metric_store

        now = self.clock()
        scaling = applicationautoscaling_backends[self.account_id][self.region]
        cloudwatch = cloudwatch_backends[self.account_id][self.region]
        store = metric_store(cloudwatch)
        components = store_of(sagemaker_backends[self.account_id][self.region])
        fired = self._alarms(cloudwatch, store, now)
        changed: dict[str, int] = {}
        for target in list(scaling.targets.get(COPY_COUNT_DIMENSION, {}).values()):
            name = component_of_resource_id(str(target.resource_id))
            if target.service_namespace != "sagemaker" or name is None:
                continue
            with components.lock:
                component = components.components.get(name)
                if component is None or component.status != "InService":
                    continue
                copies, since = component.desired, _epoch(component.last_modified_time)
            policies = [
                p
                for p in scaling.policies.values()
                if p.resource_id == target.resource_id and p.scalable_dimension == COPY_COUNT_DIMENSION
            ]
            wanted = self._decide(name, target, policies, copies, since, store, fired, now)
            if wanted is not None and wanted != copies:
                from mme_triton.local.aws._component_scaling import set_copies

                if set_copies(self.account_id, self.region, name, wanted):
                    history = self._history.setdefault(name, _History())
                    if wanted > copies:
                        history.scaled_out = now
                    else:
                        history.scaled_in = now
                    changed[name] = wanted
                    logger.info("autoscaling: inference component %s: %d -> %d copies", name, copies, wanted)
        return changed

    def _decide(
        self,
        name: str,
        target: Any,
        policies: list[Any],
        copies: int,
        since: float,
        store: Any,
        fired: dict[str, float],
        now: float,
    ) -> int | None:
        suspended = target.suspended_state or {}
        history = self._history.setdefault(name, _History())
        proposals: list[int] = []
        for policy in policies:
            if policy.policy_type == "TargetTrackingScaling":
                proposal = self._track(name, policy, copies, since, store, history, now)
            else:
                proposal = self._step(policy, copies, fired, history, now)
            if proposal is None:
                continue
            if proposal > copies and suspended.get("DynamicScalingOutSuspended"):
                continue
            if proposal < copies and suspended.get("DynamicScalingInSuspended"):
                continue
            proposals.append(proposal)
        if not proposals:
            return None
        low = int(target.min_capacity) if target.min_capacity is not None else 0
        high = int(target.max_capacity) if target.max_capacity is not None else max(proposals)
        return min(max(max(proposals), low), high)

    def _track(
        self, name: str, policy: Any, copies: int, since: float, store: Any, history: _History, now: float
    ) -> int | None:
        config = policy.target_tracking_scaling_policy_configuration or {}
        metric = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
        if metric != INVOCATIONS_PER_COPY or copies < 1:
            return None
        target_value = float(config.get("TargetValue") or 0)
        if target_value <= 0:
            return None
        period = int(self.period)
        end = int(now // period * period)
        start = end - SCALE_IN_DATAPOINTS * period
        key = _key(METRICS_NAMESPACE, "InvocationsPerCopy", COMPONENT_METRIC_DIMENSIONS, (name,))
        cells = store.aggregate(key, None, start, end, period)
        sums = {slot: cell.statistic("Sum") or 0.0 for unit in cells.values() for slot, cell in unit.items()}
        # a period with no request counts as 0 once the component's copies served all of it
        serving = math.ceil(since / period) * period
        points = [
            sums.get(slot, 0.0) for slot in range(start, end, period) if slot in sums or slot >= serving
        ]
        out_cooldown = float(config.get("ScaleOutCooldown", DEFAULT_COOLDOWN))
        in_cooldown = float(config.get("ScaleInCooldown", DEFAULT_COOLDOWN))
        recent = points[-SCALE_OUT_DATAPOINTS:]
        if len(recent) == SCALE_OUT_DATAPOINTS and all(p > target_value for p in recent):
            if now - history.scaled_out >= out_cooldown:
                return max(copies + 1, math.ceil(copies * recent[-1] / target_value))
            return None
        if config.get("DisableScaleIn") or len(points) < SCALE_IN_DATAPOINTS:
            return None
        idle = all(p < target_value * SCALE_IN_RATIO for p in points[-SCALE_IN_DATAPOINTS:])
        if idle and now - max(history.scaled_in, history.scaled_out) >= in_cooldown:
            return min(copies - 1, math.ceil(copies * points[-1] / target_value))
        return None

    def _step(
        self, policy: Any, copies: int, fired: dict[str, float], history: _History, now: float
    ) -> int | None:
        breach = fired.get(policy.policy_arn)
        if breach is None:
            return None
        config = policy.step_scaling_policy_configuration or {}
        cooldown = float(config.get("Cooldown", DEFAULT_COOLDOWN))
        if now - history.policies.get(policy.policy_arn, -math.inf) < cooldown:
            return None
        adjustment = _step_adjustment(config.get("StepAdjustments") or [], breach)
        if adjustment is None:
            return None
        history.policies[policy.policy_arn] = now
        kind = config.get("AdjustmentType", "ChangeInCapacity")
        if kind == "ExactCapacity":
            return int(adjustment)
        if kind == "PercentChangeInCapacity":
            change = copies * adjustment / 100.0
            change = math.floor(change) if change > 0 else math.ceil(change)
            minimum = int(config.get("MinAdjustmentMagnitude") or 0)
            if minimum and 0 < abs(change) < minimum:
                change = minimum if adjustment > 0 else -minimum
            return copies + int(change)
        return copies + int(adjustment)

    # -- alarms ----------------------------------------------------------------------------------------

    def _alarms(self, cloudwatch: Any, store: Any, now: float) -> dict[str, float]:
        """Evaluate the metric alarms; returns the breach (metric less threshold) of each action of an alarm
        in ``ALARM``."""
        fired: dict[str, float] = {}
        for alarm in list(cloudwatch.alarms.values()):
            if not alarm.metric_name or alarm.metric_data_queries:
                continue  # metric math alarms are not evaluated
            state, value = _alarm_state(alarm, store, now)
            if state != alarm.state_value:
                reason = f"Threshold Crossed: datapoint {value} evaluated by the embedded stack"
                alarm.update_state(reason, "{}", state)
            if state == "ALARM" and alarm.actions_enabled and value is not None:
                for action in alarm.alarm_actions or []:
                    fired[action] = value - float(alarm.threshold)
        return fired


def _alarm_state(alarm: Any, store: Any, now: float) -> tuple[str, float | None]:
    period = int(alarm.period or 60)
    evaluations = int(alarm.evaluation_periods or 1)
    needed = int(alarm.datapoints_to_alarm or evaluations)
    end = int(now // period * period)
    start = end - evaluations * period
    names = tuple(d.name for d in alarm.dimensions)
    values = tuple(d.value for d in alarm.dimensions)
    key = _key(alarm.namespace, alarm.metric_name, names, values)
    cells = store.aggregate(key, alarm.unit, start, end, period)
    statistic = alarm.statistic or "Average"
    points: dict[int, float] = {}
    for table in cells.values():
        for slot, cell in table.items():
            value = cell.statistic(statistic)
            if value is not None:
                points[slot] = value
    compare = _COMPARE.get(alarm.comparison_operator, _COMPARE["GreaterThanOrEqualToThreshold"])
    threshold = float(alarm.threshold)
    breaching = 0
    present = 0
    for slot in range(start, end, period):
        if slot in points:
            present += 1
            breaching += compare(points[slot], threshold)
        elif alarm.treat_missing_data == "breaching":
            breaching += 1
    latest = points[max(points)] if points else None
    if breaching >= needed:
        return "ALARM", latest
    if present == 0 and alarm.treat_missing_data not in ("breaching", "notBreaching"):
        return "INSUFFICIENT_DATA", None
    return "OK", latest


def _step_adjustment(steps: Iterable[dict[str, Any]], breach: float) -> float | None:
    """The ``ScalingAdjustment`` of the step whose interval holds ``breach`` (bounds relative to the
    threshold: the lower one inclusive above the threshold, the upper one inclusive below it)."""
    for step in steps:
        low, high = step.get("MetricIntervalLowerBound"), step.get("MetricIntervalUpperBound")
        low = -math.inf if low is None else float(low)
        high = math.inf if high is None else float(high)
        inside = low <= breach < high if breach >= 0 else low < breach <= high
        if inside:
            return float(step["ScalingAdjustment"])
    return None


def _key(namespace: str, name: str, names: Iterable[str], values: Iterable[str]) -> Any:
    from mme_triton.local.aws.cloudwatch import metric_key

    return metric_key(namespace, name, tuple(zip(names, values, strict=True)))


def _epoch(moment: Any) -> float:
    from datetime import timezone

    return float(moment.replace(tzinfo=timezone.utc).timestamp())
