"""What the stack's metric sinks share: hooks run before each window is published, until the sink closes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["PublishHooks"]


class PublishHooks:
    """Mixed into a sink that has a ``recorder`` (a :class:`~.metrics.MetricsRecorder`) and ``_hooks``."""

    recorder: Any
    _hooks: list[Callable[[], None]]

    def on_publish(self, hook: Callable[[Any], None]) -> None:
        """Call ``hook(sink)`` before each window is published (e.g. to sample a process's CPU and memory
        into the sink's utilization), until :meth:`close`."""

        def call() -> None:
            hook(self)

        self._hooks.append(call)
        self.recorder.add_hook(call)

    def _stop_hooks(self) -> None:
        for hook in self._hooks:
            self.recorder.remove_hook(hook)
        self._hooks.clear()
