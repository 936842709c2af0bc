"""``EXECUTION_ENV_PATH``: a python model's own environment, checked the way Triton's python backend uses it.

What the backend does (triton-inference-server/python_backend, ``src/python_be.cc``, ``src/pb_env.cc``,
``src/stub_launcher.cc``, the same from r23.05 to r25.x):

- it replaces ``$$TRITON_MODEL_DIRECTORY`` in the parameter with the model's directory and nothing else:
  any other relative path is resolved against the server's working directory;
- ``realpath()`` of the result must exist, else the load fails with "Failed to get the canonical path for
  <path>.";
- a directory is used as it is; a file is unpacked with libarchive (gzip-compressed or plain tar only)
  into ``/tmp/python_env_*/<n>`` when a model first loads from that path, on every cold load of a model
  on a multi-model endpoint (each load is a new path);
- the stub is started as ``source <env>/bin/activate && exec env LD_LIBRARY_PATH=<env>/lib:...
  <stub> ...``: without ``bin/activate`` the load fails ("The Python environment should contain an
  'activate' script"); ``conda-unpack`` is not run;
- the stub is the backend's, built for the image's Python, unless the model directory holds its own
  ``triton_python_backend_stub``; an environment of another Python is not what that stub runs (its
  packages are not found: triton-inference-server/server#8290).

:func:`check_python_env` reports what fails whatever the image; :func:`check_env_python` compares the
environment's Python with the one of a SageMaker Triton release
(:data:`mme_triton._triton_releases.TRITON_PYTHON`).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mme_triton.model import codes
from mme_triton.model._files import open_regular, path_kind
from mme_triton.model._pb import ModelConfig
from mme_triton.model.problems import Problem, Severity

__all__ = [
    "EXECUTION_ENV_PATH",
    "LARGE_ENV_BYTES",
    "MODEL_DIRECTORY",
    "STUB_NAME",
    "EnvContents",
    "EnvLimits",
    "check_env_python",
    "check_python_env",
    "env_contents",
    "env_location",
    "scan_env_archive",
    "stub_python",
]

EXECUTION_ENV_PATH = "EXECUTION_ENV_PATH"
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
STUB_NAME = "triton_python_backend_stub"

#: Unpacked size from which an environment archive gets a ``python-env-large`` warning.
LARGE_ENV_BYTES = 512 * 1024 * 1024

_PYTHON_DIR = re.compile(r"^lib/python(3\.\d+)/")
_PYTHON_BIN = re.compile(r"^bin/python(3\.\d+)$")
_LIBPYTHON = re.compile(r"^lib/libpython(3\.\d+)\.so")
_STUB_LIBPYTHON = re.compile(rb"libpython(3\.\d+)\.so")
_CHUNK = 1 << 20
_CACHE: OrderedDict[tuple[str, int, int], EnvContents] = OrderedDict()
_CACHE_SIZE = 32


@dataclass(frozen=True)
class EnvLimits:
    """Bounds for reading an environment archive (the embedded stack's); ``None``: no bound."""

    max_members: int | None = None
    max_bytes: int | None = None
    max_ratio: float | None = None
    ratio_after: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class EnvContents:
    """What an environment (archive or directory) holds, as far as the python backend cares."""

    pythons: tuple[str, ...] = ()
    """Python versions it has (``lib/python3.X/``, ``bin/python3.X``), e.g. ``("3.10",)``."""
    activate: bool = False
    """It has ``bin/activate``."""
    libpython: tuple[str, ...] = ()
    """Versions of the ``lib/libpython3.X.so*`` it carries."""
    members: int = 0
    unpacked: int = 0
    """Bytes of its regular files."""
    error: str | None = None
    """Why the backend cannot unpack or use it (not gzip or tar, a member that leaves it, a limit)."""


def env_location(config: ModelConfig) -> str | None:
    """The ``EXECUTION_ENV_PATH`` parameter's value, ``None`` without one."""
    parameter = config.parameters.get(EXECUTION_ENV_PATH)
    return None if parameter is None else str(parameter.string_value)


def _member_problem(member: tarfile.TarInfo, name: str, links: set[str]) -> str | None:
    path = PurePosixPath(name)
    if name.startswith("/") or ".." in path.parts:
        return f"member {member.name!r} is written outside the environment"
    if any(str(parent) in links for parent in path.parents if str(parent) != "."):
        return f"member {member.name!r} is written through a symbolic link of the archive"
    if member.islnk():
        target = PurePosixPath(member.linkname.removeprefix("./"))
        if member.linkname.startswith("/") or ".." in target.parts:
            return f"hard link {member.name!r} points outside the environment ({member.linkname!r})"
    if member.ischr() or member.isblk() or member.isfifo():
        return f"member {member.name!r} is a device or FIFO"
    return None


class _Counting(io.RawIOBase):
    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        self.count += len(data)
        return len(data)


def scan_env_archive(path: Path, *, limits: EnvLimits | None = None) -> EnvContents:
    """Read an environment archive's member list (the whole stream: members are not in any order).

    Never raises for the archive's content: what the backend could not unpack is the ``error``.

    Raises:
        OSError: the file cannot be opened.
    """
    limits = limits or EnvLimits()
    pythons: set[str] = set()
    libpython: set[str] = set()
    links: set[str] = set()
    activate = False
    members = unpacked = 0
    with open_regular(path) as raw:
        counter = _Counting(raw)
        buffered = io.BufferedReader(counter, buffer_size=_CHUNK)
        magic = buffered.peek(6)[:6]
        if magic.startswith((b"BZh", b"\xfd7zXZ\x00", b"PK\x03\x04", b"\x28\xb5\x2f\xfd")):
            return EnvContents(
                error="it is not gzip-compressed or a plain tar, the only archives the python backend reads"
            )
        stream: Any = gzip.GzipFile(fileobj=buffered) if magic.startswith(b"\x1f\x8b") else buffered
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    members += 1
                    name = member.name.removeprefix("./").rstrip("/")
                    if not name or name == ".":
                        continue
                    problem = _member_problem(member, name, links)
                    if problem is not None:
                        return EnvContents(error=problem, members=members)
                    if member.issym():
                        links.add(name)
                    if member.isreg():
                        unpacked += member.size
                    activate = activate or name == "bin/activate"
                    for pattern, found in (
                        (_PYTHON_DIR, pythons),
                        (_PYTHON_BIN, pythons),
                        (_LIBPYTHON, libpython),
                    ):
                        match = pattern.match(name if pattern is not _PYTHON_DIR else name + "/")
                        if match:
                            found.add(match.group(1))
                    limit = _over_limit(limits, members, unpacked, counter.count)
                    if limit is not None:
                        return EnvContents(error=limit, members=members, unpacked=unpacked)
        except (tarfile.TarError, OSError, EOFError, ValueError) as exc:
            return EnvContents(error=f"it cannot be read as a tar archive ({exc})", members=members)
    return EnvContents(
        pythons=tuple(sorted(pythons)),
        activate=activate,
        libpython=tuple(sorted(libpython)),
        members=members,
        unpacked=unpacked,
    )


def _over_limit(limits: EnvLimits, members: int, unpacked: int, read: int) -> str | None:
    if limits.max_members is not None and members > limits.max_members:
        return f"it has more than {limits.max_members} entries"
    if limits.max_bytes is not None and unpacked > limits.max_bytes:
        return f"it unpacks to more than {limits.max_bytes} bytes"
    if (
        limits.max_ratio is not None
        and unpacked > limits.ratio_after
        and unpacked / max(1, read) > limits.max_ratio
    ):
        return f"it expands more than {limits.max_ratio:g} times"
    return None


def _scan_directory(path: Path) -> EnvContents:
    pythons: set[str] = set()
    libpython: set[str] = set()
    for sub in ("lib", "bin"):
        try:
            with os.scandir(path / sub) as it:
                names = [entry.name for entry in it]
        except OSError:
            continue
        for name in names:
            relative = f"{sub}/{name}"
            for pattern, found in ((_PYTHON_DIR, pythons), (_PYTHON_BIN, pythons), (_LIBPYTHON, libpython)):
                match = pattern.match(relative + "/" if pattern is _PYTHON_DIR else relative)
                if match:
                    found.add(match.group(1))
    return EnvContents(
        pythons=tuple(sorted(pythons)),
        activate=path_kind(path / "bin" / "activate") == "file",
        libpython=tuple(sorted(libpython)),
    )


def env_contents(path: Path) -> EnvContents:
    """What the environment at ``path`` (an archive or a directory) holds; archives are read once per
    content (cached by path, size and modification time).

    Raises:
        OSError: it cannot be read.
    """
    if path_kind(path) == "dir":
        return _scan_directory(path)
    info = path.stat()
    key = (str(path), info.st_size, info.st_mtime_ns)
    cached = _CACHE.get(key)
    if cached is not None:
        _CACHE.move_to_end(key)
        return cached
    contents = scan_env_archive(path)
    _CACHE[key] = contents
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return contents


def stub_python(path: Path) -> str | None:
    """The Python version a ``triton_python_backend_stub`` links (``libpython3.X.so``), ``None`` when the
    file names none."""
    tail = b""
    with open_regular(path) as file:
        while chunk := file.read(_CHUNK):
            match = _STUB_LIBPYTHON.search(tail + chunk)
            if match:
                return match.group(1).decode()
            tail = chunk[-32:]
    return None


def _where(config_file: Path, value: str) -> tuple[int | None, int | None]:
    """Line and column of the parameter's value in config.pbtxt (the key's line when the value is not
    found as written)."""
    try:
        text = config_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, None
    for needle in (f'"{value}"', EXECUTION_ENV_PATH):
        for number, line in enumerate(text.splitlines(), start=1):
            column = line.find(needle)
            if column >= 0:
                return number, column + 1
    return None, None


def _env_problem(severity: Severity, code: str, message: str, model_dir: Path, value: str) -> Problem:
    config_file = model_dir / "config.pbtxt"
    line, column = _where(config_file, value)
    return Problem(severity, code, message, str(config_file), line=line, column=column)


def _resolve(model_dir: Path, value: str) -> Path | None:
    """The environment's path inside the model directory, ``None`` when it points outside it."""
    relative = PurePosixPath(value[len(MODEL_DIRECTORY) :].lstrip("/"))
    if ".." in relative.parts or not relative.parts:
        return None
    return model_dir.joinpath(*relative.parts)


def _archives_beside(model_dir: Path) -> list[str]:
    try:
        with os.scandir(model_dir) as it:
            return sorted(e.name for e in it if e.name.endswith((".tar.gz", ".tgz", ".tar")))
    except OSError:
        return []


def check_python_env(model_dir: Path, config: ModelConfig) -> list[Problem]:
    """What fails with ``EXECUTION_ENV_PATH`` whatever the image: a path that is not in the model, an
    environment the backend cannot unpack or activate, and (a warning) its size."""
    value = env_location(config)
    if value is None:
        return []

    def problem(severity: Severity, code: str, message: str) -> list[Problem]:
        return [_env_problem(severity, code, message, model_dir, value)]

    if not value.startswith(MODEL_DIRECTORY):
        if value.startswith("/"):
            return problem(
                "warning",
                codes.PYTHON_ENV_OUTSIDE_MODEL,
                f"EXECUTION_ENV_PATH is {value!r}, a path in the container: SageMaker puts only the model "
                "archive on the instance and a SageMaker Triton image has no such environment, so the load "
                f'fails ("Failed to get the canonical path for {value}.") unless the image was built with '
                f"it; ship it in the model directory and write '{MODEL_DIRECTORY}/<file>'",
            )
        return problem(
            "error",
            codes.PYTHON_ENV_MISSING,
            f"EXECUTION_ENV_PATH is {value!r}, which the python backend resolves against the server's "
            f"working directory, not the model directory (it replaces only {MODEL_DIRECTORY}): the load "
            f'fails with "Failed to get the canonical path for {value}."; write '
            f"'{MODEL_DIRECTORY}/{value}'",
        )
    location = _resolve(model_dir, value)
    if location is None:
        return problem(
            "error",
            codes.PYTHON_ENV_MISSING,
            f"EXECUTION_ENV_PATH is {value!r}, outside the model directory: only the model directory goes "
            "into the archive, so the environment is not there when the model loads; move it into the model "
            "directory",
        )
    kind = path_kind(location)
    if kind not in ("file", "dir"):
        beside = _archives_beside(model_dir)
        hint = f" (the model directory has {', '.join(beside)})" if beside else ""
        relative = location.relative_to(model_dir).as_posix()
        return problem(
            "error",
            codes.PYTHON_ENV_MISSING,
            f"EXECUTION_ENV_PATH is {value!r} but {relative!r} is not in the model directory{hint}; the load "
            f'fails with "Failed to get the canonical path for <model directory>/{relative}.": add the '
            "conda-pack archive, fix the name, or remove the parameter",
        )
    try:
        contents = env_contents(location)
    except OSError as exc:
        return problem(
            "error", codes.PYTHON_ENV_INVALID, f"the environment cannot be read ({exc.strerror or exc})"
        )
    name = location.name
    if contents.error is not None:
        return problem(
            "error",
            codes.PYTHON_ENV_INVALID,
            f"{name}: {contents.error}; the python backend cannot unpack it and the model fails to load",
        )
    if not contents.activate:
        return problem(
            "error",
            codes.PYTHON_ENV_INVALID,
            f"{name} has no bin/activate: the python backend starts the model's stub with 'source "
            "<environment>/bin/activate' and refuses an environment without one; pack it with conda-pack",
        )
    if kind == "file" and contents.unpacked >= LARGE_ENV_BYTES:
        mib = contents.unpacked / 2**20
        return problem(
            "warning",
            codes.PYTHON_ENV_LARGE,
            f"{name} unpacks to {mib:,.0f} MiB: the python backend unpacks it into /tmp on every cold load "
            "of the model (on a multi-model endpoint, again after each eviction) before the model is ready; "
            "trim it, or ship it unpacked and point EXECUTION_ENV_PATH at the directory",
        )
    return []


def check_env_python(model_dir: Path, config: ModelConfig, *, python: str, image: str) -> list[Problem]:
    """``python-env-python-mismatch`` when the environment's Python is not the one the stub runs: the
    model directory's own ``triton_python_backend_stub`` if it has one, else the image's (``python``,
    for ``image``, a description such as ``sagemaker-tritonserver:24.09-py3``)."""
    value = env_location(config)
    if value is None or not value.startswith(MODEL_DIRECTORY):
        return []
    location = _resolve(model_dir, value)
    if location is None or path_kind(location) not in ("file", "dir"):
        return []
    try:
        contents = env_contents(location)
        stub = model_dir / STUB_NAME
        own = stub_python(stub) if path_kind(stub) == "file" else None
    except OSError:
        return []
    if contents.error is not None or not contents.pythons:
        return []
    wanted, runner = (
        (own, f"the model's own {STUB_NAME}") if own else (python, f"the python backend of {image}")
    )
    if contents.pythons == (wanted,):
        return []
    found = " and ".join(contents.pythons)
    return [
        _env_problem(
            "error",
            codes.PYTHON_ENV_PYTHON_MISMATCH,
            f"{location.name} is a Python {found} environment but {runner} runs Python {wanted}: the stub "
            "does not see the environment's packages and the model fails to load (ModuleNotFoundError, "
            f"triton-inference-server/server#8290); rebuild it with Python {wanted}, deploy a release whose "
            f"python backend runs {found}, or ship a {STUB_NAME} built for {found} in the model directory",
            model_dir,
            value,
        )
    ]
