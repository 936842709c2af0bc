"""The steps of one ``deploy_inference_components`` call once its arguments are checked.

Existing endpoint (waited for if in progress; one that hosts a multi-model endpoint's model refused) and its
components (each name checked: free, or this library's for this endpoint) → a model per component → the
endpoint config → CreateEndpoint or UpdateEndpoint → wait for ``InService`` — the shared steps of
:class:`~mme_triton.endpoint._steps.EndpointSteps`, whose failures :mod:`mme_triton.endpoint._recovery`
handles as for ``deploy_mme`` — then per component CreateInferenceComponent, UpdateInferenceComponent (a new
model or new resources) or UpdateInferenceComponentRuntimeConfig (the copy count alone) → wait for every
changed component → delete the components this library made for the endpoint that the call no longer
names → delete the configs and models nothing uses any more → each component's autoscaling.

A component that fails rolls back what this call made and nothing a live endpoint uses
(:mod:`mme_triton.endpoint._component_recovery`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import COMPONENT_IN_PROGRESS, MIN_CREATE_COPY_COUNT
from mme_triton._sagemaker import is_transient
from mme_triton.endpoint._component_plan import ComponentPlan, ComponentSpec
from mme_triton.endpoint._component_recovery import (
    component_models,
    rollback_components,
    wait_components_gone,
)
from mme_triton.endpoint._recovery import EndpointState, Ledger, fail, remove_superseded
from mme_triton.endpoint._resources import TAG_ENDPOINT, describe_or_none, list_tags, paginate
from mme_triton.endpoint._retry import Deadline, poll_delays
from mme_triton.endpoint._steps import EndpointSteps
from mme_triton.endpoint.component_scaling import apply_component_scaling, remove_component_scaling
from mme_triton.errors import DeploymentError, DeploymentTimeoutError, EndpointFailedError

if TYPE_CHECKING:
    from mme_triton.endpoint._component_plan import ResolvedComponents
    from mme_triton.endpoint.handle import DeployProgress

__all__ = ["ComponentDeployment", "Components", "same_resources"]

logger = logging.getLogger(__name__)


def same_resources(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether two ``ComputeResourceRequirements`` ask for the same (numbers compared as numbers; an absent
    accelerator count is none)."""
    keys = set(current) | set(wanted)
    return all(
        (current.get(key) is None) == (wanted.get(key) is None)
        and (current.get(key) is None or float(current[key]) == float(wanted[key]))
        for key in keys
    )


@dataclass
class Components:
    """The components that matter to a deployment, as they are before it changes anything."""

    found: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """Each component the call names: its description, or None when it does not exist."""
    removed: list[str] = field(default_factory=list)
    """Components this library made for the endpoint that the call no longer names."""


