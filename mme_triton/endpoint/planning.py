"""``plan_deployment()``: what ``deploy_mme`` would do with the same arguments, found with read calls only.

It checks the arguments exactly as ``deploy_mme`` does, then reads (never writes) S3, SageMaker and
Application Auto Scaling: which artifacts would be uploaded, which model, config and endpoint would be
created, updated, kept or deleted, the model's Environment (with the shared-memory defaults), the image,
the AMI, and every warning ``deploy_mme`` would give. Reads are retried while the control plane
throttles or fails, for up to ``timeout`` seconds in all (:data:`PLAN_TIMEOUT` by default).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mme_triton._sagemaker import error_code, error_message, make_client, parse_s3_url, serving_container
from mme_triton.endpoint._resolve import DeployArguments, Resolved, emit_warnings, resolve
from mme_triton.endpoint._resources import (
    TAG_ENDPOINT,
    TAG_MANAGED,
    describe_or_none,
    list_tags,
    tagged_leftovers,
)
from mme_triton.endpoint._retry import Deadline, read
from mme_triton.endpoint.autoscaling import AutoScaling, current_autoscaling, resource_id, scalable_target
from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.endpoint.handle import IN_PROGRESS, check_seconds
from mme_triton.endpoint.images import DEFAULT_TRITON_VERSION

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.artifact.package import Artifact

__all__ = ["DeploymentPlan", "PlannedUpload", "plan_deployment"]

#: Seconds plan_deployment keeps retrying reads that are throttled or fail, unless told otherwise.
PLAN_TIMEOUT = 120.0

EndpointAction = Literal["create", "update", "none"]
UploadAction = Literal["upload", "unchanged", "replace", "conflict", "invalid", "unreadable"]


@dataclass(frozen=True)
class PlannedUpload:
    """One model of ``models=``: where it would go and what the upload would do.

    ``action``: ``"upload"`` (nothing under that name yet), ``"unchanged"`` (same content there: skipped),
    ``"replace"`` (different content, ``overwrite=True``), ``"conflict"`` (different content: deploy_mme
    would raise ``ArtifactConflictError``), ``"invalid"`` (the model has validation errors),
    ``"unreadable"`` (S3 refused to say what is there).
    """

    target_model: str
    source: str
    url: str
    action: UploadAction
    content_digest: str | None = None


@dataclass
class PlanReport:
    """What the deployers' plans share: where, the serving image and the variant, the endpoint now, the
    resources by action, the warnings and blockers; their JSON form and the closing lines of their
    summary."""

    endpoint_name: str
    model_data_url: str
    region: str
    image_uri: str
    triton_version: str | None
    instance_type: str
    instance_count: int
    variant_name: str
    endpoint_config_name: str
    endpoint_action: EndpointAction = field(default="create", kw_only=True)
    endpoint_status: str | None = field(default=None, kw_only=True)
    current_endpoint_config: str | None = field(default=None, kw_only=True)
    uploads: list[PlannedUpload] = field(default_factory=list, kw_only=True)
    to_create: list[tuple[str, str]] = field(default_factory=list, kw_only=True)
    to_update: list[tuple[str, str]] = field(default_factory=list, kw_only=True)
    to_delete: list[tuple[str, str]] = field(default_factory=list, kw_only=True)
    to_keep: list[tuple[str, str]] = field(default_factory=list, kw_only=True)
    warnings: list[str] = field(default_factory=list, kw_only=True)
    blockers: list[str] = field(default_factory=list, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain JSON types (pairs become two-element lists)."""
        data: dict[str, Any] = dataclasses.asdict(self)
        for key in ("to_create", "to_update", "to_delete", "to_keep"):
            data[key] = [list(pair) for pair in data[key]]
        return data

    def upload_lines(self) -> list[str]:
        """One summary line per planned upload."""
        return [f"  upload:       {u.target_model} ({u.source}): {u.action}" for u in self.uploads]

    def closing_lines(self, *extra: str) -> list[str]:
        """The summary's resources by action, then ``extra``, the warnings and the blockers."""

        def pairs(items: Sequence[tuple[str, str]]) -> str:
            return ", ".join(f"{kind} {name}" for kind, name in items) or "nothing"

        lines = [
            f"  create:       {pairs(self.to_create)}",
            f"  update:       {pairs(self.to_update)}",
            f"  delete:       {pairs(self.to_delete)}",
            f"  keep:         {pairs(self.to_keep)}",
            *extra,
        ]
        lines += [f"  warning:      {message}" for message in self.warnings]
        lines += [f"  would fail:   {message}" for message in self.blockers]
        return lines


