"""The half of an endpoint's runtime that runs off the request path: loads, unloads and restarts.

:class:`~mme_triton.local.route.endpoint_runtime.EndpointRuntime` answers requests; the methods here,
mixed into it, load a model on a loader thread and put it in the LRU with what it really holds (measured from
``/proc`` and ``/dev/shm``), unload evicted models on threads of their own (each waits only for the
requests using its model), and start the endpoint's Triton again after it exited.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.errors import LocalStackError
from mme_triton.local.route._prepare import LoadFailedError, Messages, load_failure, prepare_model
from mme_triton.local.route.extract import ExtractLimits
from mme_triton.local.route.lru import ModelLRU
from mme_triton.local.route.names import triton_model_name
from mme_triton.local.route.timings import LoadTimings, TimedBody

if TYPE_CHECKING:
    from mme_triton.local.triton.protocol import TritonLike

__all__ = ["Lifecycle", "model_hash_of"]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")


def model_hash_of(target_model: str) -> str:
    """The MD5 hex digest of ``target_model``: the name SageMaker loads it under."""
    import hashlib

    return hashlib.md5(target_model.encode("utf-8"), usedforsecurity=False).hexdigest()


class Lifecycle:
    """Loads, unloads and restarts; mixed into
    :class:`~mme_triton.local.route.endpoint_runtime.EndpointRuntime`."""

    # set by EndpointRuntime.__init__
    _lock: threading.Lock
    _idle: threading.Condition
    _in_flight: Counter[str]
    _waiting: Counter[str]
    _granted: Counter[str]
    _loading: dict[str, Future[None]]
    _unloading: dict[str, Future[None]]
    _disk: dict[str, int]
    _memory: dict[str, int]
    _timings: dict[str, LoadTimings]
    _generation: int
    _restarting: Future[None] | None
    _restart_failed_at: float
    _closed: threading.Event
    _triton: TritonLike
    _replace: Callable[[int], TritonLike] | None
    _lru: ModelLRU
    _workdir: Path
    _limits: ExtractLimits
    _adapt: Callable[[Path], list[str]] | None
    _load_timeout: float
    _unload_timeout: float
    _unloader: ThreadPoolExecutor
    loads: int
    evictions: int
    restarts: int

    @property
    def endpoint_name(self) -> str:  # pragma: no cover - defined by EndpointRuntime
        raise NotImplementedError

    def _messages(self, target_model: str) -> Messages:  # pragma: no cover - defined by EndpointRuntime
        raise NotImplementedError

    def _download(self, target_model: str) -> Any:  # pragma: no cover - defined by EndpointRuntime
        raise NotImplementedError

    def wait_for_unloads(self, timeout: float | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    def _model_root(self, model_hash: str) -> Path:
        return self._workdir / "models" / model_hash

    # -- loading -----------------------------------------------------------------------------------

    def _load_and_hold(self, target_model: str, generation: int, triton: TritonLike) -> None:
        """Wait for a pending unload of the model, load it and put it in the LRU (on a loader thread).

        Models in use are not evicted to make room; the requests that waited for this load are counted
        on it before anything else can evict it.
        """
        try:
            with self._lock:
                unloading = self._unloading.get(target_model)
            if unloading is not None:
                with contextlib.suppress(Exception):
                    unloading.result(timeout=self._unload_timeout + 5)
            size = self._load(target_model, triton)
        except BaseException:
            with self._lock:
                if self._generation == generation:
                    self._loading.pop(target_model, None)
            raise
        measured = self._measure(triton, extra=target_model)
        with self._lock:
            if self._generation != generation:
                return  # the server was replaced meanwhile; the next request loads it again
            self._loading.pop(target_model, None)
            self._disk[target_model] = size
            self._memory.update(measured)
            for name in self._lru.names():
                self._lru.resize(name, max(self._disk.get(name, 0), self._memory.get(name, 0)))
            # the requests that waited for this load hold it now, before another load can evict it
            held = self._waiting.pop(target_model, 0)
            self._in_flight[target_model] += held
            self._granted[target_model] += held
            evicted = self._lru.add(
                target_model,
                max(size, measured.get(target_model, 0)),
                keep=lambda name: self._in_flight[name] > 0,
            )
            for victim in evicted:
                self._schedule_unload(victim, triton)
        if evicted:
            logger.info(
                "endpoint %s: unloading %s to stay within the memory budget",
                self.endpoint_name,
                ", ".join(evicted),
            )

    def _measure(self, triton: TritonLike, *, extra: str) -> dict[str, int]:
        """Bytes held by the model instances of each loaded TargetModel (and ``extra``), from /proc."""
        with self._lock:
            names = [*self._lru.names(), extra]
        roots = {str(self._model_root(model_hash_of(name))) + "/": name for name in names}
        memory = dict.fromkeys(names, 0)
        try:
            processes = triton.model_processes()
        except OSError:
            return {}
        for process in processes:
            for root, name in roots.items():
                if process.model_path.startswith(root):
                    memory[name] += process.memory_bytes
        return memory

    def _load(self, target_model: str, triton: TritonLike) -> int:
        """Download, extract, check and load ``target_model``; return the size of the files it loaded."""
        model_hash = model_hash_of(target_model)
        root = self._model_root(model_hash)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        try:
            started = time.monotonic()
            body = TimedBody(self._download(target_model))
            requested = time.monotonic()  # GetObject answered; the bytes are read while extracting
            try:
                extracted = prepare_model(
                    body,
                    root,
                    target_model=target_model,
                    endpoint_name=self.endpoint_name,
                    limits=self._limits,
                    adapt=self._adapt,
                    rewrite=self._messages(target_model).rewrite,
                )
            finally:
                body.close()
            load_started = time.monotonic()
            self._triton_load(triton, model_hash, extracted.path, target_model)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        timings = LoadTimings(
            download_s=requested - started + body.seconds,
            extract_s=max(0.0, load_started - requested - body.seconds),
            load_s=time.monotonic() - load_started,
        )
        with self._lock:
            self._timings[target_model] = timings
            self.loads += 1
        return extracted.size

    def _triton_load(self, triton: TritonLike, model_hash: str, path: Path, target_model: str) -> None:
        from mme_triton.local.triton.server import TritonLoadError

        alias = triton_model_name(target_model)
        messages = self._messages(target_model)
        try:
            triton.load(model_hash, path, alias, timeout=self._load_timeout)
            return
        except TritonLoadError as exc:
            if exc.status != 507:
                raise LoadFailedError(
                    exc.status, load_failure(target_model, messages.rewrite(exc.message))
                ) from exc
            first = exc
        # 507: Triton is out of memory. Like SageMaker, unload the other models and try once more.
        logger.warning(
            "endpoint %s: out of memory loading %s; unloading the others", self.endpoint_name, target_model
        )
        with self._lock:
            for victim in self._lru.clear():
                self._schedule_unload(victim, triton)
        self.wait_for_unloads(timeout=self._unload_timeout + 5)
        try:
            triton.load(model_hash, path, alias, timeout=self._load_timeout)
        except TritonLoadError as exc:
            raise LoadFailedError(
                exc.status, load_failure(target_model, messages.rewrite(exc.message))
            ) from first

    # -- unloading ---------------------------------------------------------------------------------

    def load_timings(self) -> dict[str, LoadTimings]:
        """The parts of each TargetModel's last load on this endpoint, and of its unload once unloaded."""
        with self._lock:
            return dict(self._timings)

    def unload_model(self, target_model: str, *, timeout: float | None = None) -> bool:
        """Unload a loaded model now, once the requests using it have finished (as an eviction does);
        wait for it up to ``timeout`` seconds. ``False`` when it was not loaded."""
        with self._lock:
            if not self._lru.remove(target_model):
                return False
            future = self._schedule_unload(target_model, self._triton, evicted=False)
        with contextlib.suppress(Exception):
            future.result(timeout=timeout)
        return True

    def _schedule_unload(
        self, target_model: str, triton: TritonLike, *, evicted: bool = True
    ) -> Future[None]:
        """Queue the unload of an evicted (or asked-for) model (caller holds the lock)."""
        self.evictions += int(evicted)
        self._memory.pop(target_model, None)
        self._unloading[target_model] = future = self._unloader.submit(self._unload, target_model, triton)

        def forget(done: Future[None]) -> None:
            with self._lock:
                if self._unloading.get(target_model) is done:
                    del self._unloading[target_model]

        future.add_done_callback(forget)
        return future

    def _unload(self, target_model: str, triton: TritonLike) -> None:
        model_hash = model_hash_of(target_model)
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight[target_model] <= 0, timeout=self._unload_timeout)
        try:
            started = time.monotonic()
            triton.unload(
                model_hash, target_model=triton_model_name(target_model), timeout=self._unload_timeout
            )
            with self._lock:
                loaded = self._timings.get(target_model)
                if loaded is not None:
                    self._timings[target_model] = replace(loaded, unload_s=time.monotonic() - started)
            logger.info("endpoint %s: unloaded %s", self.endpoint_name, target_model)
        except LocalStackError as exc:
            logger.warning("endpoint %s: unloading %s failed: %s", self.endpoint_name, target_model, exc)
        finally:
            shutil.rmtree(self._model_root(model_hash), ignore_errors=True)

    # -- recovery ----------------------------------------------------------------------------------

    def _watch(self, interval: float) -> None:
        while not self._closed.wait(interval):
            triton = self._triton
            recently_failed = time.monotonic() - self._restart_failed_at < 10.0
            if triton.returncode is not None and self._replace is not None and not recently_failed:
                self._begin_restart(triton)

    def _begin_restart(self, dead: TritonLike) -> None:
        with self._lock:
            if (
                self._closed.is_set()
                or self._triton is not dead
                or dead.returncode is None  # alive (started again already)
                or self._restarting is not None
            ):
                return
            future: Future[None] = Future()
            self._restarting = future
            self._generation += 1
            self._lru.clear()
            self._loading.clear()
            self._unloading.clear()
            self._memory.clear()
            self._disk.clear()
        logger.warning(
            "endpoint %s: Triton exited (status %s); starting it again, models load again on demand",
            self.endpoint_name,
            dead.returncode,
        )
        threading.Thread(
            target=self._restart, args=(dead, future), name=f"restart-{self.endpoint_name}", daemon=True
        ).start()

    def _restart(self, dead: TritonLike, future: Future[None]) -> None:
        assert self._replace is not None
        try:
            dead.stop()
            shutil.rmtree(self._workdir / "models", ignore_errors=True)
            error: BaseException | None = None
            for attempt in range(3):
                if self._closed.is_set():
                    raise LocalStackError("the endpoint was deleted while its Triton restarted")
                replacement = self._replace(self._generation)
                try:
                    replacement.start()
                except LocalStackError as exc:
                    error = exc
                    time.sleep(0.5 * (attempt + 1))
                    continue
                with self._lock:
                    self._triton = replacement
                    self.restarts += 1
                    self._restarting = None
                logger.info("endpoint %s: Triton started again", self.endpoint_name)
                future.set_result(None)
                return
            raise error or LocalStackError("Triton did not start again")
        except BaseException as exc:
            logger.error("endpoint %s: restarting Triton failed: %s", self.endpoint_name, exc)
            with self._lock:
                self._restarting = None
                self._restart_failed_at = time.monotonic()
            future.set_exception(exc)
