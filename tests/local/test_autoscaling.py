"""Application Auto Scaling evaluated on the stack's metrics (mme_triton.local.aws.autoscaling), no Triton.

Each test registers an inference component of a control plane as a scalable target, puts the metric its
policies read straight into the plane's CloudWatch (PutMetricData, one datapoint per period), and runs one
evaluation at a chosen moment: the scaling a policy does follows from the datapoints by construction.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from mme_triton._inference_components import COPY_COUNT_DIMENSION, resource_id
from mme_triton.local.aws.autoscaling import AutoScaler, _step_adjustment

pytestmark = pytest.mark.moto

PERIOD = 60


@pytest.fixture
def scaled(plane: Any) -> Iterator[Any]:
    """A plane with an in-service component ``ic`` (1 copy) registered as a scalable target [0, 4]."""
    sm = plane.client("sagemaker")
    role = plane.execution_role()
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn=role,
        PrimaryContainer={"Image": "i", "ModelDataUrl": "s3://b/m.tar.gz"},
    )
    variant = {
        "VariantName": "AllTraffic",
        "InstanceType": "ml.m5.4xlarge",
        "InitialInstanceCount": 1,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2},
    }
    sm.create_endpoint_config(EndpointConfigName="e", ExecutionRoleArn=role, ProductionVariants=[variant])
    sm.create_endpoint(EndpointName="e", EndpointConfigName="e")
    wait(lambda: sm.describe_endpoint(EndpointName="e")["EndpointStatus"] == "InService")
    sm.create_inference_component(
        InferenceComponentName="ic",
        EndpointName="e",
        Specification={"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": 1},
    )
    plane.sm = sm
    wait(lambda: copies(plane) == 1)
    plane.scaling = plane.client("application-autoscaling")
    plane.cloudwatch = plane.client("cloudwatch")
    plane.scaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id("ic"),
        ScalableDimension=COPY_COUNT_DIMENSION,
        MinCapacity=0,
        MaxCapacity=4,
    )
    yield plane


def wait(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def copies(plane: Any) -> int | None:
    found = plane.sm.describe_inference_component(InferenceComponentName="ic")
    if found["InferenceComponentStatus"] != "InService":
        return None
    return int(found["RuntimeConfig"]["CurrentCopyCount"])


def settled_copies(plane: Any) -> int:
    wait(lambda: copies(plane) is not None)
    count = copies(plane)
    assert count is not None
    return count


def track(plane: Any, target: float, **config: Any) -> None:
    plane.scaling.put_scaling_policy(
        PolicyName="track",
        ServiceNamespace="sagemaker",
        ResourceId=resource_id("ic"),
        ScalableDimension=COPY_COUNT_DIMENSION,
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
            },
            "TargetValue": target,
            **config,
        },
    )


def put(plane: Any, metric: str, values: list[float], end: float) -> None:
    """One datapoint per period for ``values``, the last in the period that ends at ``end``."""
    data = [
        {
            "MetricName": metric,
            "Dimensions": [{"Name": "InferenceComponentName", "Value": "ic"}],
            "Timestamp": end - PERIOD * (len(values) - index),
            "Value": value,
            "Unit": "None",
        }
        for index, value in enumerate(values)
    ]
    plane.cloudwatch.put_metric_data(Namespace="AWS/SageMaker", MetricData=data)


def scaler(plane: Any, now: float) -> AutoScaler:
    return AutoScaler(plane.account_id, plane.region, period=PERIOD, clock=lambda: now)


def boundary(offset_periods: int = 1) -> float:
    """A period boundary ``offset_periods`` after now (the component served all the periods before it)."""
    return (time.time() // PERIOD + offset_periods) * PERIOD


# -- target tracking ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_copy", "expected"),
    [([10.0, 10.0, 10.0], 2), ([6.0, 6.0, 12.0], 3), ([30.0, 30.0, 30.0], 4)],
    ids=["double", "last-datapoint-sets-the-size", "capped-at-max"],
)
def test_autoscaling_target_tracking_scales_out_after_three_datapoints_above_target(
    scaled: Any, per_copy: list[float], expected: int
) -> None:
    """``ceil(copies x metric / target)`` once the last 3 datapoints are above the target, within the max."""
    track(scaled, 5.0)
    end = boundary(4)
    put(scaled, "InvocationsPerCopy", per_copy, end)
    assert scaler(scaled, end + 1).evaluate() == {"ic": expected}
    assert settled_copies(scaled) == expected


def test_autoscaling_target_tracking_waits_for_three_datapoints_and_the_cooldown(scaled: Any) -> None:
    track(scaled, 5.0, ScaleOutCooldown=600)
    end = boundary(4)
    put(scaled, "InvocationsPerCopy", [1.0, 10.0, 10.0], end)
    evaluator = scaler(scaled, end + 1)
    assert evaluator.evaluate() == {}  # two datapoints above the target of the last three
    put(scaled, "InvocationsPerCopy", [10.0], end + PERIOD)
    evaluator.clock = lambda: end + PERIOD + 1
    assert evaluator.evaluate() == {"ic": 2}
    settled_copies(scaled)
    put(scaled, "InvocationsPerCopy", [20.0], end + 2 * PERIOD)
    evaluator.clock = lambda: end + 2 * PERIOD + 1
    assert evaluator.evaluate() == {}  # within ScaleOutCooldown of the last scale-out


def test_autoscaling_target_tracking_scales_in_to_zero_after_fifteen_idle_periods(scaled: Any) -> None:
    """No request for 15 periods the component served: InvocationsPerCopy counts 0 and the component goes to
    its MinCapacity, 0."""
    track(scaled, 1.0, ScaleInCooldown=0)
    start = boundary(1)
    evaluator = scaler(scaled, start + 14 * PERIOD + 1)
    assert evaluator.evaluate() == {}  # 14 idle periods
    evaluator.clock = lambda: start + 15 * PERIOD + 1
    assert evaluator.evaluate() == {"ic": 0}
    assert settled_copies(scaled) == 0
    zero = scaled.sm.describe_endpoint(EndpointName="e")["ProductionVariants"][0]
    assert zero["CurrentInstanceCount"] == 0  # ManagedInstanceScaling MinInstanceCount 0


def test_autoscaling_target_tracking_scale_in_respects_disable_and_suspension(scaled: Any) -> None:
    track(scaled, 1.0, ScaleInCooldown=0, DisableScaleIn=True)
    idle = boundary(1) + 15 * PERIOD + 1
    assert scaler(scaled, idle).evaluate() == {}
    track(scaled, 1.0, ScaleInCooldown=0)
    scaled.scaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id("ic"),
        ScalableDimension=COPY_COUNT_DIMENSION,
        SuspendedState={"DynamicScalingInSuspended": True},
    )
    assert scaler(scaled, idle).evaluate() == {}


# -- step scaling fired by an alarm -------------------------------------------------------------------------


def wake(
    plane: Any, *, cooldown: int = 60, operator: str = "GreaterThanOrEqualToThreshold", threshold: float = 1.0
) -> str:
    """The scale-from-zero pair of AWS's guide: a step policy (+1 copy) and an alarm on
    NoCapacityInvocationFailures with the policy as its action."""
    policy = plane.scaling.put_scaling_policy(
        PolicyName="wake",
        ServiceNamespace="sagemaker",
        ResourceId=resource_id("ic"),
        ScalableDimension=COPY_COUNT_DIMENSION,
        PolicyType="StepScaling",
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity",
            "MetricAggregationType": "Maximum",
            "Cooldown": cooldown,
            "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
        },
    )
    plane.cloudwatch.put_metric_alarm(
        AlarmName="wake-ic",
        AlarmActions=[policy["PolicyARN"]],
        ComparisonOperator=operator,
        DatapointsToAlarm=1,
        Dimensions=[{"Name": "InferenceComponentName", "Value": "ic"}],
        EvaluationPeriods=1,
        MetricName="NoCapacityInvocationFailures",
        Namespace="AWS/SageMaker",
        Period=PERIOD,
        Statistic="Sum",
        Threshold=threshold,
    )
    return str(policy["PolicyARN"])


def alarm_state(plane: Any) -> str:
    return str(plane.cloudwatch.describe_alarms(AlarmNames=["wake-ic"])["MetricAlarms"][0]["StateValue"])


def test_autoscaling_a_failure_at_zero_copies_brings_a_copy_back(scaled: Any) -> None:
    scaled.sm.update_inference_component_runtime_config(
        InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0}
    )
    assert settled_copies(scaled) == 0
    wake(scaled)
    end = boundary(2)
    evaluator = scaler(scaled, end + 1)
    assert evaluator.evaluate() == {}
    assert alarm_state(scaled) == "INSUFFICIENT_DATA"
    put(scaled, "NoCapacityInvocationFailures", [1.0], end)
    assert evaluator.evaluate() == {"ic": 1}
    assert alarm_state(scaled) == "ALARM"
    assert settled_copies(scaled) == 1
    assert evaluator.evaluate() == {}  # still in ALARM, within the policy's Cooldown


def test_autoscaling_alarm_comparison_and_threshold_decide(scaled: Any) -> None:
    """AWS's CLI example uses GreaterThanThreshold 1: one failure in a period does not fire it, two do."""
    wake(scaled, operator="GreaterThanThreshold")
    end = boundary(2)
    put(scaled, "NoCapacityInvocationFailures", [1.0], end)
    assert scaler(scaled, end + 1).evaluate() == {}
    assert alarm_state(scaled) == "OK"
    put(scaled, "NoCapacityInvocationFailures", [1.0], end)
    assert scaler(scaled, end + 1).evaluate() == {"ic": 2}


