"""One in-service endpoint of the embedded stack: its production variant's instances, how requests are routed
among them, and how their number changes.

A production variant of ``InitialInstanceCount`` N runs N instances
(:class:`~mme_triton.local.route.instance.InstanceRuntime`), each with its own Triton (in its own network
namespace), memory budget, model cache and volume. :class:`EndpointRuntime` routes each request to one of
them by the rules of :mod:`mme_triton._multimodel`, which the capacity simulator follows too: to an
instance where the model is loaded (or loading), the one where it waits least; to another instance when it
would wait there longer than its cold start and 1 s; a model no instance holds to the instance with the most
free memory for models.

The count changes with ``UpdateEndpointWeightsAndCapacities`` (and Application Auto Scaling, which calls
it): :meth:`EndpointRuntime.scale_to` starts new instances (cold: they load models on demand) and adds them
to the routing once they answer, or takes the newest instances out of the routing at once and stops them
once the requests they run, or that wait there for a load, have finished. ``UpdateEndpoint`` replaces the
whole fleet: :meth:`EndpointRuntime.retire` hands new requests to the new variant's runtime and drains the
old instances. No request fails because of either.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from mme_triton._multimodel import SPILL, SPILL_WAIT_S, place, route
from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS
from mme_triton.errors import LocalStackError, MMETritonWarning
from mme_triton.local.route._cache import ModelDataNotFoundError, model_hash_of
from mme_triton.local.route._instance_view import DEFAULT_COLD_START_S, median
from mme_triton.local.route.instance import (
    DEFAULT_READY_TIMEOUT,
    EndpointModels,
    Entry,
    FastPath,
    InstanceRetiredError,
    InstanceRuntime,
)
from mme_triton.local.route.limits import DEFAULT_MAX_INSTANCES
from mme_triton.local.route.metrics import MetricsSink, NullMetricsSink, record_invocation
from mme_triton.local.route.responses import RuntimeResponse, service_unavailable
from mme_triton.local.route.timings import LoadTimings
from mme_triton.local.triton.protocol import TritonLike

__all__ = [
    "DEFAULT_READY_TIMEOUT",
    "DRAIN_TIMEOUT",
    "EndpointModels",
    "EndpointRuntime",
    "ModelDataNotFoundError",
    "target_model_hash",
]

logger = logging.getLogger(__name__)

DRAIN_TIMEOUT = INVOCATION_TIMEOUT_SECONDS + 5.0
"""Seconds an instance leaving its variant waits for its requests (each takes at most 60 s) before it
stops."""


def target_model_hash(target_model: str) -> str:
    """The name a TargetModel is loaded under: the MD5 hex digest of the name, as SageMaker's platform
    names ``/opt/ml/models/<hash>``.

    Example:
        >>> import hashlib
        >>> target_model_hash("linear.tar.gz") == hashlib.md5(b"linear.tar.gz").hexdigest()
        True
    """
    return model_hash_of(target_model)


class EndpointRuntime:
    """One in-service endpoint's production variant: its instances and their routing.

    Created by :class:`~mme_triton.local.route.runtime.InvocationRuntime` when the endpoint goes in service;
    :meth:`invoke` answers one InvokeEndpoint request.

    Parameters:
        models: what the endpoint serves.
        new_instance: starts one instance of the variant, named by its id (``i-3``).
        workdir: the endpoint's scratch directory (each instance has one inside it).
        numbers: the numbers of the instances' ids, never reused within the endpoint.
        metrics: the variant's sink (one for every instance).
        seed: for the draws that break ties in placing a model.
        max_instances: the most instances it runs, whatever its count says (a Triton each on this
            machine): more are refused with a warning.
    """

    def __init__(
        self,
        models: EndpointModels,
        *,
        new_instance: Callable[[str], InstanceRuntime],
        workdir: Path,
        numbers: Iterator[int] | None = None,
        metrics: MetricsSink | None = None,
        seed: int | None = None,
        max_instances: int = DEFAULT_MAX_INSTANCES,
    ) -> None:
        self.models = models
        self.metrics: MetricsSink = metrics or NullMetricsSink()
        """Where the variant's CloudWatch metrics are recorded (:mod:`mme_triton.local.route.metrics`)."""
        self._new_instance = new_instance
        self._workdir = workdir
        self._numbers = numbers or itertools.count(1)
        self._instances: list[InstanceRuntime] = []  # replaced, never changed in place
        self._gone: list[InstanceRuntime] = []  # instances that left: their counters still count
        self._route_lock = threading.Lock()
        self._scale_lock = threading.Lock()
        self._draw = random.Random(seed).random
        self._successor: EndpointRuntime | None = None
        self._max_instances = max_instances
        self.model_data_url = models.model_data_url
        self.cache_disabled = models.model_cache == "Disabled"

    # -- instances ---------------------------------------------------------------------------------

    def start(self, count: int | None = None) -> EndpointRuntime:
        """Start the variant's instances (``count``, default the variant's), side by side; returns itself.

        Raises:
            LocalStackError: an instance could not start (those that did are stopped).
        """
        count = self._bounded(self.models.instance_count if count is None else count)
        if count < 1:
            raise LocalStackError(f"endpoint {self.endpoint_name}: {count} instances serve nothing")
        self._instances = self._start_instances(count)
        return self

    def _bounded(self, count: int) -> int:
        """``count``, at most ``max_instances`` (with a warning: each is a Triton on this machine)."""
        if count <= self._max_instances:
            return count
        message = (
            f"endpoint {self.endpoint_name}: its variant asks for {count} instances; the stack runs at most "
            f"{self._max_instances} (LocalStack(max_instances=), each is a Triton on this machine), so "
            f"{self._max_instances} serve it while DescribeEndpoint says {count}"
        )
        logger.warning("%s", message)
        warnings.warn(message, MMETritonWarning, stacklevel=3)
        return self._max_instances

    def _start_instances(self, count: int) -> list[InstanceRuntime]:
        names = [f"i-{next(self._numbers)}" for _ in range(count)]
        started: dict[str, InstanceRuntime] = {}
        failures: list[BaseException] = []

        def run(name: str) -> None:
            try:
                started[name] = self._new_instance(name)
            except BaseException as exc:  # reported below, after the others started or failed
                failures.append(exc)

        threads = [threading.Thread(target=run, args=(name,), name=f"start-{name}") for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            for instance in started.values():
                instance.close()
            raise failures[0]
        return [started[name] for name in names]

    @property
    def instances(self) -> list[InstanceRuntime]:
        """The instances requests are routed to, oldest first."""
        return list(self._instances)

    def instance(self, instance_id: str) -> InstanceRuntime | None:
        """The instance named ``instance_id`` (``i-1`` ...), ``None`` when the variant has none."""
        return next((i for i in self._instances if i.instance_id == instance_id), None)

    def scale_to(self, count: int) -> None:
        """Run ``count`` instances: new ones start cold and take requests once they answer; the newest ones
        leave the routing at once and stop once their requests have finished (in the background).

        Raises:
            LocalStackError: a new instance could not start (the count is unchanged).
        """
        if count < 1:
            raise LocalStackError(f"endpoint {self.endpoint_name}: {count} instances serve nothing")
        count = self._bounded(count)
        with self._scale_lock:
            current = len(self._instances)
            if count > current:
                added = self._start_instances(count - current)
                with self._route_lock:
                    self._instances = [*self._instances, *added]
                logger.info(
                    "endpoint %s: %d instances (%s started)",
                    self.endpoint_name,
                    count,
                    ", ".join(i.instance_id for i in added),
                )
            elif count < current:
                with self._route_lock:
                    gone = self._instances[count:]
                    for instance in gone:
                        instance.retire()
                    self._instances = self._instances[:count]
                for instance in gone:
                    self._stop_when_done(instance)
                logger.info(
                    "endpoint %s: %d instances (%s leaving once their requests finish)",
                    self.endpoint_name,
                    count,
                    ", ".join(i.instance_id for i in gone),
                )

    def retire(self, successor: EndpointRuntime) -> None:
        """The endpoint was updated: new requests go to ``successor``; the instances stop once their
        requests have finished (in the background)."""
        with self._route_lock:
            self._successor = successor
            gone, self._instances = self._instances, []
            for instance in gone:
                instance.retire()
        for instance in gone:
            self._stop_when_done(instance)

    def _stop_when_done(self, instance: InstanceRuntime) -> None:
        self._gone.append(instance)

        def stop() -> None:
            try:
                instance.close(drain_timeout=DRAIN_TIMEOUT)
            finally:
                self.metrics.instance_gone(instance.instance_id)

        name = f"retire-{self.endpoint_name}-{instance.instance_id}"
        threading.Thread(target=stop, name=name, daemon=True).start()

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop every instance (side by side), after ``drain_timeout`` seconds at most for their requests;
        those leaving the variant too (stopping one twice does nothing)."""
        with self._route_lock:
            instances, self._instances = self._instances, []
        self._gone.extend(instances)
        instances = list(self._gone)
        threads = [
            threading.Thread(
                target=instance.close,
                kwargs={"drain_timeout": drain_timeout},
                name=f"stop-{instance.instance_id}",
            )
            for instance in instances
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    # -- the request path --------------------------------------------------------------------------

    def invoke(self, target_model: str, body: bytes, content_type: str) -> RuntimeResponse:
        """Answer one InvokeEndpoint request for ``target_model`` on the instance routing chooses; record it
        in :attr:`metrics`."""
        call: dict[str, float] = {"started": time.monotonic()}
        chosen = self._route(target_model, call)
        if chosen is None:
            successor = self._successor
            if successor is not None:
                return successor.invoke(target_model, body, content_type)
            return service_unavailable(f"Endpoint {self.endpoint_name} has no instance in service. Retry.")
        instance, entry = chosen
        response = instance.invoke(target_model, body, content_type, call, entry)
        self.record(instance, target_model, response, call)
        return response

    def fast_path(self, target_model: str) -> FastPath | None:
        """Where to forward a request for ``target_model`` directly: the instance routing chooses, when it
        has the model loaded under its own name on a healthy server (one request is counted on it; the
        caller releases it with ``fast.instance.release``). ``None``: the request needs :meth:`invoke`."""
        instances = self._instances
        if len(instances) == 1:
            return instances[0].fast_path(target_model)
        if not instances:
            successor = self._successor
            return successor.fast_path(target_model) if successor is not None else None
        with self._route_lock:
            return self._choose(target_model, self._instances).fast_path(target_model)

    def record(
        self, instance: InstanceRuntime, target_model: str, response: RuntimeResponse, call: dict[str, float]
    ) -> None:
        """Record one answered request in :attr:`metrics` (and its execution time for routing)."""
        sent, answered = call.get("sent"), call.get("answered")
        if sent is not None and answered is not None:
            instance.observe(target_model, answered - sent)
        record_invocation(self.metrics, response, call, instances=max(1, len(self._instances)))

    def _route(self, target_model: str, call: dict[str, float]) -> tuple[InstanceRuntime, Entry] | None:
        """The instance routing chooses for one request, with the request counted on it; ``None`` when the
        variant has no instance (it was replaced)."""
        for _ in range(8):  # an instance chosen as it left the variant: choose again
            instances = self._instances
            if not instances:
                return None
            try:
                if len(instances) == 1:
                    return instances[0], instances[0].enter(target_model, call)
                with self._route_lock:
                    instance = self._choose(target_model, self._instances)
                    return instance, instance.enter(target_model, call)
            except InstanceRetiredError:
                continue
        return None

    def _choose(self, target_model: str, instances: list[InstanceRuntime]) -> InstanceRuntime:
        """:func:`mme_triton._multimodel.route`, then :func:`~mme_triton._multimodel.place` (caller holds the
        routing lock)."""
        holders: list[InstanceRuntime] = []
        waits: list[float] = []
        cold: float | None = None
        now = time.monotonic()
        for instance in instances:
            held = instance.holding(target_model)
            if held is None:
                continue
            loading, value = held
            if loading:
                cold = self._cold_start_s(target_model) if cold is None else cold
                value = max(0.0, value + cold - now)
            holders.append(instance)
            waits.append(value)
        if holders:
            if cold is None and min(waits) > SPILL_WAIT_S:
                cold = self._cold_start_s(target_model)
            chosen = route(waits, cold or 0.0, instances=len(instances))
            if chosen != SPILL:
                return holders[chosen]
        candidates = [i for i in instances if i not in holders] or list(instances)
        need = self._expected_memory(target_model, instances)
        rooms = [instance.room(need) for instance in candidates]
        if any(room.available for room in rooms) and not all(room.available for room in rooms):
            pairs = [(i, r) for i, r in zip(candidates, rooms, strict=True) if r.available]
            candidates, rooms = [i for i, _ in pairs], [r for _, r in pairs]
        index = place(
            [room.free for room in rooms],
            [room.fits for room in rooms],
            [room.idle_since for room in rooms],
            self._draw,
        )
        return candidates[index]

    def _cold_start_s(self, target_model: str) -> float:
        """The model's last cold start on any instance; :data:`DEFAULT_COLD_START_S` when it never loaded."""
        known = [s for s in (i.cold_start_s(target_model) for i in self._instances) if s is not None]
        return max(known) if known else DEFAULT_COLD_START_S

    def _expected_memory(self, target_model: str, instances: list[InstanceRuntime]) -> int:
        """What the model will hold: its last measure, else the median of the variant's models' measures."""
        known = [m for m in (i.known_memory(target_model) for i in instances) if m]
        if known:
            return max(known)
        return int(median([m for i in instances for m in i.typical_memory()]) or 0)

    # -- the variant as one --------------------------------------------------------------------------

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name."""
        return self.models.endpoint_name

    @property
    def workdir(self) -> Path:
        """The endpoint's scratch directory (each instance's is inside it, ``i-<n>/``)."""
        return self._workdir

    def _first(self) -> InstanceRuntime:
        instances = self._instances or self._gone
        if not instances:
            raise RuntimeError(f"endpoint {self.endpoint_name} has no instance")
        return instances[0]

    @property
    def triton(self) -> TritonLike:
        """The first instance's Triton server."""
        return self._first().triton

    @property
    def invoke_timeout(self) -> float:
        """Seconds a request may take in all, load wait and inference (SageMaker's 60 s)."""
        return self._first().invoke_timeout

    @property
    def memory_budget(self) -> int | None:
        """Bytes the models loaded on one instance may hold (``None``: no byte limit)."""
        return self._first().memory_budget

    def _all(self) -> list[InstanceRuntime]:
        return [*self._gone, *self._instances]

    @property
    def loads(self) -> int:
        """Model loads on the variant's instances, those that left included."""
        return sum(i.loads for i in self._all())

    @property
    def downloads(self) -> int:
        """Archives downloaded by the variant's instances."""
        return sum(i.downloads for i in self._all())

    @property
    def evictions(self) -> int:
        """Models unloaded to stay within an instance's memory budget."""
        return sum(i.evictions for i in self._all())

    @property
    def restarts(self) -> int:
        """Tritons started again after they exited."""
        return sum(i.restarts for i in self._all())

    @property
    def load_counts(self) -> Counter[str]:
        """How many times each TargetModel was loaded, over the instances."""
        total: Counter[str] = Counter()
        for instance in self._all():
            total.update(instance.load_counts)
        return total

    def loaded_models(self) -> list[str]:
        """The TargetModels loaded on any instance (each instance's least recently used first)."""
        return list(dict.fromkeys(m for i in self._instances for m in i.loaded_models()))

    def model_memory(self) -> dict[str, int]:
        """Bytes each loaded TargetModel counts against the budgets, over the instances holding it."""
        total: Counter[str] = Counter()
        for instance in self._instances:
            total.update(instance.model_memory())
        return dict(total)

    def volume_models(self) -> list[str]:
        """The TargetModels extracted on any instance's volume."""
        return list(dict.fromkeys(m for i in self._instances for m in i.volume_models()))

    def volume_usage(self) -> tuple[int, int]:
        """Bytes the models on the instances' volumes take, and the volumes' size, over the instances."""
        usages = [i.volume_usage() for i in self._instances]
        return sum(u for u, _ in usages), sum(c for _, c in usages)

    def load_timings(self) -> dict[str, LoadTimings]:
        """The parts of each TargetModel's last load (on the last instance that loaded it)."""
        timings: dict[str, LoadTimings] = {}
        for instance in self._instances:
            timings.update(instance.load_timings())
        return timings

    def unload_model(self, target_model: str, *, timeout: float | None = None) -> bool:
        """Unload a model from every instance holding it, as an eviction does; ``False`` when none did."""
        return any([i.unload_model(target_model, timeout=timeout) for i in self._instances])

    def wait_for_unloads(self, timeout: float | None = None) -> None:
        """Block until the unloads scheduled so far on every instance have finished."""
        for instance in self._instances:
            instance.wait_for_unloads(timeout=timeout)

    def wait_for_restart(self, timeout: float | None = None) -> None:
        """Block until the restarts under way (if any) have finished."""
        for instance in self._instances:
            instance.wait_for_restart(timeout=timeout)

    def models_in_s3(self, limit: int = 1000) -> list[str]:
        """The TargetModels under the ModelDataUrl in S3 (see
        :meth:`~mme_triton.local.route._cache.ModelCache.models_in_s3`)."""
        return self._first().models_in_s3(limit)
