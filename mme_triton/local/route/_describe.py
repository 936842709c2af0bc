"""An in-service endpoint's description read as what the embedded stack serves: Endpoint -> EndpointConfig ->
Model (:func:`resolve_endpoint`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import model_data_url_of, parse_s3_url, serving_container
from mme_triton.errors import LocalStackError
from mme_triton.local.route.instance import EndpointModels

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = ["resolve_endpoint"]


def resolve_endpoint(
    endpoint_name: str, description: Mapping[str, Any], sagemaker: SageMakerClient | None
) -> EndpointModels:
    """Endpoint -> EndpointConfig -> Model: the ModelDataUrl, Environment and variant it serves.

    The control plane's hook description carries the config and the model; without them they are
    read with DescribeEndpointConfig and DescribeModel (``sagemaker``). The instance count is the config's
    ``InitialInstanceCount``.

    Raises:
        LocalStackError: the description does not lead to a model the stack can serve from.
    """
    config_name = description.get("EndpointConfigName")
    if not config_name:
        raise LocalStackError(f"endpoint {endpoint_name} has no EndpointConfigName")
    config: Mapping[str, Any] | None = description.get("EndpointConfig")
    if config is None:
        if sagemaker is None:
            raise LocalStackError("the runtime has no SageMaker client: call bind() first")
        config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    variants = config.get("ProductionVariants") or []
    if not variants:
        raise LocalStackError(f"endpoint config {config_name} has no production variant")
    variant = variants[0]
    model: Mapping[str, Any] | None = (description.get("Models") or {}).get(variant["ModelName"])
    if model is None:
        if sagemaker is None:
            raise LocalStackError("the runtime has no SageMaker client: call bind() first")
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
    container = serving_container(model) or {}
    url = model_data_url_of(model)
    if not url:
        raise LocalStackError(f"model {variant['ModelName']} has no ModelDataUrl")
    # SageMaker's ContainerDefinition.Mode: a container without one hosts a single model.
    mode = str(container.get("Mode") or "SingleModel")
    if mode == "MultiModel":
        try:
            parse_s3_url(url)
        except ValueError as exc:
            raise LocalStackError(f"model {variant['ModelName']}: ModelDataUrl {exc}") from exc
    return EndpointModels(
        endpoint_name=endpoint_name,
        model_data_url=url,
        environment=dict(container.get("Environment") or {}),
        variant_name=variant.get("VariantName", "AllTraffic"),
        mode=mode,
        volume_size_gb=int(variant["VolumeSizeInGB"]) if variant.get("VolumeSizeInGB") else None,
        instance_type=variant.get("InstanceType"),
        model_cache=str((container.get("MultiModelConfig") or {}).get("ModelCacheSetting") or "Enabled"),
        image=str(container.get("Image") or ""),
        instance_count=int(str(variant.get("InitialInstanceCount") or 1)),
    )
