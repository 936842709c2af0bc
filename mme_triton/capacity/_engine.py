"""The discrete-event simulation of a multi-model endpoint's instances (docs/capacity.md states the model).

Requests are taken in arrival order; events on the heap are what no arrival decides: a load, a download or
an unload ending, and an execution ending. A request to a loaded model joins the model's queue on its
instance; each model instance (Triton's ``instance_group`` count) runs one execution at a time, taking every
queued request up to ``max_batch_size`` when it is free (Triton's dynamic batcher, no queue delay).

**Processors.** The executions running on an instance share its processors (vCPUs, or GPUs on a GPU
type): each execution uses at most one, and ``n`` executions on ``P`` processors each run at
``min(1, P / n)`` of full speed (:class:`~mme_triton.capacity._sharing.SharedProcessors`); only the next
end of an instance's executions is on the heap.

A model is *in use* on an instance while a request for it is queued or executing there, and for
:data:`~mme_triton._multimodel.IDLE_AFTER_S` after the last one ended; only models not in use are
unloaded, least recently used first, when a load needs their memory. Routing, placement, what is unused and
when a load gets room follow :mod:`mme_triton._multimodel`, the rules the embedded stack follows too. Plain
Python lists and dicts on purpose: per request this is a few dict look-ups, which beats numpy's per-call
overhead on scalars. Only the standard library is imported.
"""

from __future__ import annotations

import heapq
import random
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count

from mme_triton._multimodel import IDLE_AFTER_S, SPILL
from mme_triton._multimodel import place as place_on
from mme_triton._multimodel import route as route_to
from mme_triton.capacity._sharing import SharedProcessors

__all__ = ["ERROR_NAMES", "EngineResult", "ModelTable", "run"]

ABSENT, PENDING, LOADING, LOADED, DOWNLOADING = 0, 1, 2, 3, 4
OK, NOT_READY, TIMED_OUT, TOO_LARGE, NO_CAPACITY = 0, 1, 2, 3, 4
ERROR_NAMES = {
    NOT_READY: "not_ready",
    TIMED_OUT: "timed_out",
    TOO_LARGE: "too_large",
    NO_CAPACITY: "no_capacity",
}
_LOAD_DONE, _UNLOAD_DONE, _EXEC_DONE, _LOAD_FAILED, _DOWNLOAD_DONE, _RETRY = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class ModelTable:
    """Per model (indexed as the traffic's names): what the simulation needs of its profile."""

    memory: Sequence[int]
    cold: Sequence[float]
    reload: Sequence[float]
    unload: Sequence[float]
    service: Sequence[float]
    servers: Sequence[int]
    max_batch: Sequence[int]
    batch_item: Sequence[float]


@dataclass
class EngineResult:
    """What happened, per request and per instance."""

    latency: list[float]
    load_wait: list[float]
    hit: bytearray
    error: bytearray
    instance: bytearray
    loads: int = 0
    downloads: int = 0
    unloads: int = 0
    failed_loads: int = 0
    peak_bytes: list[int] = field(default_factory=list)
    peak_models: list[int] = field(default_factory=list)
    busy_s: list[float] = field(default_factory=list)
    """Per instance, the seconds of work its executions brought (at full speed, summed)."""


class _Instance:
    __slots__ = (
        "after_unload",
        "cpu",
        "disk",
        "ended",
        "holding",
        "idle",
        "index",
        "inuse",
        "last",
        "load_end",
        "lru",
        "peak",
        "peak_models",
        "pending",
        "pending_bytes",
        "queue",
        "reserved",
        "reserved_bytes",
        "retry_at",
        "state",
        "unloading",
        "unloading_bytes",
        "used",
        "waiters",
    )

    def __init__(self, index: int, processors: float) -> None:
        self.index = index
        self.state: dict[int, int] = {}
        self.queue: dict[int, deque[int]] = {}  # model -> requests waiting for a free model instance
        self.idle: dict[int, int] = {}  # model -> model instances not executing
        self.inuse: dict[int, int] = {}  # model -> requests queued or executing
        self.ended: dict[int, float] = {}  # model -> when its last request ended
        self.last: dict[int, float] = {}  # model -> last use
        self.lru: OrderedDict[int, None] = OrderedDict()  # loaded models, least recently used first
        self.waiters: dict[int, list[int]] = {}  # model being loaded -> requests waiting for it
        self.load_end: dict[int, float] = {}
        self.disk: set[int] = set()  # unloaded models kept on the volume
        self.pending: deque[int] = deque()  # loads waiting for memory, first come first served
        self.pending_bytes = 0
        self.reserved: OrderedDict[int, None] = OrderedDict()  # loads whose room waits for unloads to end
        self.reserved_bytes = 0
        self.after_unload: set[int] = set()  # loads waiting for their model's own unload to end
        self.retry_at: float | None = None
        self.unloading: dict[int, int] = {}
        self.unloading_bytes = 0
        self.used = 0
        self.peak = 0
        self.holding = 0
        self.peak_models = 0
        self.cpu = SharedProcessors(processors)  # its executions: (model, requests) each


