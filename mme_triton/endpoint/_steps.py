"""The steps of one ``deploy_mme`` call once its arguments are checked, each with its failure handling.

Existing endpoint (waited for if in progress) → model → endpoint config → CreateEndpoint or UpdateEndpoint
→ wait for ``InService`` → remove what the endpoint no longer uses → autoscaling. What a failure before
``InService`` deletes or keeps is decided in :mod:`mme_triton.endpoint._recovery`.

:class:`EndpointSteps` holds the steps every deployment of an endpoint takes, whatever hosts its models;
:class:`Deployment` runs them for a multi-model endpoint, and the inference components' deployer
(:mod:`mme_triton.endpoint._component_steps`) for an endpoint of components.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import hosts_components
from mme_triton._sagemaker import is_transient
from mme_triton.endpoint._plan import DeployPlan, EndpointPlan
from mme_triton.endpoint._recovery import (
    RECOVERY_READ_SECONDS,
    EndpointState,
    Ledger,
    fail,
    read_endpoint,
    remove_superseded,
)
from mme_triton.endpoint._resolve import Resolved
from mme_triton.endpoint._resources import TAG_ENDPOINT, TAG_MANAGED, describe_or_none, list_tags
from mme_triton.endpoint._retry import Deadline, read
from mme_triton.endpoint.autoscaling import (
    apply_autoscaling,
    policy_name,
    read_registration,
    remove_autoscaling,
    resource_id,
)
from mme_triton.endpoint.handle import IN_PROGRESS, DeployProgress, wait_for_endpoint
from mme_triton.errors import DeploymentError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = ["Deployment", "EndpointSteps"]

logger = logging.getLogger(__name__)


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


class EndpointSteps:
    """The steps of a deployment of an endpoint, whatever hosts its models, each with its failure handling.

    ``hosts_components`` says which endpoints this deployer may take over: an endpoint hosting the other
    kind is refused before anything changes (SageMaker cannot switch one into the other in place).
    """

    hosts_components = False

    def __init__(
        self,
        sagemaker: SageMakerClient,
        scaling_client: Callable[[], ApplicationAutoScalingClient],
        plan: EndpointPlan,
        ledger: Ledger,
        wait: bool,
        timeout: float,
        poll_interval: float,
        progress: DeployProgress | None,
    ) -> None:
        self.sagemaker = sagemaker
        self.scaling_client = scaling_client
        self.plan = plan
        self.ledger = ledger
        self.wait = wait
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.progress = progress
        self.deadline = Deadline(timeout)

    def _say(self, stage: str, detail: str) -> None:
        if self.progress is not None:
            self.progress(stage, detail)

    def _recovery_state(self) -> EndpointState:
        deadline = Deadline(min(RECOVERY_READ_SECONDS, self.timeout))
        return read_endpoint(self.sagemaker, self.plan.endpoint_name, deadline)

    # -- the steps -------------------------------------------------------------------------------

    def _existing(self) -> dict[str, Any] | None:
        """The endpoint as it is before this call changes anything (waited for if in progress)."""
        name = self.plan.endpoint_name
        try:
            existing = describe_or_none(
                self.sagemaker.describe_endpoint, deadline=self.deadline, EndpointName=name
            )
            if existing is None:
                return None
            tags = list_tags(self.sagemaker, existing["EndpointArn"], deadline=self.deadline)
        except DeploymentError:
            raise
        except Exception as exc:
            raise DeploymentError(f"cannot read endpoint {name!r}: {exc}", endpoint_name=name) from exc
        if tags.get(TAG_MANAGED) != "true":
            raise DeploymentError(
                f"endpoint {name!r} exists and was not created by mme_triton; not taking it over",
                endpoint_name=name,
            )
        self._check_hosting(existing)
        if existing["EndpointStatus"] in IN_PROGRESS:
            logger.info("endpoint %s is %s; waiting for it first", name, existing["EndpointStatus"])
            return wait_for_endpoint(
                self.sagemaker,
                name,
                timeout=max(self.deadline.remaining(), min(self.poll_interval, 1.0)),
                poll_interval=self.poll_interval,
                progress=self.progress,
            )
        if existing["EndpointStatus"] != "InService":
            raise DeploymentError(
                f"endpoint {name!r} is {existing['EndpointStatus']} "
                f"({existing.get('FailureReason') or 'no reason given'}); teardown() it first",
                endpoint_name=name,
            )
        return existing

    def _check_hosting(self, existing: Mapping[str, Any]) -> None:
        """Refuse an endpoint that hosts the other kind: components on a multi-model endpoint or the
        reverse (its running config says which)."""
        name = self.plan.endpoint_name
        config_name = existing.get("EndpointConfigName")
        if not config_name:
            return
        try:
            describe = self.sagemaker.describe_endpoint_config
            config = describe_or_none(describe, deadline=self.deadline, EndpointConfigName=config_name)
        except Exception as exc:
            raise DeploymentError(f"cannot read endpoint {name!r}: {exc}", endpoint_name=name) from exc
        if config is None or hosts_components(config) == self.hosts_components:
            return
        if self.hosts_components:
            raise DeploymentError(
                f"endpoint {name!r} is a multi-model endpoint (its config {config_name} names a model); "
                "SageMaker takes inference components only on an endpoint whose variant names none: "
                f"teardown({name!r}) it first, or deploy the components to another endpoint",
                endpoint_name=name,
            )
        raise DeploymentError(
            f"endpoint {name!r} hosts inference components (its config {config_name} names no model); "
            f"deploy_mme cannot turn it into a multi-model endpoint: teardown({name!r}) it first, "
            "deploy to another endpoint, or use deploy_inference_components",
            endpoint_name=name,
        )

    def _set_aside_autoscaling(self, variant: str) -> None:
        """Remove the autoscaling of a variant the update drops (SageMaker refuses UpdateEndpoint while a
        variant it removes is a scalable target), after noting all of it in the ledger: a refused or
        rolled-back update puts it back (:func:`~mme_triton.endpoint._recovery.fail`)."""
        client = self.scaling_client()
        name = self.plan.endpoint_name
        registration = read_registration(client, name, variant, deadline=self.deadline)
        if registration is None:
            return
        self.ledger.removed_autoscaling.append(registration)
        self._say("autoscaling", f"removing {registration} before the update renames the variant")
        remove_autoscaling(client, name, variant, deadline=self.deadline)

    def _ensure(self, kind: str, name: str, request: Mapping[str, Any]) -> None:
        """Create the model or endpoint config ``name`` unless this library already made it for the
        endpoint.

        The check comes first because moto replaces a resource created under an existing name (SageMaker
        refuses): a resource of that name that someone else made is never touched.
        """
        name_key, arn_key, describe, create, label = _RESOURCES[kind]
        plan = self.plan
        existing = describe_or_none(
            getattr(self.sagemaker, describe), deadline=self.deadline, **{name_key: name}
        )
        if existing is not None:
            tags = list_tags(self.sagemaker, existing[arn_key], deadline=self.deadline)
            if tags.get(TAG_ENDPOINT) != plan.endpoint_name:
                raise DeploymentError(
                    f"{label} named {name} exists and was not created for endpoint {plan.endpoint_name!r}",
                    endpoint_name=plan.endpoint_name,
                )
            logger.info("%s %s already exists", kind, name)
            return
        self._say(f"create-{kind}", name)
        try:
            getattr(self.sagemaker, create)(**{name_key: name}, Tags=plan.tags, **request)
        except Exception as exc:
            if not is_transient(exc):
                raise
            self.ledger.add(kind, name)  # it may have been created, its answer lost
            made = describe_or_none(
                getattr(self.sagemaker, describe), deadline=self.deadline, **{name_key: name}
            )
            if made is None:
                raise
            logger.warning("creating %s %s failed (%s), but it was created", kind, name, exc)
            return
        self.ledger.add(kind, name)
        logger.info("created %s %s", kind, name)

    def _send(self, action: str) -> None:
        """CreateEndpoint or UpdateEndpoint; when the call fails, read the endpoint to see whether it was
        accepted anyway (its answer lost) before deciding what to roll back."""
        plan, name = self.plan, self.plan.endpoint_name
        self.ledger.sent = action
        try:
            if action == "create":
                self._say("create-endpoint", name)
                self.sagemaker.create_endpoint(
                    EndpointName=name, EndpointConfigName=plan.config_name, Tags=plan.tags
                )
                logger.info("creating endpoint %s with %s", name, plan.config_name)
            else:
                self._say("update-endpoint", f"{name}: {self.ledger.previous_config} -> {plan.config_name}")
                self.sagemaker.update_endpoint(EndpointName=name, EndpointConfigName=plan.config_name)
                logger.info(
                    "updating endpoint %s from %s to %s", name, self.ledger.previous_config, plan.config_name
                )
        except Exception as exc:
            state = self._recovery_state()
            if self._accepted(action, state):
                logger.warning(
                    "%s of endpoint %s failed (%s) but was accepted; waiting for it", action, name, exc
                )
                return
            raise fail(self.ledger, exc, state, self.progress) from exc

    def _accepted(self, action: str, state: EndpointState) -> bool:
        if not state.known or state.description is None:
            return False
        if action == "create":
            return state.config == self.plan.config_name
        return state.status in IN_PROGRESS or (
            state.status == "InService" and state.config == self.plan.config_name
        )

    def _describe_after_send(self) -> dict[str, Any]:
        name = self.plan.endpoint_name
        try:
            return dict(
                read(
                    self.sagemaker.describe_endpoint,
                    deadline=self.deadline,
                    what="DescribeEndpoint",
                    EndpointName=name,
                )
            )
        except Exception as exc:
            raise DeploymentError(
                f"endpoint {name!r}: {self.ledger.sent or 'no change'} sent, but it cannot be read: {exc}",
                endpoint_name=name,
                kept=self.ledger.unfinished(),
            ) from exc

    def _wait_in_service(self) -> dict[str, Any]:
        plan = self.plan
        try:
            return wait_for_endpoint(
                self.sagemaker,
                plan.endpoint_name,
                timeout=max(self.deadline.remaining(), min(self.poll_interval, 1.0)),
                poll_interval=self.poll_interval,
                progress=self.progress,
                expect_config=plan.config_name,
            )
        except Exception as exc:
            state = self._recovery_state()
            if state.status == "InService" and state.config == plan.config_name:
                logger.warning("waiting for %s failed (%s), but it is in service", plan.endpoint_name, exc)
                assert state.description is not None
                return state.description
            raise fail(self.ledger, exc, state, self.progress) from exc


class Deployment(EndpointSteps):
    """One deploy_mme call after its arguments are checked: the steps, each with its failure handling."""

    plan: DeployPlan

    def __init__(
        self,
        resolved: Resolved,
        ledger: Ledger,
        wait: bool,
        timeout: float,
        poll_interval: float,
        progress: DeployProgress | None,
    ) -> None:
        super().__init__(
            resolved.sagemaker,
            resolved.scaling_client,
            resolved.plan,
            ledger,
            wait,
            timeout,
            poll_interval,
            progress,
        )

    def run(self) -> dict[str, Any]:
        plan, name = self.plan, self.plan.endpoint_name
        existing = self._existing()
        try:
            self._ensure("model", plan.model_name, plan.model_request)
            self._ensure("endpoint-config", plan.config_name, plan.config_request)
            if existing is not None and existing.get("EndpointConfigName") != plan.config_name:
                self.ledger.previous_config = str(existing["EndpointConfigName"])
                old_variants = {v["VariantName"] for v in existing.get("ProductionVariants", [])}
                for old_variant in sorted(old_variants - {plan.variant_name}):
                    self._set_aside_autoscaling(old_variant)
        except Exception as exc:
            raise fail(self.ledger, exc, EndpointState(known=True), self.progress) from exc

        if existing is None:
            self._send("create")
        elif existing.get("EndpointConfigName") != plan.config_name:
            self._send("update")
        else:
            logger.info("endpoint %s already runs %s", name, plan.config_name)

        if not self.wait:
            return self._describe_after_send()
        description = self._wait_in_service()
        # In service on this config: from here on nothing is rolled back.
        remove_superseded(
            self.sagemaker, name, plan.config_name, {plan.model_name}, self.deadline, self.progress
        )
        self._autoscaling(description, existing is None)
        return description

    def _autoscaling(self, description: Mapping[str, Any], created: bool) -> None:
        plan, name = self.plan, self.plan.endpoint_name
        try:
            if plan.autoscaling is not None:
                self._say("autoscaling", f"{plan.autoscaling}")
                apply_autoscaling(
                    self.scaling_client(), name, plan.variant_name, plan.autoscaling, deadline=self.deadline
                )
            elif not created:
                self._remove_library_autoscaling()
        except Exception as exc:
            kept = [("endpoint", name), ("endpoint-config", plan.config_name), ("model", plan.model_name)]
            raise DeploymentError(
                f"endpoint {name!r} is InService on {plan.config_name}, but its autoscaling could not be "
                f"{'applied' if plan.autoscaling is not None else 'removed'}: {exc}; the endpoint, its "
                "config and model are kept (in service) and no scalable target is left without its policy; "
                f"run deploy_mme({name!r}, ...) again with the same arguments to finish",
                endpoint_name=name,
                kept=kept,
            ) from exc

    def _remove_library_autoscaling(self) -> None:
        """Remove a registration an earlier run made (found by its policy name); leave others alone."""
        plan, name = self.plan, self.plan.endpoint_name
        try:
            client = self.scaling_client()
            ours = read(
                client.describe_scaling_policies,
                deadline=self.deadline,
                what="DescribeScalingPolicies",
                ServiceNamespace="sagemaker",
                ResourceId=resource_id(name, plan.variant_name),
                PolicyNames=[policy_name(name, plan.variant_name)],
            ).get("ScalingPolicies", [])
        except Exception as exc:
            # Deployments without autoscaling need no Application Auto Scaling permissions.
            logger.warning("cannot check the autoscaling of %s: %s", name, exc)
            return
        if any(p.get("PolicyName") == policy_name(name, plan.variant_name) for p in ours):
            remove_autoscaling(client, name, plan.variant_name, deadline=self.deadline)
