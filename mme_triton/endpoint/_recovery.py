"""What a failed deployment deletes again and what it keeps, decided from what SageMaker says.

The rule: delete only what provably is not in use. Before CreateEndpoint/UpdateEndpoint is sent, the
model and config this call created are unused and go. Once it was sent, the endpoint may be switching
to them: the endpoint is read again (retrying throttling and 5xx for up to a minute) and

- a new endpoint that is ``Failed``, ``OutOfService`` or still ``Creating`` is deleted, and once
  DeleteEndpoint is accepted its config and model follow (nothing was ever served from them);
- an update is undone only when the endpoint is ``InService`` on another config (SageMaker rolled it back,
  or never took it): then the new config and model are unused;
- anything else (``Updating``, ``Failed`` after an update, no answer) keeps them, and the error names
  what was kept and how to finish: ``deploy_mme`` again, or ``sweep``/``teardown``.

After the endpoint is in service on the new config, :func:`remove_superseded` deletes the configs and
models this library made for the endpoint that it no longer uses (the one just replaced, and any an
interrupted run left behind).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import error_code, error_message, is_not_found
from mme_triton.endpoint._resources import describe_or_none, tagged_leftovers
from mme_triton.endpoint._retry import Deadline
from mme_triton.endpoint.autoscaling import Registration, restore_registration
from mme_triton.endpoint.handle import IN_PROGRESS, DeployProgress
from mme_triton.errors import DeploymentError, DeploymentTimeoutError, EndpointFailedError

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = [
    "EndpointState",
    "Ledger",
    "delete_in_order",
    "error_like",
    "fail",
    "read_endpoint",
    "remove_superseded",
]

logger = logging.getLogger(__name__)

#: Seconds a failed deployment keeps trying to read the endpoint before deciding what to delete.
RECOVERY_READ_SECONDS = 60.0

_DELETE_ORDER = {"inference-component": -1, "endpoint": 0, "endpoint-config": 1, "model": 2, "autoscaling": 3}


@dataclass
class EndpointState:
    """The endpoint as read after a failure: ``known`` False when it could not be read at all."""

    known: bool
    description: dict[str, Any] | None = None
    error: Exception | None = None

    @property
    def status(self) -> str | None:
        return None if self.description is None else str(self.description.get("EndpointStatus"))

    @property
    def config(self) -> str | None:
        return None if self.description is None else self.description.get("EndpointConfigName")


@dataclass
class Ledger:
    """What one deploy_mme call created (or may have), and how far it got."""

    sagemaker: SageMakerClient
    endpoint_name: str
    config_name: str
    model_name: str = ""
    created: list[tuple[str, str]] = field(default_factory=list)
    #: "create" or "update" once that call was sent (whatever became of it).
    sent: str | None = None
    previous_config: str | None = None
    #: Autoscaling of the endpoint's old variants, removed before an update that renames the variant
    #: (SageMaker refuses to remove a variant that is a scalable target), to put back if the endpoint
    #: stays on its old config; and how to reach Application Auto Scaling for that.
    removed_autoscaling: list[Registration] = field(default_factory=list)
    scaling_client: Callable[[], ApplicationAutoScalingClient] | None = None
    #: The deployer the messages tell to run again.
    call: str = "deploy_mme"

    def add(self, kind: str, name: str) -> None:
        if (kind, name) not in self.created:
            self.created.append((kind, name))

    def unfinished(self) -> list[tuple[str, str]]:
        """What is left where it is when the call stops here without deciding (an interrupt)."""
        items = list(self.created)
        if self.sent == "create":
            items.insert(0, ("endpoint", self.endpoint_name))
        return items


def read_endpoint(sagemaker: SageMakerClient, endpoint_name: str, deadline: Deadline) -> EndpointState:
    """DescribeEndpoint, retried until ``deadline``; ``known=False`` when no answer could be had."""
    try:
        description = describe_or_none(
            sagemaker.describe_endpoint, deadline=deadline, EndpointName=endpoint_name
        )
    except Exception as exc:
        logger.error("cannot read endpoint %s to decide what to roll back: %s", endpoint_name, exc)
        return EndpointState(known=False, error=exc)
    return EndpointState(known=True, description=description)


def _delete(sagemaker: SageMakerClient, kind: str, name: str) -> None:
    if kind == "inference-component":
        sagemaker.delete_inference_component(InferenceComponentName=name)
    elif kind == "endpoint":
        sagemaker.delete_endpoint(EndpointName=name)
    elif kind == "endpoint-config":
        sagemaker.delete_endpoint_config(EndpointConfigName=name)
    elif kind == "model":
        sagemaker.delete_model(ModelName=name)


def delete_in_order(
    ledger: Ledger, items: Sequence[tuple[str, str]], progress: DeployProgress | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """Delete endpoint, then configs, then models; stop before the configs if the endpoint stays.

    Returns (deleted, failed with the reason); a resource that is not there is neither.
    """
    deleted: list[tuple[str, str]] = []
    failed: list[tuple[str, str, str]] = []
    for kind, name in sorted(items, key=lambda item: _DELETE_ORDER[item[0]]):
        if failed and failed[0][0] == "endpoint":
            failed.append((kind, name, "the endpoint it belongs to could not be deleted"))
            continue
        if progress is not None:
            progress("rollback", f"deleting {kind} {name}")
        try:
            _delete(ledger.sagemaker, kind, name)
        except Exception as exc:
            if is_not_found(exc):
                continue  # never created (a call that failed before it was made), or gone already
            logger.error("rollback could not delete %s %s: %s", kind, name, exc)
            failed.append((kind, name, f"{error_code(exc) or type(exc).__name__}: {error_message(exc)}"))
            continue
        logger.info("rolled back %s %s", kind, name)
        deleted.append((kind, name))
    return deleted, failed


def _decide(ledger: Ledger, state: EndpointState) -> tuple[list[tuple[str, str]], list[tuple[str, str]], str]:
    """(to delete, to keep, why kept) for a deployment stopped before its endpoint was in service."""
    created = [item for item in ledger.created if item[0] != "endpoint"]
    if ledger.sent is None:
        return created, [], ""
    if not state.known:
        why = "the endpoint's state could not be read, so the endpoint may be switching to them"
        return [], ledger.unfinished(), why
    if ledger.sent == "create":
        if state.description is None:
            return created, [], ""  # CreateEndpoint was not accepted (or the endpoint is gone)
        if state.config != ledger.config_name:
            return created, [("endpoint", ledger.endpoint_name)], "the endpoint was not created by this call"
        if state.status in ("Failed", "OutOfService", "Creating"):
            return [("endpoint", ledger.endpoint_name), *created], [], ""
        why = f"the endpoint is {state.status}"
        return [], ledger.unfinished(), why
    # An update: the new config and model are unused only when the endpoint settled on another config.
    if state.description is None or (state.status == "InService" and state.config != ledger.config_name):
        return created, [], ""
    why = (
        f"the endpoint is {state.status} and may still switch to them"
        if state.status in IN_PROGRESS
        else f"the endpoint is {state.status} ({state.description.get('FailureReason') or 'no reason given'})"
    )
    return [], created, why


def _names(items: Sequence[tuple[str, ...]]) -> str:
    return ", ".join(f"{item[0]} {item[1]}" for item in items)


def _stays_on_old_config(ledger: Ledger, state: EndpointState) -> bool:
    """Whether the endpoint provably keeps (or is back on) the config it had before this call."""
    if ledger.sent is None:
        return True
    return ledger.sent == "update" and state.status == "InService" and state.config != ledger.config_name


def _restore_autoscaling(
    ledger: Ledger, state: EndpointState, progress: DeployProgress | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str, str]]]:
    """Put back the autoscaling removed for a variant rename when the old variant stays in service.

    Returns (restored, left removed, failed with the reason), as ``("autoscaling", resource id)``.
    """
    if not ledger.removed_autoscaling:
        return [], [], []
    items = [("autoscaling", r.resource_id) for r in ledger.removed_autoscaling]
    if not _stays_on_old_config(ledger, state) or ledger.scaling_client is None:
        return [], items, []
    restored: list[tuple[str, str]] = []
    failed: list[tuple[str, str, str]] = []
    for registration in ledger.removed_autoscaling:
        if progress is not None:
            progress("rollback", f"restoring the autoscaling of {registration.resource_id}")
        try:
            restore_registration(ledger.scaling_client(), registration)
        except Exception as exc:
            logger.error("rollback could not restore the autoscaling of %s: %s", registration, exc)
            reason = f"{error_code(exc) or type(exc).__name__}: {error_message(exc)}; put back {registration}"
            failed.append(("autoscaling", registration.resource_id, reason))
            continue
        restored.append(("autoscaling", registration.resource_id))
    return restored, [], failed


def fail(
    ledger: Ledger,
    exc: Exception,
    state: EndpointState,
    progress: DeployProgress | None,
) -> DeploymentError:
    """Roll back what is provably unused after ``exc`` (and put back the autoscaling removed for a
    variant rename when the old variant stays in service); return the error to raise (``exc`` chained)."""
    to_delete, kept, why = _decide(ledger, state)
    kept = sorted(kept, key=lambda item: _DELETE_ORDER[item[0]])
    deleted, failed = delete_in_order(ledger, to_delete, progress)
    restored, scaling_left, scaling_failed = _restore_autoscaling(ledger, state, progress)
    name = ledger.endpoint_name
    base = str(exc) if isinstance(exc, DeploymentError) else f"deploying endpoint {name!r} failed: {exc}"
    parts = [base]
    if deleted:
        parts.append(f"rolled back {_names(deleted)}")
    if restored:
        back = [str(r) for r in ledger.removed_autoscaling if ("autoscaling", r.resource_id) in restored]
        parts.append(f"restored the autoscaling removed for the variant rename: {'; '.join(back)}")
    if kept:
        parts.append(f"kept {_names(kept)}" + (f" because {why}" if why else ""))
    if scaling_left:
        parts.append(
            "the autoscaling removed for the variant rename stays removed while the endpoint may still "
            "switch to the new config, where that variant does not exist; if it stays on "
            f"{ledger.previous_config}, put back " + "; ".join(str(r) for r in ledger.removed_autoscaling)
        )
    failed += scaling_failed
    if failed:
        parts.append(f"could not roll back {'; '.join(f'{k} {n} ({reason})' for k, n, reason in failed)}")
    if kept or failed or scaling_left:
        parts.append(_how_to_finish(ledger))
    deleted += restored
    kept = kept + scaling_left
    kept = kept + [(kind, item) for kind, item, _ in failed]
    return error_like(exc, "; ".join(parts), name, deleted, kept)


def error_like(
    exc: Exception,
    message: str,
    endpoint_name: str,
    rolled_back: Sequence[tuple[str, str]],
    kept: Sequence[tuple[str, str]],
) -> DeploymentError:
    """The error to raise for ``exc`` after a rollback: of its class (a failed endpoint or component keeps
    its ``failure_reason``, a timeout stays a timeout), with what was rolled back and kept."""
    where: dict[str, Any] = {"endpoint_name": endpoint_name, "rolled_back": rolled_back, "kept": kept}
    if isinstance(exc, EndpointFailedError):
        return EndpointFailedError(message, failure_reason=exc.failure_reason, **where)
    if isinstance(exc, DeploymentTimeoutError):
        return DeploymentTimeoutError(message, **where)
    return DeploymentError(message, **where)


def _how_to_finish(ledger: Ledger) -> str:
    name = ledger.endpoint_name
    if ledger.sent == "update":
        return (
            f"to finish, run {ledger.call}({name!r}, ...) again with the same arguments (it waits for the "
            "endpoint and removes whichever config and model it no longer uses), or let sweep() remove "
            "them once unused"
        )
    return (
        f"to finish, run {ledger.call}({name!r}, ...) again with the same arguments, or remove them with "
        f"teardown({name!r}) (sweep() also removes an unused config and model)"
    )


def remove_superseded(
    sagemaker: SageMakerClient,
    endpoint_name: str,
    config_name: str,
    models_in_use: Collection[str],
    deadline: Deadline,
    progress: DeployProgress | None,
) -> list[tuple[str, str]]:
    """Delete the configs and models made for this endpoint that it does not use; return them.

    Runs once the endpoint is ``InService`` on ``config_name``, and checks that again right before it
    deletes anything. ``models_in_use`` are kept besides what the config names: the deployment's model,
    or the models of the endpoint's inference components. Failures are logged, not raised: the endpoint is
    in service, and a later run (or ``teardown``/``sweep``) removes what is left.
    """
    removed: list[tuple[str, str]] = []
    try:
        configs, models = tagged_leftovers(sagemaker, endpoint_name, deadline=deadline)
        configs = [c for c in configs if c != config_name]
        config = describe_or_none(
            sagemaker.describe_endpoint_config, deadline=deadline, EndpointConfigName=config_name
        )
        in_use = set(models_in_use) | {
            v["ModelName"] for v in (config or {}).get("ProductionVariants", []) if v.get("ModelName")
        }
        models = [m for m in models if m not in in_use]
        if not configs and not models:
            return removed
        endpoint = describe_or_none(
            sagemaker.describe_endpoint, deadline=deadline, EndpointName=endpoint_name
        )
        if (
            endpoint is None
            or endpoint["EndpointStatus"] != "InService"
            or endpoint["EndpointConfigName"] != config_name
        ):
            logger.info("endpoint %s changed meanwhile; leaving %s", endpoint_name, configs + models)
            return removed
        for kind, names in (("endpoint-config", configs), ("model", models)):
            for name in names:
                if progress is not None:
                    progress("cleanup", f"deleting superseded {kind} {name}")
                try:
                    _delete(sagemaker, kind, name)
                except Exception as exc:
                    if not is_not_found(exc):
                        raise
                logger.info("deleted superseded %s %s of endpoint %s", kind, name, endpoint_name)
                removed.append((kind, name))
    except Exception as exc:
        logger.warning(
            "could not delete the superseded configs/models of endpoint %s: %s (deleted so far: %s); "
            "deploying again, teardown() or sweep() removes them",
            endpoint_name,
            exc,
            _names(removed) or "none",
        )
    return removed
