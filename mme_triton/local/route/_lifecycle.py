"""The half of an instance's runtime that runs off the request path: loads and unloads.

:class:`~mme_triton.local.route.instance.InstanceRuntime` answers requests; the methods here, mixed into it,
load a model on a loader thread once the memory budget has room for it, and put it in the LRU with what it
really holds (measured from ``/proc`` and ``/dev/shm``); and unload models on threads of their own (each
waits only for the requests using its model). Each load's parts and its unload are timed
(:class:`~mme_triton.local.route.timings.LoadTimings`).

Room is made before a load starts, as SageMaker starts unloading "when starting the process of loading a new
model", by the rules of :mod:`mme_triton._multimodel` (the capacity simulator's too): once the model's files
are on the volume, the load's estimate (what the model measured the last time it was loaded, else what the
models of the endpoint measure, at least its files) and one more model must fit the budget with the loads
and unloads under way. Loads ask in turn, first come first served; the least recently used unused models
are unloaded for one that does not fit, and it starts as soon as what Triton holds and it fit (its own
unloads done, not unrelated ones). When every loaded model is in use, the load waits for one to become
unused (:func:`~mme_triton._multimodel.unused`: a model stays in use a moment after its last request).
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from mme_triton._multimodel import IDLE_AFTER_S, unused
from mme_triton.errors import LocalStackError
from mme_triton.local.route._cache import ModelCache, model_hash_of
from mme_triton.local.route._prepare import LoadFailedError, load_failure
from mme_triton.local.route.limits import human_size
from mme_triton.local.route.metrics import MetricsSink
from mme_triton.local.route.names import triton_model_name
from mme_triton.local.route.timings import LoadTimings
from mme_triton.local.triton.protocol import TritonLike

__all__ = ["Lifecycle"]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")


def _keep_all(name: str) -> bool:
    return True


class Lifecycle(ModelCache):
    """Loads and unloads; mixed into :class:`~mme_triton.local.route.instance.InstanceRuntime`."""

    # set by InstanceRuntime.__init__
    instance_id: str
    _load_asked: dict[str, float]
    _servers: dict[str, int]
    _idle: threading.Condition
    _waiting: Counter[str]
    _granted: Counter[str]
    _reserved: dict[str, int]
    _started: set[str]
    _room_queue: deque[str]
    _last_done: dict[str, float]
    _unloading_bytes: dict[str, int]
    _memory: dict[str, int]
    _timings: dict[str, LoadTimings]
    _generation: int
    _restarting: Future[None] | None
    _closed: threading.Event
    _triton: TritonLike
    _load_timeout: float
    _unload_timeout: float
    _unloader: ThreadPoolExecutor
    cache_disabled: bool
    metrics: MetricsSink
    load_counts: Counter[str]
    loads: int
    evictions: int

    def wait_for_unloads(self, timeout: float | None = None) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- loading -----------------------------------------------------------------------------------

    def _load_and_hold(self, target_model: str, generation: int, triton: TritonLike) -> None:
        """Wait for a pending unload of the model, get it on the volume, make room for it, load it and put
        it in the LRU (on a loader thread).

        The requests that waited for this load are counted on it before anything else can unload it.
        """
        started = time.monotonic()
        deadline = started + self._load_timeout
        try:
            with self._lock:
                unloading = self._unloading.get(target_model)
            if unloading is not None:
                with contextlib.suppress(Exception):
                    unloading.result(timeout=self._unload_timeout + 5)
            waited = time.monotonic() - started
            copy, parts = self._on_volume(target_model)
            room_from = time.monotonic()
            self._make_room(target_model, self._estimate(target_model, copy.size), generation, deadline)
            load_started = time.monotonic()
            try:
                self._triton_load(triton, model_hash_of(target_model), copy.path, target_model)
            except BaseException as exc:
                with self._idle:
                    self._reserved.pop(target_model, None)
                    self._started.discard(target_model)
                    if isinstance(exc, LoadFailedError):
                        # a copy that never loaded serves nothing: the next request downloads it again
                        self._delete_copy(target_model)
                    self._idle.notify_all()
                if isinstance(exc, LoadFailedError):
                    logger.info(
                        "endpoint %s: %s failed to load; its copy left the volume, the next request "
                        "downloads it again",
                        self.endpoint_name,
                        target_model,
                    )
                raise
        except BaseException:
            with self._idle:
                if self._generation == generation:
                    self._loading.pop(target_model, None)
                    self._load_asked.pop(target_model, None)
                self._idle.notify_all()
            raise
        parts = replace(
            parts, wait_s=waited + load_started - room_from, load_s=time.monotonic() - load_started
        )
        measured, servers = self._measure(triton, extra=target_model)
        self.metrics.model_loaded(parts.load_s)
        with self._idle:
            self.loads += 1
            self.load_counts[target_model] += 1
            self._timings[target_model] = parts
            self._reserved.pop(target_model, None)
            self._started.discard(target_model)
            if self._generation != generation:
                return  # the server was replaced meanwhile; the next request loads it again
            self._loading.pop(target_model, None)
            self._load_asked.pop(target_model, None)
            self._memory.update(measured)
            self._servers.update(servers)
            for name in self._lru.names():
                self._lru.resize(name, max(self._size_on_volume(name), self._memory.get(name, 0)))
            # the requests that waited for this load hold it now, before anything can unload it
            held = self._waiting.pop(target_model, 0)
            self._in_flight[target_model] += held
            self._granted[target_model] += held
            self._lru.add(target_model, max(copy.size, measured.get(target_model, 0)), keep=lambda _: True)
            # it measured more than estimated: the budget is kept again at once
            evicted = self._lru.excess(keep=self._in_use, **self._pending())
            for victim in evicted:
                self._schedule_unload(victim, triton)
            self._count_loaded()
            self._idle.notify_all()
        if evicted:
            logger.info(
                "endpoint %s: %s holds more than estimated; unloading %s to stay within the memory budget",
                self.endpoint_name,
                target_model,
                ", ".join(evicted),
            )

    def _estimate(self, target_model: str, files: int) -> int:
        """What ``target_model`` will hold once loaded: its last measure, else the median of the endpoint's
        models' measures, at least its files."""
        with self._lock:
            known = self._memory.get(target_model)
            others = [size for size in self._memory.values() if size > 0]
        if known:
            return max(files, known)
        return max(files, int(statistics.median(others)) if others else 0)

    def _pending(self) -> dict[str, int]:
        """What loads and unloads under way hold (caller holds the lock)."""
        return {
            "pending_bytes": sum(self._reserved.values()) + sum(self._unloading_bytes.values()),
            "pending_count": len(self._reserved) + len(self._unloading_bytes),
        }

    def _in_use(self, target_model: str) -> bool:
        """Whether a request of ``target_model`` runs or waits, or one ended a moment ago (caller holds the
        lock): such a model is never unloaded to make room."""
        if self._in_flight[target_model] > 0 or self._waiting[target_model] > 0:
            return True
        last = self._last_done.get(target_model)
        return last is not None and not unused(last, time.monotonic())

    def _size_on_volume(self, target_model: str) -> int:
        copy = self._volume.get(target_model)
        return copy.size if copy is not None else 0

    def _make_room(self, target_model: str, estimate: int, generation: int, deadline: float) -> None:
        """Hold room for ``estimate`` bytes and one more model in the budget, unloading the least recently
        used unused models for it, and wait until Triton has the room (:mod:`mme_triton._multimodel`).

        Loads ask in turn, first come first served. The room is held from the moment the unloads are
        chosen, so another load cannot take it; a load that does not fit even with every unused model
        unloaded waits (and the loads behind it) for a model to become unused.

        Raises:
            LoadFailedError: the budget stayed held by models in use until ``deadline`` (507, as Triton's
                out-of-memory answer).
            LocalStackError: the server was replaced meanwhile.
        """
        announced = False
        with self._idle:
            self._room_queue.append(target_model)
            try:
                while True:  # choose, in turn: as if the unloads under way were done (they free their room)
                    self._check_generation(target_model, generation)
                    victims = None
                    if self._room_queue[0] == target_model:
                        victims = self._lru.room_for(
                            estimate,
                            keep=self._in_use,
                            pending_bytes=sum(self._reserved.values()),
                            pending_count=len(self._reserved),
                        )
                    if victims is not None:
                        break
                    if not announced and self._room_queue[0] == target_model:
                        announced = True
                        logger.info(
                            "endpoint %s: %s waits for a loaded model to become unused (the memory budget "
                            "is held by models in use)",
                            self.endpoint_name,
                            target_model,
                        )
                    self._wait(target_model, deadline)
            finally:
                self._room_queue.remove(target_model)
                self._idle.notify_all()
            for victim in victims:
                self._schedule_unload(victim, self._triton)
            if victims:
                logger.info(
                    "endpoint %s: unloading %s to load %s (about %s) within the memory budget",
                    self.endpoint_name,
                    ", ".join(victims),
                    target_model,
                    human_size(estimate),
                )
            self._reserved[target_model] = estimate
            try:
                while True:  # then start once what Triton holds (loaded, loading, unloading) and it fit
                    self._check_generation(target_model, generation)
                    loading = [name for name in self._started if name != target_model]
                    free = self._lru.room_for(
                        estimate,
                        keep=_keep_all,
                        pending_bytes=sum(self._reserved[name] for name in loading)
                        + sum(self._unloading_bytes.values()),
                        pending_count=len(loading) + len(self._unloading_bytes),
                    )
                    if free == []:
                        self._started.add(target_model)
                        return
                    if self._lru.budget_bytes is not None and estimate > self._lru.budget_bytes:
                        for name in [n for n in self._lru.names() if not self._in_use(n)]:
                            self._schedule_unload(name, self._triton)  # it loads alone: all must go
                    self._wait(target_model, deadline)
            except BaseException:
                self._reserved.pop(target_model, None)
                self._idle.notify_all()
                raise

    def _check_generation(self, target_model: str, generation: int) -> None:
        if self._generation != generation or self._closed.is_set():
            raise LocalStackError(f"the endpoint's Triton was replaced while {target_model} waited to load")

    def _wait(self, target_model: str, deadline: float) -> None:
        """Wait for a model to become unused or an unload to finish (caller holds the condition)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LoadFailedError(
                507,
                load_failure(
                    target_model,
                    "out of memory: the endpoint's memory budget stayed held by models in use for "
                    f"{self._load_timeout:g}s",
                ),
            )
        timeout = min(remaining, 5.0)
        now = time.monotonic()
        for name in self._lru.names():  # wake when a model's last request is far enough behind
            last = self._last_done.get(name)
            if last is not None and self._in_flight[name] <= 0 and not unused(last, now):
                timeout = min(timeout, last + IDLE_AFTER_S - now + 0.001)
        self._idle.wait(timeout=max(timeout, 0.001))

    def _measure(self, triton: TritonLike, *, extra: str) -> tuple[dict[str, int], dict[str, int]]:
        """Bytes held by the model instances of each loaded TargetModel (and ``extra``), and how many
        model instances (stub processes) each has, from /proc."""
        with self._lock:
            names = [*self._lru.names(), extra]
        roots = {str(self._model_root(model_hash_of(name))) + "/": name for name in names}
        memory = dict.fromkeys(names, 0)
        servers: dict[str, int] = {}
        try:
            processes = triton.model_processes()
        except OSError:
            return {}, {}
        for process in processes:
            for root, name in roots.items():
                if process.model_path.startswith(root):
                    memory[name] += process.memory_bytes
                    servers[name] = servers.get(name, 0) + 1
        return memory, servers

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
            for victim in self._lru.names():
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
        """Unload a loaded model now, once the requests using it have finished (as an eviction does: its
        copy stays on the volume); wait for it up to ``timeout`` seconds. ``False`` when it was not
        loaded."""
        with self._idle:
            future = self._schedule_unload(target_model, self._triton, evicted=False)
        if future is None:
            return False
        with contextlib.suppress(Exception):
            future.result(timeout=timeout)
        return True

    def _schedule_unload(
        self, target_model: str, triton: TritonLike, *, evicted: bool = True, delete: bool = False
    ) -> Future[None] | None:
        """Take ``target_model`` out of the LRU and queue its unload (caller holds the lock); ``evicted``
        counts it in :attr:`evictions`, ``delete`` also deletes its copy from the volume
        (``ModelCacheSetting: Disabled``). ``None`` when it was not loaded."""
        size = self._lru.size_of(target_model)
        if not self._lru.remove(target_model):
            return None
        if evicted:
            self.evictions += 1
        self._unloading_bytes[target_model] = size
        self._unloading[target_model] = future = self._unloader.submit(
            self._unload, target_model, triton, delete
        )

        def forget(done: Future[None]) -> None:
            with self._idle:
                if self._unloading.get(target_model) is done:
                    del self._unloading[target_model]
                    self._unloading_bytes.pop(target_model, None)
                    self._count_loaded()
                self._idle.notify_all()

        future.add_done_callback(forget)
        return future

    def _unload(self, target_model: str, triton: TritonLike, delete: bool) -> None:
        model_hash = model_hash_of(target_model)
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight[target_model] <= 0, timeout=self._unload_timeout)
        try:
            started = time.monotonic()
            ended = triton.unload(
                model_hash, target_model=triton_model_name(target_model), timeout=self._unload_timeout
            )
            answered = time.monotonic() - started
            self.metrics.model_unloaded(answered)  # ModelUnloadingTime: the container's UnloadModel call
            with self._lock:
                loaded = self._timings.get(target_model)
                if loaded is not None:
                    unload_s = ended if ended is not None else answered
                    self._timings[target_model] = replace(loaded, unload_s=unload_s, unload_answer_s=answered)
            logger.info("endpoint %s: unloaded %s", self.endpoint_name, target_model)
        except LocalStackError as exc:
            logger.warning("endpoint %s: unloading %s failed: %s", self.endpoint_name, target_model, exc)
        if delete:
            with self._lock:
                if target_model not in self._loading:
                    self._delete_copy(target_model)

    def _count_loaded(self) -> None:
        """Publish how many models the instance's Triton holds: loaded, and unloading (caller holds the
        lock); a closed instance (scaled in, or replaced by an update) no longer speaks for the variant."""
        if not self._closed.is_set():
            self.metrics.loaded_models(len(self._lru) + len(self._unloading), instance=self.instance_id)

    def _release_unused(self, target_model: str) -> None:
        """A request for ``target_model`` ended and none uses it now (caller holds the lock):
        ``ModelCacheSetting: Disabled`` unloads it and deletes it from the volume, as SageMaker does."""
        self._volume.touch(target_model)
        if self.cache_disabled and target_model in self._lru:
            self._schedule_unload(target_model, self._triton, evicted=False, delete=True)
