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
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._aws import make_client
from mme_triton.endpoint._aws import (
    TAG_CREATED_AT,
    TAG_ENDPOINT,
    TAG_MANAGED,
    TAG_PREFIX,
    check_name,
    config_name_for,
    describe_or_none,
    error_code,
    is_not_found,
    list_tags,
    model_name_for,
    settings_hash,
)
from mme_triton.endpoint.autoscaling import (
    AutoScaling,
    apply_autoscaling,
    policy_name,
    remove_autoscaling,
    resource_id,
)
from mme_triton.endpoint.environment import TritonEnvironment, validate_environment
from mme_triton.endpoint.images import DEFAULT_TRITON_VERSION, triton_image_uri
from mme_triton.endpoint.instances import check_instance_type
from mme_triton.errors import DeploymentError, DeploymentTimeoutError, EndpointFailedError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

    from mme_triton.artifact.package import Artifact
    from mme_triton.client.client import MMEClient

__all__ = ["AutoScaling", "DeployProgress", "Endpoint", "deploy_mme", "wait_for_endpoint"]

logger = logging.getLogger(__name__)

#: ``progress(stage, detail)``; stages: ``"upload"``, ``"create-model"``, ``"create-endpoint-config"``,
#: ``"create-endpoint"``, ``"update-endpoint"``, ``"wait"`` (detail = status and seconds waited),
#: ``"autoscaling"``, ``"cleanup"``, ``"rollback"``, ``"done"``.
DeployProgress = Callable[[str, str], None]

_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-/]+$")
_KMS_KEY = re.compile(r"^[a-zA-Z0-9:/_-]+$")
_TAG_TEXT = re.compile(r"^[\w\s.:/=+\-@]*$")
_IN_PROGRESS = {"Creating", "Updating", "SystemUpdating", "RollingBack"}
_MAX_TAGS = 50


@dataclass
class Endpoint:
    """A handle on a deployed multi-model endpoint.

    Attributes:
        name, arn, status: the endpoint's name, ARN and last seen ``EndpointStatus``.
        model_data_url: the ``s3://bucket/prefix/`` its models are served from.
        endpoint_config_name, model_name: the SageMaker resources behind it.
        region: the endpoint's region.
        failure_reason: SageMaker's ``FailureReason``, if any.
    """

    name: str
    arn: str
    status: str
    model_data_url: str
    endpoint_config_name: str
    model_name: str
    region: str
    failure_reason: str | None = None
    _sagemaker: Any = field(default=None, repr=False, compare=False)
    _session: Any = field(default=None, repr=False, compare=False)
    _boto_config: Any = field(default=None, repr=False, compare=False)

    def client(self, **kwargs: Any) -> MMEClient:
        """A ready :class:`~mme_triton.client.client.MMEClient` for this endpoint (same session and config).

        Keyword arguments go to ``MMEClient`` (``runtime_client=``, ``binary=``, ...).
        """
        from mme_triton.client.client import MMEClient

        if "runtime_client" not in kwargs:
            kwargs.setdefault("boto3_session", self._session)
            kwargs.setdefault("boto_config", self._boto_config)
            if self._session is None:
                kwargs["runtime_client"] = make_client(
                    "sagemaker-runtime", boto_config=self._boto_config, region=self.region
                )
        kwargs.setdefault("model_data_url", self.model_data_url)
        return MMEClient(self.name, **kwargs)

    def refresh(self) -> Endpoint:
        """Describe the endpoint again and update ``status``, ``failure_reason`` and config/model names."""
        sagemaker = self._sagemaker_client()
        description = sagemaker.describe_endpoint(EndpointName=self.name)
        self._update(description)
        return self

    def wait(
        self, *, timeout: float = 1800, poll_interval: float = 15, progress: DeployProgress | None = None
    ) -> Endpoint:
        """Wait until the endpoint is ``InService``.

        Raises:
            EndpointFailedError: it went to ``Failed`` (or an update was rolled back).
            DeploymentTimeoutError: not in service after ``timeout`` seconds.
        """
        description = wait_for_endpoint(
            self._sagemaker_client(),
            self.name,
            timeout=timeout,
            poll_interval=poll_interval,
            progress=progress,
        )
        self._update(description)
        return self

    def _sagemaker_client(self) -> Any:
        if self._sagemaker is None:
            self._sagemaker = make_client(
                "sagemaker", boto3_session=self._session, boto_config=self._boto_config, region=self.region
            )
        return self._sagemaker

    def _update(self, description: Mapping[str, Any]) -> None:
        self.status = str(description.get("EndpointStatus", self.status))
        self.failure_reason = description.get("FailureReason")
        self.arn = str(description.get("EndpointArn", self.arn))
        config_name = description.get("EndpointConfigName")
        if config_name and config_name != self.endpoint_config_name:
            self.endpoint_config_name = str(config_name)
            config = self._sagemaker_client().describe_endpoint_config(EndpointConfigName=config_name)
            self.model_name = str(config["ProductionVariants"][0]["ModelName"])


