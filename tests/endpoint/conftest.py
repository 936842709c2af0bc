"""Fixtures: a ControlPlane (moto's server plus what moto lacks) and real boto3 clients on it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


@pytest.fixture
def plane() -> Iterator[Any]:
    from mme_triton.local.controlplane import ControlPlane

    with ControlPlane(transition_delay=0.05) as control_plane:
        yield control_plane


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
