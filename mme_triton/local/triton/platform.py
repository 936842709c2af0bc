"""Can this machine run the embedded stack? Linux x86_64 with glibc >= 2.35.

The Triton server binary comes from the ``nvidia-pytriton`` wheel, which is built for
``manylinux_2_35_x86_64``: it needs Linux on x86_64 and a glibc of at least 2.35 (Ubuntu 22.04+,
Debian 12+). The rest of the library runs anywhere; only the embedded stack checks this.
"""

from __future__ import annotations

import os
import platform as _platform

from mme_triton.errors import UnsupportedPlatformError

__all__ = ["MIN_GLIBC", "check_platform", "glibc_version", "platform_problem"]

MIN_GLIBC: tuple[int, int] = (2, 35)
"""The oldest glibc the Triton wheel (``manylinux_2_35``) runs on."""

_REQUIREMENT = "the embedded stack needs Linux x86_64 with glibc >= 2.35 (Ubuntu 22.04+, Debian 12+)"


def glibc_version() -> tuple[int, int] | None:
    """Return the running glibc's ``(major, minor)`` version, or ``None`` when the C library is not glibc.

    Example::

        glibc_version()  # (2, 36)
    """
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        found = None
    if found:
        name, _, version = found.partition(" ")
        if name != "glibc":
            return None
    else:
        name, version = _platform.libc_ver()
        if name != "glibc":
            return None
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def platform_problem(system: str, machine: str, glibc: tuple[int, int] | None) -> str | None:
    """Say why a platform cannot run the embedded stack, or return ``None`` when it can.

    Parameters:
        system: ``platform.system()``, e.g. ``"Linux"``.
        machine: ``platform.machine()``, e.g. ``"x86_64"``.
        glibc: the glibc version as ``(major, minor)``, ``None`` for another C library.

    Example:
        >>> platform_problem("Linux", "aarch64", (2, 39)).endswith("found Linux aarch64")
        True
    """
    if system != "Linux":
        return f"{_REQUIREMENT}; found {system or 'an unknown system'}"
    if machine.lower() not in ("x86_64", "amd64"):
        return f"{_REQUIREMENT}; found Linux {machine or 'on an unknown architecture'}"
    if glibc is None:
        return f"{_REQUIREMENT}; found Linux {machine} with a C library other than glibc (e.g. musl)"
    if glibc < MIN_GLIBC:
        return f"{_REQUIREMENT}; found Linux {machine} with glibc {glibc[0]}.{glibc[1]}"
    return None


def check_platform() -> None:
    """Raise when this machine cannot run the embedded stack.

    Raises:
        UnsupportedPlatformError: not Linux x86_64 with glibc >= 2.35; the message names the requirement
            and what was found.

    Example::

        check_platform()
    """
    problem = platform_problem(_platform.system(), _platform.machine(), glibc_version())
    if problem is not None:
        raise UnsupportedPlatformError(problem)