class ComponentDeployment(EndpointSteps):
    """One deploy_inference_components call after its arguments are checked (see the module)."""

    hosts_components = True
    plan: ComponentPlan

    def __init__(
        self,
        resolved: ResolvedComponents,
        plan: ComponentPlan,
        ledger: Ledger,
        wait: bool,
        timeout: float,
        poll_interval: float,
        progress: DeployProgress | None,
        cloudwatch: Callable[[], Any],
    ) -> None:
        where = resolved.where
        super().__init__(
            where.sagemaker, where.scaling_client, plan, ledger, wait, timeout, poll_interval, progress
        )
        self.cloudwatch = cloudwatch
        #: component -> what this call sent for it: "create", "update" or "copies"
        self.changed: dict[str, str] = {}

    def run(self) -> dict[str, Any]:
        plan, name = self.plan, self.plan.endpoint_name
        existing = self._existing()
        if existing is not None:
            self._check_variant(existing)
        components = self._components(existing is not None)
        try:
            for model_name, request in {s.model_name: s.model_request for s in plan.components}.items():
                self._ensure("model", model_name, request)
            self._ensure("endpoint-config", plan.config_name, plan.config_request)
        except Exception as exc:
            raise fail(self.ledger, exc, EndpointState(known=True), self.progress) from exc
        if existing is None:
            self._send("create")
        elif existing.get("EndpointConfigName") != plan.config_name:
            self.ledger.previous_config = str(existing["EndpointConfigName"])
            self._send("update")
        else:
            logger.info("endpoint %s already runs %s", name, plan.config_name)
        # Components are placed on an endpoint in service: the endpoint is waited for even without wait.
        description = self._wait_in_service()
        try:
            for spec in plan.components:
                self._apply(spec, components.found.get(spec.name))
            if self.wait:
                self._wait_changed()
        except BaseException as exc:
            if not isinstance(exc, Exception):
                raise  # an interrupt: nothing is deleted, deploy_inference_components says what stays
            raise rollback_components(self.ledger, plan, exc, self.deadline, self.progress) from exc
        if self.wait:
            self._remove(components.removed)
            in_use = plan.model_names | component_models(self.sagemaker, name, self.deadline)
            remove_superseded(self.sagemaker, name, plan.config_name, in_use, self.deadline, self.progress)
        self._autoscaling(components)
        return description

    # -- before anything changes -----------------------------------------------------------------

    def _check_variant(self, existing: Mapping[str, Any]) -> None:
        variants = {str(v["VariantName"]) for v in existing.get("ProductionVariants", [])}
        if variants and variants != {self.plan.variant_name}:
            name = self.plan.endpoint_name
            raise DeploymentError(
                f"endpoint {name!r} runs variant {', '.join(sorted(variants))}; its inference components "
                f"live on that variant, so variant_name={self.plan.variant_name!r} needs a new endpoint "
                f"(teardown({name!r}) first, or keep the variant's name)",
                endpoint_name=name,
            )

    def _components(self, endpoint_exists: bool) -> Components:
        """Read the components the call names and the endpoint's own; refuse a name taken by someone
        else's component and a new component with no copy, before anything is created."""
        name = self.plan.endpoint_name
        found = Components()
        try:
            for spec in self.plan.components:
                found.found[spec.name] = self._settled(spec.name)
            listed = (
                paginate(
                    self.sagemaker.list_inference_components,
                    "InferenceComponents",
                    deadline=self.deadline,
                    EndpointNameEquals=name,
                )
                if endpoint_exists
                else []
            )
            for item in listed:
                other = str(item["InferenceComponentName"])
                if other in found.found:
                    continue
                tags = list_tags(self.sagemaker, item["InferenceComponentArn"], deadline=self.deadline)
                if tags.get(TAG_ENDPOINT) == name:
                    found.removed.append(other)
                else:
                    logger.info("component %s on endpoint %s is not this library's; left alone", other, name)
        except DeploymentError:
            raise
        except Exception as exc:
            raise DeploymentError(
                f"cannot read the inference components of endpoint {name!r}: {exc}", endpoint_name=name
            ) from exc
        for spec in self.plan.components:
            self._check_component(spec, found.found[spec.name])
        return found

    def _settled(self, component: str) -> dict[str, Any] | None:
        """The component's description once it is not Creating, Updating or Deleting; None when there is
        none (a Failed component of this endpoint's is deleted, to be created again)."""
        delays = poll_delays(self.poll_interval)
        while True:
            description = describe_or_none(
                self.sagemaker.describe_inference_component,
                deadline=self.deadline,
                InferenceComponentName=component,
            )
            if description is None:
                return None
            status = description.get("InferenceComponentStatus")
            if status not in COMPONENT_IN_PROGRESS:
                break
            if self.deadline.passed():
                raise DeploymentTimeoutError(
                    f"inference component {component!r} is still {status}",
                    endpoint_name=self.plan.endpoint_name,
                )
            logger.info("inference component %s is %s; waiting for it first", component, status)
            time.sleep(min(next(delays), self.deadline.remaining()))
        if status == "Failed" and description.get("EndpointName") == self.plan.endpoint_name:
            tags = list_tags(self.sagemaker, description["InferenceComponentArn"], deadline=self.deadline)
            if tags.get(TAG_ENDPOINT) == self.plan.endpoint_name:
                self._say("delete-component", f"{component} (Failed: {description.get('FailureReason')})")
                self.sagemaker.delete_inference_component(InferenceComponentName=component)
                wait_components_gone(self.sagemaker, [component], self.deadline, self.poll_interval)
                return None
        return description

    def _check_component(self, spec: ComponentSpec, description: Mapping[str, Any] | None) -> None:
        name = self.plan.endpoint_name
        if description is None:
            if spec.copies < MIN_CREATE_COPY_COUNT:
                raise DeploymentError(
                    f"inference component {spec.name!r} does not exist yet and copies=0: SageMaker creates a "
                    f"component with at least {MIN_CREATE_COPY_COUNT} copy (CreateInferenceComponent refuses "
                    "a CopyCount of 0); create it with copies=1 (and autoscaling with min_copies=0 to let it "
                    "go to zero)",
                    endpoint_name=name,
                )
            return
        owner = description.get("EndpointName")
        tags = list_tags(self.sagemaker, description["InferenceComponentArn"], deadline=self.deadline)
        if owner != name or tags.get(TAG_ENDPOINT) != name:
            raise DeploymentError(
                f"an inference component named {spec.name!r} exists (on endpoint {owner!r}) and was not "
                f"created for endpoint {name!r}; component names are unique in the account and region: "
                "choose another name",
                endpoint_name=name,
            )

    # -- the components --------------------------------------------------------------------------

    def _apply(self, spec: ComponentSpec, description: Mapping[str, Any] | None) -> None:
        """Create the component, or update what changed of it."""
        sagemaker = self.sagemaker
        if description is None:
            self._create(spec)
            return
        current = description.get("Specification", {})
        spec_changed = current.get("ModelName") != spec.model_name or not same_resources(
            current.get("ComputeResourceRequirements", {}),
            spec.specification["ComputeResourceRequirements"],
        )
        copies = description.get("RuntimeConfig", {}).get("DesiredCopyCount")
        # With autoscaling, Application Auto Scaling owns the copy count once the component exists.
        copies_changed = spec.autoscaling is None and copies != spec.copies
        if spec_changed:
            self._say("update-component", f"{spec.name}: model {spec.model_name}")
            extra: dict[str, Any] = {"RuntimeConfig": {"CopyCount": spec.copies}} if copies_changed else {}
            update: Any = sagemaker.update_inference_component
            update(InferenceComponentName=spec.name, Specification=spec.specification, **extra)
            self.changed[spec.name] = "update"
            logger.info("updating inference component %s to %s", spec.name, spec.specification)
        elif copies_changed:
            self._say("update-component", f"{spec.name}: {copies} -> {spec.copies} copies")
            sagemaker.update_inference_component_runtime_config(
                InferenceComponentName=spec.name, DesiredRuntimeConfig={"CopyCount": spec.copies}
            )
            self.changed[spec.name] = "copies"
            logger.info("setting inference component %s to %d copies", spec.name, spec.copies)
        else:
            logger.info("inference component %s is up to date", spec.name)

    def _create(self, spec: ComponentSpec) -> None:
        plan = self.plan
        self._say("create-component", f"{spec.name} ({spec.copies} copies)")
        self.ledger.add("inference-component", spec.name)
        try:
            self.sagemaker.create_inference_component(
                InferenceComponentName=spec.name,
                EndpointName=plan.endpoint_name,
                VariantName=plan.variant_name,
                Specification=spec.specification,  # type: ignore[arg-type]
                RuntimeConfig={"CopyCount": spec.copies},
                Tags=plan.tags,
            )
        except Exception as exc:
            made = is_transient(exc) and describe_or_none(
                self.sagemaker.describe_inference_component,
                deadline=self.deadline,
                InferenceComponentName=spec.name,
            )
            if not made:
                raise
            logger.warning("creating inference component %s failed (%s), but it was created", spec.name, exc)
        self.changed[spec.name] = "create"
        logger.info("creating inference component %s on %s", spec.name, plan.endpoint_name)

    def _wait_changed(self) -> None:
        """Poll every component this call created or updated until it is in service on what was sent.

        Raises:
            EndpointFailedError: a component went to Failed, or SageMaker rolled its update back.
            DeploymentTimeoutError: one is still in progress when the deadline passes.
        """
        specs = {spec.name: spec for spec in self.plan.components}
        waiting = set(self.changed)
        delays = poll_delays(self.poll_interval)
        start = time.monotonic()
        while waiting:
            for component in sorted(waiting):
                description = describe_or_none(
                    self.sagemaker.describe_inference_component,
                    deadline=self.deadline,
                    InferenceComponentName=component,
                )
                if self._settled_as_sent(specs[component], description):
                    waiting.discard(component)
            if not waiting:
                break
            self._say(
                "wait", f"components {', '.join(sorted(waiting))} after {time.monotonic() - start:.0f}s"
            )
            if self.deadline.passed():
                raise DeploymentTimeoutError(
                    f"inference components {', '.join(sorted(waiting))} of endpoint "
                    f"{self.plan.endpoint_name!r} not in service after {self.timeout:g}s",
                    endpoint_name=self.plan.endpoint_name,
                )
            time.sleep(min(next(delays), self.deadline.remaining()))

    def _settled_as_sent(self, spec: ComponentSpec, description: Mapping[str, Any] | None) -> bool:
        """True once ``spec``'s component is InService on what this call sent; raise when it failed."""
        endpoint = self.plan.endpoint_name
        if description is None:
            raise EndpointFailedError(
                f"inference component {spec.name!r} of endpoint {endpoint!r} disappeared while it was "
                f"being {'created' if self.changed[spec.name] == 'create' else 'updated'}",
                endpoint_name=endpoint,
                failure_reason="the component no longer exists",
            )
        status = description.get("InferenceComponentStatus")
        if status in COMPONENT_IN_PROGRESS:
            return False
        reason = str(description.get("FailureReason") or "")
        if status == "InService":
            current = description.get("Specification", {})
            copies = description.get("RuntimeConfig", {}).get("DesiredCopyCount")
            if current.get("ModelName") == spec.model_name and (
                spec.autoscaling is not None or self.changed[spec.name] == "create" or copies == spec.copies
            ):
                return True
            reason = reason or "SageMaker rolled the update back"
            raise EndpointFailedError(
                f"inference component {spec.name!r} of endpoint {endpoint!r}: the update did not take: "
                f"{reason}",
                endpoint_name=endpoint,
                failure_reason=reason,
            )
        raise EndpointFailedError(
            f"inference component {spec.name!r} of endpoint {endpoint!r} is {status}: "
            f"{reason or 'no FailureReason given'}",
            endpoint_name=endpoint,
            failure_reason=reason,
        )

    # -- once every component is in service ------------------------------------------------------

    def _remove(self, components: list[str]) -> None:
        """Delete the components this library made for the endpoint that the call no longer names (their
        autoscaling first); failures are logged, and a later run or teardown() finishes."""
        if not components:
            return
        deadline = self.deadline
        try:
            for component in components:
                self._say("delete-component", f"{component} (no longer deployed)")
                remove_component_scaling(
                    self.scaling_client(), self.cloudwatch(), component, deadline=deadline
                )
                self.sagemaker.delete_inference_component(InferenceComponentName=component)
            wait_components_gone(self.sagemaker, components, deadline, self.poll_interval)
        except Exception as exc:
            logger.warning(
                "could not remove inference components %s of endpoint %s: %s; deploying again or "
                "teardown() removes them",
                ", ".join(components),
                self.plan.endpoint_name,
                exc,
            )

    def _autoscaling(self, components: Components) -> None:
        name = self.plan.endpoint_name
        deadline = Deadline(max(self.deadline.remaining(), 60.0))
        try:
            for spec in self.plan.components:
                if spec.autoscaling is not None:
                    self._say("autoscaling", f"{spec.name}: {spec.autoscaling}")
                    apply_component_scaling(
                        self.scaling_client(),
                        self.cloudwatch(),
                        spec.name,
                        spec.autoscaling,
                        deadline=deadline,
                    )
                elif components.found.get(spec.name) is not None:
                    remove_component_scaling(
                        self.scaling_client(), self.cloudwatch(), spec.name, deadline=deadline, only_ours=True
                    )
        except Exception as exc:
            raise DeploymentError(
                f"endpoint {name!r} and its inference components are in service, but the components' "
                f"autoscaling could not be applied: {exc}; everything is kept (in service) and no scalable "
                "target is left without its policy; run deploy_inference_components("
                f"{name!r}, ...) again with the same arguments to finish",
                endpoint_name=name,
                kept=[("endpoint", name), *(("inference-component", s.name) for s in self.plan.components)],
            ) from exc