def wait_for_endpoint(
    sagemaker: Any,
    endpoint_name: str,
    *,
    timeout: float,
    poll_interval: float,
    progress: DeployProgress | None = None,
    expect_config: str | None = None,
) -> dict[str, Any]:
    """Poll DescribeEndpoint until ``InService``; return the last description.

    With ``expect_config``, an endpoint back ``InService`` on another config (an update SageMaker rolled
    back) counts as failed.

    Raises:
        EndpointFailedError: ``Failed``, ``UpdateRollbackFailed``, ``OutOfService`` or a rolled-back update.
        DeploymentTimeoutError: still in progress after ``timeout`` seconds.
    """
    start = time.monotonic()
    while True:
        description: dict[str, Any] = sagemaker.describe_endpoint(EndpointName=endpoint_name)
        status = description["EndpointStatus"]
        waited = time.monotonic() - start
        if progress is not None:
            progress("wait", f"{status} after {waited:.0f}s")
        if status == "InService":
            if expect_config is not None and description.get("EndpointConfigName") != expect_config:
                reason = description.get("FailureReason") or "the update was rolled back"
                raise EndpointFailedError(
                    f"endpoint {endpoint_name!r}: update to {expect_config} failed: {reason}",
                    endpoint_name=endpoint_name,
                    failure_reason=reason,
                )
            return description
        if status not in _IN_PROGRESS:
            reason = description.get("FailureReason") or ""
            raise EndpointFailedError(
                f"endpoint {endpoint_name!r} is {status}: {reason or 'no FailureReason given'}",
                endpoint_name=endpoint_name,
                failure_reason=reason,
            )
        if waited >= timeout:
            raise DeploymentTimeoutError(
                f"endpoint {endpoint_name!r} still {status} after {timeout:g}s", endpoint_name=endpoint_name
            )
        time.sleep(max(0.0, min(poll_interval, timeout - waited)))


# -- input checks ------------------------------------------------------------------------------------


def _check_role(role: str) -> None:
    if not isinstance(role, str):
        raise TypeError(f"role must be an IAM role ARN (str), got {type(role).__name__}")
    if not (20 <= len(role) <= 2048 and _ROLE_ARN.match(role)):
        raise ValueError(
            f"role {role!r} is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)"
        )


def _normalise_tags(tags: Mapping[str, str] | Sequence[Mapping[str, str]] | None) -> dict[str, str]:
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        pairs = dict(tags)
    else:
        pairs = {}
        for tag in tags:
            if set(tag) != {"Key", "Value"}:
                raise ValueError(f"a tag must have exactly 'Key' and 'Value', got {dict(tag)!r}")
            pairs[tag["Key"]] = tag["Value"]
    for key, value in pairs.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"tag keys and values must be str, got {key!r}: {value!r}")
        if not 1 <= len(key) <= 128 or not _TAG_TEXT.match(key):
            raise ValueError(f"tag key {key!r}: 1-128 letters, digits, spaces and _.:/=+-@")
        if len(value) > 256 or not _TAG_TEXT.match(value):
            raise ValueError(f"tag value for {key!r}: at most 256 letters, digits, spaces and _.:/=+-@")
        if key.lower().startswith("aws:"):
            raise ValueError(f"tag key {key!r}: the aws: prefix is reserved")
        if key.startswith(TAG_PREFIX):
            raise ValueError(f"tag key {key!r}: the {TAG_PREFIX} prefix is reserved for this library")
    if len(pairs) + 3 > _MAX_TAGS:
        raise ValueError(f"at most {_MAX_TAGS - 3} tags (SageMaker allows {_MAX_TAGS}; 3 are this library's)")
    return pairs


