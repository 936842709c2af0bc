"""``validate_model``: every problem Triton (or SageMaker, ten minutes into a deploy) would find, up front."""

from __future__ import annotations

import os
from pathlib import Path

from mme_triton.model.problems import Problem
from mme_triton.model.repository import JUNK_NAMES, load_model

__all__ = ["validate_model", "validate_repository"]


def validate_model(path: str | os.PathLike[str], *, local_stack: bool = False) -> list[Problem]:
    """Validate one Triton model directory and return every problem found (errors and warnings).

    Ensemble steps are looked up beside the model, in the same repository, and validated too (they
    ship in the same archive). A bad model is described, never raised: whatever the directory holds,
    no file outside the model is read, and FIFOs and other special files are never opened.

    Parameters:
        path: the model directory, e.g. ``"model_repository/resnet"``.
        local_stack: also warn (``local-stack-unsupported``) about every model the embedded stack
            (``mme_triton.local``, CPU only) cannot run, saying what runs instead: TensorFlow, TensorRT,
            DALI, FIL, OpenVINO, ... Such a model may still be fine for a SageMaker endpoint.

    Returns:
        The problems, each with ``severity``, a stable ``code``, a ``message`` and the ``path`` (plus
        ``line``/``column`` for config.pbtxt parse errors). Empty when the model is fine.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotADirectoryError: ``path`` (or a parent of it) is not a directory.
        PermissionError: ``path`` cannot be listed.
        OSError: any other reason ``path`` cannot be listed (a symbolic link loop, ...).

    Example::

        for problem in validate_model("model_repository/resnet"):
            print(problem)
        # model_repository/resnet/config.pbtxt:3:1: error config-unknown-field: unknown field ...
    """
    model = load_model(path)
    problems = list(model.problems)
    if local_stack:
        problems.extend(_local_stack_problems(model.members))
    return problems


def _local_stack_problems(members: tuple[Path, ...]) -> list[Problem]:
    from mme_triton.model import codes
    from mme_triton.model._layout import Layout
    from mme_triton.model.backends import first_version_contents, local_stack_problem, resolve_backend
    from mme_triton.model.config import CONFIG_FILENAME, parse_config_file
    from mme_triton.model.repository import model_versions

    problems: list[Problem] = []
    for member in members:
        config_file = member / CONFIG_FILENAME
        config = None
        if config_file.is_file() and not config_file.is_symlink():
            try:
                config, _ = parse_config_file(config_file)
            except OSError:
                continue  # reported by validation already
        layout = Layout(member, model_versions(member), config_present=config_file.exists())
        backend, platform = resolve_backend(config, first_version_contents(layout))
        reason = local_stack_problem(backend, platform)
        if reason is not None:
            what = f'platform "{platform}"' if platform else f'backend "{backend}"'
            problems.append(
                Problem(
                    "warning",
                    codes.LOCAL_STACK_UNSUPPORTED,
                    f"{what}: {reason}",
                    str(config_file if config_file.exists() else member),
                )
            )
    return problems


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
