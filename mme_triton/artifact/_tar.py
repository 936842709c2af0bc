"""POSIX tar (ustar + pax extended headers) blocks with every variable field pinned.

``tarfile`` can write headers too, but the bytes it produces have changed between Python versions; the
artifact's sha256 is only a content identity if the same files give the same bytes everywhere, so the
few fields an archive of directories and regular files needs are encoded here, by the book (POSIX.1-2001
``pax`` interchange format). Every header has mtime 0, uid/gid 0, empty uname/gname, and the mode the
caller normalised. A pax extended header is added only when ustar cannot hold a value: a name longer than
100 bytes or not plain ASCII, or a file of 8 GiB or more.
"""

from __future__ import annotations

__all__ = [
    "BLOCK_SIZE",
    "directory_header",
    "end_of_archive",
    "file_header",
    "padding",
]

BLOCK_SIZE = 512
# tar and tarfile both fill the last record of an archive up to 20 blocks; done here too for the tools
# that check it.
RECORD_SIZE = 20 * BLOCK_SIZE

_REGTYPE = b"0"
_DIRTYPE = b"5"
_PAXTYPE = b"x"
_PAX_NAME = "././@PaxHeader"
_USTAR_NAME_SIZE = 100
_USTAR_MAX_SIZE = 0o77777777777  # 11 octal digits


def file_header(arcname: str, *, size: int, mode: int) -> bytes:
    """The header block(s) of a regular file; its data follows, then :func:`padding`."""
    return _header(arcname, _REGTYPE, size=size, mode=mode)


def directory_header(arcname: str, *, mode: int) -> bytes:
    """The header block(s) of a directory (stored as ``name/``)."""
    return _header(arcname.rstrip("/") + "/", _DIRTYPE, size=0, mode=mode)


def padding(size: int) -> bytes:
    """The zero bytes that fill a member's data of ``size`` bytes up to a whole block."""
    return bytes(-size % BLOCK_SIZE)


def end_of_archive(bytes_written: int) -> bytes:
    """Two zero blocks, then zeros up to the end of the record, after ``bytes_written`` archive bytes."""
    end = bytes_written + 2 * BLOCK_SIZE
    return bytes(2 * BLOCK_SIZE + (-end % RECORD_SIZE))


def _header(name: str, typeflag: bytes, *, size: int, mode: int) -> bytes:
    raw_name = name.encode("utf-8", "surrogateescape")
    pax: dict[str, bytes] = {}
    if len(raw_name) > _USTAR_NAME_SIZE or not raw_name.isascii():
        pax["path"] = raw_name
        raw_name = name.encode("ascii", "replace")[:_USTAR_NAME_SIZE]
    if size > _USTAR_MAX_SIZE:
        pax["size"] = str(size).encode("ascii")
        size = 0
    block = _ustar_block(raw_name, typeflag, size=size, mode=mode)
    if not pax:
        return block
    records = b"".join(_pax_record(key, value) for key, value in pax.items())
    pax_block = _ustar_block(_PAX_NAME.encode("ascii"), _PAXTYPE, size=len(records), mode=0o644)
    return pax_block + records + padding(len(records)) + block


def _pax_record(key: str, value: bytes) -> bytes:
    # "<length> <key>=<value>\n", where <length> counts the whole record including its own digits.
    body = b" " + key.encode("ascii") + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length = len(str(length)) + len(body)
    return str(length).encode("ascii") + body


def _octal(value: int, width: int) -> bytes:
    # width - 1 zero-padded octal digits and a NUL, as ustar numeric fields are written.
    return b"%0*o\x00" % (width - 1, value)


def _ustar_block(name: bytes, typeflag: bytes, *, size: int, mode: int) -> bytes:
    fields = [
        name.ljust(100, b"\x00"),
        _octal(mode, 8),
        _octal(0, 8),  # uid
        _octal(0, 8),  # gid
        _octal(size, 12),
        _octal(0, 12),  # mtime
        b" " * 8,  # checksum, counted as spaces while it is computed
        typeflag,
        bytes(100),  # linkname
        b"ustar\x00",
        b"00",
        bytes(32),  # uname
        bytes(32),  # gname
        _octal(0, 8),  # devmajor
        _octal(0, 8),  # devminor
        bytes(155),  # prefix
        bytes(12),
    ]
    block = bytearray(b"".join(fields))
    assert len(block) == BLOCK_SIZE
    block[148:156] = b"%06o\x00 " % sum(block)
    return bytes(block)
