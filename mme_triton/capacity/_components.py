"""Hosting as inference components: copies placed on instances, each model's requests shared by its copies.

SageMaker's other way to host many models on one endpoint ("Inference components", the SageMaker developer
guide): each model is a component that reserves memory, CPU cores and accelerators per copy, and runs as
many copies as its copy count; copies stay loaded (no cold start, no eviction: a component scaled to zero
has no copy, and its requests fail until one is placed again). The planner's model of it:

1. **Copies per model** (:func:`copies_for`): enough that each copy's executions keep its reserved
   processors (its cores, or its accelerators on a GPU type, and at most its model instances) at most
   ``copy_utilization`` busy on this traffic — what a target-tracking policy on
   ``SageMakerInferenceComponentInvocationsPerCopy`` holds; at least one (scaling to zero is not planned).
2. **Placing** (:func:`place`): every copy must fit one instance's memory, vCPUs and GPUs, less what the
   instance keeps for itself, by the rule the embedded stack places copies with
   (:mod:`mme_triton._inference_components`: ``SPREAD``, the fewest copies of the same component, then the
   most free memory). A copy that fits nowhere fails the plan, as SageMaker fails to place it.
3. **Serving**: a request goes to the copy of its model with the fewest requests outstanding (the
   endpoint's ``LEAST_OUTSTANDING_REQUESTS`` routing; ties drawn at random), or to a copy drawn at random
   (``RANDOM``); each copy is its own Triton — its model instances, dynamic batching, and its executions
   sharing its reserved processors only (:class:`~mme_triton.capacity._sharing.SharedProcessors`). The
   60 s answer bound holds as on a multi-model endpoint.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

from mme_triton._inference_components import ROUTING_STRATEGIES, Resources, instance_resources, place_copy
from mme_triton.capacity._engine import TIMED_OUT, EngineResult
from mme_triton.capacity._sharing import SharedProcessors
from mme_triton.capacity.profile import ModelProfile
from mme_triton.endpoint.instance_specs import InstanceType, MiB

__all__ = ["ROUTING", "Placement", "capacity_bytes", "copies_for", "place", "serve"]

ROUTING = ROUTING_STRATEGIES


def capacity_bytes(kind: InstanceType) -> int:
    """An instance's host memory for copies (:func:`mme_triton._inference_components.instance_resources`)."""
    return int(instance_resources(kind).memory_mb * MiB)


def copy_processors(profile: ModelProfile, kind: InstanceType) -> float:
    """What one copy's executions share: its reserved cores, or its GPUs on a GPU type."""
    return float(profile.component_accelerators) if kind.is_gpu else profile.component_cpus


def copies_for(profile: ModelProfile, rate: float, kind: InstanceType, copy_utilization: float) -> int:
    """Copies of a model that keep each at most ``copy_utilization`` busy at ``rate`` requests per second.

    Example:
        >>> m = ModelProfile("m", memory_bytes=2**30, cold_start_s=1, service_time_s=0.1)
        >>> from mme_triton.endpoint.instance_specs import instance_type
        >>> copies_for(m, 20.0, instance_type("ml.c5.xlarge"), 0.7)  # 2 CPU-seconds a second, 0.7 a copy
        3
    """
    usable = min(copy_processors(profile, kind), float(profile.instances))
    needed = rate * profile.service_time_s / (usable * copy_utilization)
    return max(1, math.ceil(needed - 1e-9))


@dataclass(frozen=True)
class Placement:
    """Where each copy runs: ``instance_of[model][copy]``; ``failure`` when some copy fits nowhere."""

    instance_of: dict[int, list[int]]
    memory_used: list[int]
    failure: str | None = None


def place(
    profiles: Sequence[ModelProfile], copies: Sequence[int], kind: InstanceType, instance_count: int
) -> Placement:
    """Place every copy on one of ``instance_count`` instances by the rule the embedded stack places them
    with (:func:`mme_triton._inference_components.place_copy`, ``SPREAD``), the components in the order of
    the profiles (the order ``deploy_inference_components`` creates them in); the first copy that fits
    nowhere is the failure."""
    offered = instance_resources(kind)
    free = [offered] * instance_count
    placed: dict[int, list[int]] = {m: [] for m in range(len(profiles))}
    unplaced = 0
    first: str | None = None
    for m, profile in enumerate(profiles):
        need = Resources(profile.component_memory / MiB, profile.component_cpus, _accelerators(profile, kind))
        same = [0] * instance_count
        for _ in range(copies[m]):
            chosen = place_copy(free, same, need)
            if chosen is None:
                unplaced += 1
                if first is None:
                    first = (
                        f"a copy of {profile.name} ({need.memory_mb:,.0f} MiB, {need.cores:g} cores"
                        + (f", {need.accelerators:g} GPU" if need.accelerators else "")
                        + ")"
                    )
                continue
            free[chosen] = free[chosen] - need
            same[chosen] += 1
            placed[m].append(chosen)
    failure = None
    if unplaced:
        failure = (
            f"{unplaced} of {sum(copies)} component copies fit no instance (first: {first}; an instance "
            f"offers {offered.memory_mb:,.0f} MiB, {offered.cores:g} vCPUs"
            + (f", {offered.accelerators:g} GPUs" if kind.is_gpu else "")
            + ")"
        )
    used = [round((offered.memory_mb - room.memory_mb) * MiB) for room in free]
    return Placement(placed, used, failure)


