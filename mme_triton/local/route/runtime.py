"""The InvokeEndpoint route of the embedded stack: SageMaker's runtime service, in front of moto's server.

SageMaker's runtime answers ``POST /endpoints/<name>/invocations`` (the route boto3's ``sagemaker-runtime``
client calls) for a multi-model endpoint like this:

1. the endpoint must exist and be in service, else a ``ValidationError``;
2. the body may be at most 6 MiB (6,291,456 bytes), else HTTP 413;
3. the ``TargetModel`` must match InvokeEndpoint's pattern, else a ``ValidationError``;
4. the request goes to one of the variant's instances, where the platform loads the model and forwards the
   request to the container (:class:`~mme_triton.local.route.endpoint_runtime.EndpointRuntime` chooses it).

:class:`InvocationRuntime` keeps one :class:`~mme_triton.local.route.endpoint_runtime.EndpointRuntime`
per in-service endpoint (one real Triton per instance of its variant), driven by the control plane's hooks
(in service, instance count changed, deleted), and routes the requests to them as a WSGI middleware in
front of moto's server. The error answers come from :mod:`mme_triton.local.route.responses`.
"""

from __future__ import annotations

import itertools
import logging
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from mme_triton._sagemaker import MAX_PAYLOAD_BYTES, TARGET_MODEL_HEADER, target_model_problem
from mme_triton.errors import LocalStackError
from mme_triton.local.route._describe import resolve_endpoint
from mme_triton.local.route._hosting import (
    COMPONENT_ENVIRON,
    ComponentHosting,
    drain,
    header_text,
    read_body,
    safe_name,
)
from mme_triton.local.route.budget import (
    FROM_INSTANCE,
    BudgetSetting,
    endpoint_budget,
    machine_memory_limit,
)
from mme_triton.local.route.components import ComponentEndpoint, CopyBudget
from mme_triton.local.route.endpoint_runtime import (
    DEFAULT_READY_TIMEOUT,
    EndpointRuntime,
)
from mme_triton.local.route.instance import InstanceRuntime
from mme_triton.local.route.limits import (
    DEFAULT_MAX_COMPRESSION_RATIO,
    DEFAULT_MAX_COPIES,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_MEMBERS,
    check_limits,
)
from mme_triton.local.route.lru import ModelLRU
from mme_triton.local.route.metrics import (
    MetricsSink,
    SinkFactory,
    UsageSampler,
    null_sink_factory,
)
from mme_triton.local.route.python_env import model_adapter
from mme_triton.local.route.responses import (
    COMPONENT_NOT_ALLOWED,
    COMPONENT_REQUIRED,
    RuntimeResponse,
    endpoint_not_found,
    internal_failure,
    invalid_target_model,
    missing_target_model,
    not_multi_model,
    payload_too_large,
    validation_error,
)
from mme_triton.local.route.volume import ModelVolume
from mme_triton.local.triton.protocol import CopyFactory, TritonFactory

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.local.route._component_metrics import ComponentSinkFactory

__all__ = ["InvocationRuntime"]

logger = logging.getLogger(__name__)

_INVOCATIONS = re.compile(r"^/endpoints/(?P<name>[^/]+)/invocations/?$")
# how a WSGI server names the TargetModel header
_TARGET_MODEL_ENVIRON = "HTTP_" + TARGET_MODEL_HEADER.upper().replace("-", "_")


