"""One instance of an endpoint's production variant: its Triton, the models loaded in it, their LRU and its
volume.

SageMaker's platform, on a multi-model endpoint instance, answers the first InvokeEndpoint for a
``TargetModel`` by downloading ``<ModelDataUrl><TargetModel>`` from S3, extracting it under
``/opt/ml/models/<hash>/model`` and asking the container to load it (``POST /models``); the request goes to
``POST /models/<hash>/invoke``; a 2xx answer is passed back as it is, anything else becomes a ``ModelError``
(HTTP 424) carrying the container's status and body. :class:`InstanceRuntime` does that for one instance
(the variant's :class:`~mme_triton.local.route.endpoint_runtime.EndpointRuntime` routes each request to one):

- **One 60 s budget per request.** The wait for a load and the inference share it: a request still waiting
  for its model at the end gets ``ModelNotReadyException`` (HTTP 429) while the load goes on; an inference
  that has not answered by then gets SageMaker's ``ModelError`` "Your invocation timed out ..." (not a
  retryable 503), and the request is not run again.
- **Memory.** Before a load starts, the least recently used models no request is using are unloaded until
  it fits the instance's budget (:mod:`mme_triton.local.route._lifecycle`); a model's cost is what its model
  instances hold, measured from ``/proc`` and ``/dev/shm`` after it loads, at least its files.
- **The volume.** An unloaded model stays extracted on the instance's volume and loads again without a
  download; copies are deleted, least recently used first, when the volume is full
  (:mod:`mme_triton.local.route._cache`). ``ModelCacheSetting: Disabled`` unloads a model and deletes its
  copy after each request.
- **Recovery.** When the instance's Triton exits, the request that finds out (or a watcher, within a second)
  gets a ``ServiceUnavailable``; Triton is started again and models load again on demand, as SageMaker
  replaces an unhealthy container (:mod:`mme_triton.local.route._restart`).

What routing needs of an instance (:meth:`InstanceRuntime.holding`, :meth:`InstanceRuntime.room`) is read
in :mod:`mme_triton.local.route._instance_view`. An instance is a Triton with a budget, a volume and a
cache; a variant is a set of them. Nothing here is particular to multi-model endpoints' one Triton per
instance, so a host of several Tritons (one per inference component) can be built from the same parts.
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
from mme_triton.local.route._instance_view import InstanceView
from mme_triton.local.route._prepare import LoadFailedError
from mme_triton.local.route.extract import ExtractLimits, ModelArchiveError
from mme_triton.local.route.lru import ModelLRU
from mme_triton.local.route.metrics import MetricsSink, NullMetricsSink
from mme_triton.local.route.names import triton_model_name
from mme_triton.local.route.responses import (
    RuntimeResponse,
    model_data_not_found,
    model_not_ready,
    service_unavailable,
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
    "Entry",
    "FastPath",
    "InstanceRetiredError",
    "InstanceRuntime",
]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")

DEFAULT_READY_TIMEOUT = INVOCATION_TIMEOUT_SECONDS
"""Seconds a request waits for its model's download and load before ``ModelNotReadyException``."""


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
    instance_count: int = 1
    """The production variant's instance count when it went in service."""


@dataclass(frozen=True)
class FastPath:
    """A loaded model a request can be forwarded to directly (see :meth:`InstanceRuntime.fast_path`)."""

    instance: InstanceRuntime
    triton: TritonLike
    front_end: FrontEnd
    model_hash: str


@dataclass(frozen=True)
class Entry:
    """A request counted on an instance (:meth:`InstanceRuntime.enter`): its model held, or what to wait for
    (a load, or a restart under way)."""

    model_hash: str
    triton: TritonLike
    waiting: Future[None] | None = None
    restarting: bool = False


class InstanceRetiredError(Exception):
    """The instance left its variant (scaled in, or replaced by an update): route the request again."""


