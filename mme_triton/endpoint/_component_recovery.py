"""What a ``deploy_inference_components`` call whose components failed deletes again, and what it keeps.

The rule is ``deploy_mme``'s (:mod:`mme_triton.endpoint._recovery`): delete only what provably is not in
use. Once the endpoint is in service the components are the last step, so:

- the components this call created are deleted (they never served a request anyone relied on), and waited
  for until they are gone;
- an updated component is SageMaker's to roll back: the new model it was given is deleted only once no
  component of the endpoint names it any more;
- when this call created the endpoint, and its components are all gone, the endpoint, its config and the
  models this call made follow, as a failed new multi-model endpoint's would; otherwise the endpoint and
  its config stay (in service), with the models the remaining components use.

Anything that could not be deleted is named in the error's ``kept``, with how to finish.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import COMPONENT_IN_PROGRESS
from mme_triton._sagemaker import error_code, error_message, is_not_found
from mme_triton.endpoint._recovery import RECOVERY_READ_SECONDS, Ledger, delete_in_order, error_like
from mme_triton.endpoint._resources import describe_or_none, paginate
from mme_triton.endpoint._retry import Deadline, poll_delays
from mme_triton.errors import DeploymentError

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.endpoint._component_plan import ComponentPlan
    from mme_triton.endpoint.handle import DeployProgress

__all__ = ["component_models", "endpoint_components_described", "rollback_components", "wait_components_gone"]

logger = logging.getLogger(__name__)

#: Seconds a rollback waits at least for the components it deleted to be gone.
COMPONENT_DELETE_SECONDS = 600.0


def endpoint_components_described(
    sagemaker: SageMakerClient, endpoint_name: str, deadline: Deadline
) -> list[dict[str, Any]]:
    """DescribeInferenceComponent of every component of the endpoint (ListInferenceComponents first)."""
    items = paginate(
        sagemaker.list_inference_components,
        "InferenceComponents",
        deadline=deadline,
        EndpointNameEquals=endpoint_name,
    )
    described = []
    for item in items:
        description = describe_or_none(
            sagemaker.describe_inference_component,
            deadline=deadline,
            InferenceComponentName=item["InferenceComponentName"],
        )
        if description is not None:
            described.append(description)
    return described


def component_models(sagemaker: SageMakerClient, endpoint_name: str, deadline: Deadline) -> set[str]:
    """The SageMaker models the endpoint's components name now."""
    return {
        str(d["Specification"]["ModelName"])
        for d in endpoint_components_described(sagemaker, endpoint_name, deadline)
        if d.get("Specification", {}).get("ModelName")
    }


def wait_components_gone(
    sagemaker: SageMakerClient, components: Iterable[str], deadline: Deadline, poll_interval: float
) -> list[str]:
    """Poll until each component is gone (DescribeInferenceComponent says it does not exist); return the
    ones still there when ``deadline`` passes."""
    waiting = set(components)
    delays = poll_delays(poll_interval)
    while waiting:
        for component in sorted(waiting):
            found = describe_or_none(
                sagemaker.describe_inference_component, deadline=deadline, InferenceComponentName=component
            )
            if found is None:
                waiting.discard(component)
        if not waiting or deadline.passed():
            break
        time.sleep(min(next(delays), deadline.remaining()))
    return sorted(waiting)


def wait_components_settled(
    sagemaker: SageMakerClient, components: Iterable[str], deadline: Deadline, poll_interval: float
) -> set[str]:
    """Poll until no component is Creating, Updating or Deleting (or ``deadline`` passes); return the ones
    that exist."""
    waiting, found = set(components), set()
    delays = poll_delays(poll_interval)
    while waiting:
        for component in sorted(waiting):
            described = describe_or_none(
                sagemaker.describe_inference_component, deadline=deadline, InferenceComponentName=component
            )
            if described is None or described.get("InferenceComponentStatus") not in COMPONENT_IN_PROGRESS:
                waiting.discard(component)
                if described is not None:
                    found.add(component)
        if not waiting or deadline.passed():
            break
        time.sleep(min(next(delays), deadline.remaining()))
    return found | waiting


