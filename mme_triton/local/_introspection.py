"""What a running :class:`~mme_triton.local.stack.LocalStack` tells about its endpoints (mixed into it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mme_triton.local.route.components import ComponentEndpoint
    from mme_triton.local.route.endpoint_runtime import EndpointRuntime
    from mme_triton.local.route.runtime import InvocationRuntime
    from mme_triton.local.route.status import EndpointStatus
    from mme_triton.local.route.timings import LoadTimings
    from mme_triton.local.triton.ports import TritonEndpoints
    from mme_triton.local.triton.server import TritonServer

__all__ = ["StackIntrospection"]


class StackIntrospection:
    """The introspection half of :class:`~mme_triton.local.stack.LocalStack`."""

    @property
    def runtime(self) -> InvocationRuntime:  # pragma: no cover - defined by LocalStack
        raise NotImplementedError

    def endpoint_runtime(self, endpoint_name: str) -> EndpointRuntime | None:
        """An in-service endpoint's runtime (``.instances``: a Triton and its models each), or ``None``."""
        return self.runtime.endpoint(endpoint_name)

    def triton(self, endpoint_name: str) -> TritonServer | None:
        """The Triton server of an in-service endpoint's first instance, ``None`` if none."""
        runtime = self.endpoint_runtime(endpoint_name)
        return runtime.triton if runtime is not None else None  # type: ignore[return-value]

    def loaded_models(self, endpoint_name: str) -> list[str]:
        """The TargetModels loaded on an endpoint's instances (each instance's least recently used first)."""
        runtime = self.endpoint_runtime(endpoint_name)
        return runtime.loaded_models() if runtime is not None else []

    def model_memory(self, endpoint_name: str) -> dict[str, int]:
        """Bytes each model loaded in an endpoint counts against the budgets (over its instances)."""
        runtime = self.endpoint_runtime(endpoint_name)
        return runtime.model_memory() if runtime is not None else {}

    def load_timings(self, endpoint_name: str) -> dict[str, LoadTimings]:
        """How long each TargetModel's last load took on an endpoint, by part (download, extract, the wait
        for room, load; a copy loaded again from the volume downloads nothing), and its unload once
        unloaded: what a cold start on the stack is made of."""
        runtime = self.endpoint_runtime(endpoint_name)
        return runtime.load_timings() if runtime is not None else {}

    def unload_model(self, endpoint_name: str, target_model: str, *, timeout: float | None = 60.0) -> bool:
        """Unload a model from an endpoint's instances now (after its requests finish), as if evicted (its
        copy stays on the volume); its next request loads it again. ``False`` when it was not loaded."""
        runtime = self.endpoint_runtime(endpoint_name)
        return runtime.unload_model(target_model, timeout=timeout) if runtime is not None else False

    def status(self) -> list[EndpointStatus]:
        """Per in-service endpoint: the models loaded on each instance (LRU order) with their memory and load
        counts, and the models in S3 no instance loaded (what ``mme-triton local status`` prints)."""
        from mme_triton.local.route.status import stack_status

        return stack_status(self.runtime)

    def triton_endpoints(self, endpoint_name: str) -> TritonEndpoints | None:
        """Triton's own HTTP, gRPC and metrics URLs of an endpoint's first instance, and the Triton name of
        each TargetModel it loaded; ``None`` unless the stack runs with ``triton_ports=True`` and the
        endpoint is in service.

        Example::

            found = stack.triton_endpoints("demo")
            found.http_url, found.models  # ('http://127.0.0.1:40123', {'linear.tar.gz': 'linear.tar.gz'})
        """
        from mme_triton.local.route.names import triton_model_name
        from mme_triton.local.triton.ports import TritonEndpoints

        runtime = self.endpoint_runtime(endpoint_name)
        ports = getattr(runtime.triton, "triton_ports", None) if runtime is not None else None
        if runtime is None or ports is None:
            return None
        models = {name: triton_model_name(name) for name in runtime.loaded_models()}
        return TritonEndpoints(ports.http_url, ports.grpc_url, ports.metrics_url, models)

    def hosting(self, endpoint_name: str) -> ComponentEndpoint | None:
        """An in-service endpoint that hosts inference components (``.component(name).copies``: each copy's
        ``copy_id``, ``instance_id``, ``triton``, ``served``), or ``None``."""
        return self.runtime.hosting(endpoint_name)
