"""What a live endpoint serves: a multi-model endpoint's ModelDataUrl and the TargetModels under it, or
the inference components of an endpoint that hosts them.

A multi-model endpoint serves every ``<ModelDataUrl><name>.tar.gz`` object directly under the prefix
of its model's serving container. :func:`endpoint_model_data_url` finds that prefix through
DescribeEndpoint → DescribeEndpointConfig → DescribeModel; :func:`endpoint_models` lists it with
:func:`mme_triton.artifact.s3.list_models`. :func:`endpoint_components` lists an endpoint's inference
components (ListInferenceComponents).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mme_triton._inference_components import hosts_components
from mme_triton._sagemaker import make_client, model_data_url_of
from mme_triton.endpoint._resources import paginate
from mme_triton.endpoint._retry import Deadline, control_plane_config, read
from mme_triton.endpoint.handle import control_plane_errors
from mme_triton.errors import DeploymentError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = ["endpoint_components", "endpoint_model_data_url", "endpoint_models"]

logger = logging.getLogger(__name__)

#: Seconds the describe calls are retried while the control plane throttles or fails.
READ_SECONDS = 60.0


def endpoint_model_data_url(
    endpoint_name: str,
    *,
    boto3_session: boto3.Session | None = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
) -> str:
    """The ``ModelDataUrl`` an endpoint serves its TargetModels from.

    The describe calls are retried while the control plane throttles or fails, for up to a minute.

    Raises:
        EndpointNotFoundError: the endpoint does not exist.
        DeploymentError: its config names no model, its model has no ModelDataUrl, or a describe call
            failed (the botocore error is chained).

    Example::

        endpoint_model_data_url("my-mme")  # 's3://my-bucket/mme/'
    """
    sagemaker: SageMakerClient = make_client(
        "sagemaker",
        client=sagemaker_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        default_config=control_plane_config(),
    )
    deadline = Deadline(READ_SECONDS)
    with control_plane_errors(endpoint_name, "describe"):
        endpoint = read(
            sagemaker.describe_endpoint,
            deadline=deadline,
            what="DescribeEndpoint",
            EndpointName=endpoint_name,
        )
    config_name = endpoint["EndpointConfigName"]
    with control_plane_errors(endpoint_name, "read the model behind", missing_is_endpoint=False):
        config = read(
            sagemaker.describe_endpoint_config,
            deadline=deadline,
            what="DescribeEndpointConfig",
            EndpointConfigName=config_name,
        )
        variants = config.get("ProductionVariants", [])
        model_name = variants[0].get("ModelName") if variants else None
        if not model_name:
            hint = (
                " (it hosts inference components: endpoint_components() lists them)"
                if hosts_components(config)
                else ""
            )
            raise DeploymentError(
                f"endpoint config {config_name!r} of endpoint {endpoint_name!r} names no model{hint}",
                endpoint_name=endpoint_name,
            )
        model = read(sagemaker.describe_model, deadline=deadline, what="DescribeModel", ModelName=model_name)
    url = model_data_url_of(model)
    if url is None:
        raise DeploymentError(
            f"model {model_name!r} of endpoint {endpoint_name!r} has no ModelDataUrl",
            endpoint_name=endpoint_name,
        )
    return url


def endpoint_models(
    endpoint_name: str,
    *,
    model_data_url: str | None = None,
    boto3_session: boto3.Session | None = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
    s3_client: S3Client | None = None,
) -> list[str]:
    """The TargetModels an endpoint serves: the ``*.tar.gz`` objects directly under its prefix, sorted.

    Parameters:
        endpoint_name: the multi-model endpoint.
        model_data_url: its prefix, when known (skips the describe calls).
        boto3_session, boto_config, sagemaker_client, s3_client: how to reach SageMaker and S3.

    Raises:
        EndpointNotFoundError: the endpoint does not exist.
        DeploymentError: the endpoint's ModelDataUrl cannot be found (see
            :func:`endpoint_model_data_url`).
        ArtifactError: the S3 listing failed.

    Example::

        endpoint_models("my-mme")  # ['linear.tar.gz', 'pipeline.tar.gz']
    """
    from mme_triton.artifact.s3 import list_models

    url = model_data_url or endpoint_model_data_url(
        endpoint_name, boto3_session=boto3_session, boto_config=boto_config, sagemaker_client=sagemaker_client
    )
    names = list_models(url, boto3_session=boto3_session, s3_client=s3_client, boto_config=boto_config)
    logger.debug("%d models under %s (endpoint %s)", len(names), url, endpoint_name)
    return names


def endpoint_components(
    endpoint_name: str,
    *,
    boto3_session: boto3.Session | None = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
) -> list[str]:
    """The names of an endpoint's inference components, sorted (none for a multi-model endpoint).

    Reads are retried while the control plane throttles or fails, for up to a minute.

    Raises:
        DeploymentError: ListInferenceComponents failed (the botocore error is chained).

    Example::

        endpoint_components("my-components")  # ['linear', 'scale']
    """
    sagemaker: SageMakerClient = make_client(
        "sagemaker",
        client=sagemaker_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        default_config=control_plane_config(),
    )
    with control_plane_errors(endpoint_name, "list the inference components of", missing_is_endpoint=False):
        items = paginate(
            sagemaker.list_inference_components,
            "InferenceComponents",
            deadline=Deadline(READ_SECONDS),
            EndpointNameEquals=endpoint_name,
        )
    return sorted(str(item["InferenceComponentName"]) for item in items)