class InstanceRuntime(InstanceView):
    """One instance: its Triton, its loaded models and their LRU, its volume.

    Created by the variant's :class:`~mme_triton.local.route.endpoint_runtime.EndpointRuntime`, which routes
    each request to one instance (:meth:`enter`, then :meth:`invoke`). ``replace(n)`` builds the (unstarted)
    server that takes over after the current one exited; without it a dead server stays dead.
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
        instance_id: str = "i-1",
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
        self.instance_id = instance_id
        """The instance's name in its variant (``i-1``, ``i-2`` ...; never reused within an endpoint)."""
        self.metrics: MetricsSink = metrics or NullMetricsSink()
        """The variant's sink; the instance records its loads, unloads and loaded-model count there."""
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
        self._load_asked: dict[str, float] = {}  # when each load under way was asked for
        self._unloading: dict[str, Future[None]] = {}
        self._unloading_bytes: dict[str, int] = {}
        self._reserved: dict[str, int] = {}  # room held in the budget by loads under way
        self._started: set[str] = set()  # those of them Triton is loading
        self._room_queue: deque[str] = deque()  # loads asking for room, in turn
        self._last_done: dict[str, float] = {}  # when each model's last request ended
        self._memory: dict[str, int] = {}  # the last measure of each model, kept after it unloads
        self._servers: dict[str, int] = {}  # model instances (stub processes) of each loaded model
        self._service: dict[str, float] = {}  # each model's execution time, smoothed
        self._timings: dict[str, LoadTimings] = {}  # the last load of each model, by part
        self._generation = 0
        self._restarting: Future[None] | None = None
        self._restart_failed_at = 0.0
        self._closed = threading.Event()
        self._retired = False
        # A Triton front-end thread serves each load and unload until it is done: keep some for requests.
        name = f"{models.endpoint_name}-{instance_id}"
        self._loader = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"load-{name}")
        self._unloader = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"unload-{name}")
        self.loads = 0
        """How many model loads this instance performed (a reload after eviction counts again)."""
        self.load_counts: Counter[str] = Counter()
        """How many times each TargetModel was loaded."""
        self.downloads = 0
        """How many archives were downloaded (a reload from the volume downloads nothing)."""
        self.evictions = 0
        """How many models were unloaded to stay within the memory budget."""
        self.restarts = 0
        """How many times the instance's Triton was started again after it exited."""
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
        """The instance's current Triton server."""
        return self._triton

    @property
    def invoke_timeout(self) -> float:
        """Seconds a request may take in all, load wait and inference (SageMaker's 60 s)."""
        return self._invoke_timeout

    @property
    def memory_budget(self) -> int | None:
        """Bytes the instance's loaded models may hold (``None``: no byte limit)."""
        return self._lru.budget_bytes

    def volume_usage(self) -> tuple[int, int]:
        """Bytes the models on the instance's volume take, and the volume's size."""
        return self._volume.total_bytes, self._volume.capacity

    def volume_models(self) -> list[str]:
        """The TargetModels extracted on the instance's volume, least recently used first."""
        with self._lock:
            return self._volume.names()

    @property
    def workdir(self) -> Path:
        """This instance's scratch directory; extracted models are under ``models/<hash>/model``."""
        return self._workdir

    def loaded_models(self) -> list[str]:
        """The TargetModels currently loaded, least recently used first."""
        with self._lock:
            return self._lru.names()

    def model_memory(self) -> dict[str, int]:
        """Bytes each loaded TargetModel counts against the budget, as last measured."""
        with self._lock:
            return {name: self._memory.get(name) or self._lru.size_of(name) for name in self._lru.names()}

    def busy(self) -> bool:
        """Whether requests run on the instance or wait for one of its loads."""
        with self._lock:
            return bool(self._in_flight or self._waiting)

    def wait_for_unloads(self, timeout: float | None = None) -> None:
        """Block until the unloads scheduled so far have finished."""
        with self._lock:
            pending = list(self._unloading.values())
        for future in pending:
            with contextlib.suppress(Exception):
                future.result(timeout=timeout)

    def wait_for_restart(self, timeout: float | None = None) -> None:
        """Block until a restart of the instance's Triton under way (if any) has finished."""
        with self._lock:
            pending = self._restarting
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.result(timeout=timeout)

    def retire(self) -> None:
        """Take no new request (:meth:`enter` and :meth:`fast_path` refuse); those counted already finish."""
        with self._lock:
            self._retired = True

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop scheduling work, stop this instance's Triton and remove its extracted models.

        Parameters:
            drain_timeout: seconds to wait first for the requests running or waiting for a load to finish.
        """
        if drain_timeout > 0:
            with self._idle:
                self._idle.wait_for(lambda: not (self._in_flight or self._waiting), timeout=drain_timeout)
        self._closed.set()
        self._loader.shutdown(wait=False, cancel_futures=True)
        self._unloader.shutdown(wait=False, cancel_futures=True)
        self.wait_for_restart(timeout=120)
        self._triton.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    # -- the request path --------------------------------------------------------------------------

    def enter(self, target_model: str, call: dict[str, float]) -> Entry:
        """Count one request for ``target_model`` on this instance: on its loaded model (``call["hit"]``),
        or waiting for its load (started now if none is under way) or for a restart.

        Raises:
            InstanceRetiredError: the instance takes no new request.
        """
        with self._lock:
            if self._retired:
                raise InstanceRetiredError(self.instance_id)
            return self._enter(target_model, call)

    def _enter(self, target_model: str, call: dict[str, float]) -> Entry:
        """:meth:`enter` (caller holds the lock)."""
        model_hash = model_hash_of(target_model)
        triton = self._triton
        if self._restarting is not None:
            call["waited"] = 1.0
            return Entry(model_hash, triton, self._restarting, restarting=True)
        if self._lru.touch(target_model):
            self._in_flight[target_model] += 1
            if "waited" not in call:
                call["hit"] = 1.0
            return Entry(model_hash, triton)
        call["waited"] = 1.0
        pending = self._loading.get(target_model)
        if pending is None:
            pending = self._loader.submit(self._load_and_hold, target_model, self._generation, triton)
            self._loading[target_model] = pending
            self._load_asked[target_model] = time.monotonic()
        self._waiting[target_model] += 1
        return Entry(model_hash, triton, pending)

    def invoke(
        self, target_model: str, body: bytes, content_type: str, call: dict[str, float], entry: Entry
    ) -> RuntimeResponse:
        """Answer one InvokeEndpoint request counted by :meth:`enter`, within one budget of
        ``invoke_timeout`` seconds (from ``call["started"]``) for the load wait and the inference together,
        noting in ``call`` (monotonic times) when its model was ``acquired``, when it was ``sent`` to Triton
        and ``answered``."""
        started = call["started"]
        deadline = started + self._invoke_timeout
        triton = entry.triton
        try:
            model_hash, triton = self._acquire(
                target_model, min(deadline, started + self._ready_timeout), call, entry
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

        ``None`` when the request needs :meth:`invoke` (a load, a restart, an alias, a retired instance).
        """
        with self._lock:
            triton = self._triton
            if (
                self._retired
                or self._restarting is not None
                or triton_model_name(target_model) != target_model
            ):
                return None
            try:
                front_end = triton.front_end
            except RuntimeError:  # not running
                return None
            if not self._lru.touch(target_model):
                return None
            self._in_flight[target_model] += 1
        return FastPath(self, triton, front_end, model_hash_of(target_model))

    def release(self, target_model: str) -> None:
        """The request counted on ``target_model`` is done."""
        with self._lock:
            self._in_flight[target_model] -= 1
            if self._in_flight[target_model] <= 0:
                del self._in_flight[target_model]
                self._last_done[target_model] = time.monotonic()
                self._release_unused(target_model)
                self._idle.notify_all()

    def _acquire(
        self, target_model: str, deadline: float, call: dict[str, float], entry: Entry | None
    ) -> tuple[str, TritonLike]:
        """Wait until ``entry``'s model is held (it is counted on it); return its hash and server.

        The download and load run on the instance's loader threads; concurrent first requests share one.
        A request waits for it (and for a restart under way) until ``deadline``, then gets
        ``ModelNotReadyException`` while the load goes on, as SageMaker answers within 60 s and keeps
        loading for up to 360 s.
        """
        while True:
            if entry is None:
                with self._lock:
                    entry = self._enter(target_model, call)
            if entry.waiting is None:
                return entry.model_hash, entry.triton
            waiting, restarting = entry.waiting, entry.restarting
            try:
                # a failed load (or restart) is this request's failure too
                waiting.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeoutError:
                if restarting:
                    raise _Replacing(self._replacing_message(None)) from None
                if self._took_hold(target_model):
                    self.release(target_model)  # the load finished just now; this request gave up
                raise _NotReady(target_model) from None
            except BaseException:
                if not restarting:
                    self._took_hold(target_model)
                raise
            if not restarting and self._took_hold(target_model):
                return entry.model_hash, entry.triton
            entry = None  # not held (the server was replaced meanwhile): take it through the LRU again

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
                self._idle.notify_all()
            return False


class _NotReady(Exception):
    """The model's download and load took longer than a request waits for it."""


class _Replacing(Exception):
    """The instance's Triton is being started again and was not ready in time."""
