"""What a live endpoint serves: ``endpoint_models`` and ``Endpoint.models()`` against moto's server
(DescribeEndpoint → DescribeEndpointConfig → DescribeModel, then an S3 listing)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from mme_triton.endpoint.models import endpoint_model_data_url, endpoint_models
from mme_triton.errors import ArtifactError, DeploymentError, EndpointNotFoundError

pytestmark = pytest.mark.moto

REGION = "us-east-1"
FAKE_CREDENTIALS: dict[str, Any] = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _aws(service: str, moto_url: str) -> Any:
    # The stubs type boto3.client() for literal service names only.
    return boto3.client(service, endpoint_url=moto_url, region_name=REGION, **FAKE_CREDENTIALS)  # type: ignore[call-overload]


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _deploy(moto_url: str, model_data_url: str) -> str:
    """Create Model (MultiModel) → EndpointConfig → Endpoint in moto; return the endpoint's name."""
    sagemaker = _aws("sagemaker", moto_url)
    name = _unique("mme")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={
            "Image": "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3",
            "ModelDataUrl": model_data_url,
            "Mode": "MultiModel",
        },
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.g4dn.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return name


def _bucket_with(moto_url: str, keys: list[str]) -> str:
    s3 = _aws("s3", moto_url)
    bucket = _unique("models")
    s3.create_bucket(Bucket=bucket)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    return bucket


KEYS = [
    "mme/resnet.tar.gz",
    "mme/bert.tar.gz",
    "mme/notes.txt",
    "mme/old/resnet-v1.tar.gz",
    "mmeother/not-ours.tar.gz",
    "elsewhere/linear.tar.gz",
]


@pytest.mark.parametrize("prefix", ["mme/", "mme"], ids=["trailing-slash", "no-trailing-slash"])
def test_endpoint_models_lists_archives_directly_under_the_endpoint_prefix(
    moto_url: str, prefix: str
) -> None:
    bucket = _bucket_with(moto_url, KEYS)
    endpoint = _deploy(moto_url, f"s3://{bucket}/{prefix}")
    names = endpoint_models(
        endpoint, sagemaker_client=_aws("sagemaker", moto_url), s3_client=_aws("s3", moto_url)
    )
    assert names == ["bert.tar.gz", "resnet.tar.gz"]


def test_endpoint_model_data_url_reads_the_serving_container(moto_url: str) -> None:
    endpoint = _deploy(moto_url, "s3://some-bucket/mme/")
    assert endpoint_model_data_url(endpoint, sagemaker_client=_aws("sagemaker", moto_url)) == (
        "s3://some-bucket/mme/"
    )


def test_endpoint_models_uses_given_model_data_url_without_describing(moto_url: str) -> None:
    bucket = _bucket_with(moto_url, KEYS)
    names = endpoint_models(
        "endpoint-that-does-not-exist",
        model_data_url=f"s3://{bucket}/elsewhere/",
        s3_client=_aws("s3", moto_url),
    )
    assert names == ["linear.tar.gz"]


@pytest.mark.slow
def test_endpoint_models_follows_pagination(moto_url: str) -> None:
    keys = [f"many/m{i:04d}.tar.gz" for i in range(1005)]
    bucket = _bucket_with(moto_url, keys)
    names = endpoint_models("ep", model_data_url=f"s3://{bucket}/many/", s3_client=_aws("s3", moto_url))
    assert names == sorted(key.split("/")[1] for key in keys)


def test_endpoint_models_missing_bucket_raises_artifact_error(moto_url: str) -> None:
    with pytest.raises(ArtifactError, match="NoSuchBucket"):
        endpoint_models("ep", model_data_url=f"s3://{_unique('absent')}/mme/", s3_client=_aws("s3", moto_url))


def test_endpoint_models_unknown_endpoint_raises_endpoint_not_found(moto_url: str) -> None:
    with pytest.raises(EndpointNotFoundError, match="Could not find endpoint") as caught:
        endpoint_models(
            "no-such-endpoint", sagemaker_client=_aws("sagemaker", moto_url), s3_client=_aws("s3", moto_url)
        )
    assert caught.value.endpoint_name == "no-such-endpoint"
    assert caught.value.error_code == "ValidationException"


def test_endpoint_model_data_url_of_a_model_without_one_raises(moto_url: str) -> None:
    sagemaker = _aws("sagemaker", moto_url)
    name = _unique("single")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={
            "Image": "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
        },
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    with pytest.raises(DeploymentError, match="has no ModelDataUrl"):
        endpoint_model_data_url(name, sagemaker_client=sagemaker)
