"""Application Auto Scaling for an endpoint variant: target tracking on invocations per instance.

The variant (``endpoint/<name>/variant/<variant>``, dimension ``sagemaker:variant:DesiredInstanceCount``)
is registered as a scalable target with a ``TargetTrackingScaling`` policy on the predefined metric
``SageMakerVariantInvocationsPerInstance``. :func:`remove_autoscaling` undoes both and is idempotent;
:func:`read_registration` and :func:`restore_registration` take a variant's whole registration (every
policy, the user's own too) away and put it back, around an update that may be refused.
Reads are retried while Application Auto Scaling throttles or fails, until the ``deadline`` given (five
minutes by default); a registration :func:`apply_autoscaling` makes is removed again when its policy
cannot be put, so no scalable target is left without a policy.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from mme_triton._sagemaker import error_code
from mme_triton.endpoint._retry import Deadline, read

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_application_autoscaling.type_defs import (
        ScalableTargetTypeDef,
        ScalingPolicyTypeDef,
        TargetTrackingScalingPolicyConfigurationTypeDef,
    )

__all__ = [
    "SCALABLE_DIMENSION",
    "AutoScaling",
    "Registration",
    "apply_autoscaling",
    "current_autoscaling",
    "policy_name",
    "read_registration",
    "remove_autoscaling",
    "remove_registration",
    "resource_id",
    "restore_registration",
    "scalable_target",
    "scaling_policies",
]

logger = logging.getLogger(__name__)

SCALABLE_DIMENSION: Final = "sagemaker:variant:DesiredInstanceCount"
_NAMESPACE: Final = "sagemaker"
_METRIC: Final = "SageMakerVariantInvocationsPerInstance"
_DEFAULT_READ_SECONDS: Final = 300.0


def _deadline(deadline: Deadline | None) -> Deadline:
    return deadline if deadline is not None else Deadline(_DEFAULT_READ_SECONDS)


@dataclass(frozen=True)
class AutoScaling:
    """Target-tracking autoscaling of the endpoint's variant on invocations per instance (per minute).

    Attributes:
        min_capacity: fewest instances (>= 1).
        max_capacity: most instances (>= min_capacity).
        target_invocations_per_instance: the InvocationsPerInstance value (per minute) to hold.
        scale_in_cooldown: seconds after a scale-in before the next one.
        scale_out_cooldown: seconds after a scale-out before the next one.

    Raises:
        ValueError: a value out of range.

    Example::

        AutoScaling(min_capacity=1, max_capacity=4, target_invocations_per_instance=200)
    """

    min_capacity: int
    max_capacity: int
    target_invocations_per_instance: float
    scale_in_cooldown: int = 300
    scale_out_cooldown: int = 60

    def __post_init__(self) -> None:
        for name in ("min_capacity", "max_capacity", "scale_in_cooldown", "scale_out_cooldown"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"AutoScaling.{name} must be an int, got {value!r}")
        if self.min_capacity < 1:
            raise ValueError(f"AutoScaling.min_capacity must be >= 1, got {self.min_capacity}")
        if self.max_capacity < self.min_capacity:
            raise ValueError(
                f"AutoScaling.max_capacity ({self.max_capacity}) must be >= "
                f"min_capacity ({self.min_capacity})"
            )
        target = self.target_invocations_per_instance
        if isinstance(target, bool) or not isinstance(target, int | float) or not math.isfinite(target):
            raise TypeError(f"AutoScaling.target_invocations_per_instance must be a number, got {target!r}")
        if target <= 0:
            raise ValueError(f"AutoScaling.target_invocations_per_instance must be > 0, got {target}")
        if self.scale_in_cooldown < 0 or self.scale_out_cooldown < 0:
            raise ValueError("AutoScaling cooldowns must be >= 0 seconds")


def resource_id(endpoint_name: str, variant_name: str) -> str:
    """Application Auto Scaling's ResourceId of an endpoint variant."""
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


def policy_name(endpoint_name: str, variant_name: str) -> str:
    """The name of the target-tracking policy this library puts on a variant."""
    return f"mme-triton-{endpoint_name}-{variant_name}-invocations"


def _policy_configuration(scaling: AutoScaling) -> TargetTrackingScalingPolicyConfigurationTypeDef:
    return {
        "TargetValue": float(scaling.target_invocations_per_instance),
        "PredefinedMetricSpecification": {"PredefinedMetricType": _METRIC},
        "ScaleInCooldown": scaling.scale_in_cooldown,
        "ScaleOutCooldown": scaling.scale_out_cooldown,
    }


def current_autoscaling(
    client: ApplicationAutoScalingClient,
    endpoint_name: str,
    variant_name: str,
    *,
    deadline: Deadline | None = None,
) -> AutoScaling | None:
    """The :class:`AutoScaling` registered for the variant by this library, or None."""
    return _current(client, endpoint_name, variant_name, _deadline(deadline))[0]


