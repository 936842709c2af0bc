"""Memory for large bodies: a bytearray the encoder fills, backed by transparent huge pages on Linux.

A fresh large buffer costs more than the copy into it: the kernel maps and zeroes it one 4 KiB page at
a time on first touch (about 0.5 ms per MB here, five times a memcpy). Huge pages (2 MiB) take 512
times fewer faults. Linux gives them to a mapping that asks with ``madvise(MADV_HUGEPAGE)`` before its
pages are touched (transparent huge pages in ``madvise`` mode, the default of most distributions;
numpy asks the same way for its arrays of 4 MiB and more). ``bytearray(n)`` zeroes its memory as it
allocates it, too early to ask; so an empty bytearray is grown through the C API
(``PyByteArray_Resize``, CPython), which leaves the new memory uninitialised, then advised, and only
then written. The caller overwrites every byte before anyone sees the buffer. Where any of this is
missing (another interpreter or system, THP off), the buffer is a plain ``bytearray(n)``: the same
bytes, slower.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import sys
from collections.abc import Callable

__all__ = ["HUGE_PAGE", "LARGE", "new_buffer"]

logger = logging.getLogger(__name__)

HUGE_PAGE = 2 * 2**20
# Buffers from this size on are advised (numpy's threshold for the same advice).
LARGE = 4 * 2**20

_Allocate = Callable[[int], bytearray]
_Advise = Callable[[int, int], None]


def _c_api() -> tuple[_Allocate, Callable[[bytearray], int], _Advise] | None:
    """The three C calls, or None where they are not all there."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if sys.implementation.name != "cpython" or not sys.platform.startswith("linux") or advice is None:
        return None
    try:
        # Prototypes of our own, so that no attribute of the shared ctypes.pythonapi is changed. A
        # pythonapi call that fails raises the exception it set (MemoryError), leaving the bytearray
        # empty and valid.
        resize = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_ssize_t)(
            ("PyByteArray_Resize", ctypes.pythonapi)
        )
        as_string = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(
            ("PyByteArray_AsString", ctypes.pythonapi)
        )
        madvise = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, use_errno=True
        )(("madvise", ctypes.CDLL(None)))
    except (AttributeError, OSError):
        return None

    def allocate(size: int) -> bytearray:
        buffer = bytearray()
        resize(buffer, size)
        return buffer

    def address(buffer: bytearray) -> int:
        return int(as_string(buffer))

    def advise(start: int, length: int) -> None:
        if madvise(start, length, advice) != 0:  # EINVAL without THP in the kernel: nothing to gain
            logger.debug("madvise(MADV_HUGEPAGE) failed: errno %d", ctypes.get_errno())

    return allocate, address, advise


_API = _c_api()


def new_buffer(size: int) -> bytearray:
    """A ``bytearray`` of ``size`` bytes for the caller to overwrite completely.

    From :data:`LARGE` bytes on (with the C API at hand) its contents are uninitialised and the
    2 MiB-aligned part of its memory is advised for huge pages; smaller buffers are zeroed
    ``bytearray(size)``.
    """
    if _API is None or size < LARGE:
        return bytearray(size)
    allocate, address, advise = _API
    buffer = allocate(size)
    start = address(buffer)
    first = -(-start // HUGE_PAGE) * HUGE_PAGE
    last = (start + size) // HUGE_PAGE * HUGE_PAGE
    if last > first:
        advise(first, last - first)
    return buffer
