"""Executions sharing processors: the processor model of both simulations (multi-model endpoint instances,
and inference component copies).

``n`` executions running at once on ``P`` processors each run at ``min(1, P / n)`` of full speed (each uses
one processor at most) — processor sharing, as an operating system's scheduler shares cores among runnable
processes. It is kept as a virtual clock that runs at the per-execution speed: an execution started at
clock ``v`` with ``w`` seconds of work ends when the clock reaches ``v + w``, so executions end in the order
of those tags and only the next end is ever scheduled. ``P`` may be fractional (an inference component
copy reserving 0.5 of a core runs one execution at half speed). Only the standard library is imported.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from itertools import count
from typing import Any

__all__ = ["SharedProcessors"]

_EPSILON = 1e-9
_SEQ = count()


class SharedProcessors:
    """The executions running on ``processors`` processors, by processor sharing.

    The simulation calls :meth:`advance` before anything changes at time ``t``, :meth:`start` for each new
    execution, :meth:`ended` when the next end comes, and :meth:`next_end` after each change to know when
    that is (each call makes the ends it gave before stale: compare :attr:`version`).

    Example:
        >>> cpu = SharedProcessors(1)
        >>> cpu.advance(0.0); cpu.start(1.0, "a"); cpu.start(3.0, "b")
        >>> cpu.next_end(0.0)  # both at half speed: a's second of work takes two
        2.0
        >>> cpu.advance(2.0); list(cpu.ended()), cpu.next_end(2.0)  # then b alone, its last 2 s at full speed
        (['a'], 4.0)
    """

    __slots__ = ("clock", "clock_at", "processors", "running", "tags", "version", "work")

    def __init__(self, processors: float) -> None:
        if processors <= 0:
            raise ValueError(f"processors must be > 0, got {processors!r}")
        self.processors = float(processors)
        self.clock = 0.0
        self.clock_at = 0.0
        self.running = 0
        self.tags: list[tuple[float, int, Any]] = []
        self.version = 0
        self.work = 0.0
        """Seconds of work started so far (at full speed)."""

    def advance(self, t: float) -> None:
        """Move the virtual clock to real time ``t``."""
        if self.running:
            self.clock += (t - self.clock_at) * min(1.0, self.processors / self.running)
        self.clock_at = t

    def start(self, work: float, payload: Any) -> None:
        """An execution of ``work`` seconds starts now (after :meth:`advance`)."""
        self.running += 1
        self.work += work
        heapq.heappush(self.tags, (self.clock + work, next(_SEQ), payload))

    def ended(self) -> Iterator[Any]:
        """The payloads of the executions that have ended by now (after :meth:`advance`)."""
        tags = self.tags
        limit = self.clock + _EPSILON * max(1.0, self.clock)
        while tags and tags[0][0] <= limit:
            self.running -= 1
            yield heapq.heappop(tags)[2]

    def next_end(self, t: float) -> float | None:
        """When the next execution ends, at the speeds of now (``t``); a new :attr:`version`."""
        self.version += 1
        if not self.tags:
            return None
        speed = min(1.0, self.processors / self.running)
        return t + max(0.0, self.tags[0][0] - self.clock) / speed
