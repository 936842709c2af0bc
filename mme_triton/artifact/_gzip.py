"""A gzip member written by hand around ISA-L's raw deflate, so that every header byte is fixed.

``gzip.GzipFile`` stores the modification time and the file name in the header, and ``isal.igzip`` does
the same; both would make two archives of the same files differ. The header written here has no time
(0), no name, no extra fields and a fixed OS byte, the body is raw deflate from ``isal.isal_zlib`` and
the trailer is the CRC-32 and length of the input (RFC 1952). Any gzip reader (``tar -xzf``, ``gzip -d``,
Python's ``gzip``/``tarfile``) reads the result.

Deflate runs on a worker thread (ISA-L releases the GIL), so reading and hashing the next chunk on the
calling thread overlaps compressing the previous one; the chunks are compressed strictly in order.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import BinaryIO

from isal import isal_zlib

__all__ = ["GzipWriter", "isal_level"]

# ID1 ID2, CM=deflate, FLG=0 (no name, no comment, no extra), MTIME=0, XFL=0, OS=255 ("unknown").
_HEADER = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"

Buffer = bytes | bytearray | memoryview

# Chunks queued for the deflate thread. A deep queue lets the reading thread run ahead while the deflate
# thread waits for a core on a busy machine (and the other way round); with 1 MiB chunks, 16 was measured
# faster and steadier than 3 at a load average of 1-2 on 2 cores, for 16 MiB more buffers.
_MAX_PENDING = 16


def isal_level(compresslevel: int) -> int:
    """ISA-L's level (0..3) for a ``compresslevel`` of 0..9: 0..3 as they are, 4..9 as 3, ISA-L's best."""
    if isinstance(compresslevel, bool) or not isinstance(compresslevel, int):
        raise TypeError(f"compresslevel must be an int, not {type(compresslevel).__name__}")
    if not 0 <= compresslevel <= 9:
        raise ValueError(f"compresslevel must be between 0 and 9, not {compresslevel}")
    return min(compresslevel, isal_zlib.ISAL_BEST_COMPRESSION)


class GzipWriter:
    """Compresses what is written to it into ``fileobj`` as one gzip member.

    Use it as a context manager; :meth:`close` finishes the member. Keeps the SHA-256 and the size of
    the compressed bytes it writes (the archive file's digest), so the archive never has to be read back.

    :meth:`write` hands the data to the deflate thread and returns before it is compressed: a buffer
    passed to it must stay unchanged until ``max_pending`` further writes have returned (a ring of
    ``max_pending + 1`` read buffers is safe). Deflate output depends on how the input is split into
    writes, so a caller that wants identical bytes for identical input splits it the same way.
    """

    def __init__(self, fileobj: BinaryIO, *, level: int, max_pending: int = _MAX_PENDING) -> None:
        self._fileobj = fileobj
        self._compressor = isal_zlib.compressobj(level, isal_zlib.DEFLATED, -15)
        self._deflate = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mme-triton-deflate")
        self._pending: deque[Future[bytes]] = deque()
        self.max_pending = max_pending
        self._crc = 0
        self.uncompressed_size = 0
        self.compressed_size = 0
        self.sha256 = hashlib.sha256()
        self._emit(_HEADER)

    def __enter__(self) -> GzipWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for future in self._pending:
            future.cancel()
        self._deflate.shutdown(wait=True)

    def write(self, data: Buffer) -> None:
        """Queue ``data`` for compression (see the class docstring about reusing its buffer)."""
        self._crc = isal_zlib.crc32(data, self._crc)
        self.uncompressed_size += len(data)
        self._pending.append(self._deflate.submit(self._compressor.compress, data))
        while len(self._pending) > self.max_pending:
            self._emit(self._pending.popleft().result())

    def close(self) -> None:
        """Write out everything queued, finish the deflate stream and write the trailer."""
        while self._pending:
            self._emit(self._pending.popleft().result())
        self._emit(self._compressor.flush())
        self._emit(struct.pack("<II", self._crc, self.uncompressed_size & 0xFFFFFFFF))

    def _emit(self, data: bytes) -> None:
        if data:
            self._fileobj.write(data)
            self.sha256.update(data)
            self.compressed_size += len(data)
