"""Running a ``tritonserver`` process: a free port, its log, and stopping it with everything it started."""

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
from pathlib import Path
from typing import IO

from mme_triton.errors import LocalStackError
from mme_triton.local.triton.procfs import remove_shm_regions

__all__ = [
    "LOG_TAIL_BYTES",
    "check_hash",
    "error_message",
    "finalize",
    "free_port",
    "log_summary",
    "read_tail",
    "startup_failure",
    "terminate",
]

logger = logging.getLogger("mme_triton.local.triton.server")

LOG_TAIL_BYTES = 4000
# "<path of the binary>: unrecognized option ..." as getopt writes it.
_ARGV0 = re.compile(r"^\S*/tritonserver: ")


class _PortInUseError(LocalStackError):
    """The chosen free port was taken before Triton bound it."""


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


def finalize(
    process: subprocess.Popen[bytes] | None, log: IO[bytes] | None, tmp: str | None, shm_prefix: str = ""
) -> None:
    if process is not None:
        terminate(process, 5.0)
    if log is not None:
        log.close()
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    if shm_prefix:
        remove_shm_regions(shm_prefix)
