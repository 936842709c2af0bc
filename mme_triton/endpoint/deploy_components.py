"""``deploy_inference_components()``: the same model directories on an endpoint of inference components.

SageMaker's second way to host many models on one endpoint: the endpoint's variant names no model, and
each model is an inference component with its own single-model Triton container and the memory, cores and
accelerators a copy reserves; SageMaker places the copies on the variant's instances, routes each request
by ``InferenceComponentName`` to a copy, and scales the copies per component (to zero and back).

Steps: upload the components' model directories under the prefix (as ``<directory>-<content hash>.tar.gz``,
so that changed content is a new archive) → a SageMaker model per component → an endpoint config without
a model → CreateEndpoint or UpdateEndpoint → wait for ``InService`` → CreateInferenceComponent,
UpdateInferenceComponent (new archive, resources or copies) → wait for the components → delete the
components, configs and models the endpoint no longer uses → each component's autoscaling. The endpoint
part is ``deploy_mme``'s own steps, recovery and handle (:mod:`mme_triton.endpoint._steps`); running the
same call again changes nothing, and a changed list of components adds, updates and removes components.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import error_code, make_client
from mme_triton.endpoint._component_plan import (
    ComponentArguments,
    ComponentSource,
    ResolvedComponents,
    build_component_plan,
    resolve_components,
)
from mme_triton.endpoint._component_steps import ComponentDeployment
from mme_triton.endpoint._recovery import Ledger
from mme_triton.endpoint._resolve import emit_warnings
from mme_triton.endpoint._retry import control_plane_config
from mme_triton.endpoint.components import InferenceComponent, artifact_url_parts
from mme_triton.endpoint.deploy import check_environments, run_steps
from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.endpoint.handle import DeployProgress, Endpoint, check_wait
from mme_triton.endpoint.images import DEFAULT_TRITON_VERSION
from mme_triton.errors import ArtifactError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = ["InferenceComponent", "deploy_inference_components"]

logger = logging.getLogger(__name__)


def deploy_inference_components(
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
    cloudwatch_client: Any = None,
    s3_client: S3Client | None = None,
) -> Endpoint:
    """Deploy (or bring up to date) an endpoint of inference components, one per model.

    Parameters:
        endpoint_name: 1-63 letters, digits and hyphens.
        components: the :class:`InferenceComponent` objects (one, or an iterable; names unique). The
            endpoint's components this library made and the list no longer names are deleted.
        role: the execution role ARN, on the endpoint config (SageMaker requires it there for components)
            and each component's model. Omitted: the SageMaker SDK's ``get_execution_role()``.
        instance_type: the instances the copies are placed on; multi-GPU types are fine (each component
            reserves its ``accelerators``).
        instance_count: the variant's initial instance count.
        model_data_url: ``s3://bucket/prefix/`` the components' directories and Artifacts are uploaded
            under. Omitted: ``s3://<the SageMaker session's default bucket>/mme-triton/<endpoint>/``.
        region, image_uri, triton_version: the Triton image, as for ``deploy_mme`` (the region's
            ``sagemaker-tritonserver`` image, ``-cpu`` for a CPU type).
        environment: the Environment of every component's container (each component's own ``environment``
            goes over it), over the shared-memory defaults; validated for a single-model Triton container.
            ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` is set to the archive's model directory.
        inference_ami_version: the variant's ``InferenceAmiVersion`` (the GPU driver).
        managed_instance_scaling: ``(min, max)`` instances SageMaker scales the variant between as the
            copies need room (``ManagedInstanceScaling``); a min of 0 lets an idle endpoint release every
            instance (with components that scale to zero).
        routing: ``RoutingConfig.RoutingStrategy``: ``"LEAST_OUTSTANDING_REQUESTS"``, ``"RANDOM"`` ...
            (None: SageMaker's default).
        vpc_config, enable_network_isolation: each component model's ``VpcConfig`` and network isolation.
        kms_key_id: KMS key for the instances' storage volume (endpoint config).
        tags: extra tags for every resource created (the components too).
        variant_name: the production variant's name (the components live on it).
        wait: wait for the components to be ``InService`` (the endpoint itself is always waited for:
            components are placed on an endpoint in service). Without it nothing is removed or rolled
            back after the component calls are sent.
        timeout: seconds for the whole call after the upload, reads retried within it included.
        poll_interval: the longest pause between two status polls.
        progress: ``progress(stage, detail)`` hook; ``deploy_mme``'s stages and ``"create-component"``,
            ``"update-component"``, ``"delete-component"``.
        overwrite: passed to ``upload_models`` for Artifacts whose name holds other content.
        boto3_session, sagemaker_session, boto_config: how to reach AWS.
        sagemaker_client, autoscaling_client, cloudwatch_client, s3_client: clients to use; a given
            client wins over the session.

    Returns:
        The same :class:`~mme_triton.endpoint.handle.Endpoint` handle ``deploy_mme`` returns, with
        ``hosting="inference-components"`` and the component names: ``endpoint.client().infer(name, ...)``.

    Raises:
        ValueError, TypeError: invalid arguments (nothing is created), among them a copy no instance of
            ``instance_type`` could hold.
        ModelValidationError: a model directory has errors (nothing is uploaded).
        ArtifactError: uploading failed, or an ``s3://`` archive does not exist (nothing is created).
        EndpointFailedError: the endpoint or a component went to ``Failed``, or SageMaker rolled a
            component's update back; ``failure_reason`` says why.
        DeploymentTimeoutError: the endpoint or a component was not ``InService`` in time.
        DeploymentError: a call failed, the endpoint is a multi-model endpoint, or a component name is
            taken by a component this library did not make for this endpoint. Each of these errors says
            in ``rolled_back`` and ``kept`` what was deleted again and what was left in use.

    Warns:
        MMETritonWarning: a setting that may not work (no accelerator on a GPU type, a component that
            scales to zero on instances that cannot, the GPU driver ...).

    Example::

        endpoint = deploy_inference_components(
            "my-components",
            [
                InferenceComponent("resnet", "repo/resnet", memory="4GiB", cpus=2, accelerators=1),
                InferenceComponent("bert", "repo/bert", memory="8GiB", cpus=4, accelerators=1, copies=2),
            ],
            role="arn:aws:iam::123456789012:role/SageMakerExecution",
            instance_type="ml.g5.12xlarge",
        )
        endpoint.client().infer("resnet", {"input": batch})
    """
    check_wait(timeout, poll_interval)
    resolved = resolve_components(
        ComponentArguments(
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
    )
    emit_warnings(resolved.warnings, stacklevel=2)
    where = resolved.where
    directories = [s.upload for s in resolved.sources if isinstance(s.upload, str | os.PathLike)]
    check_environments(directories, where.version)
    aws: dict[str, Any] = {"boto3_session": where.boto3_session, "boto_config": boto_config}
    _upload(resolved, s3_client=s3_client, overwrite=overwrite, progress=progress, **aws)
    _read_uploaded(resolved, s3_client=s3_client, **aws)
    plan = build_component_plan(resolved)

    ledger = Ledger(
        where.sagemaker,
        endpoint_name,
        plan.config_name,
        scaling_client=where.scaling_client,
        call="deploy_inference_components",
    )
    holder: list[Any] = []

    def cloudwatch() -> Any:
        if not holder:
            holder.append(
                make_client(
                    "cloudwatch",
                    client=cloudwatch_client,
                    default_config=control_plane_config(),
                    region=where.region,
                    **aws,
                )
            )
        return holder[0]

    steps = ComponentDeployment(resolved, plan, ledger, wait, timeout, poll_interval, progress, cloudwatch)
    return Endpoint.described(
        run_steps(steps.run, ledger, progress),
        plan,
        model_name="",
        region=where.region,
        sagemaker=where.sagemaker,
        session=where.boto3_session,
        boto_config=boto_config,
        hosting="inference-components",
        components=tuple(sorted(spec.name for spec in plan.components)),
    )


def _upload(
    resolved: ResolvedComponents,
    *,
    s3_client: Any,
    overwrite: bool,
    progress: DeployProgress | None,
    **aws: Any,
) -> None:
    """Upload the directories and Artifacts under the prefix (directories under versioned names) and note
    where each went."""
    from mme_triton.artifact.s3 import upload_models

    pending: list[ComponentSource] = [s for s in resolved.sources if s.upload is not None]
    if not pending:
        return
    url = resolved.where.model_data_url
    if progress is not None:
        progress("upload", f"{len(pending)} model(s) to {url}")
    for source in pending:
        # one call each: a directory goes under its versioned name, an Artifact under its own
        versioned = isinstance(source.upload, str | os.PathLike)
        (uploaded,) = upload_models(
            [source.upload],
            url,
            versioned=versioned,
            overwrite=overwrite,
            check_ensembles=False,  # each component names its archive: no TargetModel finds an old one
            s3_client=s3_client,
            **aws,
        )[:1]
        source.url, source.model_name, source.members = uploaded.url, uploaded.model_name, uploaded.members


def _read_uploaded(resolved: ResolvedComponents, *, s3_client: Any, **aws: Any) -> None:
    """Check that each archive given by URL exists, and read which model it serves from the metadata
    ``upload_models`` stores (an ensemble's); a single model's archive needs none (the container serves
    its only directory).

    Raises:
        ArtifactError: an archive is not there, or S3 refused to say.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    from mme_triton._sagemaker import parse_s3_url
    from mme_triton.artifact._ensembles import ensemble_object

    given = [s for s in resolved.sources if s.upload is None and s.model_name is None and s.url]
    if not given:
        return
    s3 = make_client("s3", client=s3_client, **aws)
    for source in given:
        assert source.url is not None
        prefix, name = artifact_url_parts(source.url)
        bucket, key_prefix = parse_s3_url(prefix)
        try:
            head = s3.head_object(Bucket=bucket, Key=key_prefix + name)
        except (ClientError, BotoCoreError) as exc:
            missing = error_code(exc) in ("404", "NoSuchKey", "NotFound")
            raise ArtifactError(
                f"inference component {source.component.name!r}: "
                + (f"there is no archive at {source.url}" if missing else f"cannot read {source.url}: {exc}"),
                url=source.url,
            ) from exc
        ensemble = ensemble_object(name, head)
        if ensemble is not None:
            source.model_name = ensemble.model
            source.members = (ensemble.model, *sorted(ensemble.steps))
