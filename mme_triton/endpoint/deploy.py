"""``deploy_mme()``: a SageMaker multi-model endpoint running Triton, in one call.

Steps: upload the given models under the prefix → CreateModel (``Mode=MultiModel``, ``ModelDataUrl`` =
the prefix, the ``SAGEMAKER_TRITON_*`` environment) → CreateEndpointConfig → CreateEndpoint (or
UpdateEndpoint) → wait for ``InService`` → delete the configs and models the endpoint no longer uses →
autoscaling. Model and config names are the endpoint name plus a hash of their settings, so running the
same call again changes nothing, and a call with changed settings creates a new config (and model) and
updates the endpoint.

Reads are retried while the control plane throttles or fails, for as long as ``timeout`` allows. When a
step fails, what this call created is deleted again if it provably is not in use, and kept (and named in
the error) when the endpoint may be switching to it (:mod:`mme_triton.endpoint._recovery`). Whatever was
interrupted, running the same call again finishes the job.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mme_triton.endpoint._recovery import Ledger
from mme_triton.endpoint._resolve import DeployArguments, emit_warnings, resolve
from mme_triton.endpoint._steps import Deployment
from mme_triton.endpoint.autoscaling import AutoScaling
from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.endpoint.handle import DeployProgress, Endpoint, check_wait, wait_for_endpoint
from mme_triton.endpoint.images import DEFAULT_TRITON_VERSION
from mme_triton.errors import ModelValidationError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.artifact.package import Artifact

__all__ = ["AutoScaling", "DeployProgress", "Endpoint", "deploy_mme", "wait_for_endpoint"]

logger = logging.getLogger(__name__)


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
    environment: TritonEnvironment | Mapping[str, str | None] | None = None,
    inference_ami_version: str | None = None,
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
            Omitted: ``s3://<the SageMaker session's default bucket>/mme-triton/<endpoint>/``
            (docs/sagemaker-sdk.md).
        models: model directories or :class:`~mme_triton.artifact.package.Artifact` objects to upload
            under the prefix first (skipped when the same content is already there).
        role: the execution role ARN SageMaker assumes (reads the prefix, pulls the image). Omitted: the
            SageMaker SDK's ``get_execution_role()`` (the notebook's role; docs/sagemaker-sdk.md).
        instance_type: a CPU type or a single-GPU type (``ml.g5.xlarge``); multi-GPU types are refused, GPU
            types SageMaker's multi-model documentation does not list get a warning.
        instance_count: initial instance count.
        region: defaults to the session's or client's region.
        image_uri: an explicit image; by default the SageMaker Triton image for the region,
            ``triton_version`` and instance type (``-cpu`` image for CPU types).
        triton_version: the Triton release (``YY.MM``) of the default image.
        environment: :class:`TritonEnvironment` or a plain mapping, added to
            :data:`~mme_triton.endpoint.environment.DEFAULT_ENVIRONMENT` (the python backend's shared
            memory) and validated against CreateModel's limits; a mapping value of None removes a
            variable, a default included.
        inference_ami_version: the production variant's ``InferenceAmiVersion`` (the GPU driver the
            instances run); None keeps SageMaker's default AMI. A warning says when it (or the default)
            is too old for the Triton image.
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
        timeout: seconds for the whole call after the upload, reads retried within it included.
        poll_interval: the longest pause between two status polls (the first ones come sooner).
        progress: ``progress(stage, detail)`` hook (see :data:`DeployProgress`).
        overwrite: passed to ``upload_models`` (replace artifacts whose content differs).
        boto3_session, sagemaker_session, boto_config, sagemaker_client, autoscaling_client, s3_client: how
            to reach AWS (a ``sagemaker.Session``'s ``boto_session``); a given client wins over the session.

    Returns:
        An :class:`Endpoint` handle.

    Raises:
        ValueError, TypeError: invalid arguments (nothing is created).
        ModelValidationError: a model has errors, or a python model's ``EXECUTION_ENV_PATH``
            environment is not of the Python the image's python backend runs (nothing is uploaded).
        ArtifactError: uploading ``models`` failed (nothing is created on SageMaker).
        EndpointFailedError: the endpoint went to ``Failed``, or SageMaker rolled back the update;
            ``failure_reason`` says why.
        DeploymentTimeoutError: not ``InService`` after ``timeout`` (or its status could not be read).
        DeploymentError: a SageMaker or Application Auto Scaling call failed (the cause is chained).
            Each of these errors says in ``rolled_back`` what was deleted again and in ``kept`` what
            was left because it may be in use, and the message says how to finish (docs/deploy.md,
            "What happens when something fails").

    Warns:
        MMETritonWarning: a setting that may not work (instance type, GPU driver, a variable that does
            nothing on a multi-model endpoint); also logged.

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

    check_wait(timeout, poll_interval)
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
        )
    )
    boto3_session = resolved.boto3_session
    emit_warnings(resolved.warnings, stacklevel=2)
    plan = resolved.plan

    if resolved.model_items:
        check_environments(resolved.model_items, resolved.triton_version)
        if progress is not None:
            progress("upload", f"{len(resolved.model_items)} model(s) to {plan.model_data_url}")
        upload_models(
            resolved.model_items,
            plan.model_data_url,
            boto3_session=boto3_session,
            s3_client=s3_client,
            boto_config=boto_config,
            overwrite=overwrite,
        )

    ledger = Ledger(
        resolved.sagemaker,
        endpoint_name,
        plan.config_name,
        plan.model_name,
        scaling_client=resolved.scaling_client,
    )
    description = run_steps(
        Deployment(resolved, ledger, wait, timeout, poll_interval, progress).run, ledger, progress
    )
    return Endpoint.described(
        description,
        plan,
        model_name=plan.model_name,
        region=resolved.region,
        sagemaker=resolved.sagemaker,
        session=boto3_session,
        boto_config=boto_config,
    )


def run_steps(
    run: Callable[[], dict[str, Any]], ledger: Ledger, progress: DeployProgress | None
) -> dict[str, Any]:
    """``run()`` (a deployment's steps); an interrupt (Ctrl-C) stops at once and says what stays."""
    try:
        description = run()
    except BaseException as exc:
        if not isinstance(exc, Exception):
            interrupted(ledger, exc)
        raise
    if progress is not None:
        progress("done", f"{ledger.endpoint_name} {description['EndpointStatus']}")
    return description


def check_environments(items: Iterable[object], triton_version: str | None) -> None:
    """Refuse, before any upload, a python model whose ``EXECUTION_ENV_PATH`` environment is not of the
    Python the image's python backend runs (only known for SageMaker's own Triton images).

    Raises:
        ModelValidationError: such a model (``python-env-python-mismatch``).
    """
    from mme_triton.model.repository import load_model
    from mme_triton.model.validate import environment_problems, python_of_release

    if triton_version is None:
        return
    try:
        release = python_of_release(triton_version)
    except ValueError:
        return
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            problems = environment_problems(load_model(item).members, release)
            if problems:
                raise ModelValidationError(str(item), problems)


def interrupted(ledger: Ledger, exc: BaseException) -> None:
    """An interrupt (Ctrl-C) stops at once: nothing is deleted, the log and the exception say what stays."""
    left = ledger.unfinished()
    if not left and not ledger.removed_autoscaling:
        return
    note = (
        f"{ledger.call}({ledger.endpoint_name!r}) was interrupted; left as they are: "
        + (", ".join(f"{kind} {name}" for kind, name in left) or "nothing created")
        + f" (run {ledger.call} again with the same arguments to finish, or teardown() to remove them)"
    )
    if ledger.removed_autoscaling:
        note += "; the autoscaling removed for the variant rename: " + "; ".join(
            str(r) for r in ledger.removed_autoscaling
        )
    logger.error("%s", note)
    if hasattr(exc, "add_note"):
        exc.add_note(note)