def scalable_target(
    client: ApplicationAutoScalingClient,
    rid: str,
    *,
    deadline: Deadline,
    dimension: str = SCALABLE_DIMENSION,
) -> ScalableTargetTypeDef | None:
    """The scalable target ``rid`` (a variant's resource id, or with ``dimension`` another SageMaker
    resource's), or None; retried until ``deadline``."""
    targets = read(
        client.describe_scalable_targets,
        deadline=deadline,
        what=f"DescribeScalableTargets({rid})",
        ServiceNamespace=_NAMESPACE,
        ResourceIds=[rid],
        ScalableDimension=dimension,
    ).get("ScalableTargets", [])
    return next((t for t in targets if t["ResourceId"] == rid), None)


def scaling_policies(
    client: ApplicationAutoScalingClient,
    rid: str,
    *,
    deadline: Deadline,
    names: Sequence[str] | None = None,
    dimension: str = SCALABLE_DIMENSION,
) -> list[ScalingPolicyTypeDef]:
    """The scaling policies of the variant ``rid`` (or with ``dimension`` of another SageMaker resource;
    only ``names`` when given), retried until ``deadline``."""
    filters: dict[str, Any] = {"PolicyNames": list(names)} if names is not None else {}
    policies = read(
        client.describe_scaling_policies,
        deadline=deadline,
        what=f"DescribeScalingPolicies({rid})",
        ServiceNamespace=_NAMESPACE,
        ResourceId=rid,
        ScalableDimension=dimension,
        **filters,
    ).get("ScalingPolicies", [])
    return [p for p in policies if p["ResourceId"] == rid]


def _current(
    client: ApplicationAutoScalingClient, endpoint_name: str, variant_name: str, deadline: Deadline
) -> tuple[AutoScaling | None, bool]:
    """(this library's registration as an AutoScaling or None, whether a scalable target exists)."""
    rid = resource_id(endpoint_name, variant_name)
    target = scalable_target(client, rid, deadline=deadline)
    if target is None:
        return None, False
    name = policy_name(endpoint_name, variant_name)
    policies = scaling_policies(client, rid, deadline=deadline, names=[name])
    policy = next((p for p in policies if p["PolicyName"] == name), None)
    if policy is None:
        return None, True
    config = policy.get("TargetTrackingScalingPolicyConfiguration", {})
    try:
        scaling = AutoScaling(
            min_capacity=int(target["MinCapacity"]),
            max_capacity=int(target["MaxCapacity"]),
            target_invocations_per_instance=float(config["TargetValue"]),
            scale_in_cooldown=int(config.get("ScaleInCooldown", 300)),
            scale_out_cooldown=int(config.get("ScaleOutCooldown", 60)),
        )
    except (KeyError, TypeError, ValueError):
        return None, True
    return scaling, True


def apply_autoscaling(
    client: ApplicationAutoScalingClient,
    endpoint_name: str,
    variant_name: str,
    scaling: AutoScaling,
    *,
    deadline: Deadline | None = None,
) -> bool:
    """Register the variant and put the target-tracking policy; return False when already in place.

    When the policy cannot be put, a scalable target this call registered is deregistered again (a
    target without a policy would pin the variant's capacity to its bounds and scale nothing) and the
    error is raised.
    """
    current, target_existed = _current(client, endpoint_name, variant_name, _deadline(deadline))
    if current == scaling:
        return False
    rid = resource_id(endpoint_name, variant_name)
    client.register_scalable_target(
        ServiceNamespace=_NAMESPACE,
        ResourceId=rid,
        ScalableDimension=SCALABLE_DIMENSION,
        MinCapacity=scaling.min_capacity,
        MaxCapacity=scaling.max_capacity,
    )
    try:
        client.put_scaling_policy(
            PolicyName=policy_name(endpoint_name, variant_name),
            ServiceNamespace=_NAMESPACE,
            ResourceId=rid,
            ScalableDimension=SCALABLE_DIMENSION,
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration=_policy_configuration(scaling),
        )
    except BaseException:
        if not target_existed:
            _undo_registration(client, rid)
        raise
    logger.info("autoscaling on %s: %s", rid, scaling)
    return True


def _undo_registration(client: ApplicationAutoScalingClient, rid: str) -> None:
    try:
        client.deregister_scalable_target(
            ServiceNamespace=_NAMESPACE, ResourceId=rid, ScalableDimension=SCALABLE_DIMENSION
        )
        logger.info("deregistered %s again: its scaling policy could not be put", rid)
    except Exception as exc:
        logger.error("could not deregister %s after its scaling policy failed: %s", rid, exc)


def _not_found(exc: Exception) -> bool:
    code = error_code(exc)
    return code in ("ObjectNotFoundException", "ValidationException", "ResourceNotFoundException")


def remove_autoscaling(
    client: ApplicationAutoScalingClient,
    endpoint_name: str,
    variant_name: str,
    *,
    deadline: Deadline | None = None,
) -> list[str]:
    """Delete the variant's scaling policies and deregister it; return what was removed (idempotent).

    Items are ``"policy:<name>"`` and ``"target:<resource id>"``; nothing registered gives ``[]``.
    """
    rid = resource_id(endpoint_name, variant_name)
    return remove_registration(client, rid, deadline=_deadline(deadline))


