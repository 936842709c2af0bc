"""The discrete-event simulation of a multi-model endpoint's instances (docs/capacity.md states the model).

Requests are taken in arrival order; the only events on the heap are what no arrival decides: a load or an
unload ending, and a retry of loads that wait for memory. A request to a loaded model is placed at once:
each model instance is a FIFO server, so its start is ``max(ready, the earliest server's free time)``
(Kiefer-Wolfowitz), without an event of its own. A model is *in use* on an instance until
:data:`~mme_triton._multimodel.IDLE_AFTER_S` after the last request placed on it ends (``busy``); only
models not in use are unloaded, least recently used first. Routing, placement, what is unused and when a
load gets room follow :mod:`mme_triton._multimodel`, the rules the embedded stack follows too.

Plain Python lists and dicts on purpose: per request this is a few dict look-ups, which beats numpy's
per-call overhead on scalars. Only the standard library is imported.
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

__all__ = ["ERROR_NAMES", "EngineResult", "ModelTable", "run"]

ABSENT, PENDING, LOADING, LOADED, DOWNLOADING = 0, 1, 2, 3, 4
OK, NOT_READY, TIMED_OUT, TOO_LARGE = 0, 1, 2, 3
ERROR_NAMES = {NOT_READY: "not_ready", TIMED_OUT: "timed_out", TOO_LARGE: "too_large"}
_LOAD_DONE, _UNLOAD_DONE, _RETRY, _LOAD_FAILED, _DOWNLOAD_DONE = 0, 1, 2, 3, 4


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


class _Batch:
    """An execution of a batching model that requests ready by its start may still join."""

    __slots__ = ("members", "server", "size", "start")

    def __init__(self, server: int, start: float, r: int) -> None:
        self.server = server
        self.start = start
        self.size = 1
        self.members = [r]


class _Instance:
    __slots__ = (
        "after_unload",
        "batch",
        "busy",
        "busy_s",
        "disk",
        "free",
        "holding",
        "index",
        "last",
        "load_end",
        "lru",
        "peak",
        "peak_models",
        "pending",
        "pending_bytes",
        "reserved",
        "reserved_bytes",
        "retry_at",
        "state",
        "unloading",
        "unloading_bytes",
        "used",
        "waiters",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.state: dict[int, int] = {}
        self.free: dict[int, list[float]] = {}  # model -> each model instance's free time
        self.busy: dict[int, float] = {}  # model -> when its last placed request ends
        self.last: dict[int, float] = {}  # model -> last use
        self.lru: OrderedDict[int, None] = OrderedDict()  # loaded models, least recently used first
        self.waiters: dict[int, list[int]] = {}  # model being loaded -> requests waiting for it
        self.load_end: dict[int, float] = {}
        self.batch: dict[int, _Batch] = {}  # model -> the execution requests may still join
        self.disk: set[int] = set()  # unloaded models kept on the volume
        self.pending: deque[int] = deque()  # loads waiting for memory, first come first served
        self.pending_bytes = 0
        self.reserved: OrderedDict[int, None] = OrderedDict()  # loads whose room waits for unloads to end
        self.reserved_bytes = 0
        self.after_unload: set[int] = set()  # loads waiting for their model's own unload to end
        self.unloading: dict[int, int] = {}
        self.unloading_bytes = 0
        self.used = 0
        self.peak = 0
        self.holding = 0
        self.peak_models = 0
        self.retry_at: float | None = None
        self.busy_s = 0.0


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
) -> EngineResult:
    """Simulate ``instances`` instances of ``budget`` bytes each serving the requests (times sorted).

    A request goes to an instance that holds its model; when the wait there would be longer than the
    model's cold start and :data:`~mme_triton._multimodel.SPILL_WAIT_S`, to another instance, which loads
    it too (:func:`mme_triton._multimodel.route`).
    """
    n = len(times)
    mem, cold, reload_, unload_s = models.memory, models.cold, models.reload, models.unload
    svc, servers, max_batch, item = models.service, models.servers, models.max_batch, models.batch_item
    out = EngineResult([0.0] * n, [0.0] * n, bytearray(n), bytearray(n), bytearray(n))
    latency, load_wait, error = out.latency, out.load_wait, out.error
    insts = [_Instance(i) for i in range(instances)]
    holders: dict[int, list[int]] = {}
    heap: list[tuple[float, int, int, int, int]] = []
    seq = count()
    rnd = random.Random(seed).random
    push = heapq.heappush

    def finish(r: int, end: float) -> None:
        took = end - times[r]
        if took > timeout:
            error[r] = TIMED_OUT
            latency[r] = timeout
        else:
            latency[r] = took

    def close_batch(inst: _Instance, m: int) -> None:
        batch = inst.batch.pop(m, None)
        if batch is not None:
            end = batch.start + svc[m] + (batch.size - 1) * item[m]
            for r in batch.members:
                finish(r, end)

    def serve(inst: _Instance, m: int, r: int, ready: float) -> None:
        fl = inst.free[m]
        if len(fl) == 1:
            k, f = 0, fl[0]
        else:
            f = min(fl)
            k = fl.index(f)
        if max_batch[m] > 1:
            batch = inst.batch.get(m)
            if batch is not None:
                start = batch.start
                others = [fl[j] for j in range(len(fl)) if j != batch.server]
                if ready <= start and batch.size < max_batch[m] and (not others or start <= min(others)):
                    batch.size += 1
                    batch.members.append(r)
                    end = start + svc[m] + (batch.size - 1) * item[m]
                    fl[batch.server] = end
                    inst.busy_s += item[m]
                    if end > inst.busy[m]:
                        inst.busy[m] = end
                    return
                close_batch(inst, m)
            begin = ready if ready > f else f
            inst.batch[m] = _Batch(k, begin, r)
            end = begin + svc[m]
            fl[k] = end
            inst.busy_s += svc[m]
            if end > inst.busy[m]:
                inst.busy[m] = end
            return
        begin = ready if ready > f else f
        end = begin + svc[m]
        fl[k] = end
        inst.busy_s += svc[m]
        if end > inst.busy[m]:
            inst.busy[m] = end
        took = end - times[r]
        if took > timeout:
            error[r] = TIMED_OUT
            latency[r] = timeout
        else:
            latency[r] = took

    def unload(inst: _Instance, v: int, t: float) -> None:
        close_batch(inst, v)
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

    def evict(inst: _Instance, shortfall: int, t: float) -> bool:
        """Unload unused models, least recently used first, to free ``shortfall`` bytes; all or nothing."""
        victims = []
        freed = 0
        busy = inst.busy
        for v in inst.lru:
            if busy[v] + IDLE_AFTER_S <= t:
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
        """Retry waiting loads when the next loaded model stops being in use (loads and unloads that end
        retry by themselves)."""
        busy = inst.busy
        soonest = min((busy[v] + IDLE_AFTER_S for v in inst.lru if busy[v] + IDLE_AFTER_S > t), default=None)
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
        if m not in inst.free:
            inst.free[m] = [0.0] * servers[m]
            inst.busy[m] = 0.0
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
        if kind == _LOAD_DONE:
            inst.state[m] = LOADED
            inst.lru[m] = None
            inst.last[m] = t
            for r in inst.waiters.pop(m):
                waited = t - times[r]
                if waited > timeout:
                    error[r] = NOT_READY
                    latency[r] = load_wait[r] = timeout
                else:
                    load_wait[r] = waited
                    serve(inst, m, r, t)
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
        elif inst.retry_at != t:
            return  # superseded by an earlier retry
        else:
            inst.retry_at = None
        if inst.pending or inst.reserved:
            process_pending(inst, t)

    def idle_since(inst: _Instance, t: float) -> float | None:
        busy = inst.busy
        for v in inst.lru:
            if busy[v] + IDLE_AFTER_S <= t:
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
            return max(0.0, min(inst.free[m]) - t)
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
            serve(inst, m, r, t)
            continue
        if state == ABSENT:
            request_load(inst, m, t)
        inst.waiters[m].append(r)
    while heap:
        t, _, kind, i, v = heapq.heappop(heap)
        handle(t, kind, i, v)
    for inst in insts:
        for m in list(inst.batch):
            close_batch(inst, m)
        for waiting in inst.waiters.values():  # loads that never started: no memory came free
            for r in waiting:
                error[r] = NOT_READY
                latency[r] = load_wait[r] = timeout
    out.peak_bytes = [inst.peak for inst in insts]
    out.peak_models = [inst.peak_models for inst in insts]
    out.busy_s = [inst.busy_s for inst in insts]
    return out