class InvocationRuntime(ComponentHosting):
    """SageMaker's runtime for the embedded stack: the InvokeEndpoint route and one Triton per endpoint.

    Wire it into the control plane: pass :meth:`middleware` as its ``wsgi_middleware``, append
    :meth:`on_in_service`, :meth:`on_instance_count` and :meth:`on_deleted` to its hooks, and call
    :meth:`bind` with a boto3 session pointing at it once it runs. :class:`~mme_triton.local.stack.LocalStack`
    does all of that.

    Parameters:
        workdir: scratch space; one sub-directory per endpoint (Triton's files and extracted models).
        region: the region in the answers (log group ARNs, console links).
        account_id: the account in the answers (``Endpoint X of account Y not found.``).
        memory_budget: what the models loaded on one instance of an endpoint may hold: ``"instance"`` (the
            default) for the production variant's instance type's memory for models, at most half of this
            machine's memory (:mod:`mme_triton.local.route.budget`); bytes; or ``None`` for no byte limit.
        reserved_memory: what an instance keeps for itself, not for models (with ``"instance"``); ``None``:
            the instance type's documented default.
        max_models: models loaded per instance before the least recently used are unloaded; ``None``
            for no count limit.
        triton_factory: builds the (unstarted) Triton server of an endpoint's instance (the stack passes
            :func:`~mme_triton.local.serve.default_triton_factory`: a
            :class:`~mme_triton.local.triton.server.TritonServer` started as the serve script would).
        adapt_gpu_configs: run :func:`~mme_triton.local.route.adapt.adapt_for_cpu` on every extracted model.
        max_payload_bytes: the request-body limit (InvokeEndpoint's 6 MiB).
        ready_timeout: seconds a request waits for its model's download and load; after that it is
            answered ``ModelNotReadyException`` while the load goes on (SageMaker: 60 s).
        max_unpacked_bytes: what one archive may unpack to; ``None``: the production variant's
            ``VolumeSizeInGB`` when set, else 16 GiB. A number is a ceiling on that too.
        max_archive_members: entries one archive may hold.
        max_compression_ratio: how many times an archive may expand.
        max_instances: the most instances (a Triton each) one endpoint's variant runs.
        metrics: ``(endpoint name, variant name) -> sink``: where each endpoint's CloudWatch metrics are
            recorded (:mod:`mme_triton.local.route.metrics`); the stack passes its recorder's. None: nowhere.
        copy_factory: builds the single-model Triton of a copy of an inference component (the stack passes
            :func:`~mme_triton.local.serve.default_triton_factory`'s); ``None``: components are refused.
        max_copies: the most copies of inference components (a Triton each) running at once.
        component_metrics: ``(component, endpoint, variant) -> sink`` of each component's metrics.

    Example::

        runtime = InvocationRuntime(workdir=Path("/tmp/rt"), triton_factory=default_triton_factory())
        control_plane = ControlPlane(wsgi_middleware=runtime.middleware)
    """

    def __init__(
        self,
        *,
        workdir: Path,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        memory_budget: BudgetSetting = FROM_INSTANCE,
        reserved_memory: int | None = None,
        max_models: int | None = None,
        triton_factory: TritonFactory,
        adapt_gpu_configs: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        max_unpacked_bytes: int | None = None,
        max_archive_members: int = DEFAULT_MAX_MEMBERS,
        max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO,
        max_instances: int = DEFAULT_MAX_INSTANCES,
        metrics: SinkFactory | None = None,
        copy_factory: CopyFactory | None = None,
        max_copies: int = DEFAULT_MAX_COPIES,
        component_metrics: ComponentSinkFactory | None = None,
    ) -> None:
        endpoint_budget(memory_budget, None)  # validates it
        ModelLRU(max_models=max_models)  # validates it
        if reserved_memory is not None and reserved_memory < 0:
            raise ValueError("reserved_memory must be >= 0 bytes")
        if ready_timeout <= 0:
            raise ValueError("ready_timeout must be > 0 seconds")
        check_limits(
            max_unpacked_bytes=max_unpacked_bytes,
            max_archive_members=max_archive_members,
            max_compression_ratio=max_compression_ratio,
            max_instances=max_instances,
        )
        self.max_instances = max_instances
        self.max_unpacked_bytes = max_unpacked_bytes
        self.max_archive_members = max_archive_members
        self.max_compression_ratio = max_compression_ratio
        self.workdir = Path(workdir)
        self.region = region
        self.account_id = account_id
        self.memory_budget = memory_budget
        self.reserved_memory = reserved_memory
        self.max_models = max_models
        self.max_payload_bytes = max_payload_bytes
        self.ready_timeout = ready_timeout
        self._triton_factory = triton_factory
        self._adapt_gpu_configs = adapt_gpu_configs
        self._endpoints: dict[str, EndpointRuntime] = {}
        self.metrics: SinkFactory = metrics or null_sink_factory
        self._sinks: dict[str, tuple[str, MetricsSink]] = {}  # endpoint -> (variant, sink)
        self._numbers: dict[str, itertools.count[int]] = {}  # endpoint -> its instances' numbers
        self._replaced: dict[str, list[EndpointRuntime]] = {}  # runtimes updates replaced (draining)
        self._lock = threading.Lock()
        self._session: Any = None
        self._s3: S3Client | None = None
        self._sagemaker: SageMakerClient | None = None
        self._generation = 0
        self._stopping = threading.Event()
        self.copy_factory = copy_factory
        self.copy_budget = CopyBudget(max_copies)
        self.component_metrics = component_metrics
        self._init_hosting()

    # -- wiring ------------------------------------------------------------------------------------

    def bind(self, boto3_session: Any, *, endpoint_url: str | None = None) -> None:
        """Give the runtime the boto3 session (pointing at the control plane) to read S3 and SageMaker."""
        from botocore.config import Config

        config = Config(retries={"max_attempts": 2, "mode": "standard"}, max_pool_connections=32)
        extra = {"endpoint_url": endpoint_url} if endpoint_url else {}
        self._session = boto3_session
        self._s3 = boto3_session.client("s3", config=config, **extra)
        self._sagemaker = boto3_session.client("sagemaker", config=config, **extra)

    def endpoint(self, endpoint_name: str) -> EndpointRuntime | None:
        """The runtime of an in-service endpoint, ``None`` when there is none."""
        with self._lock:
            return self._endpoints.get(endpoint_name)

    def endpoints(self) -> list[str]:
        """Names of the endpoints in service (each with a Triton per instance)."""
        with self._lock:
            return sorted(self._endpoints)

    # -- control-plane hooks -----------------------------------------------------------------------

    def on_in_service(self, endpoint_name: str, description: Mapping[str, Any]) -> None:
        """Start the endpoint's instances, a Triton each (replacing the previous ones after an update).

        Raising makes the control plane mark the endpoint ``Failed`` with the message as FailureReason.
        """
        if self._stopping.is_set():
            raise LocalStackError("the embedded stack is stopping")
        if self._host_components(endpoint_name, description):
            return
        models = resolve_endpoint(endpoint_name, description, self._sagemaker)
        if models.mode != "MultiModel":
            logger.warning(
                "endpoint %s serves a single-model container (Mode %s); the embedded stack serves "
                "multi-model endpoints only and will refuse its InvokeEndpoint calls",
                endpoint_name,
                models.mode,
            )
        if self._s3 is None:
            raise LocalStackError("the runtime has no S3 client: call bind() first")
        with self._lock:
            self._generation += 1
            workdir = self.workdir / f"{safe_name(endpoint_name)}-{self._generation}"
            numbers = self._numbers.setdefault(endpoint_name, itertools.count(1))
        workdir.mkdir(parents=True, exist_ok=True)
        budget = endpoint_budget(
            self.memory_budget,
            models.instance_type,
            reserved_memory=self.reserved_memory,
            machine_limit=machine_memory_limit(),
        )
        limits = self._limits(models)
        sink = self._sink(endpoint_name, models.variant_name)

        def new_instance(instance_id: str) -> InstanceRuntime:
            scratch = workdir / instance_id
            scratch.mkdir(parents=True, exist_ok=True)
            triton = self._triton_factory(endpoint_name, models.environment, scratch / "triton")
            try:
                triton.start()
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
            assert self._s3 is not None
            return InstanceRuntime(
                models,
                instance_id=instance_id,
                triton=triton,
                s3_client=self._s3,
                workdir=scratch,
                lru=ModelLRU(budget_bytes=budget.bytes, max_models=self.max_models),
                region=self.region,
                account_id=self.account_id,
                adapt=model_adapter(gpu=self._adapt_gpu_configs, image=models.image, limits=limits),
                # the same server, started again: its settings (and warnings) were decided once
                replace=lambda _generation: triton,
                limits=limits,
                volume=ModelVolume(limits.max_bytes),
                ready_timeout=self.ready_timeout,
                metrics=sink,
            )

        runtime = EndpointRuntime(
            models,
            new_instance=new_instance,
            workdir=workdir,
            numbers=numbers,
            metrics=sink,
            max_instances=self.max_instances,
        )
        try:
            runtime.start()
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        with self._lock:
            closed = self._stopping.is_set()
            previous = None if closed else self._endpoints.get(endpoint_name)
            if not closed:
                self._endpoints[endpoint_name] = runtime
        if closed:  # the stack stopped while the Tritons were starting
            runtime.close()
            raise LocalStackError("the embedded stack is stopping")
        logger.info(
            "endpoint %s in service: %d instance(s), Triton on %s serving %s; memory budget per instance %s; "
            "volume %s",
            endpoint_name,
            len(runtime.instances),
            runtime.triton.address,
            models.model_data_url,
            budget.source,
            limits.max_bytes_source,
        )
        if previous is not None:
            # new requests go to the new instances; those still on the old ones finish before they stop
            previous.retire(runtime)
            with self._lock:
                self._replaced.setdefault(endpoint_name, []).append(previous)

    def on_instance_count(self, endpoint_name: str, variant_name: str, count: int) -> None:
        """Run ``count`` instances of the endpoint's variant (``UpdateEndpointWeightsAndCapacities``, and
        Application Auto Scaling through it): new ones start cold, removed ones finish their requests first.

        Raising makes the control plane keep the previous count, with the message as FailureReason.
        """
        runtime = self.endpoint(endpoint_name)
        if runtime is None and self.hosting(endpoint_name) is not None:
            return  # its instances are the control plane's: copies run where it places them
        if runtime is None:
            raise LocalStackError(f"endpoint {endpoint_name} is not in service")
        if runtime.models.variant_name != variant_name:
            raise LocalStackError(
                f"endpoint {endpoint_name} serves its variant {runtime.models.variant_name}; the embedded "
                f"stack serves the first production variant only, not {variant_name}"
            )
        runtime.scale_to(count)

    def on_deleted(self, endpoint_name: str) -> None:
        """Stop the endpoint's Tritons and forget its models."""
        with self._lock:
            runtime = self._endpoints.pop(endpoint_name, None)
            replaced = self._replaced.pop(endpoint_name, [])
            _, sink = self._sinks.pop(endpoint_name, ("", None))
            self._numbers.pop(endpoint_name, None)
        if sink is not None:
            sink.close()
        hosting = self._hosting_gone(endpoint_name)
        if hosting is not None:
            hosting.close()
            logger.info("endpoint %s deleted: its inference components' copies stopped", endpoint_name)
        for old in replaced:
            old.close()
        if runtime is not None:
            runtime.close()
            logger.info("endpoint %s deleted: its Tritons stopped", endpoint_name)

    def stop(self) -> None:
        """Stop every endpoint's Tritons."""
        self._stopping.set()
        with self._lock:
            runtimes = list(self._endpoints.values())
            runtimes += [old for olds in self._replaced.values() for old in olds]
            self._endpoints.clear()
            self._replaced.clear()

        def close(runtime: EndpointRuntime | ComponentEndpoint) -> None:
            try:
                runtime.close()
            except Exception:  # keep stopping the others
                logger.exception("stopping the Triton of endpoint %s failed", runtime.endpoint_name)

        # each Triton takes seconds to shut down: stop them side by side
        everything: list[EndpointRuntime | ComponentEndpoint] = [*runtimes, *self._all_hosting()]
        stoppers = [
            threading.Thread(target=close, args=(r,), name=f"stop-{r.endpoint_name}") for r in everything
        ]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()

    def _sink(self, endpoint_name: str, variant_name: str) -> MetricsSink:
        """The endpoint's metrics sink (one across updates of the endpoint with the same variant), sampling
        each instance's Triton's CPU and memory and its volume before each window is published."""
        with self._lock:
            variant, sink = self._sinks.get(endpoint_name, ("", None))
        if sink is not None and variant == variant_name:
            return sink
        if sink is not None:
            sink.close()
        sink = self.metrics(endpoint_name, variant_name)
        sink.on_publish(UsageSampler(lambda: self.endpoint(endpoint_name)))
        with self._lock:
            self._sinks[endpoint_name] = (variant_name, sink)
        return sink

    # -- the HTTP route ----------------------------------------------------------------------------

    def handle(
        self,
        endpoint_name: str,
        target_model: str | None,
        body: bytes | None,
        content_type: str,
        length: int,
        component: str | None = None,
    ) -> RuntimeResponse:
        """Answer one InvokeEndpoint request (``body`` ``None`` when ``length`` was over the limit;
        ``component``: its ``InferenceComponentName``)."""
        if body is None or length > self.max_payload_bytes:
            return payload_too_large(self.max_payload_bytes)
        hosting = self.hosting(endpoint_name)
        if hosting is not None:
            if target_model:
                return not_multi_model(endpoint_name)
            if not component:
                return validation_error(COMPONENT_REQUIRED)
            return hosting.invoke(component, body, content_type or "application/octet-stream")
        runtime = self.endpoint(endpoint_name)
        if runtime is None:
            return endpoint_not_found(endpoint_name, self.account_id)
        if component:
            return validation_error(COMPONENT_NOT_ALLOWED)
        if runtime.models.mode != "MultiModel":
            if target_model:
                return not_multi_model(endpoint_name)
            return internal_failure(
                f"endpoint {endpoint_name} is a single-model endpoint; the embedded stack serves multi-model "
                "endpoints only"
            )
        if not target_model:
            return missing_target_model(endpoint_name)
        if target_model_problem(target_model) is not None:
            return invalid_target_model(target_model)
        return runtime.invoke(target_model, body, content_type or "application/octet-stream")

    def middleware(self, app: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a WSGI app: answer ``POST /endpoints/<name>/invocations``, pass everything else to ``app``."""

        def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            match = _INVOCATIONS.match(environ.get("PATH_INFO", ""))
            if match is None or environ.get("REQUEST_METHOD") != "POST":
                return app(environ, start_response)  # type: ignore[no-any-return]
            response = self._handle_wsgi(unquote(match.group("name")), environ)
            start_response(response.status_line, response.headers)
            return [response.body]

        return wsgi

    def _handle_wsgi(self, endpoint_name: str, environ: Mapping[str, Any]) -> RuntimeResponse:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body: bytes | None = None
        if length <= self.max_payload_bytes:
            body = read_body(environ["wsgi.input"], length)
            length = len(body)
        else:
            drain(environ["wsgi.input"], length)  # an unread body would reset the client's connection
        try:
            return self.handle(
                endpoint_name,
                header_text(environ.get(_TARGET_MODEL_ENVIRON)),
                body,
                environ.get("CONTENT_TYPE", ""),
                length,
                header_text(environ.get(COMPONENT_ENVIRON)),
            )
        except Exception as exc:  # the WSGI server must get an answer, and the caller a real error
            logger.exception("InvokeEndpoint for %s failed", endpoint_name)
            return internal_failure(f"{type(exc).__name__}: {exc}")
