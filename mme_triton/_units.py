"""Sizes, durations, rates and fractions written as people write them: ``"2GiB"``, ``"200ms"``, ``"50/s"``,
``"10%"``.

One rule for every number the library's functions and the command line read: **a bare number is the base
unit** — seconds for a duration (``latency_budget=0.2``, ``--target-p99 0.2``), bytes for a size, requests
per second for a rate, a fraction for a ratio (``stability=0.1``) — and a string may carry its unit
(``"200ms"``, ``"2GiB"``, ``"3000/min"``, ``"10%"``). Fields and columns whose name ends in a unit
(``p99_ms``, ``memory_bytes``) are in that unit.

Only the standard library: the command line parses its flags with these before anything heavy loads.
"""

from __future__ import annotations

import math
import re

__all__ = ["parse_duration", "parse_fraction", "parse_rate", "parse_size"]

_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]i?B|B)?\s*", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s|m|min|h|d|w)?\s*", re.IGNORECASE)
_SECONDS = {
    "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
    "w": 604800.0,
}  # fmt: skip
_FRACTION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(%)?\s*")
_RATE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:/\s*(s|m|min|h))?\s*", re.IGNORECASE)


def parse_size(value: str | int | float, what: str = "size") -> int:
    """Bytes from ``1048576``, ``"500MB"``, ``"1.5GiB"`` (a bare number is bytes).

    Raises:
        ValueError: not a size, or negative.

    Example:
        >>> parse_size("2GiB"), parse_size("500MB"), parse_size(4096)
        (2147483648, 500000000, 4096)
    """
    if isinstance(value, bool):
        raise ValueError(f"{what}: not a size: {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        match = _SIZE.fullmatch(str(value))
        if match is None:
            raise ValueError(f"{what}: not a size: {value!r} (e.g. 2GiB, 500MB, 1048576)")
        number = float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "B").lower()]
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{what}: a size is a number of bytes >= 0, got {value!r}")
    return round(number)


def parse_duration(value: str | int | float, what: str = "duration") -> float:
    """Seconds from ``2.5``, ``"200ms"``, ``"4s"``, ``"10m"``, ``"1h"``, ``"7d"`` (a bare number is seconds).

    Raises:
        ValueError: not a duration, or negative.

    Example:
        >>> parse_duration("200ms"), parse_duration("1h"), parse_duration(4)
        (0.2, 3600.0, 4.0)
    """
    if isinstance(value, bool):
        raise ValueError(f"{what}: not a duration: {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(str(value))
        if match is None:
            raise ValueError(
                f"{what}: not a duration: {value!r} (a number of seconds, or e.g. 200ms, 4s, 10m, 1h)"
            )
        seconds = float(match.group(1)) * _SECONDS[(match.group(2) or "s").lower()]
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what}: a duration is a number of seconds >= 0, got {value!r}")
    return seconds


def parse_rate(value: str | int | float, what: str = "rate") -> float:
    """Requests per second from ``50``, ``"50/s"``, ``"3000/m"``, ``"1.2/h"`` (a bare number is per second).

    Raises:
        ValueError: not a rate, or not above 0.

    Example:
        >>> parse_rate("50/s"), parse_rate("3000/min"), parse_rate(2)
        (50.0, 50.0, 2.0)
    """
    if isinstance(value, bool):
        raise ValueError(f"{what}: not a rate: {value!r}")
    if isinstance(value, (int, float)):
        rate = float(value)
    else:
        match = _RATE.fullmatch(str(value))
        if match is None:
            raise ValueError(f"{what}: not a rate: {value!r} (e.g. 50/s, 3000/min)")
        rate = float(match.group(1)) / _SECONDS[(match.group(2) or "s").lower()]
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"{what}: a rate is a number of requests per second > 0, got {value!r}")
    return rate


def parse_fraction(value: str | int | float, what: str = "fraction") -> float:
    """A fraction in [0, 1] from ``0.1`` or ``"10%"`` (a bare number is the fraction itself).

    Raises:
        ValueError: not a fraction, or outside [0, 1] (``150`` says to write ``1.5`` as ``150%`` is over 1
            too, and that ``10%`` is written ``0.1`` or ``"10%"``).

    Example:
        >>> parse_fraction("10%"), parse_fraction(0.25)
        (0.1, 0.25)
    """
    if isinstance(value, bool):
        raise ValueError(f"{what}: not a fraction: {value!r}")
    if isinstance(value, (int, float)):
        fraction = float(value)
        text = f"{value!r}"
    else:
        match = _FRACTION.fullmatch(str(value))
        if match is None:
            raise ValueError(f"{what}: not a fraction: {value!r} (e.g. 0.1 or 10%)")
        fraction = float(match.group(1)) / (100.0 if match.group(2) else 1.0)
        text = repr(str(value).strip())
    if not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise ValueError(f"{what} is a fraction between 0 and 1 (0.1, or 10% with the sign), got {text}")
    return fraction
