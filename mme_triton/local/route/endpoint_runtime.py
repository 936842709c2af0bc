"""One in-service endpoint of the embedded stack: its Triton, the models loaded in it, and their LRU.

SageMaker's platform, on a multi-model endpoint instance, answers the first InvokeEndpoint for a
``TargetModel`` by downloading ``<ModelDataUrl><TargetModel>`` from S3, extracting it under
``/opt/ml/models/<hash>/model`` and asking the container to load it (``POST /models``); the request goes to
``POST /models/<hash>/invoke``; a 2xx answer is passed back as it is, anything else becomes a ``ModelError``
(HTTP 424) carrying the container's status and body. :class:`EndpointRuntime` does that for one endpoint:

- **One 60 s budget per request.** The wait for a load and the inference share it: a request still waiting
  for its model at the end gets ``ModelNotReadyException`` (HTTP 429) while the load goes on; an inference
  that has not answered by then gets SageMaker's ``ModelError`` "Your invocation timed out ..." (not a
  retryable 503), and the request is not run again.
- **Memory.** Before a load starts, the least recently used models no request is using are unloaded until
  it fits the endpoint's budget (:mod:`mme_triton.local.route._lifecycle`); a model's cost is what its model
  instances hold, measured from ``/proc`` and ``/dev/shm`` after it loads, at least its files.
- **The volume.** An unloaded model stays extracted on the endpoint's volume and loads again without a
  download; copies are deleted, least recently used first, when the volume is full
  (:mod:`mme_triton.local.route._cache`). ``ModelCacheSetting: Disabled`` unloads a model and deletes its
  copy after each request.
- **Recovery.** When the endpoint's Triton exits, the request that finds out (or a watcher, within a second)
  gets a ``ServiceUnavailable``; Triton is started again and models load again on demand, as SageMaker
  replaces an unhealthy container.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS
from mme_triton.errors import LocalStackError
from mme_triton.local.route._cache import ModelDataNotFoundError, model_hash_of
from mme_triton.local.route._lifecycle import Lifecycle
from mme_triton.local.route._prepare import LoadFailedError, Messages
from mme_triton.local.route.extract import ExtractLimits, ModelArchiveError
from mme_triton.local.route.lru import ModelLRU
from mme_triton.local.route.metrics import MetricsSink, NullMetricsSink, record_invocation
from mme_triton.local.route.names import rename_in_response, triton_model_name
from mme_triton.local.route.responses import (
    RuntimeResponse,
    internal_failure,
    invocation_timed_out,
    model_data_not_found,
    model_error,
    model_not_ready,
    service_unavailable,
    success,
    validation_error,
)
from mme_triton.local.route.timings import LoadTimings
from mme_triton.local.route.volume import ModelVolume
from mme_triton.local.triton.protocol import TritonLike
from mme_triton.local.triton.server import TritonTimeoutError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from mme_triton.local.triton.frontend import FrontEnd


__all__ = [
    "DEFAULT_READY_TIMEOUT",
    "EndpointModels",
    "EndpointRuntime",
    "ModelDataNotFoundError",
    "target_model_hash",
]

logger = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT = INVOCATION_TIMEOUT_SECONDS
"""Seconds a request waits for its model's download and load before ``ModelNotReadyException``."""


def target_model_hash(target_model: str) -> str:
    """The name a TargetModel is loaded under: the MD5 hex digest of the name, as SageMaker's platform
    names ``/opt/ml/models/<hash>``.

    Example:
        >>> import hashlib
        >>> target_model_hash("linear.tar.gz") == hashlib.md5(b"linear.tar.gz").hexdigest()
        True
    """
    return model_hash_of(target_model)


@dataclass
class EndpointModels:
    """What an in-service endpoint serves: resolved once from Endpoint -> EndpointConfig -> Model."""

    endpoint_name: str
    model_data_url: str
    environment: dict[str, str] = field(default_factory=dict)
    variant_name: str = "AllTraffic"
    mode: str = "MultiModel"
    volume_size_gb: int | None = None
    """The production variant's ``VolumeSizeInGB``: what one archive may unpack to, when set."""
    instance_type: str | None = None
    """The production variant's ``InstanceType``."""
    model_cache: str = "Enabled"
    """The container's ``MultiModelConfig.ModelCacheSetting``: ``Enabled`` or ``Disabled``."""
    image: str = ""
    """The serving container's image URI (its Triton release decides the python backend's Python)."""


@dataclass(frozen=True)
class FastPath:
    """A loaded model a request can be forwarded to directly (see :meth:`EndpointRuntime.fast_path`)."""

    triton: TritonLike
    front_end: FrontEnd
    model_hash: str


