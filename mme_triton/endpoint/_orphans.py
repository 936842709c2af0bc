"""``sweep()``'s orphans: configs and models this library made that nothing uses any more (left by
interrupted runs), removed once they are older than the grace period.

A config is in use while an endpoint runs it; a model while a config that stays names it, or an inference
component (of any endpoint) does: an endpoint of inference components names its models in its
components, not in its config.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mme_triton._sagemaker import error_code
from mme_triton.endpoint._resources import (
    TAG_ENDPOINT,
    TAG_MANAGED,
    describe_or_none,
    paginate,
    tags_or_empty,
)
from mme_triton.endpoint._retry import Deadline

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.endpoint.teardown import TeardownReport

__all__ = ["as_utc", "sweep_orphans"]

logger = logging.getLogger(__name__)


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _component_model(sagemaker: SageMakerClient, component: str, deadline: Deadline) -> str | None:
    described = describe_or_none(
        sagemaker.describe_inference_component, deadline=deadline, InferenceComponentName=component
    )
    model = (described or {}).get("Specification", {}).get("ModelName")
    return str(model) if model else None


def sweep_orphans(
    sagemaker: SageMakerClient,
    wanted: dict[str, str],
    cutoff: datetime,
    dry_run: bool,
    deadline: Deadline,
) -> list[TeardownReport]:
    """Managed configs no endpoint uses, then managed models no remaining config or inference component
    names."""
    from mme_triton.endpoint.teardown import TeardownReport, record_delete

    # A dry run leaves the selected endpoints in place: their configs count as in use, as they are
    # already in those endpoints' reports.
    in_use_configs: set[str] = set()
    for item in paginate(sagemaker.list_endpoints, "Endpoints", deadline=deadline):
        described = describe_or_none(
            sagemaker.describe_endpoint, deadline=deadline, EndpointName=item["EndpointName"]
        )
        if described is not None:
            in_use_configs.add(described["EndpointConfigName"])

    reports: dict[str, TeardownReport] = {}

    def report_for(endpoint: str) -> TeardownReport:
        if endpoint not in reports:
            reports[endpoint] = TeardownReport(endpoint, dry_run=dry_run)
        return reports[endpoint]

    def selected(arn: str, created: datetime) -> tuple[bool, str]:
        tags = tags_or_empty(sagemaker, arn, deadline=deadline)
        ok = (
            tags.get(TAG_MANAGED) == "true"
            and all(tags.get(k) == v for k, v in wanted.items())
            and as_utc(created) < cutoff
        )
        return ok, tags.get(TAG_ENDPOINT, "")

    used_models: set[str] = set()
    for item in paginate(sagemaker.list_endpoint_configs, "EndpointConfigs", deadline=deadline):
        name = item["EndpointConfigName"]
        config = describe_or_none(
            sagemaker.describe_endpoint_config, deadline=deadline, EndpointConfigName=name
        )
        if config is None:
            continue
        orphan, endpoint = (False, "")
        if name not in in_use_configs:
            orphan, endpoint = selected(item["EndpointConfigArn"], item["CreationTime"])
        if orphan:
            record_delete(
                report_for(endpoint),
                "endpoint-config",
                name,
                sagemaker.delete_endpoint_config,
                EndpointConfigName=name,
            )
        else:
            used_models |= {
                v["ModelName"] for v in config.get("ProductionVariants", []) if v.get("ModelName")
            }
    candidates: list[tuple[str, str]] = []
    for item in paginate(sagemaker.list_models, "Models", deadline=deadline):
        name = item["ModelName"]
        if name in used_models:
            continue
        orphan, endpoint = selected(item["ModelArn"], item["CreationTime"])
        if orphan:
            candidates.append((name, endpoint))
    if candidates:
        # An endpoint of inference components names its models in its components, not in its config;
        # listed only when there is a model to decide on (multi-model deployments need no IC permission).
        components = _component_models(sagemaker, deadline)
        for name, endpoint in candidates:
            if components is not None and name not in components:
                record_delete(report_for(endpoint), "model", name, sagemaker.delete_model, ModelName=name)
    return list(reports.values())


def _component_models(sagemaker: SageMakerClient, deadline: Deadline) -> set[str] | None:
    """The models every inference component of the account names; None when they cannot be listed (then no
    model is taken for an orphan: it may be a component's)."""
    try:
        items = paginate(sagemaker.list_inference_components, "InferenceComponents", deadline=deadline)
        models = {
            _component_model(sagemaker, str(item["InferenceComponentName"]), deadline) for item in items
        }
    except Exception as exc:
        logger.warning(
            "cannot list the inference components (%s: %s); models that look orphaned are kept, as a "
            "component may use them",
            error_code(exc) or type(exc).__name__,
            exc,
        )
        return None
    return {model for model in models if model}
