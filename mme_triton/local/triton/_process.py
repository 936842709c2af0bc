"""Running a ``tritonserver`` process: its arguments, a free port, its log, its errors, and stopping it with
everything it started."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from mme_triton.errors import LocalStackError
from mme_triton.local.triton.procfs import remove_shm_regions

__all__ = [
    "LOG_TAIL_BYTES",
    "TritonLoadError",
    "TritonRequestError",
    "TritonStartError",
    "TritonTimeoutError",
    "check_hash",
    "error_message",
    "finalize",
    "free_port",
    "log_summary",
    "read_tail",
    "server_argv",
    "socket_directory",
    "spawn",
    "startup_failure",
    "terminate",
    "wait_until_ready",
]

logger = logging.getLogger("mme_triton.local.triton.server")

LOG_TAIL_BYTES = 4000
# "<path of the binary>: unrecognized option ..." as getopt writes it.
_ARGV0 = re.compile(r"^\S*/tritonserver: ")


class TritonRequestError(LocalStackError):
    """Triton's SageMaker front-end answered a control request with an error status."""

    def __init__(self, message: str, *, status: int, model_hash: str | None = None) -> None:
        self.status = status
        self.message = message
        self.model_hash = model_hash
        super().__init__(f"Triton answered HTTP {status}: {message}")


class TritonStartError(LocalStackError):
    """``tritonserver`` exited while starting; the message carries its reason, ``log`` the log's tail."""

    def __init__(self, message: str, *, returncode: int, log: str) -> None:
        self.returncode = returncode
        self.log = log
        super().__init__(message)


class TritonTimeoutError(LocalStackError):
    """Triton did not answer a request within its timeout (the request may still be running there)."""


class TritonLoadError(TritonRequestError):
    """``POST /models`` failed: ``status`` is Triton's HTTP status (400, 507 ...), ``message`` its error."""


class _PortInUseError(LocalStackError):
    """The chosen free port was taken before Triton bound it."""


def server_argv(
    server: Path,
    *,
    log_verbose: int,
    extra_args: Sequence[str],
    port: int,
    repository: Path,
    backends: Path,
    shm_prefix: str,
    own_ports: Sequence[str],
) -> list[str]:
    """``tritonserver``'s command line: the serve script's arguments first, then what the stack must
    decide, which wins over them (``own_ports``: :func:`~mme_triton.local.triton.ports.port_args`)."""
    return [
        str(server),
        "--exit-timeout-secs=5",
        f"--log-verbose={log_verbose}",
        *extra_args,
        "--allow-sagemaker=true",
        f"--sagemaker-port={port}",
        *own_ports,
        "--allow-vertex-ai=false",
        "--model-control-mode=explicit",
        f"--model-repository={repository}",
        f"--backend-directory={backends}",
        f"--backend-config=python,shm-region-prefix-name={shm_prefix}",
    ]


def socket_directory() -> str:
    """A fresh private directory (0700) for a server's unix socket, with a path short enough for one."""
    directory = tempfile.mkdtemp(prefix="mme-triton-")
    if len(directory) + len("/triton.sock") > 107:  # sun_path holds 108 bytes
        os.rmdir(directory)
        directory = tempfile.mkdtemp(prefix="mmt-", dir="/tmp")
    return directory


def check_hash(model_hash: str) -> None:
    """Refuse a model hash that is empty or holds '/' or whitespace (it goes into a URL path)."""
    if not model_hash or "/" in model_hash or any(c.isspace() for c in model_hash):
        raise ValueError(f"model_hash must be a non-empty name without '/' or spaces, got {model_hash!r}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_summary(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """Triton's error lines (a bad option is reported before a long usage text) and the log's tail."""
    try:
        with path.open("rb") as fh:
            head = fh.read(200_000).decode("utf-8", "replace")
    except OSError:
        return ""
    errors = [
        line
        for line in head.splitlines()
        if (line.startswith("E") and line[1:5].isdigit()) or "unrecognized option" in line or "error:" in line
    ][:20]
    tail = read_tail(path, limit)
    if not errors:
        return tail
    return "\n".join(errors) + "\n--- end of the log ---\n" + tail[-limit // 2 :]


def startup_failure(path: Path) -> str:
    """Why ``tritonserver`` refused to start, in its own words, on one line.

    A bad option is reported after the whole usage text (``Bad option: "--log-verbose".`` and the
    reason), an unknown one before it; errors of a failed start are ``E``-lines.
    """
    try:
        with path.open("rb") as fh:
            text = fh.read(400_000).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines()]
    for marker in ("Bad option:", "Unexpected argument:"):
        found = [i for i, line in enumerate(lines) if line.startswith(marker)]
        if found:
            return " ".join(line for line in lines[found[-1] :] if line)
    reasons = [
        _ARGV0.sub("tritonserver: ", line)  # getopt names the binary by its path: this machine's
        for line in lines
        if "unrecognized option" in line
        or "is ambiguous" in line
        or (line[:1] == "E" and line[1:5].isdigit())
    ]
    if reasons:
        return " ".join(reasons[:5])
    return " ".join(line for line in lines[-5:] if line)


def error_message(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return str(parsed["error"])
    return text


def terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the server, then SIGKILL its whole process group (stubs included) if it lingers."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            logger.warning(
                "tritonserver (pid %d) ignored SIGTERM for %.1fs; killing it", process.pid, timeout
            )
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    # Stubs watch their parent and exit with it; anything left in the group is ours to end.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def spawn(
    argv: Sequence[str], *, log_path: Path, env: Mapping[str, str], cwd: str
) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """Start ``argv`` in a session of its own (its process group is stopped with it), writing its output
    to ``log_path``; returns the process and the open log.

    Raises:
        LocalStackError: it could not be run.
    """
    log_file = log_path.open("wb")
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        log_file.close()
        raise LocalStackError(f"cannot run {argv[0]}: {exc}") from exc
    return process, log_file


def wait_until_ready(
    process: subprocess.Popen[bytes],
    log_path: Path,
    ping: Callable[..., bool],
    *,
    started: float,
    timeout: float,
) -> None:
    """Return once ``ping(timeout=1.0)`` is true; raise when the process exits first (stopping it when it
    is still not ready ``timeout`` seconds after ``started``, a :func:`time.monotonic` value).

    Raises:
        TritonStartError: it exited while starting, with its reason.
        LocalStackError: it was not ready in time (the log's tail).
    """
    while True:
        code = process.poll()
        if code is not None:
            tail = log_summary(log_path)
            if "already in use" in tail:
                raise _PortInUseError("the port was already in use")
            raise TritonStartError(
                f"tritonserver exited with status {code} while starting: {startup_failure(log_path)}",
                returncode=code,
                log=tail,
            )
        if ping(timeout=1.0):
            return
        if time.monotonic() > started + timeout:
            tail = log_summary(log_path)
            terminate(process, 5.0)
            raise LocalStackError(f"tritonserver was not ready after {timeout:.0f}s:\n{tail}")
        time.sleep(0.05)


def finalize(
    process: subprocess.Popen[bytes] | None,
    log: IO[bytes] | None,
    directories: Sequence[str | None],
    shm_prefix: str = "",
) -> None:
    if process is not None:
        terminate(process, 5.0)
    if log is not None:
        log.close()
    for directory in directories:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    if shm_prefix:
        remove_shm_regions(shm_prefix)
