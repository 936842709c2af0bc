"""The control plane's inference components: their state, where their copies are, and how they change.

A :class:`ComponentStore` is kept on moto's SageMaker backend of an account and region (so dropping the
backend drops it). It answers the operations (:mod:`._component_api` wires them into moto's responses) and
runs each change as SageMaker does, as a status transition:

- ``CreateInferenceComponent``: ``Creating``, then ``InService`` once its copies serve, or ``Failed`` with
  a ``FailureReason`` (no room for a copy on the endpoint's instances, or a copy that did not start);
- ``UpdateInferenceComponent`` (a new specification, copies) and ``UpdateInferenceComponentRuntimeConfig``
  (copies): ``Updating``, then ``InService``; a failed update leaves the component ``InService`` as it was,
  with the ``FailureReason``;
- ``DeleteInferenceComponent``: ``Deleting``, then gone once its copies have stopped.

Changes are refused while a transition runs, as SageMaker refuses them. Each transition waits
``transition_delay`` seconds (the plane's), places the copies (:mod:`mme_triton._inference_components`) on
the endpoint's instances (:class:`Hosts`: with ``ManagedInstanceScaling``, an instance is added for a copy
that fits none, up to ``MaxInstanceCount``, and instances left without copies go, down to
``MinInstanceCount``), then runs the plane's ``on_component`` hooks with the copies that must run (the
stack starts and stops Tritons there) and becomes current. The variant's instance count in
``DescribeEndpoint`` follows the instances.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import (
    Resources,
    instance_resources,
    place_copy,
    required_resources,
)
from mme_triton.local.aws._component_checks import not_found, refuse

if TYPE_CHECKING:
    from mme_triton.local.aws.controlplane import ControlPlane

__all__ = ["NO_ROOM", "Component", "ComponentStore", "Hosts", "store_of"]

logger = logging.getLogger("mme_triton.local.aws.controlplane")

NO_ROOM = (
    "There is not enough hardware resources on the instances for this endpoint to create a copy of the "
    "inference component."
)
"""SageMaker's ``FailureReason`` for a copy no instance has room for (quoted from a measured deployment,
huggingface/skills' SageMaker scale-to-zero guide)."""

_TRANSIENT = {
    "Creating": "CREATE_IN_PROGRESS",
    "Updating": "UPDATE_IN_PROGRESS",
    "Deleting": "DELETE_IN_PROGRESS",
}


def _now() -> datetime:
    from mme_triton.local.aws._moto_patches import utcnow

    return utcnow()


@dataclass
class Component:
    """One inference component as the control plane keeps it."""

    name: str
    arn: str
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    instance_type: str
    specification: dict[str, Any]
    desired: int
    status: str = "Creating"
    failure_reason: str | None = None
    copies: list[tuple[str, str]] = field(default_factory=list)  # (copy id, instance id), serving
    version: int = 1
    deployment_config: dict[str, Any] | None = None
    tags: list[dict[str, str]] = field(default_factory=list)
    pending: dict[str, Any] | None = None  # an update under way: its specification, the count before it
    creation_time: datetime = field(default_factory=_now)
    last_modified_time: datetime = field(default_factory=_now)
    numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def need(self) -> Resources:
        return required_resources(self.specification.get("ComputeResourceRequirements") or {})

    def new_copy(self) -> str:
        return f"{self.name}-{next(self.numbers)}"


@dataclass
class Hosts:
    """The instances of an endpoint that hosts components, and its managed instance scaling."""

    endpoint_name: str
    variant_name: str
    instance_type: str
    capacity: Resources
    instances: list[str]
    minimum: int
    maximum: int | None  # None: managed instance scaling is off (the count is the variant's)
    numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(self) -> str:
        instance = f"i-{next(self.numbers)}"
        self.instances.append(instance)
        return instance


def store_of(backend: Any) -> ComponentStore:
    """The ComponentStore kept on a moto SageMaker backend (created on first use)."""
    with _stores_lock:
        store: ComponentStore | None = getattr(backend, "_mme_triton_components", None)
        if store is None:
            store = ComponentStore(backend)
            backend._mme_triton_components = store
        return store


_stores_lock = threading.Lock()