@dataclass
class DeploymentPlan(PlanReport):
    """What ``deploy_mme`` would do; ``str(plan)`` reads as a summary, ``plan.to_dict()`` is JSON-ready.

    Attributes:
        endpoint_name, model_data_url, region: where.
        image_uri, triton_version: the serving image (``triton_version`` None for a custom image).
        instance_type, instance_count, variant_name: the production variant.
        inference_ami_version: the variant's ``InferenceAmiVersion`` (None: SageMaker's default AMI).
        environment: the model's ``Environment`` as it would be sent (shared-memory defaults included).
        model_name, endpoint_config_name: the names deploy_mme derives from the settings.
        endpoint_action: ``"create"``, ``"update"`` (UpdateEndpoint to the new config) or ``"none"``.
        endpoint_status, current_endpoint_config: the endpoint as it is now (None when there is none).
        uploads: one :class:`PlannedUpload` per model of ``models=``.
        to_create, to_update, to_delete, to_keep: ``(kind, name)`` pairs, kinds ``"model"``,
            ``"endpoint-config"``, ``"endpoint"``, ``"autoscaling"`` (name: the scalable target's
            resource id) and ``"bucket"`` (the SageMaker SDK's default bucket, when ``model_data_url``
            is derived from it and the bucket does not exist yet); ``to_delete`` lists what deploy_mme
            would remove: the autoscaling of a variant the update drops (before UpdateEndpoint), and
            once the endpoint is in service the configs and models made for it that it no longer uses
            (superseded ones, leftovers of an interrupted run) and a registration it made earlier.
        autoscaling: the requested :class:`AutoScaling` (None: none, or an earlier one removed).
        warnings: what deploy_mme would warn about.
        blockers: why deploy_mme would fail before changing anything (empty: it would go ahead).
    """

    inference_ami_version: str | None
    environment: dict[str, str]
    model_name: str
    autoscaling: AutoScaling | None = None

    def __str__(self) -> str:
        version = f" (Triton {self.triton_version})" if self.triton_version else ""
        ami = self.inference_ami_version or "SageMaker's default AMI"
        now = f"{self.endpoint_status} on {self.current_endpoint_config}" if self.endpoint_status else "none"
        lines = [
            f"deployment plan for endpoint {self.endpoint_name} ({self.region}): {self.endpoint_action}",
            f"  endpoint now: {now}",
            f"  image:        {self.image_uri}{version}",
            f"  instances:    {self.instance_count} x {self.instance_type} ({self.variant_name}), {ami}",
            f"  models from:  {self.model_data_url}",
            "  environment:  " + (", ".join(f"{k}={v}" for k, v in self.environment.items()) or "none"),
        ]
        lines += self.upload_lines()
        lines += self.closing_lines(f"  autoscaling:  {self.autoscaling or 'none'}")
        return "\n".join(lines)


