"""What each endpoint of the embedded stack holds now (``LocalStack.status()``, ``mme-triton local status``).

SageMaker shows none of this (per-model metrics "aren't supported"); the stack can, because it runs the
instances: per in-service endpoint, each instance's loaded models (least recently used first) with the
memory each counts against the instance's budget and how many times it was loaded there, and the models in
S3 no instance has loaded; for an endpoint that hosts inference components, each component's copies (the
instance each runs on, the requests it served and has in flight). The runtime server answers the same as
JSON on ``GET /mme-triton/status`` (:data:`STATUS_PATH`), so that another process (``mme-triton local
status``) can read a running ``local up``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mme_triton.errors import LocalStackError

if TYPE_CHECKING:
    from mme_triton.local.route.runtime import InvocationRuntime

__all__ = [
    "STATUS_PATH",
    "EndpointStatus",
    "HostedComponent",
    "InstanceStatus",
    "LoadedModel",
    "RunningCopy",
    "stack_status",
    "status_from_json",
]

logger = logging.getLogger(__name__)

STATUS_PATH = "/mme-triton/status"
"""The runtime server's read-only route that answers :func:`stack_status` as JSON."""


@dataclass(frozen=True)
class LoadedModel:
    """One model loaded in an instance's Triton (in :attr:`EndpointStatus.loaded`: on any instance)."""

    target_model: str
    memory_bytes: int
    """What it counts against the memory budget, as last measured (summed over the instances holding it)."""
    loads: int
    """How many times it was loaded (a load after an eviction counts again)."""


@dataclass(frozen=True)
class InstanceStatus:
    """What one instance of an endpoint's variant holds now."""

    instance_id: str
    loaded: list[LoadedModel] = field(default_factory=list)
    """Least recently used first."""
    loads: int = 0
    evictions: int = 0
    downloads: int = 0
    restarts: int = 0


@dataclass(frozen=True)
class RunningCopy:
    """One copy of an inference component: a Triton serving the component's model on an instance."""

    copy_id: str
    instance_id: str
    served: int
    """Requests it answered."""
    in_flight: int
    """Requests it is answering now."""


@dataclass(frozen=True)
class HostedComponent:
    """One inference component of an endpoint that hosts them (in :attr:`EndpointStatus.components`)."""

    component_name: str
    copy_count: int
    """The copies the control plane gives it now (``CurrentCopyCount``)."""
    copies: list[RunningCopy] = field(default_factory=list)
    """The copies in the routing (fewer than ``copy_count`` while copies start or leave)."""


@dataclass(frozen=True)
class EndpointStatus:
    """What one in-service endpoint of the stack holds now."""

    endpoint_name: str
    variant_name: str
    instance_type: str | None
    model_data_url: str
    memory_budget: int | None
    """Bytes the models loaded on one instance may hold (``None``: no byte limit)."""
    loaded: list[LoadedModel] = field(default_factory=list)
    """The models loaded on any instance (each instance's least recently used first)."""
    not_loaded: list[str] = field(default_factory=list)
    """Models in S3 under the ModelDataUrl that no instance has loaded."""
    loads: int = 0
    evictions: int = 0
    downloads: int = 0
    restarts: int = 0
    s3_error: str | None = None
    """Why the models in S3 could not be listed, when they could not."""
    instances: list[InstanceStatus] = field(default_factory=list)
    """Each instance's models and counters, oldest instance first."""
    components: list[HostedComponent] = field(default_factory=list)
    """For an endpoint that hosts inference components (no ModelDataUrl, no models loaded on demand):
    each component and its copies, by name."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return asdict(self)


def stack_status(runtime: InvocationRuntime) -> list[EndpointStatus]:
    """The status of each endpoint ``runtime`` serves, by endpoint name."""
    found: list[EndpointStatus] = []
    for name in runtime.endpoints():
        endpoint = runtime.endpoint(name)
        if endpoint is None:  # deleted meanwhile
            continue
        instances = []
        for instance in endpoint.instances:
            memory = instance.model_memory()
            instances.append(
                InstanceStatus(
                    instance.instance_id,
                    [
                        LoadedModel(model, memory.get(model, 0), instance.load_counts[model])
                        for model in instance.loaded_models()
                    ],
                    instance.loads,
                    instance.evictions,
                    instance.downloads,
                    instance.restarts,
                )
            )
        memory = endpoint.model_memory()
        counts = endpoint.load_counts
        loaded = [
            LoadedModel(model, memory.get(model, 0), counts[model])
            for model in dict.fromkeys(m.target_model for i in instances for m in i.loaded)
        ]
        error = None
        try:
            in_s3 = endpoint.models_in_s3()
        except LocalStackError as exc:
            logger.warning("endpoint %s: %s", name, exc)
            in_s3, error = [], str(exc)
        names = {model.target_model for model in loaded}
        found.append(
            EndpointStatus(
                endpoint_name=name,
                variant_name=endpoint.models.variant_name,
                instance_type=endpoint.models.instance_type,
                model_data_url=endpoint.model_data_url,
                memory_budget=endpoint.memory_budget,
                loaded=loaded,
                not_loaded=[model for model in in_s3 if model not in names],
                loads=endpoint.loads,
                evictions=endpoint.evictions,
                downloads=endpoint.downloads,
                restarts=endpoint.restarts,
                s3_error=error,
                instances=instances,
            )
        )
    for name in runtime.hostings():
        hosting = runtime.hosting(name)
        if hosting is None:  # deleted meanwhile
            continue
        components = []
        for component_name in hosting.components():
            component = hosting.component(component_name)
            if component is None:
                continue
            copies = [
                RunningCopy(copy.copy_id, copy.instance_id, copy.served, copy.in_flight)
                for copy in component.copies
                if not copy.retired
            ]
            components.append(HostedComponent(component_name, component.planned, copies))
        found.append(
            EndpointStatus(
                endpoint_name=name,
                variant_name=hosting.variant_name,
                instance_type=hosting.instance_type,
                model_data_url="",
                memory_budget=None,
                components=components,
            )
        )
    return found


def status_from_json(document: Any) -> list[EndpointStatus]:
    """The statuses in the runtime server's answer (``{"endpoints": [...]}``).

    Raises:
        ValueError: not such a document.
    """

    def loaded(entry: Any) -> list[LoadedModel]:
        return [LoadedModel(**model) for model in entry.get("loaded", [])]

    try:
        return [
            EndpointStatus(
                **{
                    **entry,
                    "loaded": loaded(entry),
                    "instances": [
                        InstanceStatus(**{**instance, "loaded": loaded(instance)})
                        for instance in entry.get("instances", [])
                    ],
                    "components": [
                        HostedComponent(
                            **{**component, "copies": [RunningCopy(**c) for c in component.get("copies", [])]}
                        )
                        for component in entry.get("components", [])
                    ],
                }
            )
            for entry in document["endpoints"]
        ]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a status document of the embedded stack: {exc}") from exc
