"""What an instance tells the routing of its variant, and how it words its answers.

Mixed into :class:`~mme_triton.local.route.instance.InstanceRuntime`. The variant routes each request by the
rules of :mod:`mme_triton._multimodel` (the capacity simulator's too); an instance gives it what the rules
weigh, read under the instance's lock:

- :meth:`InstanceView.holding`: whether the instance holds a model (loaded, or loading) and the wait a
  request would have there: for a loaded model, the requests ahead of it spread over its model instances
  times its execution time (smoothed over its last requests); for a loading model, what is left of its
  load, by the model's last cold start;
- :meth:`InstanceView.room`: its free memory for models (free slots under a model-count limit first, then
  bytes), counting the loads and unloads under way as holding theirs, whether a model fits there now, and
  since when its least recently used unused model has been unused.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mme_triton.local.route._prepare import Messages
from mme_triton.local.route._restart import Recovery
from mme_triton.local.route.names import rename_in_response, triton_model_name
from mme_triton.local.route.responses import (
    RuntimeResponse,
    internal_failure,
    invocation_timed_out,
    model_error,
    service_unavailable,
    success,
)
from mme_triton.local.triton.protocol import TritonLike

if TYPE_CHECKING:
    from mme_triton.local.route.instance import EndpointModels

__all__ = ["DEFAULT_COLD_START_S", "InstanceView", "Room"]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")

DEFAULT_COLD_START_S = 2.0
"""The cold start the stack assumes for a model it never loaded (a small model's download and load here)."""

_UNLIMITED = 1 << 62
_SMOOTHING = 0.2  # weight of the newest execution time in the smoothed one


@dataclass(frozen=True)
class Room:
    """An instance's room for one more model (see :meth:`InstanceView.room`)."""

    free: tuple[int, int]
    """Free model slots (a large number without a count limit), then free bytes."""
    fits: bool
    """Whether the model fits in it now."""
    idle_since: float | None
    """When the least recently used unused model was last used (``time.monotonic()``); ``None``: none."""
    available: bool
    """Neither restarting nor leaving the variant."""


def median(values: Sequence[float]) -> float | None:
    """The median of ``values``; ``None`` when there are none."""
    return statistics.median(values) if values else None


class InstanceView(Recovery):
    """What routing reads of an instance, and its answers; mixed into
    :class:`~mme_triton.local.route.instance.InstanceRuntime`."""

    # set by InstanceRuntime.__init__
    _region: str
    _account_id: str
    _invoke_timeout: float
    _retired: bool
    _load_asked: dict[str, float]
    _servers: dict[str, int]
    _service: dict[str, float]
    models: EndpointModels

    # -- what routing reads -------------------------------------------------------------------------

    def holding(self, target_model: str) -> tuple[bool, float] | None:
        """Whether the instance holds ``target_model``: ``(False, wait)`` when it is loaded, with the wait in
        seconds a request would have here; ``(True, asked)`` when it is loading, with when its load was
        asked for (``time.monotonic()``); ``None`` when neither (or the instance takes no request)."""
        with self._lock:
            if self._retired or self._restarting is not None:
                return None
            if target_model in self._lru:
                servers = max(1, self._servers.get(target_model, 1))
                ahead = self._in_flight[target_model] - servers + 1
                if ahead <= 0:
                    return False, 0.0
                return False, ahead * self._service.get(target_model, 0.0) / servers
            asked = self._load_asked.get(target_model)
            if target_model not in self._loading or asked is None:
                return None
            return True, asked

    def room(self, need: int) -> Room:
        """The instance's room for one more model of ``need`` bytes."""
        with self._lock:
            held = self._lru.total_bytes + sum(self._unloading_bytes.values()) + sum(self._reserved.values())
            known = [size for size in self._memory.values() if size > 0]
            typical = int(median(known) or 0)
            waiting = [name for name in self._loading if name not in self._reserved]
            held += sum(self._memory.get(name) or typical for name in waiting)
            count = len(self._lru) + len(self._unloading_bytes) + len(self._reserved) + len(waiting)
            budget = self._lru.budget_bytes
            free_bytes = (_UNLIMITED if budget is None else budget) - held
            slots = _UNLIMITED if self._lru.max_models is None else self._lru.max_models - count
            idle_since = next(
                (self._last_done.get(name, 0.0) for name in self._lru.names() if not self._in_use(name)), None
            )
            available = not self._retired and self._restarting is None
        return Room((slots, free_bytes), slots >= 1 and free_bytes >= need, idle_since, available)

    def known_memory(self, target_model: str) -> int | None:
        """What ``target_model`` measured here the last time it was loaded."""
        with self._lock:
            return self._memory.get(target_model)

    def typical_memory(self) -> list[int]:
        """What the models measured here, each the last time it was loaded."""
        with self._lock:
            return [size for size in self._memory.values() if size > 0]

    def cold_start_s(self, target_model: str) -> float | None:
        """The download, extraction and load of ``target_model``'s last load here (its wait for room left
        out)."""
        with self._lock:
            parts = self._timings.get(target_model)
        if parts is None or parts.from_volume:
            return None if parts is None else parts.load_s
        return parts.download_s + parts.extract_s + parts.load_s

    def observe(self, target_model: str, seconds: float) -> None:
        """An execution of ``target_model`` took ``seconds`` (from sending it to Triton to its answer)."""
        if not math.isfinite(seconds) or seconds < 0:
            return
        with self._lock:
            last = self._service.get(target_model)
            self._service[target_model] = seconds if last is None else last + _SMOOTHING * (seconds - last)

    # -- answers ------------------------------------------------------------------------------------

    def timed_out(self, target_model: str) -> RuntimeResponse:
        """SageMaker's answer when the container did not answer within the request's 60 s: a ``ModelError``
        (not retried by clients); the inference may still run in Triton."""
        logger.warning(
            "endpoint %s: %s did not answer within %gs; answered ModelError (Triton may still be running it)",
            self.endpoint_name,
            target_model,
            self._invoke_timeout,
        )
        return invocation_timed_out(
            endpoint_name=self.endpoint_name, region=self._region, account_id=self._account_id
        )

    def answer(self, target_model: str, status: int, content_type: str, body: bytes) -> RuntimeResponse:
        """The InvokeEndpoint answer for Triton's answer to a request for ``target_model``."""
        alias = triton_model_name(target_model)
        if 200 <= status < 300:
            content = content_type or "application/octet-stream"
            if alias != target_model:
                body, content = rename_in_response(body, content, alias, target_model)
            return success(body, content, self.models.variant_name)
        return self._model_error(status, self._messages(target_model).body(body))

    def forward_failed(self, triton: TritonLike, exc: Exception) -> RuntimeResponse:
        """The answer when ``triton`` could not be reached: if it exited, it is being replaced.

        A killed server's connections close a moment before the process can be reaped, so a server
        that still looks alive is answered the same way (the watcher notices the exit within a second).
        """
        code = triton.returncode
        if code is None:
            logger.error("endpoint %s: %s", self.endpoint_name, exc)
            return service_unavailable(
                f"The model container of endpoint {self.endpoint_name} did not answer ({exc}). Retry the "
                "request."
            )
        if self._replace is None:
            return internal_failure(f"the Triton server of endpoint {self.endpoint_name} exited ({code})")
        self._begin_restart(triton)
        return service_unavailable(self._replacing_message(code))

    def _replacing_message(self, code: int | None) -> str:
        return (
            f"The model container of endpoint {self.endpoint_name} exited (status {code}) and is being "
            "replaced; its models load again on the next requests. Retry the request."
        )

    def _model_error(self, status: int, body: bytes) -> RuntimeResponse:
        return model_error(
            status, body, endpoint_name=self.endpoint_name, region=self._region, account_id=self._account_id
        )

    def _messages(self, target_model: str) -> Messages:
        from mme_triton.local.route._cache import model_hash_of

        return Messages(
            target_model=target_model,
            alias=triton_model_name(target_model),
            root=self._model_root(model_hash_of(target_model)),
            scratch=Path(self._workdir),
        )
