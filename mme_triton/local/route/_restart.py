"""An instance's recovery: its Triton started again after it exited, as SageMaker replaces an unhealthy
container (mixed into :class:`~mme_triton.local.route.instance.InstanceRuntime`).

When the instance's Triton exits, the request that finds out (or a watcher, within a second) starts the
replacement: the instance forgets its loaded models and its volume, a server built by ``replace`` is
started (three tries), and models load again on demand.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from mme_triton.errors import LocalStackError
from mme_triton.local.route._lifecycle import Lifecycle
from mme_triton.local.triton.protocol import TritonLike

__all__ = ["Recovery"]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")


class Recovery(Lifecycle):
    """Restarts; mixed into :class:`~mme_triton.local.route.instance.InstanceRuntime`."""

    # set by InstanceRuntime.__init__
    _restart_failed_at: float
    _replace: Callable[[int], TritonLike] | None
    _load_asked: dict[str, float]
    restarts: int

    def _watch(self, interval: float) -> None:
        while not self._closed.wait(interval):
            triton = self._triton
            recently_failed = time.monotonic() - self._restart_failed_at < 10.0
            if triton.returncode is not None and self._replace is not None and not recently_failed:
                self._begin_restart(triton)

    def _begin_restart(self, dead: TritonLike) -> None:
        with self._idle:
            if (
                self._closed.is_set()
                or self._triton is not dead
                or dead.returncode is None  # alive (started again already)
                or self._restarting is not None
            ):
                return
            future: Future[None] = Future()
            self._restarting = future
            self._generation += 1
            self._lru.clear()
            self._loading.clear()
            self._load_asked.clear()
            self._unloading.clear()
            self._unloading_bytes.clear()
            self._reserved.clear()
            self._started.clear()
            self._last_done.clear()
            self._memory.clear()
            self._volume.clear()
            self.metrics.loaded_models(0)
            self._idle.notify_all()
        logger.warning(
            "endpoint %s: Triton exited (status %s); starting it again, models load again on demand",
            self.endpoint_name,
            dead.returncode,
        )
        threading.Thread(
            target=self._restart, args=(dead, future), name=f"restart-{self.endpoint_name}", daemon=True
        ).start()

    def _restart(self, dead: TritonLike, future: Future[None]) -> None:
        assert self._replace is not None
        try:
            dead.stop()
            shutil.rmtree(self._workdir / "models", ignore_errors=True)
            error: BaseException | None = None
            for attempt in range(3):
                if self._closed.is_set():
                    raise LocalStackError("the endpoint was deleted while its Triton restarted")
                replacement = self._replace(self._generation)
                try:
                    replacement.start()
                except LocalStackError as exc:
                    error = exc
                    time.sleep(0.5 * (attempt + 1))
                    continue
                with self._lock:
                    self._triton = replacement
                    self.restarts += 1
                    self._restarting = None
                logger.info("endpoint %s: Triton started again", self.endpoint_name)
                future.set_result(None)
                return
            raise error or LocalStackError("Triton did not start again")
        except BaseException as exc:
            logger.error("endpoint %s: restarting Triton failed: %s", self.endpoint_name, exc)
            with self._lock:
                self._restarting = None
                self._restart_failed_at = time.monotonic()
            future.set_exception(exc)
