"""How a multi-model endpoint's instances share its requests and their memory, decided once.

AWS documents the outline ("How multi-model endpoints work", the multi-model endpoint guide): SageMaker
"continues to route requests for a model to the instance where the model is already loaded. However, if the
model receives many invocation requests, and there are additional instances for the multi-model endpoint,
SageMaker routes some requests to another instance to accommodate the traffic"; and when an instance needs
memory to load a model, it "unloads unused models". What counts as busy, where a model no instance holds
goes, and what counts as unused are not documented. The capacity simulator
(:mod:`mme_triton.capacity._engine`) and the embedded stack (:mod:`mme_triton.local.route`) both decide
them here, so a plan and the stack that checks it follow one rule (docs/capacity.md, "The model of an
instance", and docs/local.md, "Several instances", describe it from this module):

- **Routing** (:func:`route`): a request goes to an instance that holds its model (loaded, or loading),
  the one where its wait is shortest (the first of them on a tie). It *spills* to an instance that does
  not hold the model when that wait is longer than both the model's cold start and :data:`SPILL_WAIT_S`
  (loading it there is then quicker than waiting), unless every instance holds the model already.
- **Placing** a model no instance holds, or a spilled request (:func:`place`): the instance with the most
  free memory for models, among those where the model fits now (a model-count limit counts first: the most
  free slots, then the most free bytes); ties drawn at random. When it fits nowhere, the instance whose
  least recently used unused model has been unused longest (so the instances behave as one LRU cache);
  when no instance has an unused model, one drawn at random (the load waits there for room).
- **Unused** (:func:`unused`): no request of the model is running or waiting on the instance, and none
  ended within the last :data:`IDLE_AFTER_S`: a model a client calls in a loop never looks unused in the
  moment between two calls, so a load that waits for room takes the model that really stopped being used.
- **Room for a load**, on one instance: a load asks for room once its files are on the instance's volume
  (a download holds no memory). Loads that wait for room are served first come, first served. A load that
  fits with the loads and unloads under way takes its room and starts at once, side by side with the other
  loads; otherwise the least recently used unused models are unloaded until it would fit once the unloads
  under way have ended, its room is held from then on, and it starts as soon as what the instance holds
  (loaded, loading and unloading models) and the load fit — it waits for the unloads that free its memory,
  not for unrelated ones. When it does not fit even with every unused model unloaded, it waits (and the
  loads behind it) until a model becomes unused or a load or unload ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["IDLE_AFTER_S", "SPILL", "SPILL_WAIT_S", "place", "route", "spills", "unused"]

SPILL_WAIT_S = 1.0
"""Seconds a request may wait on the instance holding its model before it spills elsewhere (when the
model's cold start is shorter than this, this is the bound)."""

IDLE_AFTER_S = 0.5
"""Seconds after its last request ended that a model still counts as used."""

SPILL = -1
"""What :func:`route` returns when the request goes to an instance that does not hold its model."""


def spills(wait_s: float, cold_start_s: float) -> bool:
    """Whether a request that would wait ``wait_s`` seconds on the best instance holding its model goes to
    another instance instead, for a model whose cold start is ``cold_start_s``.

    Example:
        >>> spills(0.5, 0.2), spills(1.5, 0.2), spills(1.5, 2.0)
        (False, True, False)
    """
    return wait_s > max(cold_start_s, SPILL_WAIT_S)


def route(waits: Sequence[float], cold_start_s: float, *, instances: int) -> int:
    """Which of the instances holding a model a request goes to: the index into ``waits`` (each holder's
    expected wait, in seconds) of the shortest (the first on a tie), or :data:`SPILL` when it spills to an
    instance that does not hold the model (see :func:`place`). ``instances``: how many the variant has.

    Example:
        >>> route([0.3, 0.0], 2.0, instances=3), route([4.0], 2.0, instances=3)
        (1, -1)
        >>> route([4.0], 2.0, instances=1)  # every instance holds it: it waits
        0
    """
    if not waits:
        return SPILL
    best = 0
    for index in range(1, len(waits)):
        if waits[index] < waits[best]:
            best = index
    if len(waits) < instances and spills(waits[best], cold_start_s):
        return SPILL
    return best


def place(
    free: Sequence[Any],
    fits: Sequence[bool],
    idle_since: Sequence[float | None],
    draw: Callable[[], float],
) -> int:
    """The index of the candidate instance a model goes to when it is placed.

    Parameters:
        free: each candidate's free memory for models (any comparable: bytes, or ``(slots, bytes)`` under a
            model-count limit), counting the loads and unloads under way as holding theirs.
        fits: whether the model fits in each candidate's free memory now.
        idle_since: when each candidate's least recently used unused model was last used; ``None`` when it
            has none.
        draw: a uniform number in [0, 1), for ties and for the last resort.

    Example:
        >>> place([10, 30, 30], [True, True, True], [None, None, None], lambda: 0.9)
        2
        >>> place([0, 5], [False, False], [40.0, 12.0], lambda: 0.0)
        1
    """
    roomy = [index for index, ok in enumerate(fits) if ok]
    if roomy:
        most = max(free[index] for index in roomy)
        best = [index for index in roomy if free[index] == most]
        return best[int(draw() * len(best))] if len(best) > 1 else best[0]
    oldest: int | None = None
    for index, since in enumerate(idle_since):
        if since is not None and (oldest is None or since < idle_since[oldest]):  # type: ignore[operator]
            oldest = index
    return oldest if oldest is not None else int(draw() * len(free))


def unused(last_end: float, now: float) -> bool:
    """Whether a model with no request running or waiting, whose last request ended at ``last_end``, counts
    as unused at ``now`` (the same clock).

    Example:
        >>> unused(10.0, 10.2), unused(10.0, 10.5)
        (False, True)
    """
    return last_end + IDLE_AFTER_S <= now