def run(
    times: Sequence[float],
    targets: Sequence[int],
    models: ModelTable,
    *,
    budget: int,
    instances: int,
    seed: int,
    timeout: float,
    load_limit: float,
    processors: int = 1_000_000,
) -> EngineResult:
    """Simulate ``instances`` instances of ``budget`` bytes and ``processors`` processors each serving the
    requests (times sorted).

    A request goes to an instance that holds its model; when the wait there would be longer than the
    model's cold start and :data:`~mme_triton._multimodel.SPILL_WAIT_S`, to another instance, which loads
    it too (:func:`mme_triton._multimodel.route`).
    """
    n = len(times)
    mem, cold, reload_, unload_s = models.memory, models.cold, models.reload, models.unload
    svc, servers, max_batch, item = models.service, models.servers, models.max_batch, models.batch_item
    out = EngineResult([0.0] * n, [0.0] * n, bytearray(n), bytearray(n), bytearray(n))
    latency, load_wait, error = out.latency, out.load_wait, out.error
    insts = [_Instance(i, processors) for i in range(instances)]
    holders: dict[int, list[int]] = {}
    heap: list[tuple[float, int, int, int, int]] = []
    seq = count()
    rnd = random.Random(seed).random
    push = heapq.heappush

    # -- executions on shared processors -------------------------------------------------------------

    def reschedule(inst: _Instance, t: float) -> None:
        end = inst.cpu.next_end(t)
        if end is not None:
            push(heap, (end, next(seq), _EXEC_DONE, inst.index, inst.cpu.version))

    def start(inst: _Instance, m: int) -> None:
        """Start executions of ``m`` while a model instance is idle and requests wait (caller reschedules)."""
        queue = inst.queue[m]
        while queue and inst.idle[m] > 0:
            size = min(len(queue), max_batch[m])
            members = [queue.popleft() for _ in range(size)]
            inst.idle[m] -= 1
            inst.cpu.start(svc[m] + (size - 1) * item[m], (m, members))

    def serve(inst: _Instance, m: int, requests: list[int], t: float) -> None:
        """Queue ``requests`` for the loaded model ``m`` and start what can start."""
        inst.queue[m].extend(requests)
        inst.inuse[m] += len(requests)
        if inst.idle[m] > 0:
            inst.cpu.advance(t)
            start(inst, m)
            reschedule(inst, t)

    def finish(inst: _Instance, t: float) -> None:
        inst.cpu.advance(t)
        freed = False
        for m, members in list(inst.cpu.ended()):
            inst.idle[m] += 1
            for r in members:
                took = t - times[r]
                if took > timeout:
                    error[r] = TIMED_OUT
                    latency[r] = timeout
                else:
                    latency[r] = took
            inst.inuse[m] -= len(members)
            inst.ended[m] = t
            start(inst, m)
            if inst.inuse[m] == 0:
                freed = True
        reschedule(inst, t)
        if freed and inst.pending:  # a model becomes unused soon: a waiting load may evict it then
            soon = t + IDLE_AFTER_S
            if inst.retry_at is None or soon < inst.retry_at:
                inst.retry_at = soon
                push(heap, (soon, next(seq), _RETRY, inst.index, -1))

    # -- memory: loads, unloads ----------------------------------------------------------------------

    def unload(inst: _Instance, v: int, t: float) -> None:
        del inst.lru[v]
        del inst.state[v]
        holders[v].remove(inst.index)
        inst.disk.add(v)
        inst.holding -= 1
        out.unloads += 1
        if unload_s[v] > 0:
            inst.unloading[v] = mem[v]
            inst.unloading_bytes += mem[v]
            push(heap, (t + unload_s[v], next(seq), _UNLOAD_DONE, inst.index, v))
        else:
            inst.used -= mem[v]

    def is_unused(inst: _Instance, v: int, t: float) -> bool:
        return not inst.inuse[v] and inst.ended.get(v, -IDLE_AFTER_S) + IDLE_AFTER_S <= t

    def evict(inst: _Instance, shortfall: int, t: float) -> bool:
        """Unload unused models, least recently used first, to free ``shortfall`` bytes; all or nothing."""
        victims = []
        freed = 0
        for v in inst.lru:
            if is_unused(inst, v, t):
                victims.append(v)
                freed += mem[v]
                if freed >= shortfall:
                    break
        if freed < shortfall:
            return False
        for v in victims:
            unload(inst, v, t)
        return True

    def schedule_retry(inst: _Instance, t: float) -> None:
        """Retry waiting loads when the next loaded model becomes unused (a model in use retries when its
        last request ends; loads and unloads that end retry by themselves)."""
        soonest = min(
            (
                inst.ended[v] + IDLE_AFTER_S
                for v in inst.lru
                if not inst.inuse[v] and inst.ended.get(v, -IDLE_AFTER_S) + IDLE_AFTER_S > t
            ),
            default=None,
        )
        if soonest is not None and (inst.retry_at is None or soonest < inst.retry_at):
            inst.retry_at = soonest
            push(heap, (soonest, next(seq), _RETRY, inst.index, -1))

    def begin_load(inst: _Instance, m: int, t: float) -> None:
        inst.used += mem[m]
        inst.holding += 1
        inst.peak = max(inst.peak, inst.used)
        inst.peak_models = max(inst.peak_models, inst.holding)
        inst.state[m] = LOADING
        out.loads += 1
        took = reload_[m] if m in inst.disk else cold[m]
        if m not in inst.queue:
            inst.queue[m] = deque()
            inst.idle[m] = servers[m]
            inst.inuse[m] = 0
        if took > load_limit:
            push(heap, (t + load_limit, next(seq), _LOAD_FAILED, inst.index, m))
            inst.load_end[m] = t + load_limit
        else:
            push(heap, (t + took, next(seq), _LOAD_DONE, inst.index, m))
            inst.load_end[m] = t + took

    def process_pending(inst: _Instance, t: float) -> None:
        """Start the loads whose room is held once the instance holds them (their unloads ended), then give
        room to the waiting loads in turn: a load that fits starts, one that fits once unused models are
        unloaded holds its room, one that does not fit yet stops the queue."""
        reserved = inst.reserved
        for m in list(reserved):
            if budget - inst.used >= mem[m]:
                del reserved[m]
                inst.reserved_bytes -= mem[m]
                begin_load(inst, m, t)
        pending = inst.pending
        while pending:
            m = pending[0]
            need = mem[m]
            # as if the unloads under way had ended: they free their room
            free = budget - (inst.used - inst.unloading_bytes) - inst.reserved_bytes
            if free < need and not evict(inst, need - free, t):
                schedule_retry(inst, t)
                break
            pending.popleft()
            inst.pending_bytes -= need
            if budget - inst.used >= need:
                begin_load(inst, m, t)
            else:  # its room is held; it starts when the unloads that free it end
                reserved[m] = None
                inst.reserved_bytes += need

    def request_load(inst: _Instance, m: int, t: float) -> None:
        inst.waiters[m] = []
        holders.setdefault(m, []).append(inst.index)
        if m in inst.unloading:  # its earlier copy is still unloading: the load asks for room after it
            inst.state[m] = PENDING
            inst.after_unload.add(m)
            return
        download = cold[m] - reload_[m]
        if m not in inst.disk and download > 0 and cold[m] <= load_limit:
            # the download to the volume holds no memory for models; the load after it does
            inst.state[m] = DOWNLOADING
            inst.load_end[m] = t + cold[m]
            out.downloads += 1
            push(heap, (t + download, next(seq), _DOWNLOAD_DONE, inst.index, m))
            return
        queue_load(inst, m, t)

    def queue_load(inst: _Instance, m: int, t: float) -> None:
        inst.state[m] = PENDING
        inst.pending.append(m)
        inst.pending_bytes += mem[m]
        process_pending(inst, t)

    def drop(inst: _Instance, m: int, t: float) -> None:
        """A load that failed: its memory back, its waiters answered ModelNotReadyException."""
        del inst.state[m]
        holders[m].remove(inst.index)
        inst.used -= mem[m]
        inst.holding -= 1
        out.failed_loads += 1
        for r in inst.waiters.pop(m):
            error[r] = NOT_READY
            latency[r] = load_wait[r] = min(timeout, t - times[r])

    def handle(t: float, kind: int, i: int, m: int) -> None:
        inst = insts[i]
        if kind == _EXEC_DONE:
            if m == inst.cpu.version:
                finish(inst, t)
            return
        if kind == _LOAD_DONE:
            inst.state[m] = LOADED
            inst.lru[m] = None
            inst.last[m] = t
            ready = []
            for r in inst.waiters.pop(m):
                waited = t - times[r]
                if waited > timeout:
                    error[r] = NOT_READY
                    latency[r] = load_wait[r] = timeout
                else:
                    load_wait[r] = waited
                    ready.append(r)
            if ready:
                serve(inst, m, ready, t)
        elif kind == _UNLOAD_DONE:
            inst.used -= inst.unloading.pop(m)
            inst.unloading_bytes -= mem[m]
            if m in inst.after_unload:
                inst.after_unload.discard(m)
                queue_load(inst, m, t)
                return
        elif kind == _DOWNLOAD_DONE:
            inst.disk.add(m)
            queue_load(inst, m, t)
            return
        elif kind == _LOAD_FAILED:
            drop(inst, m, t)
        elif kind == _RETRY:
            if inst.retry_at != t:
                return  # superseded by an earlier retry
            inst.retry_at = None
        if inst.pending or inst.reserved:
            process_pending(inst, t)

    # -- routing ---------------------------------------------------------------------------------------

    def idle_since(inst: _Instance, t: float) -> float | None:
        for v in inst.lru:
            if is_unused(inst, v, t):
                return inst.last[v]
        return None

    def place(m: int, t: float, exclude: list[int]) -> _Instance:
        """Where a model no instance (or no instance at hand) holds is loaded
        (:func:`mme_triton._multimodel.place`)."""
        need = mem[m]
        candidates = [inst for inst in insts if inst.index not in exclude]
        free = [budget - c.used - c.pending_bytes - c.reserved_bytes for c in candidates]
        chosen = place_on(free, [room >= need for room in free], [idle_since(c, t) for c in candidates], rnd)
        return candidates[chosen]

    def expected_wait(inst: _Instance, m: int, t: float) -> float:
        state = inst.state[m]
        if state == LOADED:
            ahead = inst.inuse[m] - servers[m] + 1
            if ahead <= 0:
                return 0.0
            slowdown = max(1.0, inst.cpu.running / processors)
            return ahead / servers[m] * svc[m] * slowdown
        if state in (LOADING, DOWNLOADING):
            return inst.load_end[m] - t
        return cold[m]

    def route(m: int, t: float) -> _Instance:
        """Where a request goes (:func:`mme_triton._multimodel.route`)."""
        held = holders.get(m)
        if not held:
            return place(m, t, [])
        chosen = route_to([expected_wait(insts[i], m, t) for i in held], cold[m], instances=instances)
        if chosen == SPILL:
            return place(m, t, held)  # the model is swamped: SageMaker sends some requests elsewhere
        return insts[held[chosen]]

    single = insts[0] if instances == 1 else None
    instance_of = out.instance
    hit = out.hit
    for r in range(n):
        t = times[r]
        m = targets[r]
        while heap and heap[0][0] <= t:
            at, _, kind, i, v = heapq.heappop(heap)
            handle(at, kind, i, v)
        if mem[m] > budget:
            error[r] = TOO_LARGE
            continue
        inst = single if single is not None else route(m, t)
        instance_of[r] = inst.index
        state = inst.state.get(m, ABSENT)
        if state == LOADED:
            hit[r] = 1
            inst.lru.move_to_end(m)
            inst.last[m] = t
            serve(inst, m, [r], t)
            continue
        if state == ABSENT:
            request_load(inst, m, t)
        inst.waiters[m].append(r)
    while heap:
        t, _, kind, i, v = heapq.heappop(heap)
        handle(t, kind, i, v)
    for inst in insts:
        for waiting in inst.waiters.values():  # loads that never started: no memory came free
            for r in waiting:
                error[r] = NOT_READY
                latency[r] = load_wait[r] = timeout
    out.peak_bytes = [inst.peak for inst in insts]
    out.peak_models = [inst.peak_models for inst in insts]
    out.busy_s = [inst.cpu.work for inst in insts]
    return out
