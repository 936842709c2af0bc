"""The models extracted on an endpoint's storage volume: what stays there after an unload, and what goes.

"Models that are unloaded remain on the instance's storage volume and can be loaded into the container's
memory later without being downloaded again from the S3 bucket. If the instance's storage volume reaches
its capacity, SageMaker deletes any unused models from the storage volume." (SageMaker's multi-model
endpoint guide, "How multi-model endpoints work".) :class:`ModelVolume` is that bookkeeping for one
endpoint: each TargetModel's extracted copy, its size and the S3 object it came from, least recently used
first. SageMaker does not document which unused copies it deletes first; the stack deletes the least
recently used.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ModelCopy", "ModelVolume"]


@dataclass(frozen=True)
class ModelCopy:
    """One TargetModel extracted on the volume."""

    size: int
    """Bytes of its extracted files."""
    etag: str
    """The S3 object's ETag when it was downloaded (to tell an overwritten artifact)."""
    fetched_at: float
    """When it was downloaded (``time.time()``)."""
    path: Path
    """The directory Triton loads it from."""


class ModelVolume:
    """The extracted copies of one endpoint's models, least recently used first, within ``capacity`` bytes.

    Not thread-safe by itself: the endpoint's runtime calls it under its own lock.

    Example:
        >>> volume = ModelVolume(capacity=100)
        >>> volume.add("a", ModelCopy(60, "e1", 0.0, Path("a")))
        >>> volume.add("b", ModelCopy(60, "e2", 0.0, Path("b")))
        >>> volume.over_capacity(keep=lambda name: name == "b")
        ['a']
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be > 0 bytes")
        self.capacity = capacity
        self._copies: OrderedDict[str, ModelCopy] = OrderedDict()

    def __contains__(self, name: object) -> bool:
        return name in self._copies

    def get(self, name: str) -> ModelCopy | None:
        """The copy of ``name``, ``None`` when it is not on the volume."""
        return self._copies.get(name)

    def names(self) -> list[str]:
        """The models on the volume, least recently used first."""
        return list(self._copies)

    @property
    def total_bytes(self) -> int:
        """Bytes the copies take."""
        return sum(copy.size for copy in self._copies.values())

    def add(self, name: str, copy: ModelCopy) -> None:
        """Record ``name``'s copy, most recently used."""
        self._copies[name] = copy
        self._copies.move_to_end(name)

    def touch(self, name: str) -> None:
        """Mark ``name`` as just used (nothing happens when it is not on the volume)."""
        if name in self._copies:
            self._copies.move_to_end(name)

    def remove(self, name: str) -> ModelCopy | None:
        """Forget ``name``'s copy; return it (``None`` when there was none)."""
        return self._copies.pop(name, None)

    def clear(self) -> None:
        """Forget every copy."""
        self._copies.clear()

    def over_capacity(self, *, keep: Callable[[str], bool]) -> list[str]:
        """The copies to delete, least recently used first, until the rest fit the capacity; copies that
        ``keep`` says are in use (loaded, or being loaded) stay, even if the volume stays over."""
        excess = self.total_bytes - self.capacity
        victims: list[str] = []
        for name, copy in self._copies.items():
            if excess <= 0:
                break
            if keep(name):
                continue
            victims.append(name)
            excess -= copy.size
        return victims
