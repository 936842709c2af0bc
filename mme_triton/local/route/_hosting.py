"""The runtime's side of inference components: endpoints that host them, and the control plane's plans
(and what one archive of an endpoint may unpack to, for both kinds of endpoint).

Mixed into :class:`~mme_triton.local.route.runtime.InvocationRuntime`. An endpoint whose variant names no
model gets a :class:`~mme_triton.local.route.components.ComponentEndpoint` when it goes in service (no
Triton starts then: each component's copies start when the control plane places them, through
:meth:`ComponentHosting.on_component`).

Also here: how the WSGI route reads a request (header text, body, a body over the limit drained), shared by
the runtime's WSGI middleware.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mme_triton._inference_components import INFERENCE_COMPONENT_HEADER
from mme_triton.errors import LocalStackError
from mme_triton.local.route.components import ComponentEndpoint, CopyBudget
from mme_triton.local.route.extract import ExtractLimits
from mme_triton.local.route.instance import EndpointModels
from mme_triton.local.route.limits import DEFAULT_MAX_UNPACKED_BYTES, GiB
from mme_triton.local.route.python_env import model_adapter

if TYPE_CHECKING:
    from mme_triton.local.route._component_metrics import ComponentSinkFactory
    from mme_triton.local.route.endpoint_runtime import EndpointRuntime
    from mme_triton.local.triton.protocol import CopyFactory

__all__ = ["COMPONENT_ENVIRON", "ComponentHosting", "drain", "header_text", "read_body", "safe_name"]

logger = logging.getLogger("mme_triton.local.route.runtime")

COMPONENT_ENVIRON = "HTTP_" + INFERENCE_COMPONENT_HEADER.upper().replace("-", "_")
"""How a WSGI server names the ``InferenceComponentName`` header."""
_COPY_CHUNK = 1024 * 1024


class ComponentHosting:
    """The endpoints that host inference components; mixed into the runtime (its attributes below)."""

    # set by InvocationRuntime.__init__
    _lock: threading.Lock
    _generation: int
    max_unpacked_bytes: int | None
    max_archive_members: int
    max_compression_ratio: float
    _stopping: threading.Event
    _endpoints: dict[str, EndpointRuntime]
    _s3: Any
    region: str
    account_id: str
    workdir: Path
    copy_factory: CopyFactory | None
    copy_budget: CopyBudget
    component_metrics: ComponentSinkFactory | None

    def _init_hosting(self) -> None:
        self._hosting: dict[str, ComponentEndpoint] = {}

    def hostings(self) -> list[str]:
        """Names of the endpoints in service that host inference components."""
        with self._lock:
            return sorted(self._hosting)

    def hosting(self, endpoint_name: str) -> ComponentEndpoint | None:
        """The runtime of an in-service endpoint that hosts inference components (else ``None``)."""
        with self._lock:
            return self._hosting.get(endpoint_name)

    def _limits(self, models: EndpointModels) -> ExtractLimits:
        """What one archive of the endpoint may unpack to: its volume, within the stack's ceiling."""
        limit = self.max_unpacked_bytes
        source = "the stack's limit (max_unpacked_bytes)"
        if models.volume_size_gb:
            volume = models.volume_size_gb * GiB
            if limit is None or volume <= limit:
                limit = volume
                source = f"the endpoint's VolumeSizeInGB ({models.volume_size_gb})"
        if limit is None:
            limit = DEFAULT_MAX_UNPACKED_BYTES
            source = "the stack's default limit (max_unpacked_bytes)"
        return ExtractLimits(
            max_bytes=limit,
            max_members=self.max_archive_members,
            max_ratio=self.max_compression_ratio,
            max_bytes_source=source,
        )

    def _host_components(self, endpoint_name: str, description: Mapping[str, Any]) -> bool:
        """When the endpoint going in service hosts components (its variant names no model): its runtime,
        with no Triton yet (copies start as they are placed); ``False`` for any other endpoint."""
        variants = (description.get("EndpointConfig") or {}).get("ProductionVariants") or [{}]
        if variants[0].get("ModelName"):
            return False
        with self._lock:
            self._generation += 1
            workdir = self.workdir / f"{safe_name(endpoint_name)}-{self._generation}"
        size = variants[0].get("VolumeSizeInGB")
        limits = self._limits(EndpointModels(endpoint_name, "", volume_size_gb=int(size) if size else None))
        if self.copy_factory is None or self._s3 is None:
            raise LocalStackError("the runtime cannot start copies of inference components (no copy factory)")
        with self._lock:
            if endpoint_name in self._hosting:
                raise LocalStackError(
                    f"endpoint {endpoint_name} hosts inference components: the embedded stack does not "
                    "update such an endpoint to a new endpoint config (delete and create it again)"
                )
        variant = variants[0]
        routing = (variant.get("RoutingConfig") or {}).get("RoutingStrategy")
        image_adapters: dict[str, Any] = {}

        def adapt(image: str) -> Any:
            if image not in image_adapters:
                image_adapters[image] = model_adapter(gpu=True, image=image, limits=limits)
            return image_adapters[image]

        endpoint = ComponentEndpoint(
            endpoint_name,
            variant.get("VariantName", "AllTraffic"),
            instance_type=variant.get("InstanceType"),
            routing=routing,
            s3=self._s3,
            workdir=workdir,
            copy_factory=self.copy_factory,
            budget=self.copy_budget,
            limits=limits,
            adapt=adapt,
            region=self.region,
            account_id=self.account_id,
            sinks=self.component_metrics,
        )
        with self._lock:
            if self._stopping.is_set():
                raise LocalStackError("the embedded stack is stopping")
            self._hosting[endpoint_name] = endpoint
        logger.info(
            "endpoint %s in service: it hosts inference components (routing %s)",
            endpoint_name,
            endpoint.routing,
        )
        return True

    def on_component(self, component_name: str, plan: Mapping[str, Any]) -> None:
        """Run the copies the control plane placed for a component (``plan["Copies"]``; none: it leaves).

        Raising makes the control plane fail the component's create, or undo its update, with the message
        as ``FailureReason``.
        """
        endpoint = self.hosting(str(plan.get("EndpointName") or ""))
        if endpoint is None:
            if not plan.get("Copies"):
                return  # its endpoint is gone already, and its copies with it
            raise LocalStackError(f"Endpoint {plan.get('EndpointName')} is not in service.")
        endpoint.apply(component_name, plan)

    def _hosting_gone(self, endpoint_name: str) -> ComponentEndpoint | None:
        with self._lock:
            return self._hosting.pop(endpoint_name, None)

    def _all_hosting(self) -> list[ComponentEndpoint]:
        with self._lock:
            found = list(self._hosting.values())
            self._hosting.clear()
        return found


def header_text(value: str | None) -> str | None:
    """A header value as the client sent it: WSGI hands header bytes over decoded as latin-1 (PEP 3333),
    boto3 sends UTF-8."""
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def read_body(stream: IO[bytes], length: int) -> bytes:
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def drain(stream: IO[bytes], length: int) -> None:
    remaining = length
    while remaining > 0:
        chunk = stream.read(min(remaining, _COPY_CHUNK))
        if not chunk:
            return
        remaining -= len(chunk)


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "endpoint"
