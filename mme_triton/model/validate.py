"""``validate_model``: every problem Triton (or SageMaker, ten minutes into a deploy) would find, up front."""

from __future__ import annotations

import os
from pathlib import Path

from mme_triton.model.problems import Problem
from mme_triton.model.repository import JUNK_NAMES, load_model

__all__ = ["validate_model", "validate_repository"]


def validate_model(path: str | os.PathLike[str]) -> list[Problem]:
    """Validate one Triton model directory and return every problem found (errors and warnings).

    Ensemble steps are looked up beside the model, in the same repository, and validated too (they
    ship in the same archive). A bad model is described, never raised: whatever the directory holds,
    no file outside the model is read, and FIFOs and other special files are never opened.

    Parameters:
        path: the model directory, e.g. ``"model_repository/resnet"``.

    Returns:
        The problems, each with ``severity``, a stable ``code``, a ``message`` and the ``path`` (plus
        ``line``/``column`` for config.pbtxt parse errors). Empty when the model is fine.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotADirectoryError: ``path`` (or a parent of it) is not a directory.
        PermissionError: ``path`` cannot be listed.
        OSError: any other reason ``path`` cannot be listed (a symbolic link loop, ...).

    Example:
        >>> for problem in validate_model("model_repository/resnet"):
        ...     print(problem)  # doctest: +SKIP
        model_repository/resnet/config.pbtxt:3:1: error config-unknown-field: unknown field ...
    """
    return list(load_model(path).problems)


def validate_repository(path: str | os.PathLike[str]) -> dict[str, list[Problem]]:
    """Validate every model directory in a model repository; maps model name to its problems.

    Raises:
        FileNotFoundError, NotADirectoryError, PermissionError: ``path`` cannot be listed.
    """
    repository = Path(path)
    results: dict[str, list[Problem]] = {}
    with os.scandir(repository) as it:
        names = sorted(
            entry.name
            for entry in it
            # a linked model directory is a model too, as for validate_model; a dangling link is not
            if entry.is_dir() and entry.name not in JUNK_NAMES and not entry.name.startswith(".")
        )
    for name in names:
        results[name] = validate_model(repository / name)
    return results