class ComponentStore:
    """The inference components of one account and region (thread-safe)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.lock = threading.RLock()
        self.components: dict[str, Component] = {}
        self.hosts: dict[str, Hosts] = {}  # endpoint name -> its instances

    # -- reading -----------------------------------------------------------------------------------

    def get(self, name: str) -> Component:
        with self.lock:
            component = self.components.get(name)
            if component is None:
                raise not_found(self.arn(name))
            return component

    def arn(self, name: str) -> str:
        from moto.sagemaker.utils import arn_formatter

        return arn_formatter(
            "inference-component", name.lower(), self.backend.account_id, self.backend.region_name
        )

    def by_arn(self, arn: str) -> Component | None:
        with self.lock:
            return next((c for c in self.components.values() if c.arn.lower() == arn.lower()), None)

    def of_endpoint(self, endpoint_name: str) -> list[Component]:
        with self.lock:
            return [c for c in self.components.values() if c.endpoint_name == endpoint_name]

    # -- changes -----------------------------------------------------------------------------------

    def add(self, component: Component) -> None:
        with self.lock:
            if component.name in self.components:
                raise refuse(f'Cannot create already existing inference component "{component.arn}".')
            self.components[component.name] = component
        self._schedule(component.name, "create")

    def change(
        self,
        name: str,
        *,
        copies: int | None = None,
        specification: dict[str, Any] | None = None,
        deployment_config: dict[str, Any] | None = None,
        why: str = "update",
    ) -> str:
        """Start an update: a new copy count and/or specification (``Updating`` until it is done)."""
        with self.lock:
            component = self.get(name)
            if component.status != "InService":
                raise refuse(
                    f'Cannot update inference component "{component.arn}" while it is in status '
                    f"{component.status}."
                )
            component.status = "Updating"
            component.last_modified_time = _now()
            component.pending = {"specification": specification, "previous": component.desired}
            if copies is not None:
                component.desired = copies
            if deployment_config is not None:
                component.deployment_config = deployment_config
            arn = component.arn
        self._schedule(name, why)
        return arn

    def remove(self, name: str) -> None:
        with self.lock:
            component = self.get(name)
            if component.status in _TRANSIENT:
                raise refuse(
                    f'Cannot delete inference component "{component.arn}" while it is in state '
                    f"{_TRANSIENT[component.status]}."
                )
            component.status = "Deleting"
            component.last_modified_time = _now()
        self._schedule(name, "delete")

    def endpoint_gone(self, endpoint_name: str) -> None:
        """DeleteEndpoint: its instances go; its components stay (SageMaker keeps them; delete them
        first), with no copy running."""
        with self.lock:
            self.hosts.pop(endpoint_name, None)
            for component in self.components.values():
                if component.endpoint_name == endpoint_name:
                    component.copies = []

    # -- transitions -------------------------------------------------------------------------------

    def _plane(self) -> ControlPlane | None:
        from mme_triton.local.aws._moto_patches import plane_for

        return plane_for(self.backend.account_id)

    def _schedule(self, name: str, what: str) -> None:
        plane = self._plane()
        if plane is None:
            self._transition(name, None, what)
            return
        plane.later(
            ("inference-component", name), what, lambda generation: self._transition(name, plane, what)
        )

    def _transition(self, name: str, plane: ControlPlane | None, what: str, attempt: int = 0) -> None:
        with self.lock:
            component = self.components.get(name)
            if component is None:
                return
            endpoint = self.backend.endpoints.get(component.endpoint_name)
            waiting = endpoint is not None and endpoint.endpoint_status in ("Creating", "Updating")
            gone = endpoint is None or endpoint.endpoint_status == "Failed"
        if waiting and component.status != "Deleting" and plane is not None and attempt < 6000:
            # a component waits for its endpoint to be in service before its copies start
            plane.later(
                ("inference-component", name),
                what,
                lambda generation: self._transition(name, plane, what, attempt + 1),
                delay=0.1,
            )
            return
        if component.status == "Deleting":
            self._run_hooks(plane, name, {**self._plan(component, []), "Deleted": True})
            with self.lock:
                self.components.pop(name, None)
                self._release(component.endpoint_name)
            return
        pending, component.pending = component.pending or {}, None
        specification = pending.get("specification")
        desired = component.desired
        with self.lock:
            try:
                if gone:
                    raise _NoRoom(f'Endpoint "{component.endpoint_arn}" is not in service.')
                placed = self._place(
                    component, desired, new_version=specification is not None, specification=specification
                )
                reason = None
            except _NoRoom as exc:
                placed, reason = [], str(exc)
        version = component.version + (1 if specification is not None else 0)
        if reason is None:
            target = copy.copy(component)
            target.specification = specification or component.specification
            target.version = version
            reason = self._run_hooks(plane, name, self._plan(target, placed), fail=True)
        with self.lock:
            if reason is None:
                component.copies = placed
                component.version = version
                if specification is not None:
                    component.specification = specification
                component.status = "InService"
                component.failure_reason = None
            elif component.status == "Creating":
                component.status = "Failed"
                component.failure_reason = reason
                component.copies = []
            else:
                component.status = "InService"
                component.failure_reason = reason
                component.desired = int(pending.get("previous", component.desired))
            component.last_modified_time = _now()
            self._release(component.endpoint_name)
            restore = self._plan(component, component.copies) if reason is not None else None
        if restore is not None:
            self._run_hooks(plane, name, restore)

    def _run_hooks(
        self, plane: ControlPlane | None, name: str, plan: dict[str, Any], *, fail: bool = False
    ) -> str | None:
        if plane is None:
            return None
        for hook in list(plane.on_component):
            try:
                hook(name, copy.deepcopy(plan))
            except Exception as exc:
                logger.info("inference component %s: %s", name, exc)
                if fail:
                    return str(exc) or type(exc).__name__
        return None

    # -- placement ---------------------------------------------------------------------------------

    def hosts_of(self, component: Component) -> Hosts:
        """The instances of the component's endpoint (created from its variant on first use)."""
        hosts = self.hosts.get(component.endpoint_name)
        if hosts is not None:
            return hosts
        endpoint = self.backend.endpoints[component.endpoint_name]
        config = self.backend.endpoint_configs.get(endpoint.endpoint_config_name)
        variant: dict[str, Any] = next(
            (
                v
                for v in (config.production_variants if config else [])
                if v["VariantName"] == component.variant_name
            ),
            {},
        )
        managed = variant.get("ManagedInstanceScaling") or {}
        enabled = managed.get("Status") == "ENABLED"
        count = int(variant.get("InitialInstanceCount") or 1)
        hosts = Hosts(
            component.endpoint_name,
            component.variant_name,
            component.instance_type,
            instance_resources(component.instance_type),
            [],
            int(managed.get("MinInstanceCount", 1)) if enabled else count,
            int(managed.get("MaxInstanceCount", count)) if enabled else None,
        )
        for _ in range(count):
            hosts.add()
        self.hosts[component.endpoint_name] = hosts
        return hosts

    def _place(
        self, component: Component, desired: int, *, new_version: bool, specification: dict[str, Any] | None
    ) -> list[tuple[str, str]]:
        """The copies the component runs at ``desired`` (caller holds the lock): those it has, the newest
        leaving first, and new ones placed where they fit. A new specification places all its copies anew,
        counting the old ones as gone (they stop once the new ones serve)."""
        hosts = self.hosts_of(component)
        need = required_resources(
            (specification or component.specification).get("ComputeResourceRequirements") or {}
        )
        kept = [] if new_version else component.copies[:desired]
        used = {instance: Resources(0.0) for instance in hosts.instances}
        same = dict.fromkeys(hosts.instances, 0)
        for other in self.components.values():
            if other is component or other.endpoint_name != component.endpoint_name:
                continue
            for _, instance in other.copies:
                if instance in used:
                    used[instance] = used[instance] + other.need
        for _, instance in kept:
            if instance in used:
                used[instance] = used[instance] + need
                same[instance] += 1
        placed = list(kept)
        strategy = str(
            ((specification or component.specification).get("SchedulingConfig") or {}).get(
                "PlacementStrategy"
            )
            or "SPREAD"
        )
        while len(placed) < desired:
            free = [hosts.capacity - used[instance] for instance in hosts.instances]
            index = place_copy(free, [same[i] for i in hosts.instances], need, strategy=strategy)
            if (
                index is None
                and hosts.maximum is not None
                and len(hosts.instances) < hosts.maximum
                and hosts.capacity.covers(need)
            ):
                instance = hosts.add()
                used[instance], same[instance] = Resources(0.0), 0
                index = len(hosts.instances) - 1
                logger.info(
                    "endpoint %s: instance %s added for a copy of %s",
                    hosts.endpoint_name,
                    instance,
                    component.name,
                )
            if index is None:
                raise _NoRoom(NO_ROOM)
            instance = hosts.instances[index]
            placed.append((component.new_copy(), instance))
            used[instance] = used[instance] + need
            same[instance] += 1
        self._sync_counts(hosts)
        return placed

    def _release(self, endpoint_name: str) -> None:
        """Managed instance scaling: instances without copies go, down to the minimum (lock held)."""
        hosts = self.hosts.get(endpoint_name)
        if hosts is None or hosts.maximum is None:
            return
        busy = {i for c in self.components.values() if c.endpoint_name == endpoint_name for _, i in c.copies}
        for instance in [i for i in reversed(hosts.instances) if i not in busy]:
            if len(hosts.instances) <= hosts.minimum:
                break
            hosts.instances.remove(instance)
            logger.info("endpoint %s: instance %s released (no copies)", endpoint_name, instance)
        self._sync_counts(hosts)

    def _sync_counts(self, hosts: Hosts) -> None:
        endpoint = self.backend.endpoints.get(hosts.endpoint_name)
        if endpoint is None:
            return
        for variant in endpoint.production_variants:
            if variant["VariantName"] == hosts.variant_name:
                variant["CurrentInstanceCount"] = variant["DesiredInstanceCount"] = len(hosts.instances)

    def set_instance_count(self, endpoint_name: str, variant_name: str, count: int) -> None:
        """``UpdateEndpointWeightsAndCapacities`` on an endpoint that hosts components: the instances follow,
        never below what its copies use."""
        with self.lock:
            hosts = self.hosts.get(endpoint_name)
            if hosts is None or hosts.variant_name != variant_name:
                return
            busy = {
                i for c in self.components.values() if c.endpoint_name == endpoint_name for _, i in c.copies
            }
            while len(hosts.instances) < count:
                hosts.add()
            idle = [i for i in reversed(hosts.instances) if i not in busy]
            while len(hosts.instances) > count:
                if not idle:
                    raise refuse(
                        f"Cannot scale endpoint {endpoint_name} to {count} instances: its inference "
                        "components' copies run on more. Reduce their copy counts first."
                    )
                hosts.instances.remove(idle.pop(0))

    def _plan(self, component: Component, copies: list[tuple[str, str]]) -> dict[str, Any]:
        """What the ``on_component`` hooks get: the copies that must run, and what each serves."""
        from mme_triton._sagemaker import model_data_url_of, serving_container

        specification = component.specification
        container: dict[str, Any] = {}
        if specification.get("ModelName") and specification["ModelName"] in self.backend._models:
            model = self.backend.describe_model(specification["ModelName"]).response_object
            found = dict(serving_container(model) or {})
            container = {
                "Image": found.get("Image", ""),
                "ModelDataUrl": model_data_url_of(model) or "",
                "Environment": dict(found.get("Environment") or {}),
            }
        elif specification.get("Container"):
            given = specification["Container"]
            container = {
                "Image": given.get("Image", ""),
                "ModelDataUrl": given.get("ArtifactUrl", ""),
                "Environment": dict(given.get("Environment") or {}),
            }
        return {
            "InferenceComponentName": component.name,
            "EndpointName": component.endpoint_name,
            "VariantName": component.variant_name,
            "InstanceType": component.instance_type,
            "Version": component.version,
            "Container": container,
            "ComputeResourceRequirements": dict(specification.get("ComputeResourceRequirements") or {}),
            "StartupParameters": dict(specification.get("StartupParameters") or {}),
            "Copies": [{"CopyId": copy_id, "InstanceId": instance} for copy_id, instance in copies],
        }


class _NoRoom(Exception):
    """No instance has room for a copy."""


Hook = Callable[[str, dict[str, Any]], None]
