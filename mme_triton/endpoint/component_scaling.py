"""Application Auto Scaling of an inference component's copies, down to zero and back, as AWS documents it.

A component (``inference-component/<name>``, dimension ``sagemaker:inference-component:DesiredCopyCount``)
is registered as a scalable target with a ``TargetTrackingScaling`` policy on the predefined metric
``SageMakerInferenceComponentInvocationsPerCopy``. With ``min_copies=0`` target tracking takes the
component to zero copies when it is idle, but cannot bring it back: with no copy there is no invocation
per copy to track. So, as "Scale an endpoint to zero instances" in SageMaker's developer guide says, a
``StepScaling`` policy (add one copy) is put too, and a CloudWatch alarm on ``NoCapacityInvocationFailures``
(``AWS/SageMaker``, dimension ``InferenceComponentName``), which SageMaker emits for a request no copy could
take, sets it off. The alarm fires on the first such request of a minute (``Sum >= 1``; the guide's CLI
example writes ``GreaterThanThreshold`` with a threshold of 1, which waits for a second one).

Every piece is named after the component (:func:`tracking_policy_name`, :func:`from_zero_policy_name`,
:func:`alarm_name`), so a re-run finds what an earlier one made; :func:`remove_component_scaling` removes it
all and is idempotent. Reads are retried while the services throttle or fail, until the ``deadline``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mme_triton._inference_components import (
    COMPONENT_METRIC_DIMENSIONS,
    COPY_COUNT_DIMENSION,
    INVOCATIONS_PER_COPY,
    NO_CAPACITY_METRIC,
    resource_id,
)
from mme_triton._sagemaker import METRICS_NAMESPACE, error_code
from mme_triton.endpoint._retry import Deadline, read
from mme_triton.endpoint.autoscaling import remove_registration, scalable_target, scaling_policies

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_application_autoscaling.type_defs import (
        TargetTrackingScalingPolicyConfigurationTypeDef,
    )

__all__ = [
    "ComponentAutoScaling",
    "alarm_name",
    "apply_component_scaling",
    "current_component_scaling",
    "from_zero_policy_name",
    "remove_component_scaling",
    "tracking_policy_name",
]

logger = logging.getLogger(__name__)

_NAMESPACE: Final = "sagemaker"
#: The step policy's cooldown, in seconds (the guide's value).
_FROM_ZERO_COOLDOWN: Final = 60


@dataclass(frozen=True)
class ComponentAutoScaling:
    """Target-tracking autoscaling of an inference component's copies on invocations per copy (per minute),
    to zero copies and back when ``min_copies`` is 0.

    Attributes:
        min_copies: fewest copies (>= 0; 0 scales the component to zero when idle, and a request then
            brings one copy back: the request itself fails with ``NoCapacityError``, the copy takes
            minutes to start on AWS).
        max_copies: most copies (>= 1 and >= min_copies).
        target_invocations_per_copy: the ``InvocationsPerCopy`` value (per minute) to hold.
        scale_in_cooldown: seconds after a scale-in before the next one.
        scale_out_cooldown: seconds after a scale-out before the next one.
        alarm_period: seconds of the ``NoCapacityInvocationFailures`` alarm's period (with
            ``min_copies=0``): 60 (or a multiple of it) for the metric SageMaker publishes every minute,
            10 or 30 only when the endpoint publishes it more often (enhanced metrics).

    Raises:
        ValueError, TypeError: a value out of range.

    Example::

        ComponentAutoScaling(min_copies=0, max_copies=4, target_invocations_per_copy=100)
    """

    min_copies: int
    max_copies: int
    target_invocations_per_copy: float
    scale_in_cooldown: int = 300
    scale_out_cooldown: int = 60
    alarm_period: int = 60

    def __post_init__(self) -> None:
        for name in ("min_copies", "max_copies", "scale_in_cooldown", "scale_out_cooldown", "alarm_period"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"ComponentAutoScaling.{name} must be an int, got {value!r}")
        if self.min_copies < 0:
            raise ValueError(f"ComponentAutoScaling.min_copies must be >= 0, got {self.min_copies}")
        if self.max_copies < max(1, self.min_copies):
            raise ValueError(
                f"ComponentAutoScaling.max_copies ({self.max_copies}) must be >= 1 and >= "
                f"min_copies ({self.min_copies})"
            )
        target = self.target_invocations_per_copy
        if isinstance(target, bool) or not isinstance(target, int | float) or not math.isfinite(target):
            raise TypeError(
                f"ComponentAutoScaling.target_invocations_per_copy must be a number, got {target!r}"
            )
        if target <= 0:
            raise ValueError(f"ComponentAutoScaling.target_invocations_per_copy must be > 0, got {target}")
        if self.scale_in_cooldown < 0 or self.scale_out_cooldown < 0:
            raise ValueError("ComponentAutoScaling cooldowns must be >= 0 seconds")
        if self.alarm_period not in (10, 30) and (self.alarm_period < 60 or self.alarm_period % 60):
            raise ValueError(
                f"ComponentAutoScaling.alarm_period must be 10, 30 or a multiple of 60 seconds (CloudWatch's "
                f"alarm periods), got {self.alarm_period}"
            )

    @property
    def scales_to_zero(self) -> bool:
        """Whether the component may go to zero copies (and has the alarm that brings it back)."""
        return self.min_copies == 0

    def __str__(self) -> str:
        zero = ", back from zero on NoCapacityInvocationFailures" if self.scales_to_zero else ""
        return (
            f"{self.min_copies}-{self.max_copies} copies, target {self.target_invocations_per_copy:g} "
            f"invocations/copy/min{zero}"
        )


def tracking_policy_name(component: str) -> str:
    """The target-tracking policy this library puts on a component."""
    return f"mme-triton-{component}-invocations-per-copy"


def from_zero_policy_name(component: str) -> str:
    """The step-scaling policy that adds a copy when the component has none."""
    return f"mme-triton-{component}-from-zero"


def alarm_name(component: str) -> str:
    """The CloudWatch alarm on the component's ``NoCapacityInvocationFailures``."""
    return f"mme-triton-{component}-no-capacity"


