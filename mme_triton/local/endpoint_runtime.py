"""One in-service endpoint of the embedded stack: its Triton, the models loaded in it, and their LRU.

SageMaker's platform, on a multi-model endpoint instance, answers the first InvokeEndpoint for a
``TargetModel`` by downloading ``<ModelDataUrl><TargetModel>`` from S3, extracting it under
``/opt/ml/models/<hash>/model`` and asking the container to load it (``POST /models``), answering
``ModelNotReadyException`` when that takes more than 60 s; the model stays loaded until memory runs
short, and then the least recently used models are unloaded (``DELETE /models/<hash>``). The request goes
to ``POST /models/<hash>/invoke``; a 2xx answer is passed back as it is, anything else becomes a
``ModelError`` (HTTP 424) carrying the container's status and body. :class:`EndpointRuntime` does that
for one endpoint.

Memory budget: the least recently used models are unloaded when the **on-disk size of the extracted
model directories** loaded in the endpoint's Triton goes over the budget (default 2 GiB), and/or when
more than ``max_models`` are loaded. On-disk size is deterministic and known before the load; it is a
proxy for resident memory (ONNX weights take about their file size; every model instance, ONNX ones
included, also runs in a python-backend stub process of ~40-70 MB that the budget does not see). A single
model larger than the budget is still loaded (alone).

Loads: a request for a model that is not loaded yet waits while it is downloaded and loaded, for at most
60 s (``ready_timeout``); a longer load goes on in the background and the request is answered
``ModelNotReadyException`` (HTTP 429) to be retried, as SageMaker does. Concurrent first requests for one
model share a single load. Unloads run on a background thread, after the requests that use the model have
finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS, error_code, parse_s3_url
from mme_triton.errors import LocalStackError
from mme_triton.local.extract import ModelArchiveError, directory_size, safe_extract
from mme_triton.local.lru import ModelLRU
from mme_triton.local.responses import (
    RuntimeResponse,
    internal_failure,
    model_data_not_found,
    model_error,
    model_not_ready,
    success,
    validation_error,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "DEFAULT_READY_TIMEOUT",
    "EndpointModels",
    "EndpointRuntime",
    "ModelDataNotFoundError",
    "TritonLike",
    "gpu_adapter",
    "target_model_hash",
]

logger = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT = INVOCATION_TIMEOUT_SECONDS
"""Seconds a request waits for its model's download and load before ``ModelNotReadyException``."""

_COPY_CHUNK = 1024 * 1024


class ModelDataNotFoundError(LocalStackError):
    """``<ModelDataUrl>/<TargetModel>`` is not in S3."""

    def __init__(self, bucket: str, key: str) -> None:
        self.bucket = bucket
        self.key = key
        super().__init__(f"s3://{bucket}/{key} does not exist")


def target_model_hash(target_model: str) -> str:
    """The name a TargetModel is loaded under: the MD5 hex digest of the name, as SageMaker's platform
    names ``/opt/ml/models/<hash>``.

    Example:
        >>> target_model_hash("linear.tar.gz") == hashlib.md5(b"linear.tar.gz").hexdigest()
        True
    """
    return hashlib.md5(target_model.encode("utf-8"), usedforsecurity=False).hexdigest()


class TritonLike(Protocol):
    """What the runtime needs of a :class:`~mme_triton.local.triton.TritonServer`."""

    def start(self) -> None: ...
    def stop(self, timeout: float = ...) -> None: ...
    def load(self, model_hash: str, model_dir: Path, target_model: str, *, timeout: float = ...) -> None: ...
    def unload(self, model_hash: str, *, target_model: str | None = ..., timeout: float = ...) -> None: ...
    def invoke(
        self, model_hash: str, target_model: str, body: bytes, content_type: str, *, timeout: float = ...
    ) -> tuple[int, dict[str, str], bytes]: ...


@dataclass
class EndpointModels:
    """What an in-service endpoint serves: resolved once from Endpoint -> EndpointConfig -> Model."""

    endpoint_name: str
    model_data_url: str
    environment: dict[str, str] = field(default_factory=dict)
    variant_name: str = "AllTraffic"
    mode: str = "MultiModel"