def test_autoscaling_largest_capacity_wins_within_the_target_range(scaled: Any) -> None:
    """A step policy asking for +1 and target tracking asking for 4 at once: Application Auto Scaling takes
    the largest."""
    wake(scaled)
    track(scaled, 1.0)
    end = boundary(4)
    put(scaled, "InvocationsPerCopy", [9.0, 9.0, 9.0], end)
    put(scaled, "NoCapacityInvocationFailures", [1.0], end)
    assert scaler(scaled, end + 1).evaluate() == {"ic": 4}


@pytest.mark.parametrize(
    ("steps", "breach", "adjustment"),
    [
        ([{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}], 0.0, 1.0),
        ([{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}], -0.5, None),
        (
            [
                {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 10, "ScalingAdjustment": 1},
                {"MetricIntervalLowerBound": 10, "ScalingAdjustment": 3},
            ],
            10.0,
            3.0,
        ),
        ([{"MetricIntervalUpperBound": 0, "ScalingAdjustment": -1}], 0.0, None),
        ([{"MetricIntervalUpperBound": 0, "ScalingAdjustment": -1}], -2.0, -1.0),
    ],
    ids=["at-threshold", "below", "upper-step", "upper-bound-exclusive-above", "below-threshold-step"],
)
def test_autoscaling_step_adjustment_bounds(
    steps: list[dict[str, Any]], breach: float, adjustment: float | None
) -> None:
    """The bounds as Application Auto Scaling reads them: above the threshold the lower bound is inclusive
    and the upper exclusive; below it the other way round."""
    assert _step_adjustment(steps, breach) == adjustment
