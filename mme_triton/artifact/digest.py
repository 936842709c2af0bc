"""The content digest: one SHA-256 over what an artifact holds, independent of tar and gzip.

The archive's own sha256 changes with the compressor (level, ISA-L version), so "is this model already
on S3" and "does the model under this name differ" are decided on the content digest instead. It covers,
for every archive entry in archive order, the entry's kind, its normalised mode, its name relative to the
archive root, and for files the SHA-256 of the bytes. Packaging computes it in the same single read of
each file that fills the archive; :func:`content_digest` computes it on its own from a model directory.

Encoding (version 1): SHA-256 of ``b"mme-triton content digest v1\\n"`` followed by one record per entry,
``kind NUL mode NUL file-sha256 NUL arcname NUL`` where kind is ``d`` or ``f``, mode is four octal digits
(``0755``/``0644``), file-sha256 is lowercase hex (empty for directories) and arcname is UTF-8 without a
trailing slash. The result reads ``"sha256:<64 hex digits>"``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mme_triton.artifact._files import open_regular_file

if TYPE_CHECKING:
    from mme_triton.model.repository import ModelEntry, TritonModel

__all__ = ["CHUNK_SIZE", "ContentDigest", "content_digest", "entry_mode"]

CHUNK_SIZE = 1 << 20
_PREFIX = "sha256:"
_VERSION_LINE = b"mme-triton content digest v1\n"


def entry_mode(entry: ModelEntry) -> int:
    """The mode an entry gets in the archive: 0o755 for directories and executables, 0o644 otherwise."""
    return 0o755 if entry.is_dir or entry.executable else 0o644


class ContentDigest:
    """Builds a content digest one entry at a time, in archive order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256(_VERSION_LINE)

    def add_directory(self, arcname: str, mode: int) -> None:
        self._add(b"d", arcname, mode, "")

    def add_file(self, arcname: str, mode: int, sha256_hex: str) -> None:
        self._add(b"f", arcname, mode, sha256_hex)

    def _add(self, kind: bytes, arcname: str, mode: int, sha256_hex: str) -> None:
        name = arcname.rstrip("/").encode("utf-8", "surrogateescape")
        self._hash.update(b"%s\x00%04o\x00%s\x00%s\x00" % (kind, mode, sha256_hex.encode("ascii"), name))

    def hexdigest(self) -> str:
        """``"sha256:<hex>"``."""
        return _PREFIX + self._hash.hexdigest()


def content_digest(model: str | os.PathLike[str] | TritonModel) -> str:
    """The content digest of a model: the same value ``package_model(model).content_digest`` carries.

    Parameters:
        model: a model directory (its ensemble components are found beside it, as for packaging) or a
            ``TritonModel`` from ``load_model``.

    Returns ``"sha256:<hex>"``. Validation is not repeated here: the digest covers exactly the entries
    packaging would put in the archive, whatever problems the model has.

    Raises:
        OSError: a file cannot be read.

    Example::

        content_digest("model_repository/resnet")  # 'sha256:5f0c...'
    """
    if isinstance(model, (str, os.PathLike)):
        from mme_triton.model.repository import load_model

        model = load_model(Path(model))
    digest = ContentDigest()
    for entry in model.entries():
        mode = entry_mode(entry)
        if entry.is_dir:
            digest.add_directory(entry.arcname, mode)
        else:
            digest.add_file(entry.arcname, mode, _file_sha256(Path(entry.path)))
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    buffer = bytearray(CHUNK_SIZE)
    view = memoryview(buffer)
    file, _ = open_regular_file(path)
    with file:
        while n := file.readinto(buffer):
            sha.update(view[:n])
    return sha.hexdigest()
