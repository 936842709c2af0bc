"""What ``teardown()`` does for an endpoint of inference components: its components go before it.

SageMaker deletes an endpoint only once no component lives on it, and a component's delete takes a while
(``Deleting``): each component's autoscaling (its scaling policies, scalable target and the alarm that
brings it back from zero) is removed, the component deleted, and the components waited for until they
are gone; then the endpoint, its config and the components' models follow (``teardown`` itself).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import COPY_COUNT_DIMENSION, resource_id
from mme_triton._sagemaker import ARCHIVE_SUFFIX, error_code, is_not_found, model_data_url_of
from mme_triton.endpoint._component_recovery import (
    endpoint_components_described,
    wait_components_gone,
    wait_components_settled,
)
from mme_triton.endpoint._retry import Deadline
from mme_triton.endpoint.autoscaling import scalable_target
from mme_triton.endpoint.component_scaling import remove_component_scaling
from mme_triton.endpoint.components import artifact_url_parts

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.endpoint.teardown import TeardownReport

__all__ = ["Component", "archive_prefix", "components_of", "remove_components"]

logger = logging.getLogger(__name__)

#: The longest pause between two polls of a component being deleted.
DELETE_POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Component:
    """An inference component of the endpoint being torn down, and the model it names."""

    name: str
    model_name: str | None


def components_of(sagemaker: SageMakerClient, endpoint_name: str, deadline: Deadline) -> list[Component]:
    """The endpoint's inference components (none for a multi-model endpoint)."""
    return [
        Component(str(d["InferenceComponentName"]), d.get("Specification", {}).get("ModelName"))
        for d in endpoint_components_described(sagemaker, endpoint_name, deadline)
    ]


def archive_prefix(model: dict[str, Any]) -> str | None:
    """The prefix a component model's archive sits under (``delete_artifacts`` removes the ``.tar.gz``
    objects under it, as it does under a multi-model endpoint's ModelDataUrl)."""
    url = model_data_url_of(model)
    if url is None or not url.endswith(ARCHIVE_SUFFIX):
        return url  # a multi-model endpoint's prefix
    try:
        return artifact_url_parts(url)[0]
    except ValueError:
        return None


def remove_components(
    sagemaker: SageMakerClient,
    autoscaling: Any,
    cloudwatch: Any,
    components: list[Component],
    report: TeardownReport,
    deadline: Deadline,
) -> bool:
    """Remove each component's autoscaling, delete the components and wait until they are gone; record it
    all in ``report``. True when none is left (the endpoint can go)."""
    if not components:
        return True
    if not report.dry_run:
        # SageMaker refuses to delete a component while it is Creating or Updating
        wait_components_settled(sagemaker, [c.name for c in components], deadline, DELETE_POLL_SECONDS)
    for component in components:
        rid = resource_id(component.name)
        if report.dry_run:
            target = scalable_target(autoscaling, rid, deadline=deadline, dimension=COPY_COUNT_DIMENSION)
            if target is not None:
                report.deleted.append(("autoscaling", rid))
            report.deleted.append(("inference-component", component.name))
            continue
        try:
            if remove_component_scaling(autoscaling, cloudwatch, component.name, deadline=deadline):
                report.deleted.append(("autoscaling", rid))
        except Exception as exc:
            logger.error("could not remove the autoscaling of %s: %s", rid, exc)
            report.errors.append(("autoscaling", rid, str(exc)))
        try:
            sagemaker.delete_inference_component(InferenceComponentName=component.name)
        except Exception as exc:
            if is_not_found(exc):
                report.missing.append(("inference-component", component.name))
                continue
            logger.error(
                "could not delete inference component %s: %s (%s)", component.name, exc, error_code(exc)
            )
            report.errors.append(("inference-component", component.name, str(exc)))
            continue
        report.deleted.append(("inference-component", component.name))
    if report.dry_run:
        return True
    pending = [c.name for c in components if ("inference-component", c.name) in report.deleted]
    left = wait_components_gone(sagemaker, pending, deadline, DELETE_POLL_SECONDS)
    for name in left:
        report.errors.append(("inference-component", name, "still being deleted when the timeout passed"))
    failed = {name for kind, name, _ in report.errors if kind == "inference-component"}
    return not failed
