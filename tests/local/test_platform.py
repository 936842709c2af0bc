"""The embedded stack's platform check: Linux x86_64 with glibc >= 2.35."""

from __future__ import annotations

import platform

import pytest

from mme_triton.errors import UnsupportedPlatformError
from mme_triton.local.triton.platform import check_platform, glibc_version, platform_problem


@pytest.mark.parametrize(
    ("system", "machine", "glibc", "found"),
    [
        ("Darwin", "arm64", None, "found Darwin"),
        ("Windows", "AMD64", None, "found Windows"),
        ("Linux", "aarch64", (2, 39), "found Linux aarch64"),
        ("Linux", "x86_64", (2, 34), "glibc 2.34"),
        ("Linux", "x86_64", (2, 26), "glibc 2.26"),
        ("Linux", "x86_64", None, "other than glibc"),
    ],
    ids=["macos", "windows", "linux-arm", "glibc-2.34", "amazon-linux-2", "musl"],
)
def test_platform_problem_names_the_requirement_and_what_was_found(
    system: str, machine: str, glibc: tuple[int, int] | None, found: str
) -> None:
    problem = platform_problem(system, machine, glibc)

    assert problem is not None
    assert "Linux x86_64 with glibc >= 2.35" in problem
    assert found in problem


@pytest.mark.parametrize(
    ("machine", "glibc"),
    [("x86_64", (2, 35)), ("x86_64", (2, 39)), ("x86_64", (3, 0))],
    ids=["glibc-2.35", "glibc-2.39", "glibc-3.0"],
)
def test_platform_problem_accepts_supported_platforms(machine: str, glibc: tuple[int, int]) -> None:
    assert platform_problem("Linux", machine, glibc) is None


def test_glibc_version_agrees_with_the_standard_library() -> None:
    name, version = platform.libc_ver()
    if name != "glibc":
        assert glibc_version() is None
    else:
        major, minor = (int(part) for part in version.split(".")[:2])
        assert glibc_version() == (major, minor)


def test_check_platform_follows_platform_problem() -> None:
    problem = platform_problem(platform.system(), platform.machine(), glibc_version())
    if problem is None:
        check_platform()
    else:
        with pytest.raises(UnsupportedPlatformError, match=r"glibc >= 2\.35"):
            check_platform()
