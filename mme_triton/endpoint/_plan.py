"""What ``deploy_mme`` creates, decided before any AWS call: the model, the endpoint config, their names.

Model and config names are the endpoint name plus a hash of their settings, so the same call run again
names the same resources (and creates nothing), and changed settings give new names (and an update).
:class:`EndpointPlan` is what every deployment of an endpoint has, whatever hosts its models (the
inference components' deployer extends it too); :class:`DeployPlan` adds a multi-model endpoint's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from mme_triton.endpoint._resources import (
    TAG_CREATED_AT,
    TAG_ENDPOINT,
    TAG_MANAGED,
    config_name_for,
    model_name_for,
    settings_hash,
)
from mme_triton.endpoint.autoscaling import AutoScaling

if TYPE_CHECKING:
    from mypy_boto3_sagemaker.type_defs import TagTypeDef

__all__ = ["DeployPlan", "EndpointPlan", "build_plan", "resource_tags"]


@dataclass
class EndpointPlan:
    """What a deployment of an endpoint sends whatever hosts its models: the CreateEndpointConfig request
    and its name, the tags of every resource, the production variant's name."""

    endpoint_name: str
    model_data_url: str
    config_name: str
    config_request: dict[str, Any]
    tags: list[TagTypeDef]
    variant_name: str


@dataclass
class DeployPlan(EndpointPlan):
    """The SageMaker resources of one deploy_mme call: CreateModel and CreateEndpointConfig requests."""

    model_name: str
    model_request: dict[str, Any]
    autoscaling: AutoScaling | None


def resource_tags(endpoint_name: str, tags: Mapping[str, str]) -> list[TagTypeDef]:
    """The caller's tags and the library's own (managed, the endpoint, the creation time) as SageMaker
    takes them."""
    created_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    all_tags = {**tags, TAG_MANAGED: "true", TAG_ENDPOINT: endpoint_name, TAG_CREATED_AT: created_at}
    return [{"Key": k, "Value": v} for k, v in all_tags.items()]


def build_plan(
    endpoint_name: str,
    model_data_url: str,
    *,
    role: str,
    image_uri: str,
    instance_type: str,
    instance_count: int,
    environment: Mapping[str, str],
    model_cache: str | None,
    vpc: Mapping[str, Any] | None,
    enable_network_isolation: bool,
    kms_key_id: str | None,
    tags: Mapping[str, str],
    variant_name: str,
    autoscaling: AutoScaling | None,
    inference_ami_version: str | None = None,
) -> DeployPlan:
    """The plan for arguments ``deploy_mme`` has already checked."""
    container: dict[str, Any] = {"Image": image_uri, "Mode": "MultiModel", "ModelDataUrl": model_data_url}
    if environment:
        container["Environment"] = dict(environment)
    if model_cache is not None:
        container["MultiModelConfig"] = {"ModelCacheSetting": model_cache}
    model_request: dict[str, Any] = {"ExecutionRoleArn": role, "PrimaryContainer": container}
    if vpc is not None:
        model_request["VpcConfig"] = dict(vpc)
    if enable_network_isolation:
        model_request["EnableNetworkIsolation"] = True
    model_name = model_name_for(endpoint_name, settings_hash(model_request))
    variant = {
        "VariantName": variant_name,
        "ModelName": model_name,
        "InstanceType": instance_type,
        "InitialInstanceCount": instance_count,
        "InitialVariantWeight": 1.0,
    }
    if inference_ami_version is not None:
        variant["InferenceAmiVersion"] = inference_ami_version
    config_request: dict[str, Any] = {"ProductionVariants": [variant]}
    if kms_key_id is not None:
        config_request["KmsKeyId"] = kms_key_id
    config_name = config_name_for(endpoint_name, settings_hash(config_request))
    return DeployPlan(
        endpoint_name=endpoint_name,
        model_data_url=model_data_url,
        model_name=model_name,
        config_name=config_name,
        model_request=model_request,
        config_request=config_request,
        tags=resource_tags(endpoint_name, tags),
        variant_name=variant_name,
        autoscaling=autoscaling,
    )
