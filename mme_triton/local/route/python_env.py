"""``EXECUTION_ENV_PATH`` on the embedded stack: served as the SageMaker container serves it, or refused with
the container's reason.

The stack's Triton runs the same python backend as the container, which handles the parameter itself
(:mod:`mme_triton.model._python_env` says how). Two things differ, and this module makes up for them before
Triton sees the model:

- **The stub's Python.** The container's stub runs the image's Python
  (:data:`~mme_triton._triton_releases.TRITON_PYTHON`, 3.10 for 24.09); the stack's runs this
  interpreter's. An environment of another Python than the image's fails in the container (its packages
  are not seen, triton-inference-server/server#8290), so the stack refuses it with that reason. An
  environment of the image's Python is served: with the stack's own stub when this interpreter is of that
  Python too, else with the wheel's stub for that Python put into the extracted copy's model directory as
  ``triton_python_backend_stub`` (the backend's own way to run another Python), which needs the
  environment's ``lib/libpython3.X.so`` (conda-pack environments carry it). A model directory with its
  own stub is served with it, as in the container.
- **The machine.** The backend unpacks the archive into ``/tmp/python_env_*`` with libarchive, checking
  neither sizes nor paths. The stack reads the archive first and refuses one that would unpack outside
  itself, beyond the endpoint's limits (its bytes, :data:`MAX_ENV_MEMBERS` entries, the expansion ratio)
  or past the free space of ``/tmp`` (keeping the stack's reserve).

A path the backend cannot resolve is left to Triton, whose message is the container's ("Failed to get the
canonical path for ..."), except where the stack's file system would answer differently from the
container's: a path outside the archive (absolute, relative to the server's working directory, or
through ``..``) is refused with that message at once.
"""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from mme_triton.local.route.extract import ExtractLimits
from mme_triton.local.route.support import UnsupportedModelError

if TYPE_CHECKING:
    from mme_triton.model._python_env import EnvLimits

__all__ = ["MAX_ENV_MEMBERS", "model_adapter", "prepare_environments"]

logger = logging.getLogger(__name__)

#: Entries an environment archive may have (a conda environment with PyTorch has some 30,000).
MAX_ENV_MEMBERS = 200_000
_TMP = Path("/tmp")  # the python backend's EnvironmentManager: mkdtemp("/tmp/python_env_XXXXXX")


def _image_python(image: str) -> tuple[str, str] | None:
    """``(release, Python)`` of a SageMaker Triton image URI, ``None`` for another image."""
    from mme_triton._triton_releases import TRITON_PYTHON
    from mme_triton.endpoint.images import triton_version_of

    release = triton_version_of(image)
    python = TRITON_PYTHON.get(release) if release else None
    return (release, python) if release and python else None


def _refuse(name: str, reason: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"model {name!r}: {reason}", model=name)


def _env_limits(limits: ExtractLimits) -> EnvLimits:
    from mme_triton.model._python_env import EnvLimits

    free = max(0, shutil.disk_usage(_TMP).free - limits.disk_reserve)
    return EnvLimits(
        max_members=MAX_ENV_MEMBERS,
        max_bytes=min(limits.max_bytes, free),
        max_ratio=limits.max_ratio,
        ratio_after=limits.ratio_after,
    )


def _wheel_stub(python: str) -> Path | None:
    from mme_triton.local.triton.wheel import find_triton

    stub = find_triton().stubs / python / "triton_python_backend_stub"
    return stub if stub.is_file() else None