class EndpointRuntime:
    """One in-service endpoint: its Triton, its loaded models and their LRU.

    Created by :class:`InvocationRuntime` when the endpoint goes in service; :meth:`invoke` answers one
    InvokeEndpoint request.
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
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        load_timeout: float = 360.0,
        unload_timeout: float = 60.0,
        invoke_timeout: float = 60.0,
    ) -> None:
        self.models = models
        self.triton = triton
        self._s3 = s3_client
        self._workdir = workdir
        self._lru = lru
        self._region = region
        self._account_id = account_id
        self._adapt = adapt
        self._ready_timeout = ready_timeout
        self._load_timeout = load_timeout
        self._unload_timeout = unload_timeout
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight: Counter[str] = Counter()
        self._loading: dict[str, Future[None]] = {}
        self._unloading: dict[str, Future[None]] = {}
        self._invoke_timeout = invoke_timeout
        self._loader = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"load-{models.endpoint_name}")
        self._unloader = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"unload-{models.endpoint_name}"
        )
        self.loads = 0
        """How many model loads this endpoint performed (a reload after eviction counts again)."""

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name."""
        return self.models.endpoint_name

    @property
    def workdir(self) -> Path:
        """This endpoint's scratch directory; extracted models are under ``models/<hash>/model``."""
        return self._workdir

    def loaded_models(self) -> list[str]:
        """The TargetModels currently loaded, least recently used first."""
        with self._lock:
            return self._lru.names()

    def wait_for_unloads(self, timeout: float | None = None) -> None:
        """Block until the unloads scheduled so far have finished."""
        with self._lock:
            pending = list(self._unloading.values())
        for future in pending:
            with contextlib.suppress(Exception):
                future.result(timeout=timeout)

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop scheduling unloads, stop this endpoint's Triton and remove its extracted models.

        Parameters:
            drain_timeout: seconds to wait first for the requests being forwarded to finish.
        """
        if drain_timeout > 0:
            with self._idle:
                self._idle.wait_for(lambda: not self._in_flight, timeout=drain_timeout)
        self._loader.shutdown(wait=False, cancel_futures=True)
        self._unloader.shutdown(wait=False, cancel_futures=True)
        self.triton.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    # -- the request path --------------------------------------------------------------------------

    def invoke(self, target_model: str, body: bytes, content_type: str) -> RuntimeResponse:
        """Answer one InvokeEndpoint request for ``target_model`` (loading it first if needed)."""
        try:
            model_hash = self._acquire(target_model)
        except ModelDataNotFoundError as exc:
            return model_data_not_found(exc.bucket, exc.key)
        except ModelArchiveError as exc:
            bucket, key = self._location(target_model)
            return validation_error(f"Failed to extract model data(bucket: {bucket}, key: {key}): {exc}")
        except _NotReady:
            return model_not_ready(target_model, self._ready_timeout)
        except _LoadFailed as exc:
            return self._model_error(exc.status, exc.body)
        except LocalStackError as exc:
            logger.error("endpoint %s: %s", self.endpoint_name, exc)
            return internal_failure(str(exc))
        try:
            status, headers, answer = self._forward(model_hash, target_model, body, content_type)
        except LocalStackError as exc:
            logger.error("endpoint %s: %s", self.endpoint_name, exc)
            return internal_failure(str(exc))
        finally:
            self._release(target_model)
        if 200 <= status < 300:
            content = headers.get("content-type", "application/octet-stream")
            return success(answer, content, self.models.variant_name)
        return self._model_error(status, answer)

    def _forward(
        self, model_hash: str, target_model: str, body: bytes, content_type: str
    ) -> tuple[int, dict[str, str], bytes]:
        """``POST /models/<hash>/invoke`` through the Triton wrapper's pool of keep-alive connections."""
        return self.triton.invoke(model_hash, target_model, body, content_type, timeout=self._invoke_timeout)

    def _model_error(self, status: int, body: bytes) -> RuntimeResponse:
        return model_error(
            status, body, endpoint_name=self.endpoint_name, region=self._region, account_id=self._account_id
        )

    def _location(self, target_model: str) -> tuple[str, str]:
        bucket, prefix = parse_s3_url(self.models.model_data_url)
        return bucket, prefix + target_model

    def _acquire(self, target_model: str) -> str:
        """Make sure ``target_model`` is loaded and count one request on it; return its hash.

        The download and load run on the endpoint's loader threads; concurrent first requests share one.
        A request waits for it at most ``ready_timeout`` seconds, then gets ``ModelNotReadyException``
        while the load goes on, as SageMaker answers within 60 s and keeps loading for up to 360 s.
        """
        model_hash = target_model_hash(target_model)
        deadline = time.monotonic() + self._ready_timeout
        while True:
            with self._lock:
                if self._lru.touch(target_model):
                    self._in_flight[target_model] += 1
                    return model_hash
                pending = self._loading.get(target_model)
                if pending is None:
                    pending = self._loader.submit(self._load_and_hold, target_model, model_hash)
                    self._loading[target_model] = pending
            try:
                # the load's failure is this request's failure too
                pending.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeoutError:
                raise _NotReady(target_model) from None
            # loaded now: take it through the LRU (a concurrent load may have evicted it already)

    def _load_and_hold(self, target_model: str, model_hash: str) -> None:
        """Wait for a pending unload of the model, load it and put it in the LRU (on a loader thread)."""
        try:
            with self._lock:
                unloading = self._unloading.get(target_model)
            if unloading is not None:
                with contextlib.suppress(Exception):
                    unloading.result(timeout=self._unload_timeout + 5)
            size = self._load(target_model, model_hash)
        except BaseException:
            with self._lock:
                self._loading.pop(target_model, None)
            raise
        with self._lock:
            self._loading.pop(target_model, None)
            evicted = self._lru.add(target_model, size)
            for victim in evicted:
                self._schedule_unload(victim)
        if evicted:
            logger.info(
                "endpoint %s: unloading %s to stay within the memory budget",
                self.endpoint_name,
                ", ".join(evicted),
            )

    def _release(self, target_model: str) -> None:
        with self._lock:
            self._in_flight[target_model] -= 1
            if self._in_flight[target_model] <= 0:
                del self._in_flight[target_model]
                self._idle.notify_all()

    def _model_root(self, model_hash: str) -> Path:
        return self._workdir / "models" / model_hash

    def _load(self, target_model: str, model_hash: str) -> int:
        """Download, extract, adapt and load ``target_model``; return the on-disk size of what it loaded."""
        root = self._model_root(model_hash)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        try:
            archive = root / "archive"
            self._download(target_model, archive)
            extracted = safe_extract(archive, root / "model")
            archive.unlink()
            if self._adapt is not None:
                changes = self._adapt(extracted.path)
                if changes:
                    logger.warning(
                        "endpoint %s: %s targets a GPU; serving an adapted copy on the CPU: %s",
                        self.endpoint_name,
                        target_model,
                        "; ".join(changes),
                    )
            self._triton_load(model_hash, extracted.path, target_model)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        with self._lock:
            self.loads += 1
        return directory_size(extracted.path)  # after adaptation: the bytes Triton actually loaded

    def _triton_load(self, model_hash: str, path: Path, target_model: str) -> None:
        from mme_triton.local.triton import TritonLoadError

        try:
            self.triton.load(model_hash, path, target_model, timeout=self._load_timeout)
            return
        except TritonLoadError as exc:
            if exc.status != 507:
                raise _LoadFailed(exc.status, exc.message) from exc
            first = exc
        # 507: Triton is out of memory. Like SageMaker, unload the other models and try once more.
        logger.warning(
            "endpoint %s: out of memory loading %s; unloading the others", self.endpoint_name, target_model
        )
        with self._lock:
            for victim in self._lru.clear():
                self._schedule_unload(victim)
        self.wait_for_unloads(timeout=self._unload_timeout + 5)
        try:
            self.triton.load(model_hash, path, target_model, timeout=self._load_timeout)
        except TritonLoadError as exc:
            raise _LoadFailed(exc.status, exc.message) from first

    def _download(self, target_model: str, destination: Path) -> None:
        from botocore.exceptions import ClientError

        bucket, key = self._location(target_model)
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = error_code(exc)
            if code in ("NoSuchKey", "NoSuchBucket", "404", "403", "AccessDenied"):
                raise ModelDataNotFoundError(bucket, key) from exc
            raise LocalStackError(f"cannot download s3://{bucket}/{key}: {exc}") from exc
        stream = response["Body"]
        try:
            with destination.open("wb") as out:
                for chunk in iter(lambda: stream.read(_COPY_CHUNK), b""):
                    out.write(chunk)
        finally:
            stream.close()

    def _schedule_unload(self, target_model: str) -> None:
        """Queue the unload of an evicted model (caller holds the lock)."""
        self._unloading[target_model] = future = self._unloader.submit(self._unload, target_model)

        def forget(done: Future[None]) -> None:
            with self._lock:
                if self._unloading.get(target_model) is done:
                    del self._unloading[target_model]

        future.add_done_callback(forget)

    def _unload(self, target_model: str) -> None:
        model_hash = target_model_hash(target_model)
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight[target_model] <= 0, timeout=self._unload_timeout)
        try:
            self.triton.unload(model_hash, target_model=target_model, timeout=self._unload_timeout)
            logger.info("endpoint %s: unloaded %s", self.endpoint_name, target_model)
        except LocalStackError as exc:
            logger.warning("endpoint %s: unloading %s failed: %s", self.endpoint_name, target_model, exc)
        finally:
            shutil.rmtree(self._model_root(model_hash), ignore_errors=True)


class _NotReady(Exception):
    """The model's download and load took longer than a request waits for it."""


class _LoadFailed(Exception):
    """Triton refused to load a model (or the stack cannot run it); answered as a ModelError."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.body = json.dumps({"error": message}).encode()
        super().__init__(message)


def gpu_adapter() -> Callable[[Path], list[str]]:
    """Adapts an extracted model for the CPU (see :mod:`mme_triton.local.adapt`); refuses GPU-only ones."""
    from mme_triton.local.adapt import GPUModelError, adapt_for_cpu

    def adapt(model_dir: Path) -> list[str]:
        try:
            return list(adapt_for_cpu(model_dir))
        except GPUModelError as exc:
            raise _LoadFailed(400, str(exc)) from exc

    return adapt


# Arguments that would bind fixed ports (two stacks could not run side by side) stay the stack's choice.
