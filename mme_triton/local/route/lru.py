"""Least-recently-used bookkeeping of the models loaded in one endpoint's Triton: which to unload, before a
load, for it to fit."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

__all__ = ["ModelLRU"]


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

    def __init__(self, *, budget_bytes: int | None = None, max_models: int | None = None) -> None:
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

    def size_of(self, name: str) -> int:
        """The size ``name`` is held at (0 when it is not held)."""
        return self._sizes.get(name, 0)

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

    def room_for(
        self, size: int, *, pending_bytes: int = 0, pending_count: int = 0, keep: Callable[[str], bool]
    ) -> list[str] | None:
        """The models to unload, least recently used first, before one more model of ``size`` bytes loads.

        ``pending_bytes`` and ``pending_count`` are what loads and unloads under way still hold; models
        ``keep`` says are in use are not chosen. ``[]``: it fits now. ``None``: it does not fit even with
        every unused model unloaded (wait for one to become unused). A model larger than the whole budget
        fits once nothing else is held or pending.

        Example:
            >>> lru = ModelLRU(budget_bytes=100)
            >>> lru.add("a", 40), lru.add("b", 40)
            ([], [])
            >>> lru.room_for(50, keep=lambda n: False), lru.room_for(50, keep=lambda n: n == "a")
            (['a'], ['b'])
            >>> lru.room_for(50, keep=lambda n: True) is None
            True
        """
        if self.budget_bytes is not None and size > self.budget_bytes:
            # it loads alone: every other model goes, the unused ones now
            if not self._sizes and not pending_count:
                return []
            return [name for name in self._sizes if not keep(name)] or None
        victims, fits = self._victims(
            self.total_bytes + pending_bytes + size, len(self._sizes) + pending_count + 1, keep
        )
        return victims if fits else None

    def excess(
        self, *, keep: Callable[[str], bool], pending_bytes: int = 0, pending_count: int = 0
    ) -> list[str]:
        """The unused models to unload, least recently used first, for the held ones (and the pending
        loads and unloads) to fit again: after a model measured more than it was estimated at."""
        return self._victims(self.total_bytes + pending_bytes, len(self._sizes) + pending_count, keep)[0]

    def _victims(self, total: int, count: int, keep: Callable[[str], bool]) -> tuple[list[str], bool]:
        """The unused models to unload, least recently used first, until ``total`` bytes in ``count``
        models fit; and whether they then fit."""
        victims: list[str] = []
        for name, held in self._sizes.items():
            if not self._over(total, count):
                break
            if not keep(name):
                victims.append(name)
                total -= held
                count -= 1
        return victims, not self._over(total, count)

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

    def _over(self, total: int | None = None, count: int | None = None) -> bool:
        count = len(self._sizes) if count is None else count
        total = self.total_bytes if total is None else total
        if self.max_models is not None and count > self.max_models:
            return True
        return self.budget_bytes is not None and total > self.budget_bytes
