"""Autoscaling of an inference component on the embedded stack, as AWS's "Scale an endpoint to zero
instances" sets it up: a target tracking policy on ``SageMakerInferenceComponentInvocationsPerCopy``, and a
step scaling policy fired by an alarm on ``NoCapacityInvocationFailures``.

Its own stack (``metrics_period=1``: the policies are evaluated every second on one-second datapoints, as
AWS evaluates them every minute), the guide's calls in plain boto3 with short cooldowns and alarm period.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from components_helpers import component_endpoint, create_component, upload_model, wait_for

from mme_triton import encode_request
from mme_triton._inference_components import COPY_COUNT_DIMENSION, INVOCATIONS_PER_COPY, resource_id

pytestmark = [pytest.mark.triton, pytest.mark.moto]


@pytest.fixture(scope="module")
def scaling_stack(tmp_path_factory: pytest.TempPathFactory, model_writers: dict[str, Any]) -> Iterator[Any]:
    """A stack whose metrics and scaling policies run every second (the shared ``stack`` fixture's every
    minute would make a test wait minutes), with the ``scale`` model as a single-model SageMaker model."""
    from mme_triton.local import LocalStack

    repository = tmp_path_factory.mktemp("scaling_models")
    model_writers["scale"](repository)
    with LocalStack(metrics_period=1) as running:
        upload_model(running, repository / "scale", tmp_path_factory.mktemp("scaling_out"), "ic/scale.tar.gz")
        yield running


def copies(stack: Any, name: str) -> int:
    found = stack.client("sagemaker").describe_inference_component(InferenceComponentName=name)
    return (
        int(found["RuntimeConfig"]["CurrentCopyCount"])
        if found["InferenceComponentStatus"] == "InService"
        else -1
    )


def test_stack_component_scales_out_in_to_zero_and_back_on_the_next_failure(scaling_stack: Any) -> None:
    stack = scaling_stack
    endpoint = component_endpoint(stack, "zero-ep", managed={"MinInstanceCount": 0, "MaxInstanceCount": 2})
    create_component(stack, "zero-ic", endpoint, "scale-model")
    scaling = stack.client("application-autoscaling")
    cloudwatch = stack.client("cloudwatch")
    target = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": resource_id("zero-ic"),
        "ScalableDimension": COPY_COUNT_DIMENSION,
    }
    scaling.register_scalable_target(**target, MinCapacity=0, MaxCapacity=3)
    scaling.put_scaling_policy(
        PolicyName="track",
        PolicyType="TargetTrackingScaling",
        **target,
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {"PredefinedMetricType": INVOCATIONS_PER_COPY},
            "TargetValue": 2.0,
            "ScaleInCooldown": 1,
            "ScaleOutCooldown": 1,
        },
    )
    step = scaling.put_scaling_policy(
        PolicyName="wake",
        PolicyType="StepScaling",
        **target,
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity",
            "MetricAggregationType": "Maximum",
            "Cooldown": 5,
            "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
        },
    )
    cloudwatch.put_metric_alarm(
        AlarmName="wake-zero-ic",
        AlarmActions=[step["PolicyARN"]],
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        DatapointsToAlarm=1,
        Dimensions=[{"Name": "InferenceComponentName", "Value": "zero-ic"}],
        EvaluationPeriods=1,
        MetricName="NoCapacityInvocationFailures",
        Namespace="AWS/SageMaker",
        Period=10,
        Statistic="Sum",
        Threshold=1,
    )
    runtime = stack.client("sagemaker-runtime")
    body, content_type = encode_request({"INPUT0": np.ones((1, 4), np.float32)})

    def call() -> None:
        runtime.invoke_endpoint(
            EndpointName=endpoint,
            InferenceComponentName="zero-ic",
            Body=bytes(body),
            ContentType=content_type,
        )

    # scale out: about 8 requests a second on one copy, 4 times the target per copy
    stop = threading.Event()
    failures: list[BaseException] = []

    def load() -> None:
        while not stop.is_set():
            try:
                call()
            except BaseException as exc:  # reported below
                failures.append(exc)
            time.sleep(0.12)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        wait_for(lambda: copies(stack, "zero-ic") >= 2, timeout=60)
    finally:
        stop.set()
        loader.join()
    assert failures == []
    # scale in: 15 idle datapoints, then to MinCapacity 0, and the endpoint's instances to MinInstanceCount 0
    wait_for(lambda: copies(stack, "zero-ic") == 0, timeout=90)
    variant = stack.client("sagemaker").describe_endpoint(EndpointName=endpoint)["ProductionVariants"][0]
    assert variant["CurrentInstanceCount"] == 0
    # back from zero: the first request fails, the alarm fires the step policy, a copy comes back
    with pytest.raises(runtime.exceptions.ValidationError, match="has no capacity"):
        call()
    wait_for(lambda: copies(stack, "zero-ic") >= 1, timeout=60)
    call()
