"""What one archive may take from the machine the embedded stack runs on, and how it keeps to that.

On SageMaker an endpoint has an instance to itself; on the stack every endpoint shares one machine with
the user's other work. What an archive may unpack to is bounded here (:data:`DEFAULT_MAX_UNPACKED_BYTES`,
:data:`DEFAULT_MAX_MEMBERS`, :data:`DEFAULT_MAX_COMPRESSION_RATIO`, :data:`DISK_RESERVE_BYTES`; see
:mod:`mme_triton.local.route.extract`), each with a documented default and a test. The bounds on
``tritonserver``'s own arguments (shared memory, threads) are in :mod:`mme_triton.local.triton.options`.
"""

from __future__ import annotations

from mme_triton.local.triton.options import check_shm_limit

__all__ = [
    "DEFAULT_MAX_COMPRESSION_RATIO",
    "DEFAULT_MAX_COPIES",
    "DEFAULT_MAX_INSTANCES",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_UNPACKED_BYTES",
    "DISK_RESERVE_BYTES",
    "check_compression_ratio",
    "check_limits",
    "human_size",
]

GiB = 1024**3

DEFAULT_MAX_UNPACKED_BYTES = 16 * GiB
"""Default limit on what one archive unpacks to when the endpoint's variant sets no ``VolumeSizeInGB``."""
DEFAULT_MAX_MEMBERS = 10_000
"""Default limit on the entries (files and directories) of one archive."""
DEFAULT_MAX_COMPRESSION_RATIO = 200
"""Default limit on unpacked bytes per compressed byte (checked once 16 MiB are unpacked)."""
DISK_RESERVE_BYTES = 1 * GiB
"""An extraction never leaves less than this free on the scratch directory's disk."""
DEFAULT_MAX_INSTANCES = 16
"""Default limit on the instances (a Triton each) one endpoint's variant runs on the stack."""
DEFAULT_MAX_COPIES = 16
"""The most copies of inference components (a Triton each) the stack runs at once, over its endpoints."""


def human_size(size: float) -> str:
    """``"8.0 MiB"``, ``"512 bytes"``: a size for a message."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover


def check_compression_ratio(ratio: float, name: str = "max_compression_ratio") -> None:
    """A limit on unpacked bytes per archive byte must be > 1: a gzip'd tar unpacks to more than it weighs
    (its headers and padding alone), so a limit of 1 or less would refuse every archive.

    Raises:
        ValueError: ``ratio`` is not > 1 (NaN included).
    """
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not ratio > 1:
        raise ValueError(f"{name} must be > 1, got {ratio!r}")


def check_limits(
    *,
    shm_limit: int | None = None,
    max_unpacked_bytes: int | None,
    max_archive_members: int,
    max_compression_ratio: float,
    max_instances: int = DEFAULT_MAX_INSTANCES,
) -> None:
    """Check the stack's limits as :class:`~mme_triton.local.LocalStack` takes them.

    Raises:
        ValueError: one is out of range (the message names it).
    """
    if shm_limit is not None:
        check_shm_limit(shm_limit)
    if max_unpacked_bytes is not None and max_unpacked_bytes <= 0:
        raise ValueError("max_unpacked_bytes must be > 0 bytes (or None for the default)")
    if max_archive_members <= 0:
        raise ValueError("max_archive_members must be > 0")
    check_compression_ratio(max_compression_ratio)
    if isinstance(max_instances, bool) or not isinstance(max_instances, int) or max_instances < 1:
        raise ValueError(f"max_instances must be an integer >= 1, got {max_instances!r}")
