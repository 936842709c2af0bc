"""``teardown()`` and ``sweep()``: remove an endpoint and everything behind it, idempotently.

Order: autoscaling registration → inference components (each with its autoscaling; waited for until they
are gone, which SageMaker needs before it deletes their endpoint) → endpoint → endpoint config(s) →
model(s) → (optionally) the artifacts under the prefix. A piece that is already gone is reported as
missing, not raised, so running teardown twice, on a half-created deployment, or from two processes at
once is safe. Every read (describe, list, tags) is retried while the control plane throttles or fails, for
up to ``timeout`` seconds in all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import hosts_components
from mme_triton._sagemaker import error_code, is_not_found, make_client
from mme_triton._sdk import boto3_session_of
from mme_triton.endpoint._orphans import as_utc, sweep_orphans
from mme_triton.endpoint._resources import (
    TAG_MANAGED,
    check_name,
    describe_or_none,
    paginate,
    tagged_leftovers,
    tags_or_empty,
)
from mme_triton.endpoint._retry import Deadline, control_plane_config, read
from mme_triton.endpoint._teardown_components import archive_prefix, components_of, remove_components
from mme_triton.endpoint.autoscaling import remove_autoscaling
from mme_triton.errors import TeardownError

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = ["TeardownError", "TeardownReport", "sweep", "teardown"]

logger = logging.getLogger(__name__)

#: Kinds of resources in a report, in the order they are removed.
KINDS = ("autoscaling", "inference-component", "endpoint", "endpoint-config", "model", "artifact")

#: Seconds teardown() (and sweep(), per endpoint) keeps retrying reads that are throttled or fail.
DEFAULT_TIMEOUT = 900.0


@dataclass
class TeardownReport:
    """What a teardown removed (or, with ``dry_run``, would remove).

    Attributes:
        endpoint_name: the endpoint torn down (for orphans found by :func:`sweep`, the endpoint their
            tags name).
        deleted: ``(kind, name)`` pairs removed, kinds as in :data:`KINDS`.
        missing: ``(kind, name)`` pairs that were already gone.
        errors: ``(kind, name, message)`` for pieces that could not be removed.
        dry_run: nothing was removed; ``deleted`` lists what would have been.
    """

    endpoint_name: str
    deleted: list[tuple[str, str]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str, str]] = field(default_factory=list)
    dry_run: bool = False

    def names(self, kind: str) -> list[str]:
        """Names of the removed resources of one kind (``"model"``, ``"endpoint-config"``, ...)."""
        return [name for k, name in self.deleted if k == kind]

    def __str__(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        parts = [f"{kind} {name}" for kind, name in self.deleted] or ["nothing"]
        text = f"{self.endpoint_name}: {verb} {', '.join(parts)}"
        if self.missing:
            text += f"; already gone: {', '.join(f'{k} {n}' for k, n in self.missing)}"
        if self.errors:
            text += f"; failed: {', '.join(f'{k} {n} ({m})' for k, n, m in self.errors)}"
        return text


@dataclass
class _Clients:
    sagemaker: SageMakerClient
    autoscaling: ApplicationAutoScalingClient
    boto3_session: Any
    boto_config: Any
    s3_client: S3Client | None
    cloudwatch: Any = None


def _clients(
    boto3_session: boto3.Session | None,
    boto_config: Config | None,
    sagemaker_client: SageMakerClient | None,
    autoscaling_client: ApplicationAutoScalingClient | None,
    s3_client: S3Client | None,
    region: str | None,
    cloudwatch_client: Any = None,
) -> _Clients:
    sagemaker = make_client(
        "sagemaker",
        client=sagemaker_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        default_config=control_plane_config(),
        region=region,
    )
    region = region or getattr(getattr(sagemaker, "meta", None), "region_name", None)
    autoscaling = make_client(
        "application-autoscaling",
        client=autoscaling_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        default_config=control_plane_config(),
        region=region,
    )
    cloudwatch = make_client(
        "cloudwatch",
        client=cloudwatch_client,
        boto3_session=boto3_session,
        boto_config=boto_config,
        default_config=control_plane_config(),
        region=region,
    )
    return _Clients(sagemaker, autoscaling, boto3_session, boto_config, s3_client, cloudwatch)


def record_delete(report: TeardownReport, kind: str, name: str, call: Any, **kwargs: Any) -> bool:
    """Run one delete call, recording it as deleted, missing or failed; True when it is gone now."""
    if report.dry_run:
        report.deleted.append((kind, name))
        return True
    try:
        call(**kwargs)
    except Exception as exc:
        if is_not_found(exc):
            report.missing.append((kind, name))
            return True
        logger.error(
            "could not delete %s %s: %s (%s)", kind, name, exc, error_code(exc) or type(exc).__name__
        )
        report.errors.append((kind, name, str(exc)))
        return False
    logger.info("deleted %s %s", kind, name)
    report.deleted.append((kind, name))
    return True


def teardown(
    endpoint_name: str,
    *,
    delete_artifacts: bool = False,
    dry_run: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    region: str | None = None,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
    autoscaling_client: ApplicationAutoScalingClient | None = None,
    s3_client: S3Client | None = None,
    cloudwatch_client: Any = None,
) -> TeardownReport:
    """Delete an endpoint and what stands behind it; report what was removed.

    Removes the autoscaling registration of its variants, its inference components (each with its
    autoscaling and the alarm that brings it back from zero; the components are waited for until they
    are gone, as SageMaker requires before it deletes the endpoint), the endpoint, its endpoint config,
    the models that config or the components name, and configs/models this library created for the
    endpoint on earlier runs (found by their names and ``mme-triton:endpoint`` tag). With
    ``delete_artifacts``, also every ``.tar.gz`` directly under the models' ``ModelDataUrl`` prefix (for a
    component, the prefix its archive sits under) — including ones other endpoints may serve from the
    same prefix. Idempotent: missing pieces go to ``report.missing``.

    Parameters:
        endpoint_name: the endpoint.
        delete_artifacts: also delete the artifacts under the prefix.
        dry_run: remove nothing, report what would be removed.
        timeout: seconds, in all, that reads are retried while the control plane throttles or fails.
        region, boto3_session, boto_config: how to reach AWS.
        sagemaker_client, autoscaling_client, s3_client, cloudwatch_client: clients to use; a given
            client wins over the session.
        sagemaker_session: a ``sagemaker.Session`` instead of ``boto3_session`` (its ``boto_session``).

    Raises:
        TeardownError: some pieces could not be removed (``exc.report`` has the details; everything else
            was removed).
        ValueError: an invalid endpoint name.

    Example::

        report = teardown("my-mme")
        print(report)  # my-mme: deleted endpoint my-mme, endpoint-config my-mme-c1a2b3c4d, ...
    """
    check_name("endpoint name", endpoint_name)
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    boto3_session = boto3_session_of(boto3_session, sagemaker_session)
    clients = _clients(
        boto3_session, boto_config, sagemaker_client, autoscaling_client, s3_client, region, cloudwatch_client
    )
    report = TeardownReport(endpoint_name, dry_run=dry_run)
    try:
        _teardown(
            clients, endpoint_name, report, delete_artifacts=delete_artifacts, deadline=Deadline(timeout)
        )
    except Exception as exc:  # finding the pieces failed (access denied, throttled, ...)
        raise TeardownError(
            f"teardown of {endpoint_name!r} failed: {exc} (so far: {report})",
            endpoint_name=endpoint_name,
            report=report,
        ) from exc
    if report.errors:
        raise TeardownError(f"teardown incomplete: {report}", endpoint_name=endpoint_name, report=report)
    return report


def _teardown(
    clients: _Clients,
    endpoint_name: str,
    report: TeardownReport,
    *,
    delete_artifacts: bool,
    deadline: Deadline,
) -> None:
    sagemaker = clients.sagemaker
    endpoint = describe_or_none(sagemaker.describe_endpoint, deadline=deadline, EndpointName=endpoint_name)
    configs: list[str] = []
    variants: set[str] = set()
    if endpoint is not None:
        configs.append(endpoint["EndpointConfigName"])
        variants |= {v["VariantName"] for v in endpoint.get("ProductionVariants", [])}
    leftover_configs, leftover_models = tagged_leftovers(sagemaker, endpoint_name, deadline=deadline)
    configs += [c for c in leftover_configs if c not in configs]

    models: list[str] = []
    with_components = False
    for config_name in configs:
        config = describe_or_none(
            sagemaker.describe_endpoint_config, deadline=deadline, EndpointConfigName=config_name
        )
        with_components |= config is not None and endpoint is not None and hosts_components(config)
        for variant in (config or {}).get("ProductionVariants", []):
            variants.add(variant["VariantName"])  # removing a registration that is not there is a no-op
            if variant.get("ModelName") and variant["ModelName"] not in models:
                models.append(variant["ModelName"])
    # Listed only for an endpoint whose config hosts components (a multi-model endpoint's teardown needs no
    # inference component permissions).
    components = components_of(sagemaker, endpoint_name, deadline) if with_components else []
    models += [c.model_name for c in components if c.model_name and c.model_name not in models]
    models += [m for m in leftover_models if m not in models]

    model_data_urls: list[str] = []
    if delete_artifacts:
        for model_name in models:
            model = describe_or_none(sagemaker.describe_model, deadline=deadline, ModelName=model_name)
            url = archive_prefix(model) if model is not None else None
            if url and url not in model_data_urls:
                model_data_urls.append(url)

    for variant in sorted(variants):
        _remove_scaling(clients, endpoint_name, variant, report, deadline)
    gone = remove_components(sagemaker, clients.autoscaling, clients.cloudwatch, components, report, deadline)
    if endpoint is not None and not gone:
        report.errors.append(("endpoint", endpoint_name, "its inference components could not all be deleted"))
    elif endpoint is not None:
        record_delete(
            report, "endpoint", endpoint_name, sagemaker.delete_endpoint, EndpointName=endpoint_name
        )
    else:
        report.missing.append(("endpoint", endpoint_name))
    for config_name in configs:
        record_delete(
            report,
            "endpoint-config",
            config_name,
            sagemaker.delete_endpoint_config,
            EndpointConfigName=config_name,
        )
    for model_name in models:
        record_delete(report, "model", model_name, sagemaker.delete_model, ModelName=model_name)
    for url in model_data_urls:
        _remove_artifacts(clients, url, report)


def _remove_scaling(
    clients: _Clients, endpoint_name: str, variant: str, report: TeardownReport, deadline: Deadline
) -> None:
    from mme_triton.endpoint.autoscaling import SCALABLE_DIMENSION, resource_id

    rid = resource_id(endpoint_name, variant)
    try:
        if report.dry_run:
            targets = read(
                clients.autoscaling.describe_scalable_targets,
                deadline=deadline,
                what=f"DescribeScalableTargets({rid})",
                ServiceNamespace="sagemaker",
                ResourceIds=[rid],
                ScalableDimension=SCALABLE_DIMENSION,
            ).get("ScalableTargets", [])
            if any(t["ResourceId"] == rid for t in targets):
                report.deleted.append(("autoscaling", rid))
            return
        removed = remove_autoscaling(clients.autoscaling, endpoint_name, variant, deadline=deadline)
        # Reported once, by whoever deregistered the target (a concurrent run may take the policy).
        if f"target:{rid}" in removed:
            report.deleted.append(("autoscaling", rid))
    except Exception as exc:
        logger.error("could not remove autoscaling of %s: %s", rid, exc)
        report.errors.append(("autoscaling", rid, str(exc)))


def _remove_artifacts(clients: _Clients, model_data_url: str, report: TeardownReport) -> None:
    from mme_triton.artifact.s3 import list_models, remove_model

    aws = {
        "boto3_session": clients.boto3_session,
        "s3_client": clients.s3_client,
        "boto_config": clients.boto_config,
    }
    try:
        names = list_models(model_data_url, **aws)
    except Exception as exc:
        report.errors.append(("artifact", model_data_url, str(exc)))
        return
    prefix = model_data_url if model_data_url.endswith("/") else model_data_url + "/"
    for name in names:
        url = prefix + name
        if report.dry_run:
            report.deleted.append(("artifact", url))
            continue
        try:
            if remove_model(model_data_url, name, **aws):
                report.deleted.append(("artifact", url))
            else:
                report.missing.append(("artifact", url))
        except Exception as exc:
            report.errors.append(("artifact", url, str(exc)))


def sweep(
    *,
    tags: Mapping[str, str] | None = None,
    older_than: timedelta | None = None,
    dry_run: bool = False,
    orphans: bool = True,
    orphan_min_age: timedelta = timedelta(hours=1),
    delete_artifacts: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    region: str | None = None,
    boto3_session: boto3.Session | None = None,
    sagemaker_session: Any = None,
    boto_config: Config | None = None,
    sagemaker_client: SageMakerClient | None = None,
    autoscaling_client: ApplicationAutoScalingClient | None = None,
    s3_client: S3Client | None = None,
) -> list[TeardownReport]:
    """Tear down the endpoints this library created, for scheduled cleanup jobs.

    Selects endpoints tagged ``mme-triton:managed=true`` whose tags include every ``tags`` pair and that
    were created more than ``older_than`` ago, and tears each down. With ``orphans``, it also deletes
    configs and models this library created that no existing endpoint uses (left by interrupted runs),
    if they are older than ``orphan_min_age`` (and ``older_than``) — the grace period keeps a sweep from
    deleting what a deployment running at the same moment has just created.

    Parameters:
        tags: tag pairs an endpoint must carry (all of them).
        older_than: only resources created longer ago than this.
        dry_run: delete nothing; the reports list what would be deleted.
        orphans: also remove orphaned configs and models.
        orphan_min_age: the least age of an orphan before it is removed.
        delete_artifacts: passed to :func:`teardown` for each endpoint.
        timeout: seconds that reads are retried while the control plane throttles or fails: for the
            listing, for each endpoint's teardown and for the orphans, each.
        region, boto3_session, sagemaker_session: how to reach AWS, as for :func:`teardown`.
        boto_config, sagemaker_client, autoscaling_client, s3_client: likewise.

    Returns:
        One :class:`TeardownReport` per endpoint, then one per endpoint name that orphans were tagged for.

    Raises:
        TeardownError: some pieces could not be removed (``exc.report`` holds the first incomplete report;
            every other selected resource was processed).

    Example::

        sweep(tags={"team": "search"}, older_than=timedelta(days=1), dry_run=True)
    """
    if older_than is not None and older_than < timedelta(0):
        raise ValueError("older_than must not be negative")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    boto3_session = boto3_session_of(boto3_session, sagemaker_session)
    clients = _clients(boto3_session, boto_config, sagemaker_client, autoscaling_client, s3_client, region)
    sagemaker = clients.sagemaker
    now = datetime.now(timezone.utc)
    wanted = dict(tags or {})
    cutoff = now - older_than if older_than is not None else None

    reports: list[TeardownReport] = []
    listing = Deadline(timeout)
    for item in paginate(sagemaker.list_endpoints, "Endpoints", deadline=listing):
        name = item["EndpointName"]
        endpoint_tags = tags_or_empty(sagemaker, item["EndpointArn"], deadline=listing)
        selected = (
            endpoint_tags.get(TAG_MANAGED) == "true"
            and all(endpoint_tags.get(k) == v for k, v in wanted.items())
            and (cutoff is None or as_utc(item["CreationTime"]) < cutoff)
        )
        if not selected:
            continue
        report = TeardownReport(name, dry_run=dry_run)
        reports.append(report)
        try:
            _teardown(clients, name, report, delete_artifacts=delete_artifacts, deadline=Deadline(timeout))
        except Exception as exc:  # record it and go on with the other endpoints
            report.errors.append(("endpoint", name, str(exc)))

    if orphans:
        orphan_cutoff = now - max(orphan_min_age, older_than or timedelta(0))
        reports += sweep_orphans(sagemaker, wanted, orphan_cutoff, dry_run, Deadline(timeout))

    failed = [r for r in reports if r.errors]
    if failed:
        raise TeardownError(
            f"sweep incomplete: {failed[0]}", endpoint_name=failed[0].endpoint_name, report=failed[0]
        )
    return reports
