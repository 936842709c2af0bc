"""Fixtures: a ControlPlane (moto's server plus what moto lacks) and real boto3 clients on it."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


@pytest.fixture
def session(plane: Any) -> Any:
    return plane.boto3_session()


@pytest.fixture
def sm(session: Any) -> Any:
    return session.client("sagemaker")


@pytest.fixture
def aas(session: Any) -> Any:
    return session.client("application-autoscaling")


@pytest.fixture
def s3(session: Any) -> Any:
    return session.client("s3")


@pytest.fixture
def model_data_url(s3: Any) -> str:
    bucket = f"models-{secrets.token_hex(4)}"
    s3.create_bucket(Bucket=bucket)
    return f"s3://{bucket}/mme/"


@pytest.fixture
def deploy_kwargs(session: Any) -> dict[str, Any]:
    return {
        "role": ROLE,
        "instance_type": "ml.g5.xlarge",
        "boto3_session": session,
        "poll_interval": 0.05,
        "timeout": 20,
    }


@pytest.fixture
def inventory(sm: Any, aas: Any) -> Any:
    """``inventory()``: every endpoint, config, model, scalable target and policy in the plane's account."""
    return lambda: _resources(sm, aas)


def _resources(sm: Any, aas: Any) -> dict[str, list[str]]:
    found = {
        "endpoints": sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]),
        "configs": sorted(c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]),
        "models": sorted(m["ModelName"] for m in sm.list_models()["Models"]),
    }
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    found["targets"] = sorted(t["ResourceId"] for t in targets)
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    found["policies"] = sorted(p["PolicyName"] for p in policies)
    return found


#: What ``inventory()`` returns for an account with nothing in it.
EMPTY: dict[str, list[str]] = {"endpoints": [], "configs": [], "models": [], "targets": [], "policies": []}


@pytest.fixture
def nothing() -> dict[str, list[str]]:
    return {k: list(v) for k, v in EMPTY.items()}


@pytest.fixture
def snapshot(sm: Any, aas: Any, s3: Any) -> Any:
    """``snapshot(bucket)``: the full description of every resource, with its tags, and the bucket's objects.

    Unlike ``inventory()`` it compares settings, tags, timestamps, scaling policies and object ETags, so
    an update, a re-tag or a re-upload shows up as a difference.
    """
    return lambda bucket: _snapshot(sm, aas, s3, bucket)


def _described(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "ResponseMetadata"}


def _snapshot(sm: Any, aas: Any, s3: Any, bucket: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for endpoint in sm.list_endpoints()["Endpoints"]:
        described = _described(sm.describe_endpoint(EndpointName=endpoint["EndpointName"]))
        described["Tags"] = sm.list_tags(ResourceArn=described["EndpointArn"])["Tags"]
        found[f"endpoint {endpoint['EndpointName']}"] = described
    for config in sm.list_endpoint_configs()["EndpointConfigs"]:
        described = _described(sm.describe_endpoint_config(EndpointConfigName=config["EndpointConfigName"]))
        described["Tags"] = sm.list_tags(ResourceArn=described["EndpointConfigArn"])["Tags"]
        found[f"config {config['EndpointConfigName']}"] = described
    for model in sm.list_models()["Models"]:
        described = _described(sm.describe_model(ModelName=model["ModelName"]))
        described["Tags"] = sm.list_tags(ResourceArn=described["ModelArn"])["Tags"]
        found[f"model {model['ModelName']}"] = described
    found["targets"] = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    found["policies"] = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    found["objects"] = [
        (item["Key"], item["ETag"], item["LastModified"])
        for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    ]
    return found