def prepare_environments(root: Path, *, image: str, limits: ExtractLimits) -> list[str]:
    """Check (and, for another Python than this interpreter's, equip) every python model under ``root`` (an
    extracted archive) that has ``EXECUTION_ENV_PATH``; returns one line per change made.

    Raises:
        UnsupportedModelError: the container would not load the model, or the stack will not unpack its
            environment (the message says which, and why).
    """
    from mme_triton.model._python_env import (
        MODEL_DIRECTORY,
        STUB_NAME,
        env_location,
        scan_env_archive,
        stub_python,
    )
    from mme_triton.model.config import CONFIG_FILENAME, parse_config_file

    changes: list[str] = []
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        config_file = model_dir / CONFIG_FILENAME
        if not config_file.is_file():
            continue
        config, _ = parse_config_file(config_file)
        value = None if config is None else env_location(config)
        if value is None:
            continue
        name = model_dir.name
        canonical = f'"Failed to get the canonical path for {value}."'
        if not value.startswith(MODEL_DIRECTORY):
            where = (
                "the container's file system" if value.startswith("/") else "the server's working directory"
            )
            raise _refuse(
                name,
                f"the python backend fails with {canonical}: EXECUTION_ENV_PATH {value!r} is a path in "
                f"{where}, not in the model archive; write '{MODEL_DIRECTORY}/<file>'",
            )
        relative = PurePosixPath(value[len(MODEL_DIRECTORY) :].lstrip("/"))
        location = model_dir.joinpath(*relative.parts)
        if ".." in relative.parts and not location.resolve().is_relative_to(root.resolve()):
            raise _refuse(
                name,
                f"the python backend fails with {canonical}: EXECUTION_ENV_PATH leaves the archive, and only "
                "the archive is on the instance",
            )
        if not location.is_file():
            continue  # missing: Triton says so in the container's words; a directory: nothing to unpack
        contents = scan_env_archive(location, limits=_env_limits(limits))
        if contents.error is not None:
            raise _refuse(
                name,
                f"the environment archive {location.name} is refused: {contents.error} (the python backend "
                "unpacks it into /tmp and checks neither its size nor where its members go)",
            )
        own_stub = model_dir / STUB_NAME
        if own_stub.is_file():  # the backend runs the model's own stub, as in the container
            runner, python = f"the model's own {STUB_NAME}", stub_python(own_stub)
        else:
            found = _image_python(image)
            runner = f"the python backend of sagemaker-tritonserver:{found[0]}-py3" if found else ""
            python = found[1] if found else None
        if python is None or not contents.pythons:
            continue  # another image, or a Python of no telling: served as it is
        if contents.pythons != (python,):
            raise _refuse(
                name,
                f"{location.name} is a Python {' and '.join(contents.pythons)} environment and {runner} runs "
                f"Python {python}: the stub does not see the environment's packages, and the model's imports "
                "fail in the container (triton-inference-server/server#8290); rebuild the environment with "
                f"Python {python} or deploy a release whose Python it is",
            )
        here = f"{sys.version_info[0]}.{sys.version_info[1]}"
        if own_stub.is_file() or python == here:
            continue  # the model's own stub, or the stack's, runs this Python
        stub = _wheel_stub(python)
        if stub is None or python not in contents.libpython:
            raise _refuse(
                name,
                f"the embedded stack runs Python {here} and cannot start a Python {python} stub for "
                f"{location.name}: the environment carries no lib/libpython{python}.so (conda-pack "
                "environments do); the container would serve it",
            )
        shutil.copy2(stub, own_stub)
        changes.append(f"{name}: the wheel's Python {python} stub for its environment {location.name}")
    return changes


def model_adapter(*, gpu: bool, image: str, limits: ExtractLimits) -> Callable[[Path], list[str]]:
    """What the stack does to an extracted archive before Triton loads it: the GPU adaptation (with
    ``gpu``, :func:`~mme_triton.local.route.adapt.adapt_for_cpu`), then :func:`prepare_environments` for
    the endpoint's ``image``."""

    def adapt(root: Path) -> list[str]:
        changes: list[str] = []
        if gpu:
            from mme_triton.local.route.adapt import adapt_for_cpu

            changes.extend(adapt_for_cpu(root))
        changes.extend(prepare_environments(root, image=image, limits=limits))
        return changes

    return adapt