def _check_vpc(vpc_config: Mapping[str, Any] | None) -> dict[str, list[str]] | None:
    if vpc_config is None:
        return None
    groups = list(vpc_config.get("SecurityGroupIds", []))
    subnets = list(vpc_config.get("Subnets", []))
    if set(vpc_config) - {"SecurityGroupIds", "Subnets"}:
        raise ValueError(f"vpc_config takes SecurityGroupIds and Subnets only, got {sorted(vpc_config)}")
    if not 1 <= len(groups) <= 5 or not all(isinstance(g, str) and g.startswith("sg-") for g in groups):
        raise ValueError("vpc_config['SecurityGroupIds'] must list 1-5 security group ids (sg-...)")
    if not 1 <= len(subnets) <= 16 or not all(
        isinstance(s, str) and s.startswith("subnet-") for s in subnets
    ):
        raise ValueError("vpc_config['Subnets'] must list 1-16 subnet ids (subnet-...)")
    return {"SecurityGroupIds": groups, "Subnets": subnets}


def _environment_dict(environment: TritonEnvironment | Mapping[str, str] | None) -> dict[str, str]:
    if environment is None:
        return {}
    if isinstance(environment, TritonEnvironment):
        return environment.to_environment()
    if isinstance(environment, Mapping):
        return validate_environment(environment)
    raise TypeError(f"environment must be a TritonEnvironment or a mapping, got {type(environment).__name__}")


def _target_names(models: Iterable[str | os.PathLike[str] | Artifact]) -> list[str]:
    """The TargetModel names the given models will get by default (to catch duplicates early)."""
    names = []
    for item in models:
        if isinstance(item, str | os.PathLike):
            names.append(f"{Path(item).name}.tar.gz")
        else:
            names.append(str(item.name))
    return names


def _models_list(
    models: str | os.PathLike[str] | Artifact | Iterable[str | os.PathLike[str] | Artifact],
) -> list[str | os.PathLike[str] | Artifact]:
    from mme_triton.artifact.package import Artifact

    if isinstance(models, str | os.PathLike | Artifact):
        return [models]
    return list(models)


def _region_of(sagemaker: Any, region: str | None) -> str:
    resolved = region or getattr(getattr(sagemaker, "meta", None), "region_name", None)
    if not resolved:
        raise ValueError("no AWS region: pass region= or a boto3 session/client with a region")
    return str(resolved)


# -- the deployment ----------------------------------------------------------------------------------


@dataclass
class _Plan:
    endpoint_name: str
    model_data_url: str
    model_name: str
    config_name: str
    model_request: dict[str, Any]
    config_request: dict[str, Any]
    tags: list[dict[str, str]]
    variant_name: str
    autoscaling: AutoScaling | None