def plan_deployment(
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
    environment: TritonEnvironment | Mapping[str, str | None] | None = None,
    inference_ami_version: str | None = None,
    model_cache: str | None = None,
    vpc_config: Mapping[str, Any] | None = None,
    enable_network_isolation: bool = False,
    kms_key_id: str | None = None,
    tags: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
    variant_name: str = "AllTraffic",
    autoscaling: AutoScaling | None = None,
    overwrite: bool = False,
    timeout: float = PLAN_TIMEOUT,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
    autoscaling_client: ApplicationAutoScalingClient | None = None,
    s3_client: S3Client | None = None,
) -> DeploymentPlan:
    """What ``deploy_mme`` would do with these arguments; only read calls are made.

    Takes ``deploy_mme``'s arguments except ``wait``, ``poll_interval`` and ``progress``, and checks them
    the same way. ``timeout`` bounds the plan's own reads (retried while the control plane throttles or
    fails; :data:`PLAN_TIMEOUT` seconds by default), not a wait for ``InService``.

    Returns:
        A :class:`DeploymentPlan`.

    Raises:
        ValueError, TypeError: invalid arguments (as deploy_mme raises them, before any call), or a
            ``timeout`` that is not > 0.
        DeploymentError: the endpoint, or a model or config under the derived names, cannot be read.

    Warns:
        MMETritonWarning: what deploy_mme would warn about (also listed in ``plan.warnings``).

    Example::

        plan = plan_deployment("my-mme", "s3://my-bucket/mme/", role=ROLE, instance_type="ml.g5.xlarge")
        print(plan)                 # what would be created, updated, deleted and kept
        json.dumps(plan.to_dict())  # the same, for a machine
    """
    from mme_triton.errors import DeploymentError

    check_seconds("timeout", timeout)
    resolved = resolve(
        DeployArguments(
            endpoint_name=endpoint_name,
            model_data_url=model_data_url,
            models=models,
            role=role,
            instance_type=instance_type,
            instance_count=instance_count,
            region=region,
            image_uri=image_uri,
            triton_version=triton_version,
            environment=environment,
            inference_ami_version=inference_ami_version,
            model_cache=model_cache,
            vpc_config=vpc_config,
            enable_network_isolation=enable_network_isolation,
            kms_key_id=kms_key_id,
            tags=tags,
            variant_name=variant_name,
            autoscaling=autoscaling,
            boto3_session=boto3_session,
            boto_config=boto_config,
            sagemaker_client=sagemaker_client,
            autoscaling_client=autoscaling_client,
            sagemaker_session=sagemaker_session,
        ),
        plan_only=True,
    )
    emit_warnings(resolved.warnings, stacklevel=2)
    deadline = Deadline(timeout)
    plan = _empty_plan(resolved)
    s3 = make_client("s3", client=s3_client, boto3_session=resolved.boto3_session, boto_config=boto_config)
    if resolved.default_bucket is not None:
        _plan_default_bucket(s3, resolved.default_bucket, plan, deadline)
    for item in resolved.model_items:
        upload, problem = planned_upload(s3, item, plan.model_data_url, overwrite, deadline)
        plan.uploads.append(upload)
        if problem:
            plan.blockers.append(problem)
    try:
        old_variants = _plan_sagemaker(resolved, plan, deadline)
    except DeploymentError:
        raise
    except Exception as exc:
        raise DeploymentError(
            f"cannot plan endpoint {endpoint_name!r}: {error_message(exc)}", endpoint_name=endpoint_name
        ) from exc
    _plan_autoscaling(resolved, plan, old_variants, deadline)
    return plan


def _empty_plan(resolved: Resolved) -> DeploymentPlan:
    plan = resolved.plan
    container = serving_container(plan.model_request) or {}
    variant = plan.config_request["ProductionVariants"][0]
    return DeploymentPlan(
        endpoint_name=plan.endpoint_name,
        model_data_url=plan.model_data_url,
        region=resolved.region,
        image_uri=resolved.image_uri,
        triton_version=resolved.triton_version,
        instance_type=str(variant["InstanceType"]),
        instance_count=int(variant["InitialInstanceCount"]),
        variant_name=plan.variant_name,
        inference_ami_version=variant.get("InferenceAmiVersion"),
        environment=dict(container.get("Environment", {})),
        model_name=plan.model_name,
        endpoint_config_name=plan.config_name,
        endpoint_action="create",
        autoscaling=plan.autoscaling,
        warnings=list(resolved.warnings),
    )


def _plan_default_bucket(s3: S3Client, bucket: str, plan: DeploymentPlan, deadline: Deadline) -> None:
    """The SageMaker SDK's default bucket: deploy_mme creates it when missing (the plan never does)."""
    try:
        read(s3.head_bucket, deadline=deadline, what=f"HeadBucket({bucket})", Bucket=bucket)
    except Exception as exc:
        if error_code(exc) in ("404", "NoSuchBucket", "NotFound"):
            plan.to_create.append(("bucket", bucket))
            return
        plan.warnings.append(f"the default bucket {bucket} cannot be checked: {error_message(exc)}")


def planned_upload(
    s3: S3Client,
    item: Any,
    model_data_url: str,
    overwrite: bool,
    deadline: Deadline,
    *,
    versioned: bool = False,
) -> tuple[PlannedUpload, str | None]:
    """What uploading ``item`` would do (a directory under its versioned name with ``versioned``), and why
    it would fail (None: it would not)."""
    from mme_triton.artifact.package import Artifact, versioned_name
    from mme_triton.artifact.s3 import CONTENT_DIGEST_METADATA

    if isinstance(item, Artifact):
        name, source, digest = item.name, str(item.path), item.content_digest
    else:
        from mme_triton.artifact.digest import content_digest
        from mme_triton.model.repository import load_model

        model = load_model(item)
        name, source = f"{model.path.name}.tar.gz", str(item)
        if model.errors:
            problem = f"{source} has {len(model.errors)} validation error(s) (validate_model lists them)"
            return PlannedUpload(name, source, model_data_url + name, "invalid"), problem
        digest = content_digest(model)
        if versioned:
            name = versioned_name(model.path.name, digest)
    url = model_data_url + name
    bucket, prefix = parse_s3_url(model_data_url)
    try:
        head = read(
            s3.head_object, deadline=deadline, what=f"HeadObject({url})", Bucket=bucket, Key=prefix + name
        )
    except Exception as exc:
        if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return PlannedUpload(name, source, url, "upload", digest), None
        problem = f"cannot check {url}: {error_message(exc)}"
        return PlannedUpload(name, source, url, "unreadable", digest), problem
    if head.get("Metadata", {}).get(CONTENT_DIGEST_METADATA) == digest:
        return PlannedUpload(name, source, url, "unchanged", digest), None
    if overwrite:
        return PlannedUpload(name, source, url, "replace", digest), None
    problem = f"{url} holds different content (upload under a new name, or pass overwrite=True)"
    return PlannedUpload(name, source, url, "conflict", digest), problem


