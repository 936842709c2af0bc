"""Where the Triton server of the ``nvidia-pytriton`` wheel is, and which Python its stubs need.

The wheel bundles ``tritonserver`` (Triton 2.51), the python backend, one python-backend stub per Python
version and the shared libraries they link (see ``LOCAL_TRITON.md`` in the docs for the verified steps).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from mme_triton.errors import LocalStackError

__all__ = [
    "INSTALL_HINT",
    "STACK_BACKENDS",
    "PythonInfo",
    "TritonInstallation",
    "find_triton",
    "prepare_backends",
    "python_info",
    "python_stub",
    "server_environment",
]

INSTALL_HINT = "pip install 'mme-triton[local]'"

#: The stack's own python-based backends, shipped in ``mme_triton/local/triton/backends/<name>/model.py``.
STACK_BACKENDS = ("onnxruntime", "pytorch")
_BACKENDS = Path(__file__).parent / "backends"


@dataclass(frozen=True)
class TritonInstallation:
    """Where the pieces of the ``nvidia-pytriton`` wheel are."""

    server: Path
    """The ``tritonserver`` binary."""
    backends: Path
    """The wheel's ``backends/`` directory (the python backend)."""
    stubs: Path
    """``python_backend_stubs/`` with one ``<X.Y>/triton_python_backend_stub`` per Python version."""
    libs: Path
    """``site-packages/nvidia_pytriton.libs``: the shared libraries the binary links."""


def find_triton() -> TritonInstallation:
    """Locate the Triton server shipped in the ``nvidia-pytriton`` wheel.

    Raises:
        LocalStackError: ``nvidia-pytriton`` is not installed (the message says how to install it) or the
            installation lacks a piece.

    Example::

        find_triton().server.name  # 'tritonserver'
    """
    try:
        spec = importlib.util.find_spec("pytriton")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise LocalStackError(
            "the embedded stack needs the Triton server from nvidia-pytriton; "
            f"install it with: {INSTALL_HINT}"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    root = package / "tritonserver"
    found = TritonInstallation(
        server=root / "bin" / "tritonserver",
        backends=root / "backends",
        stubs=root / "python_backend_stubs",
        libs=package.parent / "nvidia_pytriton.libs",
    )
    for path in (found.server, found.backends / "python", found.stubs, found.libs):
        if not path.exists():
            raise LocalStackError(
                f"the nvidia-pytriton installation at {package} is incomplete ({path} is missing); "
                f"reinstall it with: {INSTALL_HINT}"
            )
    return found


@dataclass(frozen=True)
class PythonInfo:
    """The interpreter whose packages python-backend models see."""

    executable: str
    version: str  # "3.11"
    libdir: str


def python_info(executable: str | None) -> PythonInfo:
    # Not realpath: a venv's python is a link to its base interpreter, and two venvs of one base Python
    # must stay two interpreters with their own packages.
    if executable is None or os.path.abspath(executable) == os.path.abspath(sys.executable):
        return PythonInfo(
            executable=sys.executable,
            version=f"{sys.version_info[0]}.{sys.version_info[1]}",
            libdir=str(sysconfig.get_config_var("LIBDIR") or ""),
        )
    probe = (
        "import json, sys, sysconfig; print(json.dumps(['%d.%d' % sys.version_info[:2], "
        "sysconfig.get_config_var('LIBDIR') or '']))"
    )
    try:
        out = subprocess.run(
            [executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
        )
        version, libdir = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise LocalStackError(f"cannot query the Python interpreter {executable!r}: {exc}") from exc
    return PythonInfo(executable=executable, version=str(version), libdir=str(libdir))


def python_stub(installation: TritonInstallation, python: PythonInfo) -> Path:
    """The wheel's python-backend stub for ``python``'s version.

    Raises:
        LocalStackError: the wheel has none for that version.
    """
    stub = installation.stubs / python.version / "triton_python_backend_stub"
    if not stub.is_file():
        raise LocalStackError(
            f"nvidia-pytriton has no python-backend stub for Python {python.version} "
            f"(looked for {stub}); use a Python it supports (3.8-3.13)"
        )
    return stub


def prepare_backends(directory: Path, installation: TritonInstallation, stub: Path) -> Path:
    """A writable ``backends/`` under ``directory``: the wheel's python backend with ``stub`` in it, and
    the stack's python-based backends (``onnxruntime``, ``pytorch``) beside it. Returns its path."""
    backends = directory / "backends"
    shutil.copytree(installation.backends, backends, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(stub, backends / "python" / "triton_python_backend_stub")
    for name in STACK_BACKENDS:
        target = backends / name
        target.mkdir(exist_ok=True)
        shutil.copy2(_BACKENDS / name / "model.py", target / "model.py")
    return backends


def server_environment(installation: TritonInstallation, python: PythonInfo) -> dict[str, str]:
    """This process's environment, set up for ``tritonserver`` and its python-backend stubs."""
    env = dict(os.environ)
    # The stub links libpython3.X.so: the running interpreter's copy must win over the distribution's.
    lib_dirs = [d for d in (python.libdir, str(installation.libs)) if d]
    if env.get("LD_LIBRARY_PATH"):
        lib_dirs.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(lib_dirs)
    # The stub's Python ignores PYTHONPATH and finds its packages through the python3 on PATH.
    bin_dir = os.path.dirname(os.path.abspath(python.executable))
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    env["SAGEMAKER_MULTI_MODEL"] = "true"
    return env