@dataclass
class _Rollback:
    sagemaker: Any
    endpoint_name: str
    created: list[tuple[str, str]] = field(default_factory=list)
    autoscaling_client: Any = None
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
    model_data_url: str,
    *,
    models: str | os.PathLike[str] | Artifact | Iterable[str | os.PathLike[str] | Artifact] = (),
    role: str,
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
    boto_config: Config | None = None,
    sagemaker_client: Any = None,
    autoscaling_client: Any = None,
    s3_client: Any = None,
) -> Endpoint:
    """Deploy (or bring up to date) a Triton multi-model endpoint serving ``model_data_url``.

    Parameters:
        endpoint_name: 1-63 letters, digits and hyphens.
        model_data_url: ``s3://bucket/prefix/``; every ``<name>.tar.gz`` directly under it is a TargetModel.
        models: model directories or :class:`~mme_triton.artifact.package.Artifact` objects to upload
            under the prefix first (skipped when the same content is already there).
        role: the execution role ARN SageMaker assumes (reads the prefix, pulls the image).
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
        boto3_session, boto_config, sagemaker_client, autoscaling_client, s3_client: how to reach AWS; a
            given client wins over the session.

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
    from mme_triton.artifact.s3 import parse_s3_url, upload_models

    check_name("endpoint name", endpoint_name)
    check_name("variant name", variant_name)
    bucket, prefix = parse_s3_url(model_data_url)
    model_data_url = f"s3://{bucket}/{prefix}"
    _check_role(role)
    is_gpu = check_instance_type(instance_type)
    if isinstance(instance_count, bool) or not isinstance(instance_count, int) or instance_count < 1:
        raise ValueError(f"instance_count must be an int >= 1, got {instance_count!r}")
    env = _environment_dict(environment)
    if model_cache not in (None, "Enabled", "Disabled"):
        raise ValueError(f"model_cache must be 'Enabled', 'Disabled' or None, got {model_cache!r}")
    vpc = _check_vpc(vpc_config)
    if kms_key_id is not None and (len(kms_key_id) > 2048 or not _KMS_KEY.match(kms_key_id)):
        raise ValueError(f"kms_key_id {kms_key_id!r} is not a KMS key id, ARN or alias")
    user_tags = _normalise_tags(tags)
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
    model_items = _models_list(models)
    names = _target_names(model_items)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"several models would be uploaded as {', '.join(duplicates)}")

    sagemaker = make_client(
        "sagemaker",
        client=sagemaker_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        region=region,
    )
    region = _region_of(sagemaker, region)
    if image_uri is None:
        image_uri = triton_image_uri(region, version=triton_version, cpu=not is_gpu)

    container: dict[str, Any] = {"Image": image_uri, "Mode": "MultiModel", "ModelDataUrl": model_data_url}
    if env:
        container["Environment"] = env
    if model_cache is not None:
        container["MultiModelConfig"] = {"ModelCacheSetting": model_cache}
    model_request: dict[str, Any] = {"ExecutionRoleArn": role, "PrimaryContainer": container}
    if vpc is not None:
        model_request["VpcConfig"] = vpc
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
    config_request: dict[str, Any] = {"ProductionVariants": [variant]}
    if kms_key_id is not None:
        config_request["KmsKeyId"] = kms_key_id
    config_name = config_name_for(endpoint_name, settings_hash(config_request))
    created_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    all_tags = {**user_tags, TAG_MANAGED: "true", TAG_ENDPOINT: endpoint_name, TAG_CREATED_AT: created_at}
    plan = _Plan(
        endpoint_name=endpoint_name,
        model_data_url=model_data_url,
        model_name=model_name,
        config_name=config_name,
        model_request=model_request,
        config_request=config_request,
        tags=[{"Key": k, "Value": v} for k, v in all_tags.items()],
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

    scaling_client_holder: list[Any] = []

    def scaling_client() -> Any:
        if not scaling_client_holder:
            scaling_client_holder.append(
                make_client(
                    "application-autoscaling",
                    client=autoscaling_client,
                    boto3_session=boto3_session,
                    boto_config=boto_config,
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
        endpoint_config_name=str(description.get("EndpointConfigName", config_name)),
        model_name=model_name,
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
    sagemaker: Any,
    kind: str,
    name: str,
    request: Mapping[str, Any],
    plan: _Plan,
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
    sagemaker: Any,
    scaling_client: Callable[[], Any],
    plan: _Plan,
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
        if existing["EndpointStatus"] in _IN_PROGRESS:
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
        description: dict[str, Any] = sagemaker.describe_endpoint(EndpointName=name)
        return description
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


def _remove_library_autoscaling(client: Any, endpoint_name: str, variant_name: str) -> None:
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
    sagemaker: Any, endpoint_name: str, config_name: str, plan: _Plan, progress: DeployProgress | None
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