def _common(component: str) -> dict[str, Any]:
    return {
        "ServiceNamespace": _NAMESPACE,
        "ResourceId": resource_id(component),
        "ScalableDimension": COPY_COUNT_DIMENSION,
    }


def _alarm(cloudwatch: Any, component: str, deadline: Deadline) -> dict[str, Any] | None:
    alarms = read(
        cloudwatch.describe_alarms,
        deadline=deadline,
        what=f"DescribeAlarms({alarm_name(component)})",
        AlarmNames=[alarm_name(component)],
    ).get("MetricAlarms", [])
    return next((dict(a) for a in alarms if a.get("AlarmName") == alarm_name(component)), None)


def current_component_scaling(
    client: ApplicationAutoScalingClient,
    cloudwatch: Any,
    component: str,
    *,
    deadline: Deadline,
) -> tuple[ComponentAutoScaling | None, bool]:
    """(the :class:`ComponentAutoScaling` this library registered for ``component``, whether a scalable
    target exists at all). A registration that lacks a piece (the from-zero policy or its alarm when
    ``MinCapacity`` is 0) reads as None, so that applying it again completes it."""
    rid = resource_id(component)
    target = scalable_target(client, rid, deadline=deadline, dimension=COPY_COUNT_DIMENSION)
    if target is None:
        return None, False
    names = [tracking_policy_name(component), from_zero_policy_name(component)]
    policies = {
        p["PolicyName"]: p
        for p in scaling_policies(client, rid, deadline=deadline, names=names, dimension=COPY_COUNT_DIMENSION)
    }
    tracking = policies.get(tracking_policy_name(component))
    if tracking is None:
        return None, True
    config = tracking.get("TargetTrackingScalingPolicyConfiguration", {})
    try:
        scaling = ComponentAutoScaling(
            min_copies=int(target["MinCapacity"]),
            max_copies=int(target["MaxCapacity"]),
            target_invocations_per_copy=float(config["TargetValue"]),
            scale_in_cooldown=int(config.get("ScaleInCooldown", 300)),
            scale_out_cooldown=int(config.get("ScaleOutCooldown", 60)),
        )
    except (KeyError, TypeError, ValueError):
        return None, True
    from_zero = from_zero_policy_name(component) in policies
    if scaling.scales_to_zero != from_zero:
        return None, True
    if from_zero:
        alarm = _alarm(cloudwatch, component, deadline)
        if alarm is None:
            return None, True
        scaling = dataclasses.replace(scaling, alarm_period=int(alarm.get("Period", 60)))
    return scaling, True


def _acting(scaling: ComponentAutoScaling) -> ComponentAutoScaling:
    """``scaling`` as it acts: the alarm's period matters only for a component that scales to zero."""
    return scaling if scaling.scales_to_zero else dataclasses.replace(scaling, alarm_period=60)