class EndpointRuntime(Lifecycle):
    """One in-service endpoint: its Triton, its loaded models and their LRU.

    Created by :class:`InvocationRuntime` when the endpoint goes in service; :meth:`invoke` answers one
    InvokeEndpoint request. ``replace(n)`` builds the (unstarted) server that takes over after the
    current one exited; without it a dead server stays dead.
    """

    def __init__(
        self,
        models: EndpointModels,
        *,
        triton: TritonLike,
        s3_client: S3Client,
        workdir: Path,
        lru: ModelLRU,
        region: str,
        account_id: str,
        adapt: Callable[[Path], list[str]] | None = None,
        replace: Callable[[int], TritonLike] | None = None,
        limits: ExtractLimits | None = None,
        volume: ModelVolume | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        load_timeout: float = 360.0,
        unload_timeout: float = 60.0,
        invoke_timeout: float = 60.0,
        workers: int = 3,
        watch_interval: float = 0.5,
        metrics: MetricsSink | None = None,
    ) -> None:
        self.models = models
        self.metrics: MetricsSink = metrics or NullMetricsSink()
        """Where the endpoint's CloudWatch metrics are recorded (:mod:`mme_triton.local.route.metrics`)."""
        self._triton = triton
        self._s3 = s3_client
        self._workdir = workdir
        self._lru = lru
        self._region = region
        self._account_id = account_id
        self._adapt = adapt
        self._replace = replace
        self._limits = limits or ExtractLimits()
        self._volume = volume or ModelVolume(self._limits.max_bytes)
        self.model_data_url = models.model_data_url
        self.cache_disabled = models.model_cache == "Disabled"
        self._ready_timeout = ready_timeout
        self._load_timeout = load_timeout
        self._unload_timeout = unload_timeout
        self._invoke_timeout = invoke_timeout
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight: Counter[str] = Counter()
        # requests waiting for a model's load, and the holds a finished load handed them
        self._waiting: Counter[str] = Counter()
        self._granted: Counter[str] = Counter()
        self._loading: dict[str, Future[None]] = {}
        self._unloading: dict[str, Future[None]] = {}
        self._unloading_bytes: dict[str, int] = {}
        self._reserved: dict[str, int] = {}  # room held in the budget by loads under way
        self._started: set[str] = set()  # those of them Triton is loading
        self._room_queue: deque[str] = deque()  # loads asking for room, in turn
        self._last_done: dict[str, float] = {}  # when each model's last request ended
        self._memory: dict[str, int] = {}  # the last measure of each model, kept after it unloads
        self._timings: dict[str, LoadTimings] = {}  # the last load of each model, by part
        self._generation = 0
        self._restarting: Future[None] | None = None
        self._restart_failed_at = 0.0
        self._closed = threading.Event()
        # A Triton front-end thread serves each load and unload until it is done: keep some for requests.
        name = models.endpoint_name
        self._loader = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"load-{name}")
        self._unloader = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"unload-{name}")
        self.loads = 0
        """How many model loads this endpoint performed (a reload after eviction counts again)."""
        self.load_counts: Counter[str] = Counter()
        """How many times each TargetModel was loaded."""
        self.downloads = 0
        """How many archives were downloaded (a reload from the volume downloads nothing)."""
        self.evictions = 0
        """How many models were unloaded to stay within the memory budget."""
        self.restarts = 0
        """How many times the endpoint's Triton was started again after it exited."""
        self._watcher = threading.Thread(
            target=self._watch, args=(watch_interval,), name=f"watch-{name}", daemon=True
        )
        self._watcher.start()

    # -- state -------------------------------------------------------------------------------------

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name."""
        return self.models.endpoint_name

    @property
    def triton(self) -> TritonLike:
        """The endpoint's current Triton server."""
        return self._triton

    @property
    def invoke_timeout(self) -> float:
        """Seconds a request may take in all, load wait and inference (SageMaker's 60 s)."""
        return self._invoke_timeout

    @property
    def memory_budget(self) -> int | None:
        """Bytes the endpoint's loaded models may hold (``None``: no byte limit)."""
        return self._lru.budget_bytes

    def volume_usage(self) -> tuple[int, int]:
        """Bytes the models on the endpoint's volume take, and the volume's size."""
        return self._volume.total_bytes, self._volume.capacity

    def volume_models(self) -> list[str]:
        """The TargetModels extracted on the endpoint's volume, least recently used first."""
        with self._lock:
            return self._volume.names()

    @property
    def workdir(self) -> Path:
        """This endpoint's scratch directory; extracted models are under ``models/<hash>/model``."""
        return self._workdir

    def loaded_models(self) -> list[str]:
        """The TargetModels currently loaded, least recently used first."""
        with self._lock:
            return self._lru.names()

    def model_memory(self) -> dict[str, int]:
        """Bytes each loaded TargetModel counts against the budget, as last measured."""
        with self._lock:
            return {name: self._memory.get(name) or self._lru.size_of(name) for name in self._lru.names()}

    def wait_for_unloads(self, timeout: float | None = None) -> None:
        """Block until the unloads scheduled so far have finished."""
        with self._lock:
            pending = list(self._unloading.values())
        for future in pending:
            with contextlib.suppress(Exception):
                future.result(timeout=timeout)

    def wait_for_restart(self, timeout: float | None = None) -> None:
        """Block until a restart of the endpoint's Triton under way (if any) has finished."""
        with self._lock:
            pending = self._restarting
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.result(timeout=timeout)

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop scheduling work, stop this endpoint's Triton and remove its extracted models.

        Parameters:
            drain_timeout: seconds to wait first for the requests being forwarded to finish.
        """
        if drain_timeout > 0:
            with self._idle:
                self._idle.wait_for(lambda: not self._in_flight, timeout=drain_timeout)
        self._closed.set()
        self._loader.shutdown(wait=False, cancel_futures=True)
        self._unloader.shutdown(wait=False, cancel_futures=True)
        self.wait_for_restart(timeout=120)
        self._triton.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    # -- the request path --------------------------------------------------------------------------

    def invoke(self, target_model: str, body: bytes, content_type: str) -> RuntimeResponse:
        """Answer one InvokeEndpoint request for ``target_model`` (loading it first if needed), within one
        budget of ``invoke_timeout`` seconds for the load wait and the inference together; record it in
        :attr:`metrics`."""
        call: dict[str, float] = {"started": time.monotonic()}
        response = self._invoke(target_model, body, content_type, call)
        record_invocation(self.metrics, response, call)
        return response

    def _invoke(
        self, target_model: str, body: bytes, content_type: str, call: dict[str, float]
    ) -> RuntimeResponse:
        """:meth:`invoke`, noting in ``call`` (monotonic times) whether the model was loaded when the
        request came (``hit``), when it was ``acquired``, ``sent`` to Triton and ``answered``."""
        started = call["started"]
        deadline = started + self._invoke_timeout
        triton = self._triton
        try:
            model_hash, triton = self._acquire(
                target_model, min(deadline, started + self._ready_timeout), call
            )
            call["acquired"] = time.monotonic()
        except ModelDataNotFoundError as exc:
            return model_data_not_found(exc.bucket, exc.key)
        except ModelArchiveError as exc:
            bucket, key = self._location(target_model)
            return validation_error(f"Failed to extract model data(bucket: {bucket}, key: {key}): {exc}")
        except _NotReady:
            return model_not_ready(target_model, min(self._ready_timeout, self._invoke_timeout))
        except _Replacing as exc:
            return service_unavailable(str(exc))
        except LoadFailedError as exc:
            return self._model_error(exc.status, exc.body)
        except LocalStackError as exc:
            return self.forward_failed(triton, exc)
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self.timed_out(target_model)
            alias = triton_model_name(target_model)
            call["sent"] = time.monotonic()
            status, headers, answer = triton.invoke(model_hash, alias, body, content_type, timeout=remaining)
            call["answered"] = time.monotonic()
        except TritonTimeoutError:
            return self.timed_out(target_model)
        except LocalStackError as exc:
            return self.forward_failed(triton, exc)
        finally:
            self.release(target_model)
        return self.answer(target_model, status, headers.get("content-type", ""), answer)

    def fast_path(self, target_model: str) -> FastPath | None:
        """The server and hash to forward ``target_model``'s request to, when it is loaded, under its own
        name, on a healthy server; one request is counted on it (:meth:`release` when done).

        ``None`` when the request needs :meth:`invoke` (a load, a restart, an alias).
        """
        with self._lock:
            triton = self._triton
            if self._restarting is not None or triton_model_name(target_model) != target_model:
                return None
            try:
                front_end = triton.front_end
            except RuntimeError:  # not running
                return None
            if not self._lru.touch(target_model):
                return None
            self._in_flight[target_model] += 1
        return FastPath(triton, front_end, target_model_hash(target_model))

    def release(self, target_model: str) -> None:
        """The request counted on ``target_model`` is done."""
        with self._lock:
            self._in_flight[target_model] -= 1
            if self._in_flight[target_model] <= 0:
                del self._in_flight[target_model]
                self._last_done[target_model] = time.monotonic()
                self._release_unused(target_model)
                self._idle.notify_all()

    def timed_out(self, target_model: str) -> RuntimeResponse:
        """SageMaker's answer when the container did not answer within the request's 60 s: a ``ModelError``
        (not retried by clients); the inference may still run in Triton."""
        logger.warning(
            "endpoint %s: %s did not answer within %gs; answered ModelError (Triton may still be running it)",
            self.endpoint_name,
            target_model,
            self._invoke_timeout,
        )
        return invocation_timed_out(
            endpoint_name=self.endpoint_name, region=self._region, account_id=self._account_id
        )

    def answer(self, target_model: str, status: int, content_type: str, body: bytes) -> RuntimeResponse:
        """The InvokeEndpoint answer for Triton's answer to a request for ``target_model``."""
        alias = triton_model_name(target_model)
        if 200 <= status < 300:
            content = content_type or "application/octet-stream"
            if alias != target_model:
                body, content = rename_in_response(body, content, alias, target_model)
            return success(body, content, self.models.variant_name)
        return self._model_error(status, self._messages(target_model).body(body))

    def forward_failed(self, triton: TritonLike, exc: LocalStackError) -> RuntimeResponse:
        """The answer when ``triton`` could not be reached: if it exited, it is being replaced.

        A killed server's connections close a moment before the process can be reaped, so a server
        that still looks alive is answered the same way (the watcher notices the exit within a second).
        """
        code = triton.returncode
        if code is None:
            logger.error("endpoint %s: %s", self.endpoint_name, exc)
            return service_unavailable(
                f"The model container of endpoint {self.endpoint_name} did not answer ({exc}). Retry the "
                "request."
            )
        if self._replace is None:
            return internal_failure(f"the Triton server of endpoint {self.endpoint_name} exited ({code})")
        self._begin_restart(triton)
        return service_unavailable(self._replacing_message(code))

    # -- internals: loading ------------------------------------------------------------------------

    def _replacing_message(self, code: int | None) -> str:
        return (
            f"The model container of endpoint {self.endpoint_name} exited (status {code}) and is being "
            "replaced; its models load again on the next requests. Retry the request."
        )

    def _model_error(self, status: int, body: bytes) -> RuntimeResponse:
        return model_error(
            status, body, endpoint_name=self.endpoint_name, region=self._region, account_id=self._account_id
        )

    def _messages(self, target_model: str) -> Messages:
        return Messages(
            target_model=target_model,
            alias=triton_model_name(target_model),
            root=self._model_root(target_model_hash(target_model)),
            scratch=self._workdir,
        )

    def _acquire(self, target_model: str, deadline: float, call: dict[str, float]) -> tuple[str, TritonLike]:
        """Make sure ``target_model`` is loaded and count one request on it; return its hash and server
        (``call["hit"]`` set when it was loaded already).

        The download and load run on the endpoint's loader threads; concurrent first requests share one.
        A request waits for it (and for a restart under way) until ``deadline``, then gets
        ``ModelNotReadyException`` while the load goes on, as SageMaker answers within 60 s and keeps
        loading for up to 360 s.
        """
        model_hash = target_model_hash(target_model)
        while True:
            with self._lock:
                restarting = self._restarting
                waiting: Future[None]
                if restarting is not None:
                    call["waited"] = 1.0
                    waiting = restarting
                else:
                    triton = self._triton
                    if self._lru.touch(target_model):
                        self._in_flight[target_model] += 1
                        if "waited" not in call:
                            call["hit"] = 1.0
                        return model_hash, triton
                    call["waited"] = 1.0
                    pending = self._loading.get(target_model)
                    if pending is None:
                        pending = self._loader.submit(
                            self._load_and_hold, target_model, self._generation, triton
                        )
                        self._loading[target_model] = pending
                    self._waiting[target_model] += 1
                    waiting = pending
            try:
                # a failed load (or restart) is this request's failure too
                waiting.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeoutError:
                if restarting is not None:
                    raise _Replacing(self._replacing_message(None)) from None
                if self._took_hold(target_model):
                    self.release(target_model)  # the load finished just now; this request gave up
                raise _NotReady(target_model) from None
            except BaseException:
                if restarting is None:
                    self._took_hold(target_model)
                raise
            if restarting is None and self._took_hold(target_model):
                return model_hash, triton
            # not held (the server was replaced meanwhile): take it through the LRU again

    def _took_hold(self, target_model: str) -> bool:
        """After waiting for a load: take the hold it handed this request, if any (else stop waiting)."""
        with self._lock:
            if self._granted[target_model] > 0:
                self._granted[target_model] -= 1
                if self._granted[target_model] <= 0:
                    del self._granted[target_model]
                return True
            if self._waiting[target_model] > 0:
                self._waiting[target_model] -= 1
            if self._waiting[target_model] <= 0:
                del self._waiting[target_model]
            return False


class _NotReady(Exception):
    """The model's download and load took longer than a request waits for it."""


class _Replacing(Exception):
    """The endpoint's Triton is being started again and was not ready in time."""
