"""From ``deploy_mme``'s (and ``plan_deployment``'s) arguments to what would be sent: checks, clients,
image, Environment, the plan, and the warnings to give. Nothing here mutates anything on AWS."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import make_client, parse_s3_url
from mme_triton._sdk import deploy_defaults
from mme_triton.endpoint._inputs import (
    check_kms_key,
    check_role,
    check_vpc,
    environment_dict,
    environment_warnings,
    models_list,
    normalise_tags,
    region_of,
    target_names,
)
from mme_triton.endpoint._plan import DeployPlan, build_plan
from mme_triton.endpoint._resources import check_name
from mme_triton.endpoint._retry import control_plane_config
from mme_triton.endpoint.autoscaling import AutoScaling
from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.endpoint.images import triton_image_uri, triton_version_of
from mme_triton.endpoint.instances import check_inference_ami_version, check_instance_type, gpu_warnings
from mme_triton.errors import MMETritonWarning

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.artifact.package import Artifact

__all__ = [
    "DeployArguments",
    "EndpointArguments",
    "Reach",
    "Resolved",
    "check_endpoint_arguments",
    "emit_warnings",
    "reach",
    "resolve",
]

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class EndpointArguments:
    """A deployer's arguments about the endpoint, whatever hosts its models, as the caller gave them."""

    endpoint_name: str
    model_data_url: str | None
    role: str | None
    instance_type: str
    instance_count: int
    region: str | None
    image_uri: str | None
    triton_version: str
    environment: TritonEnvironment | Mapping[str, str | None] | None
    inference_ami_version: str | None
    vpc_config: Mapping[str, Any] | None
    enable_network_isolation: bool
    kms_key_id: str | None
    tags: Mapping[str, str] | Sequence[Mapping[str, str]] | None
    variant_name: str
    boto3_session: boto3.Session | None = None
    boto_config: Config | None = None
    sagemaker_client: SageMakerClient | None = None
    autoscaling_client: ApplicationAutoScalingClient | None = None
    sagemaker_session: Any = None


@dataclass(kw_only=True)
class DeployArguments(EndpointArguments):
    """``deploy_mme``'s arguments about what to deploy (not how to wait), as the caller gave them."""

    models: Any
    model_cache: str | None
    autoscaling: AutoScaling | None


@dataclass
class Resolved:
    """The checked arguments: the plan, the clients, what to upload, the warnings to give."""

    plan: DeployPlan
    sagemaker: SageMakerClient
    region: str
    image_uri: str
    triton_version: str | None
    model_items: list[str | os.PathLike[str] | Artifact]
    scaling_client: Callable[[], ApplicationAutoScalingClient]
    warnings: list[str] = field(default_factory=list)
    boto3_session: boto3.Session | None = None
    """The session clients are made from (a ``sagemaker.Session``'s, when one was given)."""
    default_bucket: str | None = None
    """The SageMaker SDK's default bucket, when ``model_data_url`` was derived from it."""


def check_endpoint_arguments(args: EndpointArguments) -> None:
    """The checks every deployer makes first: the names, the role and prefix when given, the count.

    Raises:
        ValueError, TypeError: one AWS would refuse.
    """
    check_name("endpoint name", args.endpoint_name)
    check_name("variant name", args.variant_name)
    if args.role is not None:
        check_role(args.role)
    if args.model_data_url is not None:
        parse_s3_url(args.model_data_url)
    count = args.instance_count
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"instance_count must be an int >= 1, got {count!r}")


