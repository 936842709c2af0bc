"""``deploy_mme()``: a SageMaker multi-model endpoint running Triton, in one call, or none of it.

Steps: upload the given models under the prefix → CreateModel (``Mode=MultiModel``, ``ModelDataUrl`` =
the prefix, the ``SAGEMAKER_TRITON_*`` environment) → CreateEndpointConfig → CreateEndpoint (or
UpdateEndpoint) → wait for ``InService`` → autoscaling. Model and config names are the endpoint name plus a
hash of their settings, so running the same call again changes nothing, and a call with changed settings
creates a new config (and model) and updates the endpoint. When a step fails, the SageMaker resources this
call created are deleted again before the error is raised.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import error_code, is_not_found, make_client, parse_s3_url
from mme_triton._sdk import deploy_defaults
from mme_triton.endpoint._inputs import (
    check_kms_key,
    check_role,
    check_vpc,
    environment_dict,
    models_list,
    normalise_tags,
    region_of,
    target_names,
)
from mme_triton.endpoint._plan import DeployPlan, build_plan
from mme_triton.endpoint._resources import (
    TAG_ENDPOINT,
    TAG_MANAGED,
    check_name,
    describe_or_none,
    list_tags,
)
from mme_triton.endpoint._retry import control_plane_config
from mme_triton.endpoint.autoscaling import (
    AutoScaling,
    apply_autoscaling,
    policy_name,
    remove_autoscaling,
    resource_id,
)
from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.endpoint.handle import IN_PROGRESS, DeployProgress, Endpoint, wait_for_endpoint
from mme_triton.endpoint.images import DEFAULT_TRITON_VERSION, triton_image_uri
from mme_triton.endpoint.instances import check_instance_type
from mme_triton.errors import DeploymentError, EndpointFailedError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.artifact.package import Artifact

__all__ = ["AutoScaling", "DeployProgress", "Endpoint", "deploy_mme", "wait_for_endpoint"]

logger = logging.getLogger(__name__)


# -- the deployment ----------------------------------------------------------------------------------


@dataclass
class _Rollback:
    sagemaker: SageMakerClient
    endpoint_name: str
    created: list[tuple[str, str]] = field(default_factory=list)
    autoscaling_client: ApplicationAutoScalingClient | None = None
    variant_name: str = ""

    def add(self, kind: str, name: str) -> None:
        self.created.append((kind, name))

    def run(self, progress: DeployProgress | None) -> list[str]:
        """Delete what was created, newest first; return what could not be deleted."""
        leftovers: list[str] = []
        for kind, name in reversed(self.created):
            if progress is not None:
                progress("rollback", f"deleting {kind} {name}")
            try:
                if kind == "autoscaling":
                    if self.autoscaling_client is not None:
                        remove_autoscaling(self.autoscaling_client, self.endpoint_name, self.variant_name)
                elif kind == "endpoint":
                    self.sagemaker.delete_endpoint(EndpointName=name)
                elif kind == "endpoint-config":
                    self.sagemaker.delete_endpoint_config(EndpointConfigName=name)
                elif kind == "model":
                    self.sagemaker.delete_model(ModelName=name)
                logger.info("rolled back %s %s", kind, name)
            except Exception as exc:
                if is_not_found(exc):
                    continue
                logger.error("rollback could not delete %s %s: %s", kind, name, exc)
                leftovers.append(f"{kind} {name} ({exc})")
        self.created.clear()
        return leftovers


def deploy_mme(
    endpoint_name: str,
    model_data_url: str | None = None,
    *,
    models: str | os.PathLike[str] | Artifact | Iterable[str | os.PathLike[str] | Artifact] = (),
    role: str | None = None,
    instance_type: str,
    instance_count: int = 1,
    region: str | None = None,
    image_uri: str | None = None,
    triton_version: str = DEFAULT_TRITON_VERSION,
    environment: TritonEnvironment | Mapping[str, str] | None = None,
    model_cache: str | None = None,
    vpc_config: Mapping[str, Any] | None = None,
    enable_network_isolation: bool = False,
    kms_key_id: str | None = None,
    tags: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
    variant_name: str = "AllTraffic",
    autoscaling: AutoScaling | None = None,
    wait: bool = True,
    timeout: float = 1800,
    poll_interval: float = 15,
    progress: DeployProgress | None = None,
    overwrite: bool = False,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
    autoscaling_client: ApplicationAutoScalingClient | None = None,
    s3_client: S3Client | None = None,
) -> Endpoint:
    """Deploy (or bring up to date) a Triton multi-model endpoint serving ``model_data_url``.

    Parameters:
        endpoint_name: 1-63 letters, digits and hyphens.
        model_data_url: ``s3://bucket/prefix/``; every ``<name>.tar.gz`` directly under it is a TargetModel.
        models: model directories or :class:`~mme_triton.artifact.package.Artifact` objects to upload
            under the prefix first (skipped when the same content is already there).
        role: the execution role ARN. Omitted (``model_data_url`` too): derived by the SageMaker SDK.
        instance_type: a CPU type or a single-GPU type (``ml.g5.xlarge``); multi-GPU types are refused.
        instance_count: initial instance count.
        region: defaults to the session's or client's region.
        image_uri: an explicit image; by default the SageMaker Triton image for the region,
            ``triton_version`` and instance type (``-cpu`` image for CPU types).
        environment: :class:`TritonEnvironment` or a plain mapping, validated against CreateModel's limits.
        model_cache: ``"Enabled"`` or ``"Disabled"`` (``MultiModelConfig.ModelCacheSetting``).
        vpc_config: ``{"SecurityGroupIds": [...], "Subnets": [...]}``.
        enable_network_isolation: no outbound network from the container.
        kms_key_id: KMS key for the instances' storage volume (endpoint config).
        tags: extra tags for every resource created (mapping or ``[{"Key", "Value"}]``).
        variant_name: the production variant's name.
        autoscaling: register the variant with Application Auto Scaling (see :class:`AutoScaling`);
            None removes a registration this library made on an earlier run.
        wait: wait for ``InService`` (without it the handle is returned while ``Creating``/``Updating``
            and nothing is rolled back after that point).
        timeout, poll_interval: seconds for the wait.
        progress: ``progress(stage, detail)`` hook (see :data:`DeployProgress`).
        overwrite: passed to ``upload_models`` (replace artifacts whose content differs).
        boto3_session, sagemaker_session, boto_config, sagemaker_client, autoscaling_client, s3_client: how
            to reach AWS (a ``sagemaker.Session``'s ``boto_session``); a given client wins over the session.

    Returns:
        An :class:`Endpoint` handle.

    Raises:
        ValueError, TypeError: invalid arguments (nothing is created).
        ArtifactError: uploading ``models`` failed (nothing is created on SageMaker).
        EndpointFailedError: the endpoint went to ``Failed``, or SageMaker rolled back the update;
            ``failure_reason`` says why. What this call created has been deleted.
        DeploymentTimeoutError: not ``InService`` after ``timeout``; what this call created has been
            deleted.
        DeploymentError: a SageMaker or Application Auto Scaling call failed (the cause is chained);
            what this call created has been deleted.

    Example::

        endpoint = deploy_mme(
            "my-mme", "s3://my-bucket/mme/",
            models=["repo/resnet", "repo/bert"],
            role="arn:aws:iam::123456789012:role/SageMakerExecution",
            instance_type="ml.g5.xlarge",
            environment=TritonEnvironment(shm_default_byte_size=64 * 2**20),
        )
        endpoint.client().infer("resnet.tar.gz", {"input": batch})
    """
    from mme_triton.artifact.s3 import upload_models

    check_name("endpoint name", endpoint_name)
    check_name("variant name", variant_name)
    boto3_session, model_data_url, role = deploy_defaults(
        endpoint_name, model_data_url, role, boto3_session=boto3_session, sagemaker_session=sagemaker_session
    )
    bucket, prefix = parse_s3_url(model_data_url)
    model_data_url = f"s3://{bucket}/{prefix}"
    check_role(role)
    is_gpu = check_instance_type(instance_type)
    if isinstance(instance_count, bool) or not isinstance(instance_count, int) or instance_count < 1:
        raise ValueError(f"instance_count must be an int >= 1, got {instance_count!r}")
    env = environment_dict(environment)
    if model_cache not in (None, "Enabled", "Disabled"):
        raise ValueError(f"model_cache must be 'Enabled', 'Disabled' or None, got {model_cache!r}")
    vpc = check_vpc(vpc_config)
    check_kms_key(kms_key_id)
    user_tags = normalise_tags(tags)
    if autoscaling is not None:
        if not isinstance(autoscaling, AutoScaling):
            raise TypeError(f"autoscaling must be an AutoScaling, got {type(autoscaling).__name__}")
        if not autoscaling.min_capacity <= instance_count <= autoscaling.max_capacity:
            raise ValueError(
                f"instance_count {instance_count} is outside autoscaling's "
                f"[{autoscaling.min_capacity}, {autoscaling.max_capacity}]"
            )
    if timeout <= 0 or poll_interval <= 0:
        raise ValueError("timeout and poll_interval must be > 0 seconds")
    model_items = models_list(models)
    names = target_names(model_items)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"several models would be uploaded as {', '.join(duplicates)}")

    sagemaker = make_client(
        "sagemaker",
        client=sagemaker_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        default_config=control_plane_config(),
        region=region,
    )
    region = region_of(sagemaker, region)
    if image_uri is None:
        image_uri = triton_image_uri(region, version=triton_version, cpu=not is_gpu)

    plan = build_plan(
        endpoint_name,
        model_data_url,
        role=role,
        image_uri=image_uri,
        instance_type=instance_type,
        instance_count=instance_count,
        environment=env,
        model_cache=model_cache,
        vpc=vpc,
        enable_network_isolation=enable_network_isolation,
        kms_key_id=kms_key_id,
        tags=user_tags,
        variant_name=variant_name,
        autoscaling=autoscaling,
    )

    if model_items:
        if progress is not None:
            progress("upload", f"{len(model_items)} model(s) to {model_data_url}")
        upload_models(
            model_items,
            model_data_url,
            boto3_session=boto3_session,
            s3_client=s3_client,
            boto_config=boto_config,
            overwrite=overwrite,
        )

    scaling_client_holder: list[ApplicationAutoScalingClient] = []

    def scaling_client() -> ApplicationAutoScalingClient:
        if not scaling_client_holder:
            scaling_client_holder.append(
                make_client(
                    "application-autoscaling",
                    client=autoscaling_client,
                    boto3_session=boto3_session,
                    boto_config=boto_config,
                    default_config=control_plane_config(),
                    region=region,
                )
            )
        return scaling_client_holder[0]

    rollback = _Rollback(sagemaker, endpoint_name, variant_name=variant_name)
    try:
        description = _deploy(
            sagemaker, scaling_client, plan, rollback, wait, timeout, poll_interval, progress
        )
    except BaseException as exc:
        leftovers = rollback.run(progress) if rollback.created else []
        if not isinstance(exc, Exception):
            raise
        if isinstance(exc, DeploymentError) and not leftovers:
            raise
        note = f" (could not roll back: {'; '.join(leftovers)})" if leftovers else ""
        if isinstance(exc, EndpointFailedError):
            raise EndpointFailedError(
                f"{exc}{note}", endpoint_name=endpoint_name, failure_reason=exc.failure_reason
            ) from exc
        if isinstance(exc, DeploymentError):
            raise type(exc)(f"{exc}{note}", endpoint_name=endpoint_name) from exc
        raise DeploymentError(
            f"deploying endpoint {endpoint_name!r} failed: {exc}{note}", endpoint_name=endpoint_name
        ) from exc
    if progress is not None:
        progress("done", f"{endpoint_name} {description['EndpointStatus']}")
    return Endpoint(
        name=endpoint_name,
        arn=str(description["EndpointArn"]),
        status=str(description["EndpointStatus"]),
        model_data_url=model_data_url,
        endpoint_config_name=str(description.get("EndpointConfigName", plan.config_name)),
        model_name=plan.model_name,
        region=region,
        failure_reason=description.get("FailureReason"),
        _sagemaker=sagemaker,
        _session=boto3_session,
        _boto_config=boto_config,
    )


#: kind -> (name parameter, ARN field, Describe* method, Create* method, what to call it in messages)
_RESOURCES = {
    "model": ("ModelName", "ModelArn", "describe_model", "create_model", "a model"),
    "endpoint-config": (
        "EndpointConfigName",
        "EndpointConfigArn",
        "describe_endpoint_config",
        "create_endpoint_config",
        "an endpoint config",
    ),
}


def _ensure(
    sagemaker: SageMakerClient,
    kind: str,
    name: str,
    request: Mapping[str, Any],
    plan: DeployPlan,
    rollback: _Rollback,
    progress: DeployProgress | None,
) -> None:
    """Create the model or endpoint config ``name`` unless this library already made it for the endpoint.

    The check comes first because moto replaces a resource created under an existing name (SageMaker
    refuses): a resource of that name that someone else made is never touched.
    """
    name_key, arn_key, describe, create, label = _RESOURCES[kind]
    existing = describe_or_none(getattr(sagemaker, describe), **{name_key: name})
    if existing is not None:
        if list_tags(sagemaker, existing[arn_key]).get(TAG_ENDPOINT) != plan.endpoint_name:
            raise DeploymentError(
                f"{label} named {name} exists and was not created for endpoint {plan.endpoint_name!r}",
                endpoint_name=plan.endpoint_name,
            )
        logger.info("%s %s already exists", kind, name)
        return
    if progress is not None:
        progress(f"create-{kind}", name)
    getattr(sagemaker, create)(**{name_key: name}, Tags=plan.tags, **request)
    rollback.add(kind, name)
    logger.info("created %s %s", kind, name)


def _deploy(
    sagemaker: SageMakerClient,
    scaling_client: Callable[[], ApplicationAutoScalingClient],
    plan: DeployPlan,
    rollback: _Rollback,
    wait: bool,
    timeout: float,
    poll_interval: float,
    progress: DeployProgress | None,
) -> dict[str, Any]:
    name = plan.endpoint_name
    deadline = time.monotonic() + timeout
    existing = describe_or_none(sagemaker.describe_endpoint, EndpointName=name)
    if existing is not None:
        if list_tags(sagemaker, existing["EndpointArn"]).get(TAG_MANAGED) != "true":
            raise DeploymentError(
                f"endpoint {name!r} exists and was not created by mme_triton; not taking it over",
                endpoint_name=name,
            )
        if existing["EndpointStatus"] in IN_PROGRESS:
            existing = wait_for_endpoint(
                sagemaker, name, timeout=timeout, poll_interval=poll_interval, progress=progress
            )
        elif existing["EndpointStatus"] != "InService":
            raise DeploymentError(
                f"endpoint {name!r} is {existing['EndpointStatus']} "
                f"({existing.get('FailureReason') or 'no reason given'}); teardown() it first",
                endpoint_name=name,
            )

    _ensure(sagemaker, "model", plan.model_name, plan.model_request, plan, rollback, progress)
    _ensure(sagemaker, "endpoint-config", plan.config_name, plan.config_request, plan, rollback, progress)

    previous_config: str | None = None
    if existing is None:
        if progress is not None:
            progress("create-endpoint", name)
        sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=plan.config_name, Tags=plan.tags)
        rollback.add("endpoint", name)
        logger.info("creating endpoint %s with %s", name, plan.config_name)
    elif existing.get("EndpointConfigName") != plan.config_name:
        previous_config = str(existing["EndpointConfigName"])
        old_variants = {v["VariantName"] for v in existing.get("ProductionVariants", [])}
        for old_variant in old_variants - {plan.variant_name}:
            remove_autoscaling(scaling_client(), name, old_variant)
        if progress is not None:
            progress("update-endpoint", f"{name}: {previous_config} -> {plan.config_name}")
        sagemaker.update_endpoint(EndpointName=name, EndpointConfigName=plan.config_name)
        logger.info("updating endpoint %s from %s to %s", name, previous_config, plan.config_name)
    else:
        logger.info("endpoint %s already runs %s", name, plan.config_name)

    if not wait:
        return dict(sagemaker.describe_endpoint(EndpointName=name))
    remaining = max(deadline - time.monotonic(), poll_interval)
    description = wait_for_endpoint(
        sagemaker,
        name,
        timeout=remaining,
        poll_interval=poll_interval,
        progress=progress,
        expect_config=plan.config_name,
    )
    if existing is not None:
        # The endpoint now runs on this config and model: they are no longer this call's to delete.
        rollback.created.clear()

    if plan.autoscaling is not None:
        if progress is not None:
            progress("autoscaling", f"{plan.autoscaling}")
        client = scaling_client()
        rollback.autoscaling_client = client
        if existing is None:
            rollback.add("autoscaling", name)  # before the calls: a half-made registration is removed too
        apply_autoscaling(client, name, plan.variant_name, plan.autoscaling)
    elif existing is not None:
        _remove_library_autoscaling(scaling_client(), name, plan.variant_name)

    rollback.created.clear()  # in service: from here on nothing is rolled back
    if previous_config is not None:
        _remove_superseded(sagemaker, name, previous_config, plan, progress)
    return description


def _remove_library_autoscaling(
    client: ApplicationAutoScalingClient, endpoint_name: str, variant_name: str
) -> None:
    """Remove a registration an earlier run made (found by its policy name); leave others alone."""
    try:
        ours = client.describe_scaling_policies(
            ServiceNamespace="sagemaker",
            ResourceId=resource_id(endpoint_name, variant_name),
            PolicyNames=[policy_name(endpoint_name, variant_name)],
        ).get("ScalingPolicies", [])
    except Exception as exc:
        # Deployments without autoscaling need no Application Auto Scaling permissions.
        logger.warning("cannot check the autoscaling of %s: %s", endpoint_name, exc)
        return
    if any(p.get("PolicyName") == policy_name(endpoint_name, variant_name) for p in ours):
        remove_autoscaling(client, endpoint_name, variant_name)


def _remove_superseded(
    sagemaker: SageMakerClient,
    endpoint_name: str,
    config_name: str,
    plan: DeployPlan,
    progress: DeployProgress | None,
) -> None:
    """Delete the config (and its models) an update replaced, when this library created them."""
    try:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
        if list_tags(sagemaker, config["EndpointConfigArn"]).get(TAG_ENDPOINT) != endpoint_name:
            return
        if progress is not None:
            progress("cleanup", f"deleting superseded {config_name}")
        sagemaker.delete_endpoint_config(EndpointConfigName=config_name)
        for variant in config.get("ProductionVariants", []):
            model = variant.get("ModelName")
            if not model or model == plan.model_name:
                continue
            described = sagemaker.describe_model(ModelName=model)
            if list_tags(sagemaker, described["ModelArn"]).get(TAG_ENDPOINT) == endpoint_name:
                sagemaker.delete_model(ModelName=model)
        logger.info("deleted superseded endpoint config %s", config_name)
    except Exception as exc:
        # The endpoint is in service on the new config; a leftover is for teardown()/sweep() to remove.
        logger.warning(
            "could not delete superseded %s of endpoint %s: %s (%s)",
            config_name,
            endpoint_name,
            exc,
            error_code(exc),
        )
