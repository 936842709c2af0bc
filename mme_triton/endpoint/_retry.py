"""How the endpoint stage talks to SageMaker's control plane and Application Auto Scaling: retries.

Two layers, because reads and writes fail differently:

- **every call** goes through botocore's ``standard`` retry mode with more attempts than botocore's 3
  (:func:`control_plane_config`): throttling, 5xx answers and dropped connections are retried with
  exponential backoff and full jitter (1 s base for throttling, 50 ms otherwise, each wait capped at
  20 s). That bound is what a mutating call (Create*, Update*, Delete*, Put*, Register*) gets: sending
  it again and again for minutes would only make it harder to tell what happened.
- **reads** (Describe*, List*) are retried on top of that by :func:`read`, for as long as the caller's
  :class:`Deadline` allows, with capped, jittered backoff. A status poll that is throttled for a minute
  is not a failed deployment; only the endpoint's own status, or the deadline, ends a wait.

Why ``standard`` and not ``adaptive``: adaptive mode adds a client-side rate limiter that, after the
first throttle, delays every later call of that client, for as long as it sees fit and regardless of our
deadline; botocore documents it as experimental. It pays off for one client sending many calls a second;
a deployment sends a few calls a minute, and SageMaker's limits are per account, shared with every other
client, so a limiter inside one process buys little and makes the timing of a wait unpredictable.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from mme_triton._sagemaker import error_code, is_transient

if TYPE_CHECKING:
    from botocore.config import Config

__all__ = [
    "CONTROL_PLANE_MAX_ATTEMPTS",
    "READ_BACKOFF_CAP",
    "Deadline",
    "control_plane_config",
    "poll_delays",
    "read",
    "read_backoff",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Attempts botocore makes per control-plane call (the first one included).
CONTROL_PLANE_MAX_ATTEMPTS = 8

#: Longest pause, in seconds, between two tries of a read that keeps failing.
READ_BACKOFF_CAP = 10.0
_READ_BACKOFF_BASE = 0.25
# Doublings after which the base is past the cap, whatever the cap: 2**16 * 0.25 s is 4.5 hours.
_READ_BACKOFF_DOUBLINGS = 16

#: The first status poll comes this many seconds (before jitter) after the first one.
FIRST_POLL_DELAY = 0.25


def control_plane_config() -> Config:
    """The botocore ``Config`` the endpoint stage's clients start from (``boto_config`` is merged over it).

    ``standard`` retry mode with :data:`CONTROL_PLANE_MAX_ATTEMPTS` attempts (see the module docstring
    for why not ``adaptive``); 10 s to connect, 60 s to read an answer.
    """
    from botocore.config import Config

    return Config(
        retries={"mode": "standard", "total_max_attempts": CONTROL_PLANE_MAX_ATTEMPTS},
        connect_timeout=10,
        read_timeout=60,
    )


class Deadline:
    """A point in time (``time.monotonic``) that waits and reads must not go past.

    Example:
        >>> deadline = Deadline(30)
        >>> 0 < deadline.remaining() <= 30
        True
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.at = time.monotonic() + self.seconds

    def remaining(self) -> float:
        """Seconds left (0 when passed)."""
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at


def read_backoff(attempt: int) -> float:
    """The pause before retry ``attempt`` (0-based) of :func:`read`: exponential, capped at
    :data:`READ_BACKOFF_CAP`, half of it random.

    The exponent stops growing once the cap is reached, so a read that keeps failing for hours (attempt
    1024 and beyond) still gets a pause instead of an ``OverflowError``.

    Example:
        >>> 0.125 <= read_backoff(0) <= 0.25
        True
        >>> READ_BACKOFF_CAP / 2 <= read_backoff(10**6) <= READ_BACKOFF_CAP
        True
    """
    ceiling = min(READ_BACKOFF_CAP, _READ_BACKOFF_BASE * 2.0 ** min(attempt, _READ_BACKOFF_DOUBLINGS))
    return random.uniform(ceiling / 2, ceiling)


def read(call: Callable[..., T], /, *, deadline: Deadline, what: str, **kwargs: Any) -> T:
    """``call(**kwargs)`` for a read-only call, tried again while it fails transiently and time is left.

    A transient failure (:func:`mme_triton._sagemaker.is_transient`: throttling, 5xx, a dropped
    connection) is retried after a capped, jittered pause until ``deadline``; then the last error is
    raised as it came. Any other error is raised at once. Each try is itself one botocore call with
    botocore's own retries, so the deadline can be overrun by at most one such call.

    Example:
        >>> read(lambda **kw: kw, deadline=Deadline(1), what="an echo", value=1)
        {'value': 1}
    """
    attempt = 0
    while True:
        try:
            return call(**kwargs)
        except Exception as exc:
            if not is_transient(exc) or deadline.passed():
                raise
            pause = min(read_backoff(attempt), deadline.remaining())
            logger.info(
                "%s failed (%s), trying again in %.1fs: %s",
                what,
                error_code(exc) or type(exc).__name__,
                pause,
                exc,
            )
            attempt += 1
            time.sleep(pause)


def poll_delays(poll_interval: float) -> Iterator[float]:
    """Pauses between status polls: about 0.25-0.5 s first, doubling (jittered) up to ``poll_interval``.

    A deployment on the embedded stack is in service within a second, one on AWS after minutes: polling
    soon and then less often serves both without a fixed interval that is wrong for one of them.

    Example:
        >>> delays = poll_delays(15)
        >>> first = next(delays)
        >>> 0.25 <= first <= 0.5
        True
        >>> all(0 < next(delays) <= 15 for _ in range(20))
        True
    """
    step = FIRST_POLL_DELAY
    while True:
        yield min(poll_interval, random.uniform(step, 2 * step))
        step = min(step * 2, poll_interval)
