"""``endpoint_status()``: what a live endpoint is — its state, variants, scaling and models (a multi-model
endpoint's TargetModels, or an endpoint's inference components).

One read-only look through DescribeEndpoint → DescribeEndpointConfig → DescribeModel, Application Auto
Scaling's scalable targets and policies, and the S3 listing of the endpoint's prefix. ``mme-triton status``
prints it. Every read is retried while the control plane throttles or fails, as deploys and teardowns
retry theirs (:func:`~mme_triton.endpoint._retry.read`), and autoscaling that cannot be read (no
Application Auto Scaling permission, say) is reported as unknown rather than failing the whole look.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import Hosting, hosts_components
from mme_triton._sagemaker import error_code, error_message, make_client, model_data_url_of, serving_container
from mme_triton._sdk import boto3_session_of
from mme_triton.endpoint._component_status import ComponentStatus, read_components
from mme_triton.endpoint._retry import Deadline, control_plane_config, read
from mme_triton.endpoint.autoscaling import SCALABLE_DIMENSION, resource_id, scalable_target, scaling_policies
from mme_triton.endpoint.handle import check_seconds, control_plane_errors

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = [
    "STATUS_TIMEOUT",
    "ComponentStatus",
    "EndpointStatus",
    "ScalingStatus",
    "VariantStatus",
    "endpoint_status",
]

logger = logging.getLogger(__name__)

#: Seconds endpoint_status keeps retrying reads that are throttled or fail, unless told otherwise.
STATUS_TIMEOUT = 60.0


@dataclass(frozen=True)
class ScalingStatus:
    """A variant's Application Auto Scaling registration.

    Attributes:
        min_capacity, max_capacity: the scalable target's bounds.
        policies: the names of its scaling policies.
        target_invocations_per_instance: the target value of a target-tracking policy, if one has it.
    """

    min_capacity: int
    max_capacity: int
    policies: tuple[str, ...] = ()
    target_invocations_per_instance: float | None = None


@dataclass(frozen=True)
class VariantStatus:
    """One production variant of the endpoint.

    Attributes:
        name: the variant's name.
        instance_type: its instance type (from the endpoint config).
        current_instance_count, desired_instance_count: SageMaker's counts (``None`` while it has none,
            e.g. during creation).
        model_name: the model the variant serves.
        scaling: its autoscaling registration, ``None`` without one (or when it cannot be read).
        scaling_error: why its autoscaling could not be read (e.g. no Application Auto Scaling read
            permission); ``None`` when it was read.
    """

    name: str
    instance_type: str | None
    current_instance_count: int | None
    desired_instance_count: int | None
    model_name: str | None
    scaling: ScalingStatus | None = None
    scaling_error: str | None = None


@dataclass(frozen=True)
class EndpointStatus:
    """An endpoint as :func:`endpoint_status` found it.

    Attributes:
        name, arn, status: the endpoint's name, ARN and ``EndpointStatus`` (``InService``, ``Creating`` ...).
        failure_reason: SageMaker's ``FailureReason``, if any.
        endpoint_config_name: the config it runs.
        creation_time, last_modified_time: as SageMaker reports them.
        model_data_url: the prefix its TargetModels are served from (``None`` if its model has none).
        image: the serving container's image.
        variants: its production variants.
        models: the TargetModels under the prefix (``None`` when not listed, and for an endpoint of
            inference components).
        hosting: ``"mme"`` or ``"inference-components"``.
        components: its inference components (:class:`ComponentStatus`), by name.
    """

    name: str
    arn: str
    status: str
    failure_reason: str | None
    endpoint_config_name: str
    creation_time: datetime | None
    last_modified_time: datetime | None
    model_data_url: str | None
    image: str | None
    variants: tuple[VariantStatus, ...] = ()
    models: tuple[str, ...] | None = field(default=None)
    hosting: Hosting = "mme"
    components: tuple[ComponentStatus, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 strings)."""
        data = dataclasses.asdict(self)
        for key in ("creation_time", "last_modified_time"):
            value = data[key]
            data[key] = value.isoformat() if isinstance(value, datetime) else value
        return data

    def __str__(self) -> str:
        lines = [f"{self.name}: {self.status}" + (f" ({self.failure_reason})" if self.failure_reason else "")]
        lines.append(f"  endpoint config  {self.endpoint_config_name}")
        if self.image:
            lines.append(f"  image            {self.image}")
        if self.hosting == "mme":
            lines.append(f"  model data url   {self.model_data_url or '-'}")
        for variant in self.variants:
            counts = f"{_count(variant.current_instance_count)}/{_count(variant.desired_instance_count)}"
            lines.append(
                f"  variant {variant.name}: {variant.instance_type or '?'} x {counts} (current/desired), "
                f"model {variant.model_name or '?'}"
            )
            scaling = variant.scaling
            if variant.scaling_error is not None:
                lines.append(f"    autoscaling    unknown (cannot be read: {variant.scaling_error})")
            elif scaling is None:
                lines.append("    autoscaling    none")
            else:
                target = scaling.target_invocations_per_instance
                tracking = f", target {target:g} invocations/instance/min" if target is not None else ""
                lines.append(
                    f"    autoscaling    {scaling.min_capacity}-{scaling.max_capacity} instances{tracking}"
                )
        if self.models is not None:
            lines.append(f"  models ({len(self.models)})" + "".join(f"\n    {name}" for name in self.models))
        if self.hosting == "inference-components":
            lines.append(f"  inference components ({len(self.components)})")
            lines += [str(component) for component in self.components]
        return "\n".join(lines)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _scaling(
    client: ApplicationAutoScalingClient, rid: str, deadline: Deadline, dimension: str
) -> ScalingStatus | None:
    target = scalable_target(client, rid, deadline=deadline, dimension=dimension)
    if target is None:
        return None
    policies = scaling_policies(client, rid, deadline=deadline, dimension=dimension)
    tracking = next(
        (
            p["TargetTrackingScalingPolicyConfiguration"]
            for p in policies
            if "TargetTrackingScalingPolicyConfiguration" in p
        ),
        None,
    )
    return ScalingStatus(
        min_capacity=int(target["MinCapacity"]),
        max_capacity=int(target["MaxCapacity"]),
        policies=tuple(p["PolicyName"] for p in policies),
        target_invocations_per_instance=float(tracking["TargetValue"]) if tracking else None,
    )


