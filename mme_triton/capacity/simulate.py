"""One plan simulated: a traffic served by ``instance_count`` instances of one type.

:func:`simulate` runs the discrete-event model of docs/capacity.md (:mod:`mme_triton.capacity._engine`)
and returns a :class:`SimulationResult`: what happened to every request, and the figures an endpoint's
CloudWatch metrics give for the same period (:meth:`SimulationResult.summary`, with the keys of
``EndpointMetrics.summary()``), so a prediction and a measurement compare key by key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS, MODEL_LOAD_TIMEOUT_SECONDS
from mme_triton._stats import percentile
from mme_triton.capacity._engine import ERROR_NAMES, NO_CAPACITY, TOO_LARGE, ModelTable, run
from mme_triton.capacity.profile import ModelProfile, expand
from mme_triton.capacity.traffic import Traffic
from mme_triton.endpoint.instance_specs import InstanceType
from mme_triton.endpoint.instance_specs import instance_type as as_instance_type

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SimulationResult", "simulate"]

logger = logging.getLogger(__name__)

HOSTINGS = ("mme", "inference-components")
"""How the models are hosted: a multi-model endpoint, or one inference component each."""
DEFAULT_COPY_UTILIZATION = 0.7
"""Inference components: how busy the planner keeps each copy's reserved processors when it decides the
copy counts (what a target-tracking policy on InvocationsPerCopy would hold)."""

MAX_INSTANCES = 255
"""The most instances one simulation takes (an endpoint variant's instance count is far below)."""


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """What the simulation gives for one instance type and count.

    Attributes:
        instance_type: the type simulated.
        instance_count: its instances.
        duration_s: seconds of traffic.
        latency_s: per request, seconds until its answer (load wait, queue and execution; an error is
            answered after 60 s, a request for a model larger than the instance at once, with 0).
        load_wait_s: per request, seconds it waited for its model's load (0 for a hit).
        hit: per request, whether its model was loaded on the instance it reached (``ModelCacheHit``).
        error: per request, 0 or the error's code (see :attr:`errors`).
        instance: per request, the instance that served it.
        loads: loads started (``ModelLoadingTime`` SampleCount).
        downloads: downloads from S3 (``ModelDownloadingTime`` SampleCount): the first load of a model on
            an instance whose profile has a ``reload_s`` below its ``cold_start_s``.
        unloads: models unloaded to make room (``ModelUnloadingTime`` SampleCount).
        failed_loads: loads past the 360 s limit.
        peak_bytes: per instance, the most memory its models held at once.
        peak_models: per instance, the most models it held (loaded or loading) at once.
        busy_s: per instance, seconds of work its executions brought (at full speed, summed over model
            instances).
        elapsed_s: seconds the simulation itself took.
        hosting: ``"mme"`` (a multi-model endpoint) or ``"inference-components"``.
        copies: hosted as inference components, each profile's copies by TargetModel (else ``None``).
        copy_busy: hosted as inference components, the busiest copy's work over its reserved processors'
            capacity in the traffic's duration.
        placement_failure: hosted as inference components, why some copies fit no instance (else
            ``None``).
    """

    instance_type: InstanceType
    instance_count: int
    duration_s: float
    latency_s: npt.NDArray[np.float64] = field(repr=False)
    load_wait_s: npt.NDArray[np.float64] = field(repr=False)
    hit: npt.NDArray[np.bool_] = field(repr=False)
    error: npt.NDArray[np.uint8] = field(repr=False)
    instance: npt.NDArray[np.uint8] = field(repr=False)
    loads: int
    downloads: int
    unloads: int
    failed_loads: int
    peak_bytes: tuple[int, ...]
    peak_models: tuple[int, ...]
    busy_s: tuple[float, ...]
    elapsed_s: float
    hosting: str = "mme"
    copies: dict[str, int] | None = field(default=None, repr=False)
    copy_busy: float | None = None
    placement_failure: str | None = None

    @property
    def processors(self) -> int:
        """Processors per instance its executions share (:attr:`InstanceType.processors`)."""
        return self.instance_type.processors

    @property
    def processor_utilization(self) -> float:
        """The busiest instance's work over what its processors can do in the traffic's duration (hosted as
        inference components: the busiest copy's, over its reserved processors): above 1.0 the executions
        need more than there is, and queue without end."""
        if self.copy_busy is not None:
            return self.copy_busy
        if self.duration_s <= 0:
            return 0.0
        return max(self.busy_s, default=0.0) / (self.processors * self.duration_s)

    @property
    def requests(self) -> int:
        """Requests simulated (``Invocations``)."""
        return int(self.hit.shape[0])

    @property
    def hits(self) -> int:
        """Requests whose model was loaded where they arrived."""
        return int(self.hit.sum())

    @property
    def misses(self) -> int:
        """Requests whose model was not loaded where they arrived (a first request included)."""
        return self.requests - self.hits

    @property
    def hit_ratio(self) -> float:
        """``hits / requests`` (``ModelCacheHit`` Average); 1.0 without requests."""
        return self.hits / self.requests if self.requests else 1.0

    @property
    def errors(self) -> dict[str, int]:
        """Requests that failed, by cause: ``not_ready`` (``ModelNotReadyException``: the load took over
        60 s, or never started), ``timed_out`` (answered after 60 s), ``too_large`` (the model is larger
        than an instance's memory for models), ``no_capacity`` (inference components: no copy of the model
        could be placed)."""
        import numpy as np

        counts = np.bincount(self.error, minlength=len(ERROR_NAMES) + 1)
        return {name: int(counts[code]) for code, name in ERROR_NAMES.items()}

    @property
    def failed(self) -> int:
        """Requests that failed, all causes."""
        return int((self.error != 0).sum())

    def _waits(self) -> npt.NDArray[np.float64]:
        waited: npt.NDArray[np.float64] = self.load_wait_s[(~self.hit) & (self.error != TOO_LARGE)]
        return waited

    def latency_percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the requests' latency, in seconds, nearest-rank as
        perf_analyzer takes it (:mod:`mme_triton._stats`): requests for a model larger than an instance's
        memory are left out (they never reach a model); 0.0 without requests."""
        served = self.latency_s[self.error != TOO_LARGE]
        return percentile(served, q) if served.size else 0.0

    def load_wait_stats(self) -> dict[str, float]:
        """Mean, p99 and max of the load waits of the requests that missed (``ModelLoadingWaitTime``)."""
        waits = self._waits()
        if not waits.size:
            return {"mean": 0.0, "p99": 0.0, "max": 0.0}
        return {"mean": float(waits.mean()), "p99": percentile(waits, 99), "max": float(waits.max())}

    def summary(self) -> dict[str, Any]:
        """The figures with the keys of ``EndpointMetrics.summary()`` (CloudWatch's view of a variant)
        and a few more; every error the simulation knows is a 4xx on InvokeEndpoint."""
        waits = self.load_wait_stats()
        return {
            "invocations": self.requests,
            "cache_hit_ratio": self.hit_ratio,
            "loads": self.loads,
            "unloads": self.unloads,
            "load_wait_mean_s": waits["mean"],
            "load_wait_max_s": waits["max"],
            "load_wait_p99_s": waits["p99"],
            "errors_4xx": self.failed,
            "errors_5xx": 0,
            "p50_s": self.latency_percentile(50),
            "p99_s": self.latency_percentile(99),
            "loaded_models_max": max(self.peak_models, default=0),
        }


def _table(profiles: dict[str, ModelProfile], names: Sequence[str]) -> ModelTable:
    missing = [name for name in names if name not in profiles]
    if missing:
        shown = ", ".join(repr(name) for name in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(
            f"the traffic names models without a profile: {shown}{more} "
            f"(the profiles name {len(profiles)} models, e.g. {next(iter(profiles))!r})"
        )
    chosen = [profiles[name] for name in names]
    return ModelTable(
        memory=[p.memory_bytes for p in chosen],
        cold=[p.cold_start_s for p in chosen],
        reload=[p.reload_time_s for p in chosen],
        unload=[p.unload_s for p in chosen],
        service=[p.service_time_s for p in chosen],
        servers=[p.instances for p in chosen],
        max_batch=[p.max_batch_size for p in chosen],
        batch_item=[p.batch_item_s for p in chosen],
    )


def _profiles(models: Sequence[ModelProfile] | ModelProfile) -> dict[str, ModelProfile]:
    given: object = models
    if isinstance(given, ModelProfile):
        given = [given]
    if not isinstance(given, (list, tuple)):
        raise TypeError(f"models must be ModelProfile objects, got {type(models).__name__}")
    if not given:
        raise ValueError("no model profile given")
    return expand(list(given))


def simulate(
    models: Sequence[ModelProfile] | ModelProfile,
    traffic: Traffic,
    instance_type: str | InstanceType,
    instance_count: int = 1,
    *,
    seed: int = 0,
    hosting: str = "mme",
    routing: str = "LEAST_OUTSTANDING_REQUESTS",
    copy_utilization: float = DEFAULT_COPY_UTILIZATION,
    copies: Mapping[str, int] | None = None,
) -> SimulationResult:
    """Serve ``traffic`` with ``instance_count`` instances of ``instance_type`` and say what happens.

    ``hosting="mme"``: a multi-model endpoint (docs/capacity.md, "The model of an instance").
    ``hosting="inference-components"``: each profile's models as inference components, as many copies as
    keep each at most ``copy_utilization`` busy (or ``copies``, by TargetModel), placed on the instances,
    requests routed among a model's copies as ``routing`` says (:mod:`mme_triton.capacity._components`).
    The same arguments give the same result (``seed`` drives the few random choices of routing).

    Raises:
        ValueError: the traffic names a model no profile names, an unknown instance type, an instance
            count below 1 (or above 255).
        TypeError: models that are not ModelProfile objects, traffic that is not a Traffic.

    Example:
        >>> model = ModelProfile("m.tar.gz", memory_bytes=2**30, cold_start_s=2.0, service_time_s=0.01)
        >>> traffic = Traffic.trace([(0.0, "m.tar.gz"), (5.0, "m.tar.gz"), (6.0, "m.tar.gz")])
        >>> result = simulate([model], traffic, "ml.m5.xlarge")
        >>> result.hits, result.loads, round(result.latency_percentile(0), 3)
        (2, 1, 0.01)
    """
    if not isinstance(traffic, Traffic):
        raise TypeError(
            f"traffic must be a Traffic (Traffic.zipf, .uniform, .trace), got {type(traffic).__name__}"
        )
    kind = as_instance_type(instance_type)
    if isinstance(instance_count, bool) or not isinstance(instance_count, int) or instance_count < 1:
        raise ValueError(f"instance_count must be an integer >= 1, got {instance_count!r}")
    if instance_count > MAX_INSTANCES:
        raise ValueError(f"instance_count is at most {MAX_INSTANCES}, got {instance_count}")
    if hosting not in HOSTINGS:
        raise ValueError(f"hosting is one of {', '.join(HOSTINGS)}, got {hosting!r}")
    by_name = _profiles(models)
    table = _table(by_name, traffic.names)
    if hosting == "inference-components":
        return _components_result(
            by_name, traffic, kind, instance_count, seed, routing, copy_utilization, copies
        )
    started = time.perf_counter()
    raw = run(
        traffic.times.tolist(),
        traffic.targets.tolist(),
        table,
        budget=kind.memory_budget_bytes,
        instances=instance_count,
        seed=seed,
        timeout=INVOCATION_TIMEOUT_SECONDS,
        load_limit=MODEL_LOAD_TIMEOUT_SECONDS,
        processors=kind.processors,
    )
    import numpy as np

    elapsed = time.perf_counter() - started
    logger.debug(
        "simulated %d requests on %d x %s in %.2f s", len(traffic), instance_count, kind.name, elapsed
    )
    return SimulationResult(
        instance_type=kind,
        instance_count=instance_count,
        duration_s=traffic.duration,
        latency_s=np.asarray(raw.latency, dtype=np.float64),
        load_wait_s=np.asarray(raw.load_wait, dtype=np.float64),
        hit=np.frombuffer(bytes(raw.hit), dtype=np.uint8).astype(bool),
        error=np.frombuffer(bytes(raw.error), dtype=np.uint8).copy(),
        instance=np.frombuffer(bytes(raw.instance), dtype=np.uint8).copy(),
        loads=raw.loads,
        downloads=raw.downloads,
        unloads=raw.unloads,
        failed_loads=raw.failed_loads,
        peak_bytes=tuple(raw.peak_bytes),
        peak_models=tuple(raw.peak_models),
        busy_s=tuple(raw.busy_s),
        elapsed_s=elapsed,
    )


def _components_result(
    by_name: dict[str, ModelProfile],
    traffic: Traffic,
    kind: InstanceType,
    instance_count: int,
    seed: int,
    routing: str,
    copy_utilization: float,
    given: Mapping[str, int] | None,
) -> SimulationResult:
    import numpy as np

    from mme_triton.capacity import _components

    if routing not in _components.ROUTING:
        raise ValueError(f"routing is one of {', '.join(_components.ROUTING)}, got {routing!r}")
    if not 0 < copy_utilization <= 1:
        raise ValueError(f"copy_utilization is a fraction in (0, 1], got {copy_utilization!r}")
    started = time.perf_counter()
    profiles = [by_name[name] for name in traffic.names]
    counts = np.bincount(traffic.targets, minlength=len(profiles))
    duration = max(traffic.duration, 1e-9)
    copies = [
        given[name]
        if given is not None and name in given
        else _components.copies_for(profile, float(counts[m]) / duration, kind, copy_utilization)
        for m, (name, profile) in enumerate(zip(traffic.names, profiles, strict=True))
    ]
    placement = _components.place(profiles, copies, kind, instance_count)
    times, targets = traffic.times.tolist(), traffic.targets.tolist()
    placed = [len(placement.instance_of[m]) for m in range(len(profiles))]
    served = [r for r in range(len(times)) if placed[targets[r]]]
    raw, work = _components.serve(
        [times[r] for r in served], [targets[r] for r in served], profiles, placement, kind,
        routing=routing, timeout=INVOCATION_TIMEOUT_SECONDS, seed=seed,
    )  # fmt: skip
    n = len(times)
    latency = np.full(n, float(INVOCATION_TIMEOUT_SECONDS))
    error = np.full(n, NO_CAPACITY, dtype=np.uint8)  # a model none of whose copies could be placed
    instance = np.zeros(n, dtype=np.uint8)
    chosen = np.asarray(served, dtype=np.int64)
    latency[chosen] = raw.latency
    error[chosen] = np.frombuffer(bytes(raw.error), dtype=np.uint8)
    instance[chosen] = np.frombuffer(bytes(raw.instance), dtype=np.uint8)
    reserved = [
        _components.copy_processors(profiles[m], kind) for m in sorted(placement.instance_of) for _ in
        placement.instance_of[m]
    ]  # fmt: skip
    busiest = max((w / (p * duration) for w, p in zip(work, reserved, strict=True)), default=0.0)
    return SimulationResult(
        instance_type=kind,
        instance_count=instance_count,
        duration_s=traffic.duration,
        latency_s=latency,
        load_wait_s=np.zeros(n),
        hit=error != NO_CAPACITY,  # a request finds a copy of its model loaded, or no copy at all
        error=error,
        instance=instance,
        loads=0,
        downloads=0,
        unloads=0,
        failed_loads=0,
        peak_bytes=tuple(raw.peak_bytes),
        peak_models=tuple(raw.peak_models),
        busy_s=tuple(raw.busy_s),
        elapsed_s=time.perf_counter() - started,
        hosting="inference-components",
        copies={name: copies[m] for m, name in enumerate(traffic.names)},
        copy_busy=busiest,
        placement_failure=placement.failure,
    )