def _accelerators(profile: ModelProfile, kind: InstanceType) -> int:
    return profile.component_accelerators if kind.is_gpu else 0


class _Copy:
    __slots__ = ("cpu", "idle", "instance", "inuse", "queue")

    def __init__(self, processors: float, servers: int, instance: int) -> None:
        self.cpu = SharedProcessors(processors)
        self.idle = servers
        self.inuse = 0
        self.queue: deque[int] = deque()
        self.instance = instance


def serve(
    times: Sequence[float],
    targets: Sequence[int],
    profiles: Sequence[ModelProfile],
    placement: Placement,
    kind: InstanceType,
    *,
    routing: str,
    timeout: float,
    seed: int,
) -> tuple[EngineResult, list[float]]:
    """Serve the requests (times sorted; ``targets`` index ``profiles``) with the placed copies; the
    result, and each copy's work in seconds (in the order of the placement)."""
    n = len(times)
    out = EngineResult([0.0] * n, [0.0] * n, bytearray(b"\x01" * n), bytearray(n), bytearray(n))
    latency, error = out.latency, out.error
    copies = {
        m: [_Copy(copy_processors(profiles[m], kind), profiles[m].instances, i) for i in where]
        for m, where in placement.instance_of.items()
    }
    flat = [copy for m in sorted(copies) for copy in copies[m]]
    index = {id(copy): k for k, copy in enumerate(flat)}
    heap: list[tuple[float, int, int, int]] = []
    seq = count()
    rnd = random.Random(seed).random
    least = routing == "LEAST_OUTSTANDING_REQUESTS"

    def start(copy: _Copy, m: int) -> None:
        profile = profiles[m]
        while copy.queue and copy.idle > 0:
            size = min(len(copy.queue), profile.max_batch_size)
            members = [copy.queue.popleft() for _ in range(size)]
            copy.idle -= 1
            copy.cpu.start(profile.batch_time_s(size), (m, members))

    def reschedule(copy: _Copy, t: float) -> None:
        end = copy.cpu.next_end(t)
        if end is not None:
            heapq.heappush(heap, (end, next(seq), index[id(copy)], copy.cpu.version))

    def finish(copy: _Copy, t: float) -> None:
        copy.cpu.advance(t)
        for m, members in list(copy.cpu.ended()):
            copy.idle += 1
            copy.inuse -= len(members)
            for r in members:
                took = t - times[r]
                if took > timeout:
                    error[r], latency[r] = TIMED_OUT, timeout
                else:
                    latency[r] = took
            start(copy, m)
        reschedule(copy, t)

    for r in range(n):
        t, m = times[r], targets[r]
        while heap and heap[0][0] <= t:
            at, _, k, version = heapq.heappop(heap)
            if flat[k].cpu.version == version:
                finish(flat[k], at)
        held = copies[m]
        if least:
            fewest = min(copy.inuse for copy in held)
            ties = [copy for copy in held if copy.inuse == fewest]
            copy = ties[int(rnd() * len(ties))] if len(ties) > 1 else ties[0]
        else:
            copy = held[int(rnd() * len(held))] if len(held) > 1 else held[0]
        out.instance[r] = copy.instance
        copy.queue.append(r)
        copy.inuse += 1
        if copy.idle > 0:
            copy.cpu.advance(t)
            start(copy, m)
            reschedule(copy, t)
    while heap:
        at, _, k, version = heapq.heappop(heap)
        if flat[k].cpu.version == version:
            finish(flat[k], at)
    busy = [0.0] * len(placement.memory_used)
    for copy in flat:
        busy[copy.instance] += copy.cpu.work
    out.busy_s = busy
    out.peak_bytes = list(placement.memory_used)
    out.peak_models = [sum(1 for copy in flat if copy.instance == i) for i in range(len(busy))]
    return out, [copy.cpu.work for copy in flat]