def _names(items: Iterable[tuple[str, ...]]) -> str:
    return ", ".join(f"{item[0]} {item[1]}" for item in items)


def rollback_components(
    ledger: Ledger,
    plan: ComponentPlan,
    exc: Exception,
    deadline: Deadline,
    progress: DeployProgress | None,
) -> DeploymentError:
    """Roll back what this call made once its components failed (see the module); return the error to
    raise (``exc`` chained by the caller)."""
    sagemaker, name = ledger.sagemaker, ledger.endpoint_name
    wait = Deadline(max(deadline.remaining(), COMPONENT_DELETE_SECONDS))
    created = [item for item in ledger.created if item[0] == "inference-component"]
    deleted: list[tuple[str, str]] = []
    failed: list[tuple[str, str, str]] = []
    # SageMaker refuses to delete a component while it is Creating: each is waited for first
    settled = wait_components_settled(sagemaker, [c for _, c in created], wait, poll_interval=5.0)
    for kind, component in created:
        if component not in settled:
            continue  # never created (its call failed), or gone already
        if progress is not None:
            progress("rollback", f"deleting {kind} {component}")
        try:
            sagemaker.delete_inference_component(InferenceComponentName=component)
        except Exception as error:
            if not is_not_found(error):
                reason = f"{error_code(error) or type(error).__name__}: {error_message(error)}"
                failed.append((kind, component, reason))
            continue
        deleted.append((kind, component))
    still = wait_components_gone(sagemaker, [c for _, c in deleted], wait, poll_interval=5.0)
    for component in still:
        deleted.remove(("inference-component", component))
        failed.append(("inference-component", component, "still being deleted"))

    others: list[str] = []
    in_use: set[str] | None = None
    try:
        described = endpoint_components_described(sagemaker, name, Deadline(RECOVERY_READ_SECONDS))
        others = [str(d["InferenceComponentName"]) for d in described]
        in_use = {str(d.get("Specification", {}).get("ModelName")) for d in described}
    except Exception as error:
        logger.error("cannot read the components of %s to decide what to roll back: %s", name, error)
    made = [item for item in ledger.created if item[0] in ("endpoint-config", "model")]
    to_delete: list[tuple[str, str]] = []
    kept: list[tuple[str, str]] = []
    if ledger.sent == "create" and in_use is not None and not others and not failed:
        to_delete = [("endpoint", name), *made]
    elif in_use is not None:
        # the endpoint stays: its config is in use once an update was sent, models while a component names one
        for kind, item in made:
            unused = item not in in_use if kind == "model" else ledger.sent is None
            (to_delete if unused else kept).append((kind, item))
    else:
        kept = list(made)
    gone, not_gone = delete_in_order(ledger, to_delete, progress)
    deleted += gone
    failed += not_gone
    return _error(ledger, exc, deleted, kept, failed)


def _error(
    ledger: Ledger,
    exc: Exception,
    deleted: list[tuple[str, str]],
    kept: list[tuple[str, str]],
    failed: list[tuple[str, str, str]],
) -> DeploymentError:
    name = ledger.endpoint_name
    base = (
        str(exc)
        if isinstance(exc, DeploymentError)
        else f"deploying the inference components of {name!r} failed: {exc}"
    )
    parts = [base]
    if deleted:
        parts.append(f"rolled back {_names(deleted)}")
    if kept:
        parts.append(f"kept {_names(kept)} (the endpoint or its remaining components use them)")
    if failed:
        parts.append(f"could not roll back {'; '.join(f'{k} {n} ({reason})' for k, n, reason in failed)}")
    if kept or failed:
        parts.append(
            f"to finish, run {ledger.call}({name!r}, ...) again (it removes what the endpoint no longer "
            f"uses), or remove the endpoint with teardown({name!r})"
        )
    return error_like(exc, "; ".join(parts), name, deleted, kept + [(kind, item) for kind, item, _ in failed])
