"""Least-recently-used bookkeeping of the models loaded in one endpoint's Triton."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

__all__ = ["DEFAULT_MEMORY_BUDGET", "ModelLRU"]

DEFAULT_MEMORY_BUDGET = 2 * 1024**3
"""Default budget: 2 GiB of extracted model files loaded per endpoint."""


class ModelLRU:
    """Least-recently-used bookkeeping of loaded models under a byte budget and/or a model count.

    Not thread-safe by itself: :class:`InvocationRuntime` calls it under its own lock.

    Parameters:
        budget_bytes: the sum of sizes above which the least recently used are evicted; ``None``: no limit.
        max_models: the number of models above which they are evicted; ``None``: no limit.

    Example:
        >>> lru = ModelLRU(budget_bytes=100)
        >>> lru.add("a", 60), lru.add("b", 30), lru.touch("a"), lru.add("c", 30)
        ([], [], True, ['b'])
    """

    def __init__(
        self, *, budget_bytes: int | None = DEFAULT_MEMORY_BUDGET, max_models: int | None = None
    ) -> None:
        if budget_bytes is not None and budget_bytes <= 0:
            raise ValueError("budget_bytes must be > 0 (or None for no limit)")
        if max_models is not None and max_models <= 0:
            raise ValueError("max_models must be > 0 (or None for no limit)")
        self.budget_bytes = budget_bytes
        self.max_models = max_models
        self._sizes: OrderedDict[str, int] = OrderedDict()

    def __contains__(self, name: object) -> bool:
        return name in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def total_bytes(self) -> int:
        """The sum of the sizes of the models held."""
        return sum(self._sizes.values())

    def names(self) -> list[str]:
        """The models held, least recently used first."""
        return list(self._sizes)

    def touch(self, name: str) -> bool:
        """Mark ``name`` as just used; ``False`` when it is not held."""
        if name not in self._sizes:
            return False
        self._sizes.move_to_end(name)
        return True

    def add(self, name: str, size: int, *, keep: Callable[[str], bool] | None = None) -> list[str]:
        """Hold ``name`` (most recently used) and return the models evicted to make room, oldest first.

        The model just added is never evicted, even when it alone is over the budget; nor is a model
        ``keep`` says is in use (the budget is then kept once it no longer is, at a later ``add``).
        """
        if size < 0:
            raise ValueError("size must be >= 0")
        self._sizes[name] = size
        self._sizes.move_to_end(name)
        evicted: list[str] = []
        while self._over():
            victim = next((n for n in self._sizes if n != name and not (keep is not None and keep(n))), None)
            if victim is None:
                break
            del self._sizes[victim]
            evicted.append(victim)
        return evicted

    def resize(self, name: str, size: int) -> bool:
        """Set the size of ``name`` (measured again) without marking it used; ``False`` if not held.

        Nothing is evicted here: the next :meth:`add` keeps the budget with the new sizes.
        """
        if size < 0:
            raise ValueError("size must be >= 0")
        if name not in self._sizes:
            return False
        self._sizes[name] = size
        return True

    def remove(self, name: str) -> bool:
        """Forget ``name``; ``False`` when it was not held."""
        return self._sizes.pop(name, None) is not None

    def clear(self, *, keep: str | None = None) -> list[str]:
        """Forget every model except ``keep``; return those forgotten, oldest first."""
        gone = [n for n in self._sizes if n != keep]
        for name in gone:
            del self._sizes[name]
        return gone

    def _over(self) -> bool:
        if self.max_models is not None and len(self._sizes) > self.max_models:
            return True
        return self.budget_bytes is not None and self.total_bytes > self.budget_bytes