def _plan_sagemaker(resolved: Resolved, plan: DeploymentPlan, deadline: Deadline) -> list[str]:
    """The endpoint, model and config part of the plan; returns the variants an update would drop."""
    sagemaker = resolved.sagemaker
    name = plan.endpoint_name
    endpoint = describe_or_none(sagemaker.describe_endpoint, deadline=deadline, EndpointName=name)
    for kind, resource, arn_key, call, key in (
        ("model", plan.model_name, "ModelArn", sagemaker.describe_model, "ModelName"),
        (
            "endpoint-config",
            plan.endpoint_config_name,
            "EndpointConfigArn",
            sagemaker.describe_endpoint_config,
            "EndpointConfigName",
        ),
    ):
        existing = describe_or_none(call, deadline=deadline, **{key: resource})
        if existing is None:
            plan.to_create.append((kind, resource))
        elif list_tags(sagemaker, existing[arn_key], deadline=deadline).get(TAG_ENDPOINT) != name:
            plan.blockers.append(f"{kind} {resource} exists and was not created for endpoint {name!r}")
        else:
            plan.to_keep.append((kind, resource))
    # What an earlier run left (an interrupted deploy, a rollback that failed) goes once the endpoint is
    # in service on the new config, whether it is created or updated.
    configs, models = tagged_leftovers(sagemaker, name, deadline=deadline)
    plan.to_delete += [("endpoint-config", c) for c in configs if c != plan.endpoint_config_name]
    plan.to_delete += [("model", m) for m in models if m != plan.model_name]
    if endpoint is None:
        plan.to_create.append(("endpoint", name))
        return []
    plan.endpoint_status = str(endpoint["EndpointStatus"])
    plan.current_endpoint_config = str(endpoint["EndpointConfigName"])
    if list_tags(sagemaker, endpoint["EndpointArn"], deadline=deadline).get(TAG_MANAGED) != "true":
        plan.blockers.append(f"endpoint {name!r} exists and was not created by mme_triton")
    elif plan.endpoint_status not in IN_PROGRESS and plan.endpoint_status != "InService":
        plan.blockers.append(f"endpoint {name!r} is {plan.endpoint_status}; teardown() it first")
    if plan.current_endpoint_config == plan.endpoint_config_name:
        plan.endpoint_action = "none"
        plan.to_keep.append(("endpoint", name))
        return []
    plan.endpoint_action = "update"
    plan.to_update.append(("endpoint", name))
    running = {str(v["VariantName"]) for v in endpoint.get("ProductionVariants", [])}
    return sorted(running - {plan.variant_name})


def _plan_autoscaling(
    resolved: Resolved, plan: DeploymentPlan, old_variants: Sequence[str], deadline: Deadline
) -> None:
    rid = resource_id(plan.endpoint_name, plan.variant_name)
    if plan.autoscaling is None and plan.endpoint_status is None:
        return
    try:
        client = resolved.scaling_client()
        # A variant the update drops loses its autoscaling before UpdateEndpoint (SageMaker refuses to
        # remove a scalable target's variant), whoever registered it.
        for old_variant in old_variants:
            old = resource_id(plan.endpoint_name, old_variant)
            if scalable_target(client, old, deadline=deadline) is not None:
                plan.to_delete.append(("autoscaling", old))
        current = current_autoscaling(client, plan.endpoint_name, plan.variant_name, deadline=deadline)
    except Exception as exc:
        plan.warnings.append(f"the autoscaling of {rid} cannot be read: {error_message(exc)}")
        return
    if plan.autoscaling is None:
        if current is not None:
            plan.to_delete.append(("autoscaling", rid))
    elif current == plan.autoscaling:
        plan.to_keep.append(("autoscaling", rid))
    elif current is None:
        plan.to_create.append(("autoscaling", rid))
    else:
        plan.to_update.append(("autoscaling", rid))