def remove_registration(
    client: ApplicationAutoScalingClient,
    rid: str,
    *,
    deadline: Deadline,
    dimension: str = SCALABLE_DIMENSION,
) -> list[str]:
    """Delete every scaling policy of the scalable target ``rid`` (on ``dimension``) and deregister it;
    return what was removed, as :func:`remove_autoscaling` does (idempotent)."""
    from botocore.exceptions import ClientError

    removed: list[str] = []
    common: dict[str, Any] = {
        "ServiceNamespace": _NAMESPACE,
        "ResourceId": rid,
        "ScalableDimension": dimension,
    }
    for policy in scaling_policies(client, rid, deadline=deadline, dimension=dimension):
        try:
            client.delete_scaling_policy(PolicyName=policy["PolicyName"], **common)
            removed.append(f"policy:{policy['PolicyName']}")
        except ClientError as exc:
            if not _not_found(exc):
                raise
    if scalable_target(client, rid, deadline=deadline, dimension=dimension) is not None:
        try:
            client.deregister_scalable_target(**common)
            removed.append(f"target:{rid}")
        except ClientError as exc:
            if not _not_found(exc):
                raise
    if removed:
        logger.info("removed autoscaling of %s: %s", rid, ", ".join(removed))
    return removed


# Inputs of RegisterScalableTarget, PutScalingPolicy and PutScheduledAction that their Describe* calls
# give back (the rest of an answer, such as ARNs, alarms and creation times, is output only).
_TARGET_KEYS = ("MinCapacity", "MaxCapacity", "SuspendedState")
_POLICY_KEYS = (
    "PolicyName",
    "PolicyType",
    "StepScalingPolicyConfiguration",
    "TargetTrackingScalingPolicyConfiguration",
    "PredictiveScalingPolicyConfiguration",
)
_SCHEDULED_KEYS = (
    "ScheduledActionName",
    "Schedule",
    "Timezone",
    "StartTime",
    "EndTime",
    "ScalableTargetAction",
)


@dataclass(frozen=True)
class Registration:
    """A variant's whole Application Auto Scaling registration, as read: its scalable target, every
    scaling policy (the user's own included) and scheduled action. :func:`restore_registration` puts it
    back after :func:`remove_autoscaling` took it away."""

    resource_id: str
    target: Mapping[str, Any]
    policies: tuple[Mapping[str, Any], ...] = ()
    scheduled_actions: tuple[Mapping[str, Any], ...] = ()

    def __str__(self) -> str:
        policies = ", ".join(str(p["PolicyName"]) for p in self.policies) or "no policy"
        return (
            f"{self.resource_id}: {self.target.get('MinCapacity')}-{self.target.get('MaxCapacity')} "
            f"instances, {policies}"
        )


def read_registration(
    client: ApplicationAutoScalingClient,
    endpoint_name: str,
    variant_name: str,
    *,
    deadline: Deadline | None = None,
) -> Registration | None:
    """The variant's registration (target, policies, scheduled actions), or None when it has none."""
    rid = resource_id(endpoint_name, variant_name)
    deadline = _deadline(deadline)
    target = scalable_target(client, rid, deadline=deadline)
    if target is None:
        return None
    policies = scaling_policies(client, rid, deadline=deadline)
    actions = read(
        client.describe_scheduled_actions,
        deadline=deadline,
        what=f"DescribeScheduledActions({rid})",
        ServiceNamespace=_NAMESPACE,
        ResourceId=rid,
        ScalableDimension=SCALABLE_DIMENSION,
    ).get("ScheduledActions", [])
    return Registration(
        resource_id=rid,
        target={key: target[key] for key in _TARGET_KEYS if key in target},  # type: ignore[literal-required]
        policies=tuple({k: p[k] for k in _POLICY_KEYS if k in p} for p in policies),  # type: ignore[literal-required]
        scheduled_actions=tuple(
            {k: a[k] for k in _SCHEDULED_KEYS if k in a}  # type: ignore[literal-required]
            for a in actions
            if a["ResourceId"] == rid
        ),
    )


def restore_registration(client: ApplicationAutoScalingClient, registration: Registration) -> None:
    """Register the target again and put back its policies and scheduled actions (each call an upsert,
    so a registration that was only partly removed is completed, not duplicated)."""
    common: dict[str, Any] = {
        "ServiceNamespace": _NAMESPACE,
        "ResourceId": registration.resource_id,
        "ScalableDimension": SCALABLE_DIMENSION,
    }
    client.register_scalable_target(**common, **registration.target)
    for policy in registration.policies:
        client.put_scaling_policy(**common, **policy)
    for action in registration.scheduled_actions:
        client.put_scheduled_action(**common, **action)
    logger.info("restored the autoscaling of %s", registration)