def read_scaling(
    client: ApplicationAutoScalingClient, rid: str, deadline: Deadline, *, dimension: str = SCALABLE_DIMENSION
) -> tuple[ScalingStatus | None, str | None]:
    """(the autoscaling of the scalable target ``rid`` — a variant's, or with ``dimension`` an inference
    component's — None) or (None, why it cannot be read).

    Like a deploy, which needs Application Auto Scaling only when asked for autoscaling, the status of
    an endpoint does not fail for want of that permission (or while that service keeps failing).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return _scaling(client, rid, deadline, dimension), None
    except (ClientError, BotoCoreError) as exc:
        reason = f"{error_code(exc) or type(exc).__name__}: {error_message(exc)}"
        logger.warning("cannot read the autoscaling of %s: %s", rid, reason)
        return None, reason


def endpoint_status(
    endpoint_name: str,
    *,
    list_artifacts: bool = True,
    timeout: float = STATUS_TIMEOUT,
    region: str | None = None,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
    autoscaling_client: ApplicationAutoScalingClient | None = None,
    s3_client: S3Client | None = None,
) -> EndpointStatus:
    """Describe an endpoint: its status, variants (instance type and counts), autoscaling and models.

    Parameters:
        endpoint_name: the endpoint.
        list_artifacts: also list the TargetModels under its prefix (one S3 ListObjectsV2 call).
        timeout: seconds the reads are retried in all while the control plane throttles or fails.
        region, boto3_session, sagemaker_session: the region and session (a ``sagemaker.Session``'s
            ``boto_session``) the clients are made from.
        boto_config, sagemaker_client, autoscaling_client, s3_client: a botocore ``Config``, and ready
            clients that win over the session.

    Raises:
        EndpointNotFoundError: the endpoint does not exist.
        DeploymentError: a SageMaker describe call failed, or kept failing until ``timeout`` (the botocore
            error is chained). Application Auto Scaling errors do not raise: the variant's
            ``scaling_error`` says why its autoscaling is unknown.
        ArtifactError: the S3 listing failed.
        ValueError: ``timeout`` is not > 0.

    Example::

        print(endpoint_status("my-mme"))  # my-mme: InService
          ...
    """
    from mme_triton.artifact.s3 import list_models

    check_seconds("timeout", timeout)
    deadline = Deadline(timeout)
    session = boto3_session_of(boto3_session, sagemaker_session)
    clients: dict[str, Any] = {"boto3_session": session, "boto_config": boto_config, "region": region}
    sagemaker: SageMakerClient = make_client(
        "sagemaker", client=sagemaker_client, default_config=control_plane_config(), **clients
    )
    with control_plane_errors(endpoint_name, "describe"):
        endpoint = read(
            sagemaker.describe_endpoint,
            deadline=deadline,
            what=f"DescribeEndpoint({endpoint_name})",
            EndpointName=endpoint_name,
        )
    config_name = str(endpoint["EndpointConfigName"])
    with control_plane_errors(endpoint_name, "read the config and model of", missing_is_endpoint=False):
        config = read(
            sagemaker.describe_endpoint_config,
            deadline=deadline,
            what=f"DescribeEndpointConfig({config_name})",
            EndpointConfigName=config_name,
        )
        configured = {v["VariantName"]: v for v in config.get("ProductionVariants", [])}
        model_names = {str(v["ModelName"]) for v in configured.values() if v.get("ModelName")}
        models = {
            name: read(
                sagemaker.describe_model, deadline=deadline, what=f"DescribeModel({name})", ModelName=name
            )
            for name in sorted(model_names)
        }
    scaling_client: ApplicationAutoScalingClient = make_client(
        "application-autoscaling",
        client=autoscaling_client,
        default_config=control_plane_config(),
        **clients,
    )
    running = {v["VariantName"]: v for v in endpoint.get("ProductionVariants", [])}
    variants: list[VariantStatus] = []
    for name in list(configured) + [n for n in running if n not in configured]:
        setting: Any = configured.get(name, {})
        state: Any = running.get(name, {})
        rid = resource_id(endpoint_name, name)
        scaling, scaling_error = read_scaling(scaling_client, rid, deadline)
        variants.append(
            VariantStatus(
                name=name,
                instance_type=setting.get("InstanceType"),
                current_instance_count=state.get("CurrentInstanceCount"),
                desired_instance_count=state.get("DesiredInstanceCount", setting.get("InitialInstanceCount")),
                model_name=setting.get("ModelName"),
                scaling=scaling,
                scaling_error=scaling_error,
            )
        )
    model = next(iter(models.values()), None)
    url = model_data_url_of(model) if model is not None else None
    container = serving_container(model) if model is not None else None
    listed = None
    if list_artifacts and url is not None:
        listed = tuple(list_models(url, boto3_session=session, s3_client=s3_client, boto_config=boto_config))
    components: tuple[ComponentStatus, ...] = ()
    hosting: Hosting = "inference-components" if hosts_components(config) else "mme"
    if hosting == "inference-components":
        with control_plane_errors(
            endpoint_name, "read the inference components of", missing_is_endpoint=False
        ):
            components = read_components(sagemaker, scaling_client, endpoint_name, deadline)
    return EndpointStatus(
        name=endpoint_name,
        arn=str(endpoint["EndpointArn"]),
        status=str(endpoint["EndpointStatus"]),
        failure_reason=endpoint.get("FailureReason"),
        endpoint_config_name=config_name,
        creation_time=endpoint.get("CreationTime"),
        last_modified_time=endpoint.get("LastModifiedTime"),
        model_data_url=url,
        image=str(container["Image"]) if container is not None and container.get("Image") else None,
        variants=tuple(variants),
        models=listed,
        hosting=hosting,
        components=components,
    )
