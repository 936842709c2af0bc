"""An endpoint that hosts inference components: each component's copies, and requests routed among them.

An endpoint whose production variant names no model hosts components (``CreateInferenceComponent``). The
control plane decides where each copy runs (:mod:`mme_triton._inference_components`) and hands the route
the copies that must run (its ``on_component`` hook); :class:`ComponentEndpoint` starts each new copy — a
Triton in single-model mode serving the component's model (:mod:`._copies`) — and adds it to the routing
once it answers, and takes leaving copies out of the routing at once, stopping each once its requests have
finished. A component whose copy cannot start fails (or its update is undone) with the reason.

``InvokeEndpoint`` with ``InferenceComponentName`` goes to one of the component's copies, as the endpoint
config's ``RoutingConfig`` says: ``LEAST_OUTSTANDING_REQUESTS`` (the default: the copy with the fewest
requests in flight, ties drawn at random) or ``RANDOM``. SageMaker's answers:

- no ``InferenceComponentName`` on an endpoint that hosts components, or one on an endpoint that does not:
  a ``ValidationError`` (:data:`~.responses.COMPONENT_REQUIRED`, :data:`~.responses.COMPONENT_NOT_ALLOWED`);
- a component with no copy (scaled to zero): a ``ValidationError``, ``Inference Component has no capacity to
  process this request. ...``, counted in ``NoCapacityInvocationFailures``;
- the copy's own error answer: a ``ModelError`` (424) ``Received client error (400) from model with message
  ...``, whose log group is the component's.

Every copy is a Triton process on this machine: the stack runs at most ``max_copies`` of them in all
(:class:`CopyBudget`); a component asked for more is served by fewer, with a warning.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import ROUTING_STRATEGIES
from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS
from mme_triton.errors import LocalStackError
from mme_triton.local.route._component_metrics import (
    ComponentSinkFactory,
    null_component_sink,
    record_component_call,
)
from mme_triton.local.route._component_runtime import ComponentRuntime
from mme_triton.local.route._copies import CopyBudget, CopyRuntime, CopyStartError, prepare_repository
from mme_triton.local.route.extract import ExtractLimits
from mme_triton.local.route.responses import (
    NO_CAPACITY,
    RuntimeResponse,
    component_not_found,
    invocation_timed_out,
    model_error,
    service_unavailable,
    success,
    validation_error,
)
from mme_triton.local.triton.protocol import CopyFactory
from mme_triton.local.triton.server import TritonTimeoutError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["ComponentEndpoint", "ComponentRuntime", "CopyBudget"]

logger = logging.getLogger(__name__)


class ComponentEndpoint:
    """An in-service endpoint that hosts inference components (see the module's docstring).

    Parameters:
        endpoint_name, variant_name: the endpoint and its production variant.
        instance_type: the variant's ``InstanceType`` (what ``LocalStack.status()`` shows).
        routing: the variant's ``RoutingConfig.RoutingStrategy`` (``LEAST_OUTSTANDING_REQUESTS`` by default).
        s3: reads the components' model archives.
        workdir: the endpoint's scratch directory (a directory per component inside).
        copy_factory: builds a copy's Triton in single-model mode.
        budget: the stack's bound on copies.
        limits: what one archive may unpack to.
        adapt: for an image, what the stack does to an extracted archive (GPU configs, python environments).
        sinks: ``(component, endpoint, variant) -> sink`` of each component's metrics.
    """

    def __init__(
        self,
        endpoint_name: str,
        variant_name: str,
        *,
        instance_type: str | None = None,
        routing: str | None,
        s3: S3Client,
        workdir: Path,
        copy_factory: CopyFactory,
        budget: CopyBudget,
        limits: ExtractLimits,
        adapt: Callable[[str], Callable[[Path], list[str]]],
        region: str,
        account_id: str,
        sinks: ComponentSinkFactory | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.instance_type = instance_type
        self.routing = routing if routing in ROUTING_STRATEGIES else "LEAST_OUTSTANDING_REQUESTS"
        self.budget = budget
        self.workdir = workdir
        self._s3 = s3
        self._copy_factory = copy_factory
        self._limits = limits
        self._adapt = adapt
        self._region = region
        self._account_id = account_id
        self._sinks = sinks or null_component_sink
        self._components: dict[str, ComponentRuntime] = {}
        self._lock = threading.Lock()
        self.closed = False
        """Set by :meth:`close`: copies started after it are stopped again."""
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name=f"watch-{endpoint_name}", daemon=True).start()

    def _watch(self, interval: float = 0.5) -> None:
        """Replace the copies whose Triton exited (a request that finds one first replaces it at once)."""
        while not self._stop.wait(interval):
            for runtime in list(self._components.values()):
                for copy in runtime.copies:
                    if not copy.retired and copy.triton.returncode is not None:
                        logger.warning(
                            "copy %s: its Triton exited (%s)", copy.copy_id, copy.triton.returncode
                        )
                        runtime.replace(copy)

    def component(self, name: str) -> ComponentRuntime | None:
        """The runtime of a component the endpoint hosts, ``None`` when it hosts none of that name."""
        return self._components.get(name)

    def components(self) -> list[str]:
        return sorted(self._components)

    # -- the control plane's plans -------------------------------------------------------------------

    def apply(self, name: str, plan: Mapping[str, Any]) -> None:
        """Run the copies of ``plan`` for component ``name`` (``plan["Deleted"]``: the component leaves the
        endpoint)."""
        with self._lock:
            if self.closed:
                if plan.get("Copies"):
                    raise CopyStartError(f"Endpoint {self.endpoint_name} is not in service.")
                return
            runtime = self._components.get(name)
            if runtime is None:
                sink = self._sinks(name, self.endpoint_name, self.variant_name)
                runtime = self._components[name] = ComponentRuntime(name, self, sink)
        runtime.apply(plan)
        if plan.get("Deleted"):
            with self._lock:
                if self._components.get(name) is runtime:
                    del self._components[name]
            runtime.close()

    def prepare(self, name: str, version: int, plan: Mapping[str, Any]) -> Path:
        """The extracted repository of one version of a component (downloaded now)."""
        container = plan.get("Container") or {}
        return prepare_repository(
            self._s3,
            str(container.get("ModelDataUrl") or ""),
            self.workdir / name / f"v{version}",
            component_name=name,
            endpoint_name=self.endpoint_name,
            limits=self._limits,
            adapt=self._adapt(str(container.get("Image") or "")),
        )

    def start_copy(
        self, name: str, copy_id: str, instance: str, version: int, repository: Path, plan: Mapping[str, Any]
    ) -> CopyRuntime:
        """Start one copy's Triton on ``repository``.

        Raises:
            CopyStartError: the container exits or does not pass its ping health check.
        """
        container = plan.get("Container") or {}
        startup = (plan.get("StartupParameters") or {}).get("ContainerStartupHealthCheckTimeoutInSeconds")
        scratch = self.workdir / name / copy_id
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            triton = self._copy_factory(
                self.endpoint_name,
                dict(container.get("Environment") or {}),
                scratch,
                model_repository=repository,
                startup_s=float(startup) if startup else None,
            )
        except LocalStackError as exc:  # the serve script refuses the Environment or the repository
            shutil.rmtree(scratch, ignore_errors=True)
            raise CopyStartError(f"The container for inference component {name} exited: {exc}") from exc
        try:
            triton.start()
        except LocalStackError as exc:
            shutil.rmtree(scratch, ignore_errors=True)
            raise CopyStartError(
                f"The container for inference component {name} did not pass the ping health check. Please "
                f"check CloudWatch logs for this inference component. {exc}"
            ) from exc
        return CopyRuntime(copy_id, instance, triton, version)

    # -- the request path ----------------------------------------------------------------------------

    def take(self, name: str) -> tuple[ComponentRuntime | None, CopyRuntime | None]:
        """The component and a copy for one request (counted on it), or what is missing."""
        runtime = self._components.get(name)
        return runtime, runtime.take() if runtime is not None else None

    def refusal(self, name: str, runtime: ComponentRuntime | None) -> RuntimeResponse:
        """The answer when :meth:`take` found no copy: an unknown component, or one with no copy (counted in
        ``NoCapacityInvocationFailures``)."""
        if runtime is None:
            return component_not_found(name, self._account_id)
        runtime.sink.no_capacity()
        return validation_error(NO_CAPACITY)

    def invoke(self, name: str, body: bytes, content_type: str) -> RuntimeResponse:
        """Answer one InvokeEndpoint request for component ``name`` on one of its copies."""
        call = {"started": time.monotonic()}
        runtime, copy = self.take(name)
        if runtime is None or copy is None:
            return self.refusal(name, runtime)
        try:
            call["sent"] = time.monotonic()
            status, headers, answer = copy.triton.invocations(
                body,
                content_type,
                timeout=max(0.1, call["started"] + INVOCATION_TIMEOUT_SECONDS - time.monotonic()),
            )
            call["answered"] = time.monotonic()
            response = self.answer(name, status, headers.get("content-type", ""), answer)
        except TritonTimeoutError:
            response = self.timed_out(name)
        except LocalStackError as exc:
            response = self.failed(runtime, copy, exc)
        finally:
            copy.release()
        self.record(runtime, response, call)
        return response

    def answer(self, name: str, status: int, content_type: str, body: bytes) -> RuntimeResponse:
        """SageMaker's answer for what a copy answered."""
        if 200 <= status < 300:
            return success(body, content_type or "application/octet-stream", self.variant_name)
        return model_error(
            status,
            body,
            endpoint_name=self.endpoint_name,
            region=self._region,
            account_id=self._account_id,
            container="model",
            log_group=f"/aws/sagemaker/InferenceComponents/{name}",
        )

    def timed_out(self, name: str) -> RuntimeResponse:
        return invocation_timed_out(
            endpoint_name=self.endpoint_name,
            region=self._region,
            account_id=self._account_id,
            container="model",
            log_group=f"/aws/sagemaker/InferenceComponents/{name}",
        )

    def failed(self, runtime: ComponentRuntime, copy: CopyRuntime, exc: BaseException) -> RuntimeResponse:
        """A copy whose Triton did not answer: ``ServiceUnavailable`` (a retry may reach another copy); a
        copy whose Triton exited is replaced (:meth:`ComponentRuntime.replace`)."""
        logger.warning("copy %s did not answer: %s", copy.copy_id, exc)
        if copy.triton.returncode is not None:
            runtime.replace(copy)
        return service_unavailable(
            f"The copy {copy.copy_id} of the inference component is not available. Retry."
        )

    def record(self, runtime: ComponentRuntime, response: RuntimeResponse, call: Mapping[str, float]) -> None:
        instances = len({c.instance_id for r in list(self._components.values()) for c in r.copies})
        record_component_call(runtime.sink, response, call, copies=runtime.planned, instances=instances)

    def close(self) -> None:
        """Stop every component's copies."""
        self._stop.set()
        with self._lock:
            self.closed = True
            runtimes = list(self._components.values())
            self._components.clear()
        for runtime in runtimes:
            runtime.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
