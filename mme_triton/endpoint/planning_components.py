"""``plan_inference_components()``: what ``deploy_inference_components`` would do, found with read calls only.

It checks the arguments exactly as the deployer does, then reads (never writes) S3, SageMaker and
Application Auto Scaling: which archives would be uploaded (under their versioned names), which component
would be created, updated (a new model or new resources), resized (its copies alone), left alone or
deleted, which models and config would be created or kept, whether the endpoint would be created or
updated, the autoscaling of each component, every warning the deployer would give, and why it would fail
before changing anything (``blockers``). Reads are retried while the control plane throttles or fails, for
up to ``timeout`` seconds in all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mme_triton._inference_components import MIN_CREATE_COPY_COUNT, hosts_components, resource_id
from mme_triton._sagemaker import error_message, make_client
from mme_triton.endpoint._component_plan import ComponentArguments, ResolvedComponents, build_component_plan
from mme_triton.endpoint._component_steps import same_resources
from mme_triton.endpoint._resolve import emit_warnings
from mme_triton.endpoint._resources import (
    TAG_ENDPOINT,
    TAG_MANAGED,
    describe_or_none,
    list_tags,
    paginate,
    tagged_leftovers,
)
from mme_triton.endpoint._retry import Deadline
from mme_triton.endpoint.component_scaling import current_component_scaling
from mme_triton.endpoint.components import InferenceComponent, artifact_url_parts
from mme_triton.endpoint.handle import IN_PROGRESS, check_seconds
from mme_triton.endpoint.images import DEFAULT_TRITON_VERSION
from mme_triton.endpoint.planning import PLAN_TIMEOUT, PlannedUpload, PlanReport, planned_upload

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

    from mme_triton.endpoint._component_plan import ComponentPlan
    from mme_triton.endpoint.component_scaling import ComponentAutoScaling
    from mme_triton.endpoint.environment import TritonEnvironment

__all__ = ["ComponentDeploymentPlan", "PlannedComponent", "plan_inference_components"]

ComponentAction = Literal["create", "update", "copies", "none", "delete"]


@dataclass(frozen=True)
class PlannedComponent:
    """One component and what the deployer would do to it.

    ``action``: ``"create"``, ``"update"`` (UpdateInferenceComponent: a new model or new resources),
    ``"copies"`` (UpdateInferenceComponentRuntimeConfig), ``"none"`` or ``"delete"`` (this library made it
    for the endpoint and the call no longer names it).
    """

    name: str
    action: ComponentAction
    model_name: str | None = None
    archive_url: str | None = None
    requirements: Mapping[str, Any] = field(default_factory=dict)
    copies: int | None = None
    autoscaling: ComponentAutoScaling | None = None


@dataclass
class ComponentDeploymentPlan(PlanReport):
    """What ``deploy_inference_components`` would do; ``str(plan)`` reads as a summary, ``plan.to_dict()``
    is JSON-ready.

    Attributes:
        endpoint_name, model_data_url, region, image_uri, triton_version: where, and the serving image.
        instance_type, instance_count, variant_name: the production variant.
        endpoint_config_name: the config the deployer derives from the settings.
        endpoint_action: ``"create"``, ``"update"`` or ``"none"``.
        endpoint_status, current_endpoint_config: the endpoint as it is now (None when there is none).
        components: one :class:`PlannedComponent` per component named, then the ones to delete.
        uploads: one ``PlannedUpload`` per directory or Artifact to upload.
        to_create, to_update, to_delete, to_keep: ``(kind, name)`` pairs, kinds ``"model"``,
            ``"endpoint-config"``, ``"endpoint"``, ``"inference-component"``, ``"autoscaling"`` (name: the
            scalable target's resource id).
        warnings: what the deployer would warn about. blockers: why it would fail before changing anything.
    """

    components: list[PlannedComponent] = field(default_factory=list)

    def __str__(self) -> str:
        now = f"{self.endpoint_status} on {self.current_endpoint_config}" if self.endpoint_status else "none"
        version = f" (Triton {self.triton_version})" if self.triton_version else ""
        lines = [
            f"inference components plan for endpoint {self.endpoint_name} ({self.region}): "
            f"{self.endpoint_action}",
            f"  endpoint now: {now}",
            f"  image:        {self.image_uri}{version}",
            f"  instances:    {self.instance_count} x {self.instance_type} ({self.variant_name})",
            f"  archives in:  {self.model_data_url}",
        ]
        lines += self.upload_lines()
        for c in self.components:
            copies = f", {c.copies} copies" if c.copies is not None else ""
            lines.append(
                f"  component:    {c.name}: {c.action}{copies}"
                + (f", {c.model_name}" if c.model_name else "")
            )
        lines += self.closing_lines()
        return "\n".join(lines)


def plan_inference_components(
    endpoint_name: str,
    components: InferenceComponent | Iterable[InferenceComponent],
    *,
    role: str | None = None,
    instance_type: str,
    instance_count: int = 1,
    model_data_url: str | None = None,
    region: str | None = None,
    image_uri: str | None = None,
    triton_version: str = DEFAULT_TRITON_VERSION,
    environment: TritonEnvironment | Mapping[str, str | None] | None = None,
    inference_ami_version: str | None = None,
    managed_instance_scaling: tuple[int, int] | None = None,
    routing: str | None = None,
    vpc_config: Mapping[str, Any] | None = None,
    enable_network_isolation: bool = False,
    kms_key_id: str | None = None,
    tags: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
    variant_name: str = "AllTraffic",
    overwrite: bool = False,
    timeout: float = PLAN_TIMEOUT,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    sagemaker_client: Any = None,
    autoscaling_client: Any = None,
    cloudwatch_client: Any = None,
    s3_client: Any = None,
) -> ComponentDeploymentPlan:
    """What ``deploy_inference_components`` would do with these arguments; only read calls are made.

    Takes the deployer's arguments except ``wait``, ``poll_interval`` and ``progress``, and checks them the
    same way; ``timeout`` bounds the plan's own reads.

    Raises:
        ValueError, TypeError: invalid arguments (as the deployer raises them, before any call).
        DeploymentError: the endpoint or a component cannot be read.

    Warns:
        MMETritonWarning: what the deployer would warn about (also in ``plan.warnings``).

    Example::

        plan = plan_inference_components("my-components", [InferenceComponent("linear", "repo/linear")],
                                         role=ROLE, instance_type="ml.m5.xlarge")
        print(plan)
    """
    from mme_triton.endpoint._component_plan import resolve_components
    from mme_triton.errors import DeploymentError

    check_seconds("timeout", timeout)
    arguments = ComponentArguments(
        endpoint_name=endpoint_name,
        components=components,
        role=role,
        instance_type=instance_type,
        instance_count=instance_count,
        model_data_url=model_data_url,
        region=region,
        image_uri=image_uri,
        triton_version=triton_version,
        environment=environment,
        inference_ami_version=inference_ami_version,
        managed_instance_scaling=managed_instance_scaling,
        routing=routing,
        vpc_config=vpc_config,
        enable_network_isolation=enable_network_isolation,
        kms_key_id=kms_key_id,
        tags=tags,
        variant_name=variant_name,
        boto3_session=boto3_session,
        boto_config=boto_config,
        sagemaker_client=sagemaker_client,
        autoscaling_client=autoscaling_client,
        sagemaker_session=sagemaker_session,
    )
    resolved = resolve_components(arguments, plan_only=True)
    emit_warnings(resolved.warnings, stacklevel=2)
    deadline = Deadline(timeout)
    where = resolved.where
    aws: dict[str, Any] = {"boto3_session": where.boto3_session, "boto_config": boto_config}
    s3 = make_client("s3", client=s3_client, **aws)
    uploads: list[PlannedUpload] = []
    blockers = _archives(s3, resolved, overwrite, deadline, uploads)
    plan = build_component_plan(resolved)
    result = ComponentDeploymentPlan(
        endpoint_name=endpoint_name,
        model_data_url=where.model_data_url,
        region=where.region,
        image_uri=where.image_uri,
        triton_version=where.version,
        instance_type=instance_type,
        instance_count=instance_count,
        variant_name=variant_name,
        endpoint_config_name=plan.config_name,
        uploads=uploads,
        warnings=list(resolved.warnings),
        blockers=blockers,
    )
    try:
        _plan_sagemaker(where.sagemaker, plan, result, deadline)
    except DeploymentError:
        raise
    except Exception as exc:
        raise DeploymentError(
            f"cannot plan endpoint {endpoint_name!r}: {error_message(exc)}", endpoint_name=endpoint_name
        ) from exc
    cloudwatch = make_client("cloudwatch", client=cloudwatch_client, region=where.region, **aws)
    _plan_autoscaling(where.scaling_client, cloudwatch, plan, result, deadline)
    return result


def _archives(
    s3: Any, resolved: ResolvedComponents, overwrite: bool, deadline: Deadline, uploads: list[PlannedUpload]
) -> list[str]:
    """Note each source's archive URL as the deployer would have it, and what its upload would do."""
    from mme_triton._sagemaker import error_code, parse_s3_url
    from mme_triton.artifact.package import Artifact
    from mme_triton.endpoint._retry import read

    blockers = []
    for source in resolved.sources:
        if source.upload is not None:
            versioned = not isinstance(source.upload, Artifact)
            upload, problem = planned_upload(
                s3, source.upload, resolved.where.model_data_url, overwrite, deadline, versioned=versioned
            )
            uploads.append(upload)
            source.url = upload.url
            if problem:
                blockers.append(problem)
            continue
        assert source.url is not None
        prefix, name = artifact_url_parts(source.url)
        bucket, key = parse_s3_url(prefix)
        try:
            read(
                s3.head_object,
                deadline=deadline,
                what=f"HeadObject({source.url})",
                Bucket=bucket,
                Key=key + name,
            )
        except Exception as exc:
            missing = error_code(exc) in ("404", "NoSuchKey", "NotFound")
            blockers.append(
                f"component {source.component.name!r}: "
                + (f"there is no archive at {source.url}" if missing else f"cannot read {source.url}: {exc}")
            )
    return blockers


def _plan_sagemaker(
    sagemaker: Any, plan: ComponentPlan, result: ComponentDeploymentPlan, deadline: Deadline
) -> None:
    name = plan.endpoint_name
    endpoint = describe_or_none(sagemaker.describe_endpoint, deadline=deadline, EndpointName=name)
    for model_name in sorted(plan.model_names):
        found = describe_or_none(sagemaker.describe_model, deadline=deadline, ModelName=model_name)
        (result.to_keep if found is not None else result.to_create).append(("model", model_name))
    config = describe_or_none(
        sagemaker.describe_endpoint_config, deadline=deadline, EndpointConfigName=plan.config_name
    )
    (result.to_keep if config is not None else result.to_create).append(("endpoint-config", plan.config_name))
    if endpoint is None:
        result.to_create.append(("endpoint", name))
    else:
        result.endpoint_status = str(endpoint["EndpointStatus"])
        result.current_endpoint_config = str(endpoint["EndpointConfigName"])
        if list_tags(sagemaker, endpoint["EndpointArn"], deadline=deadline).get(TAG_MANAGED) != "true":
            result.blockers.append(f"endpoint {name!r} exists and was not created by mme_triton")
        elif result.endpoint_status not in IN_PROGRESS and result.endpoint_status != "InService":
            result.blockers.append(f"endpoint {name!r} is {result.endpoint_status}; teardown() it first")
        running = describe_or_none(
            sagemaker.describe_endpoint_config,
            deadline=deadline,
            EndpointConfigName=result.current_endpoint_config,
        )
        if running is not None and not hosts_components(running):
            result.blockers.append(f"endpoint {name!r} is a multi-model endpoint; teardown() it first")
        if result.current_endpoint_config == plan.config_name:
            result.endpoint_action = "none"
            result.to_keep.append(("endpoint", name))
        else:
            result.endpoint_action = "update"
            result.to_update.append(("endpoint", name))
    named = {spec.name for spec in plan.components}
    for spec in plan.components:
        found = describe_or_none(
            sagemaker.describe_inference_component, deadline=deadline, InferenceComponentName=spec.name
        )
        action = _action(sagemaker, spec, found, name, result, deadline)
        result.components.append(
            PlannedComponent(
                spec.name,
                action,
                spec.model_name,
                spec.artifact_url,
                spec.specification["ComputeResourceRequirements"],
                spec.copies,
                spec.autoscaling,
            )
        )
        pair = ("inference-component", spec.name)
        {"create": result.to_create, "none": result.to_keep}.get(action, result.to_update).append(pair)
    in_use = set(plan.model_names)
    if endpoint is not None:
        listed = paginate(
            sagemaker.list_inference_components,
            "InferenceComponents",
            deadline=deadline,
            EndpointNameEquals=name,
        )
        for item in listed:
            other = str(item["InferenceComponentName"])
            if other in named:
                continue
            if (
                list_tags(sagemaker, item["InferenceComponentArn"], deadline=deadline).get(TAG_ENDPOINT)
                == name
            ):
                result.components.append(PlannedComponent(other, "delete"))
                result.to_delete.append(("inference-component", other))
                continue
            # a component this library did not make stays, and so does its model
            found = describe_or_none(
                sagemaker.describe_inference_component, deadline=deadline, InferenceComponentName=other
            )
            in_use.add(str((found or {}).get("Specification", {}).get("ModelName", "")))
    # what the deployer removes once the endpoint serves the new components
    configs, models = tagged_leftovers(sagemaker, name, deadline=deadline)
    result.to_delete += [("endpoint-config", c) for c in configs if c != plan.config_name]
    result.to_delete += [("model", m) for m in models if m not in in_use]


def _action(
    sagemaker: Any,
    spec: Any,
    found: Mapping[str, Any] | None,
    endpoint: str,
    result: ComponentDeploymentPlan,
    deadline: Deadline,
) -> ComponentAction:
    if found is None:
        if spec.copies < MIN_CREATE_COPY_COUNT:
            result.blockers.append(
                f"inference component {spec.name!r} does not exist yet and copies=0: SageMaker creates a "
                f"component with at least {MIN_CREATE_COPY_COUNT} copy"
            )
        return "create"
    tags = list_tags(sagemaker, found["InferenceComponentArn"], deadline=deadline)
    if found.get("EndpointName") != endpoint or tags.get(TAG_ENDPOINT) != endpoint:
        result.blockers.append(
            f"an inference component named {spec.name!r} exists (on endpoint {found.get('EndpointName')!r}) "
            f"and was not created for endpoint {endpoint!r}"
        )
        return "none"
    current = found.get("Specification", {})
    if current.get("ModelName") != spec.model_name or not same_resources(
        current.get("ComputeResourceRequirements", {}), spec.specification["ComputeResourceRequirements"]
    ):
        return "update"
    copies = found.get("RuntimeConfig", {}).get("DesiredCopyCount")
    return "copies" if spec.autoscaling is None and copies != spec.copies else "none"


def _plan_autoscaling(
    scaling_client: Any,
    cloudwatch: Any,
    plan: ComponentPlan,
    result: ComponentDeploymentPlan,
    deadline: Deadline,
) -> None:
    existing = {c.name for c in result.components if c.action not in ("create", "delete")}
    try:
        client = scaling_client()
        for planned in result.components:
            if planned.action == "delete":
                _, registered = current_component_scaling(client, cloudwatch, planned.name, deadline=deadline)
                if registered:
                    result.to_delete.append(("autoscaling", resource_id(planned.name)))
        for spec in plan.components:
            rid = resource_id(spec.name)
            current = None
            if spec.name in existing:
                current, _ = current_component_scaling(client, cloudwatch, spec.name, deadline=deadline)
            if spec.autoscaling is None:
                if current is not None:
                    result.to_delete.append(("autoscaling", rid))
            elif current == spec.autoscaling:
                result.to_keep.append(("autoscaling", rid))
            else:
                (result.to_create if current is None else result.to_update).append(("autoscaling", rid))
    except Exception as exc:
        result.warnings.append(f"the components' autoscaling cannot be read: {error_message(exc)}")
