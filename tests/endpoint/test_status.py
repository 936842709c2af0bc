"""``endpoint_status()`` on the embedded stack's control plane: state, variants, scaling and models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mme_triton.endpoint.autoscaling import AutoScaling
from mme_triton.endpoint.deploy import deploy_mme
from mme_triton.endpoint.status import endpoint_status
from mme_triton.errors import EndpointNotFoundError

pytestmark = pytest.mark.moto

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


def test_endpoint_status_reports_variant_scaling_and_models(
    model_data_url: str, deploy_kwargs: dict[str, Any], session: Any
) -> None:
    scaling = AutoScaling(min_capacity=1, max_capacity=3, target_invocations_per_instance=150)
    deploy_mme(
        "status-mme", model_data_url, models=[EXAMPLES / "scale"], autoscaling=scaling, **deploy_kwargs
    )

    status = endpoint_status("status-mme", boto3_session=session)

    assert (status.name, status.status) == ("status-mme", "InService")
    assert status.model_data_url == model_data_url
    assert status.models == ("scale.tar.gz",)
    assert status.image is not None and "sagemaker-tritonserver" in status.image
    (variant,) = status.variants
    assert (variant.name, variant.instance_type, variant.desired_instance_count) == (
        "AllTraffic",
        "ml.g5.xlarge",
        1,
    )
    assert variant.scaling is not None
    assert (variant.scaling.min_capacity, variant.scaling.max_capacity) == (1, 3)
    assert variant.scaling.target_invocations_per_instance == 150
    text = str(status)
    assert "status-mme: InService" in text and "1-3 instances" in text and "scale.tar.gz" in text
    data = json.loads(json.dumps(status.to_dict()))
    assert data["variants"][0]["scaling"]["max_capacity"] == 3


def test_endpoint_status_without_scaling_or_listing(
    model_data_url: str, deploy_kwargs: dict[str, Any], session: Any
) -> None:
    deploy_mme("plain-mme", model_data_url, **deploy_kwargs)
    status = endpoint_status("plain-mme", list_artifacts=False, boto3_session=session)
    assert status.models is None
    assert status.variants[0].scaling is None
    assert "autoscaling    none" in str(status)


def test_endpoint_status_of_missing_endpoint_raises_not_found(session: Any) -> None:
    with pytest.raises(EndpointNotFoundError):
        endpoint_status("no-such-endpoint", boto3_session=session)


@pytest.mark.parametrize("operation", ["DescribeEndpoint", "DescribeEndpointConfig", "DescribeModel"])
@pytest.mark.parametrize("fault", ["throttle", "server_error", "drop_connection"])
def test_endpoint_status_retries_its_reads_as_deploys_do(
    model_data_url: str, deploy_kwargs: dict[str, Any], session: Any, faulty: Any, operation: str, fault: str
) -> None:
    scaling = AutoScaling(min_capacity=1, max_capacity=3, target_invocations_per_instance=150)
    deploy_mme("status-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    aas, scaling_faults = faulty("application-autoscaling")
    getattr(faults, fault)(operation, times=4)  # more than botocore's 3 attempts
    getattr(scaling_faults, fault)("DescribeScalableTargets", times=4)
    status = endpoint_status(
        "status-mme", boto3_session=session, sagemaker_client=sm, autoscaling_client=aas, timeout=60
    )
    assert faults.hits[operation] == 4 and scaling_faults.hits["DescribeScalableTargets"] == 4
    assert status.status == "InService"
    (variant,) = status.variants
    assert variant.scaling is not None and variant.scaling.max_capacity == 3
    assert variant.scaling_error is None


def test_endpoint_status_throttled_past_its_timeout_is_a_deployment_error(
    model_data_url: str, deploy_kwargs: dict[str, Any], session: Any, faulty: Any
) -> None:
    from mme_triton.errors import DeploymentError

    deploy_mme("status-mme", model_data_url, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    faults.throttle("DescribeEndpoint")
    with pytest.raises(DeploymentError, match="cannot describe endpoint 'status-mme': Rate exceeded"):
        endpoint_status("status-mme", boto3_session=session, sagemaker_client=sm, timeout=0.5)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        endpoint_status("status-mme", boto3_session=session, timeout=0)


def test_endpoint_status_without_autoscaling_permission_reports_it_unknown(
    model_data_url: str,
    deploy_kwargs: dict[str, Any],
    session: Any,
    faulty: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scaling = AutoScaling(min_capacity=1, max_capacity=3, target_invocations_per_instance=150)
    deploy_mme("status-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)
    aas, faults = faulty("application-autoscaling")
    faults.error(
        "DescribeScalableTargets",
        status=400,
        code="AccessDeniedException",
        message="not authorized to perform: application-autoscaling:DescribeScalableTargets",
    )
    status = endpoint_status("status-mme", boto3_session=session, autoscaling_client=aas)
    assert status.status == "InService"  # the rest of the status is there
    (variant,) = status.variants
    assert variant.scaling is None
    assert variant.scaling_error is not None and variant.scaling_error.startswith("AccessDeniedException")
    assert "autoscaling    unknown (cannot be read: AccessDeniedException" in str(status)
    assert status.to_dict()["variants"][0]["scaling_error"] == variant.scaling_error
    assert "cannot read the autoscaling of endpoint/status-mme/variant/AllTraffic" in caplog.text