def resolve(args: DeployArguments, *, plan_only: bool = False) -> Resolved:
    """Check every argument (no AWS call before that), then derive the SageMaker SDK's defaults, make the
    clients and the plan.

    With ``plan_only`` nothing is created on the way: the SDK's default bucket is named, not created
    (``deploy_mme`` creates it, as the SDK's ``default_bucket()`` does).

    Raises:
        ValueError, TypeError: an argument AWS would refuse (see ``deploy_mme``).
    """
    check_endpoint_arguments(args)
    instance = check_instance_type(args.instance_type)
    count = args.instance_count
    env = environment_dict(args.environment)
    ami = check_inference_ami_version(args.inference_ami_version)
    if args.model_cache not in (None, "Enabled", "Disabled"):
        raise ValueError(f"model_cache must be 'Enabled', 'Disabled' or None, got {args.model_cache!r}")
    vpc = check_vpc(args.vpc_config)
    check_kms_key(args.kms_key_id)
    user_tags = normalise_tags(args.tags)
    scaling = args.autoscaling
    if scaling is not None:
        if not isinstance(scaling, AutoScaling):
            raise TypeError(f"autoscaling must be an AutoScaling, got {type(scaling).__name__}")
        if not scaling.min_capacity <= count <= scaling.max_capacity:
            raise ValueError(
                f"instance_count {count} is outside autoscaling's "
                f"[{scaling.min_capacity}, {scaling.max_capacity}]"
            )
    model_items = models_list(args.models)
    names = target_names(model_items)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"several models would be uploaded as {', '.join(duplicates)}")

    # Every pure check passed: a missing role or prefix now comes from the SageMaker SDK, as its own
    # estimators derive them (the role with reads; the default bucket is created only by a deploy).
    where = reach(args, gpu=instance.is_gpu, plan_only=plan_only)
    image_uri, version = where.image_uri, where.version
    plan = build_plan(
        args.endpoint_name,
        where.model_data_url,
        role=where.role,
        image_uri=image_uri,
        instance_type=args.instance_type,
        instance_count=count,
        environment=env,
        model_cache=args.model_cache,
        vpc=vpc,
        enable_network_isolation=args.enable_network_isolation,
        kms_key_id=args.kms_key_id,
        tags=user_tags,
        variant_name=args.variant_name,
        autoscaling=scaling,
        inference_ami_version=ami,
    )
    return Resolved(
        plan=plan,
        sagemaker=where.sagemaker,
        region=where.region,
        image_uri=image_uri,
        triton_version=version,
        model_items=model_items,
        scaling_client=where.scaling_client,
        warnings=[
            *instance.warnings,
            *gpu_warnings(args.instance_type, version, ami),
            *environment_warnings(env),
        ],
        boto3_session=where.boto3_session,
        default_bucket=where.default_bucket,
    )


@dataclass
class Reach:
    """Where a deployment goes and how it gets there: the role and prefix (given or derived), the
    clients, the region, the Triton image."""

    boto3_session: boto3.Session | None
    role: str
    model_data_url: str
    sagemaker: SageMakerClient
    region: str
    image_uri: str
    version: str | None
    scaling_client: Callable[[], ApplicationAutoScalingClient]
    default_bucket: str | None


def reach(args: EndpointArguments, *, gpu: bool, plan_only: bool) -> Reach:
    """The role and prefix (the SageMaker SDK's when not given), the SageMaker client, the region and the
    image for a deployer's checked arguments.

    Raises:
        ValueError: a derived role that is not a role ARN, an image of no known Triton release ...
    """
    session, given_url, role = deploy_defaults(
        args.endpoint_name,
        args.model_data_url,
        args.role,
        boto3_session=args.boto3_session,
        sagemaker_session=args.sagemaker_session,
        create_bucket=not plan_only,
    )
    check_role(role)
    bucket, prefix = parse_s3_url(given_url)
    sagemaker: SageMakerClient = make_client(
        "sagemaker",
        client=args.sagemaker_client,
        boto3_session=session,
        boto_config=args.boto_config,
        default_config=control_plane_config(),
        region=args.region,
    )
    region = region_of(sagemaker, args.region)
    image_uri = args.image_uri
    if image_uri is None:
        image_uri = triton_image_uri(region, version=args.triton_version, cpu=not gpu)
    holder: list[ApplicationAutoScalingClient] = []

    def scaling_client() -> ApplicationAutoScalingClient:
        # Made on first use: deployments without autoscaling need no Application Auto Scaling access.
        if not holder:
            holder.append(
                make_client(
                    "application-autoscaling",
                    client=args.autoscaling_client,
                    boto3_session=session,
                    boto_config=args.boto_config,
                    default_config=control_plane_config(),
                    region=region,
                )
            )
        return holder[0]

    return Reach(
        boto3_session=session,
        role=role,
        model_data_url=f"s3://{bucket}/{prefix}",
        sagemaker=sagemaker,
        region=region,
        image_uri=image_uri,
        version=triton_version_of(image_uri),
        scaling_client=scaling_client,
        default_bucket=bucket if args.model_data_url is None else None,
    )


def emit_warnings(messages: Sequence[str], *, stacklevel: int) -> None:
    """Log each message and issue it as an ``MMETritonWarning`` at ``stacklevel`` of the caller."""
    for message in messages:
        logger.warning("%s", message)
        warnings.warn(message, MMETritonWarning, stacklevel=stacklevel + 1)