def apply_component_scaling(
    client: ApplicationAutoScalingClient,
    cloudwatch: Any,
    component: str,
    scaling: ComponentAutoScaling,
    *,
    deadline: Deadline,
) -> bool:
    """Register the component, put the target-tracking policy and, for ``min_copies=0``, the step policy
    and its alarm (or remove those two when the component no longer scales to zero); return False when all
    of it was in place already.

    When a policy or the alarm cannot be put, a scalable target this call registered is deregistered again
    (with whatever was put on it) and the error is raised.
    """
    current, target_existed = current_component_scaling(client, cloudwatch, component, deadline=deadline)
    if current is not None and _acting(current) == _acting(scaling):
        return False
    common = _common(component)
    client.register_scalable_target(**common, MinCapacity=scaling.min_copies, MaxCapacity=scaling.max_copies)
    tracking: TargetTrackingScalingPolicyConfigurationTypeDef = {
        "TargetValue": float(scaling.target_invocations_per_copy),
        "PredefinedMetricSpecification": {"PredefinedMetricType": INVOCATIONS_PER_COPY},
        "ScaleInCooldown": scaling.scale_in_cooldown,
        "ScaleOutCooldown": scaling.scale_out_cooldown,
    }
    try:
        client.put_scaling_policy(
            PolicyName=tracking_policy_name(component),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration=tracking,
            **common,
        )
        if scaling.scales_to_zero:
            _put_from_zero(client, cloudwatch, component, scaling.alarm_period)
        else:
            _remove_from_zero(client, cloudwatch, component)
    except BaseException:
        if not target_existed:
            try:
                _delete_alarm(cloudwatch, component)
                remove_registration(
                    client, resource_id(component), deadline=deadline, dimension=COPY_COUNT_DIMENSION
                )
            except Exception as exc:
                logger.error("could not undo the autoscaling of %s after a failure: %s", component, exc)
        raise
    logger.info("autoscaling on %s: %s", resource_id(component), scaling)
    return True


def _put_from_zero(
    client: ApplicationAutoScalingClient, cloudwatch: Any, component: str, period: int
) -> None:
    answer = client.put_scaling_policy(
        PolicyName=from_zero_policy_name(component),
        PolicyType="StepScaling",
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity",
            "MetricAggregationType": "Maximum",
            "Cooldown": _FROM_ZERO_COOLDOWN,
            "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}],
        },
        **_common(component),
    )
    cloudwatch.put_metric_alarm(
        AlarmName=alarm_name(component),
        AlarmDescription=(
            f"a request found no copy of inference component {component}: add one (mme-triton, "
            "scale from zero)"
        ),
        AlarmActions=[answer["PolicyARN"]],
        Namespace=METRICS_NAMESPACE,
        MetricName=NO_CAPACITY_METRIC,
        Dimensions=[{"Name": COMPONENT_METRIC_DIMENSIONS[0], "Value": component}],
        Statistic="Sum",
        Period=period,
        EvaluationPeriods=1,
        DatapointsToAlarm=1,
        Threshold=1.0,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData="notBreaching",
    )


def _not_found(exc: Exception) -> bool:
    # Application Auto Scaling answers a policy that is not there with a ValidationException ("No scaling
    # policy found for service namespace ...")
    code = error_code(exc)
    return code in ("ObjectNotFoundException", "ResourceNotFoundException", "ValidationException")


def _delete_alarm(cloudwatch: Any, component: str) -> None:
    # DeleteAlarms of an alarm that does not exist succeeds (CloudWatch's documented behaviour)
    cloudwatch.delete_alarms(AlarmNames=[alarm_name(component)])


def _remove_from_zero(client: ApplicationAutoScalingClient, cloudwatch: Any, component: str) -> None:
    from botocore.exceptions import ClientError

    _delete_alarm(cloudwatch, component)
    try:
        client.delete_scaling_policy(PolicyName=from_zero_policy_name(component), **_common(component))
    except ClientError as exc:
        if not _not_found(exc):
            raise


def remove_component_scaling(
    client: ApplicationAutoScalingClient,
    cloudwatch: Any,
    component: str,
    *,
    deadline: Deadline,
    only_ours: bool = False,
) -> list[str]:
    """Delete the component's alarm and scaling policies and deregister it; return what was removed
    (``"alarm:<name>"``, ``"policy:<name>"``, ``"target:<resource id>"``; idempotent).

    With ``only_ours``, a registration without this library's target-tracking policy (someone else's) is
    left alone.
    """
    rid = resource_id(component)
    if only_ours:
        ours = scaling_policies(
            client,
            rid,
            deadline=deadline,
            names=[tracking_policy_name(component)],
            dimension=COPY_COUNT_DIMENSION,
        )
        if not ours:
            return []
    removed: list[str] = []
    if _alarm(cloudwatch, component, deadline) is not None:
        _delete_alarm(cloudwatch, component)
        removed.append(f"alarm:{alarm_name(component)}")
    removed += remove_registration(client, rid, deadline=deadline, dimension=COPY_COUNT_DIMENSION)
    return removed
