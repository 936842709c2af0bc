"""Build a model directory beside its destination and move it into place only once it validates."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from mme_triton.errors import ModelValidationError
from mme_triton.model.problems import Problem

__all__ = ["check_model_name", "staged_model_dir", "unstaged"]

logger = logging.getLogger(__name__)


def check_model_name(name: str, what: str = "model name") -> None:
    """The rule for the name of a model directory the library creates (its name is the model's name).

    Not empty, no whitespace (Triton's python backend starts a model's stub through a shell, so a name
    with a space cannot load), no ``/`` (one directory), and no leading ``.`` (a hidden directory, which
    repository-wide tools skip, and the form of the library's own staging directories).

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: it breaks the rule (the message says which part).
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, got {type(name).__name__}")
    if not name or any(c.isspace() for c in name) or "/" in name or name.startswith("."):
        raise ValueError(
            f"{what} {name!r} must be a non-empty directory name without whitespace or '/', not starting "
            "with '.'"
        )


@contextmanager
def staged_model_dir(target: Path, *, siblings: tuple[Path, ...] = ()) -> Iterator[Path]:
    """Yield an empty model directory beside ``target``; on a clean exit validate it and move it there.

    The staged directory has ``target``'s name (so the config's name and the directory agree) and sits
    in a hidden directory of ``target``'s parent, where ``siblings`` (models it needs, e.g. the steps of
    an ensemble) are linked beside it for validation. An exception inside the block, or a validation
    error, removes everything that was written.

    Raises:
        ModelValidationError: the staged model has validation errors.
    """
    from mme_triton.model.validate import validate_model

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
    try:
        staged = staging / target.name
        staged.mkdir()
        for sibling in siblings:
            (staging / sibling.name).symlink_to(sibling.resolve(), target_is_directory=True)
        yield staged
        problems = validate_model(staged)
        for problem in problems:
            logger.debug("staged model %s: %s", target.name, problem)
        if any(p.severity == "error" for p in problems):
            shown = [unstaged(p, staging, target.parent) for p in problems]
            raise ModelValidationError(str(target), shown)
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def unstaged(problem: Problem, staging: Path, parent: Path) -> Problem:
    """``problem`` with the staging directory in its path replaced by the real parent directory."""
    return replace(problem, path=problem.path.replace(str(staging), str(parent)))
