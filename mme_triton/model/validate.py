"""``validate_model``: every problem Triton (or SageMaker, ten minutes into a deploy) would find, up front."""

from __future__ import annotations

import os
from pathlib import Path

from mme_triton.model.problems import Problem
from mme_triton.model.repository import JUNK_NAMES, load_model

__all__ = ["environment_problems", "python_of_release", "validate_model", "validate_repository"]


def validate_model(
    path: str | os.PathLike[str], *, local_stack: bool = False, triton_version: str | None = None
) -> list[Problem]:
    """Validate one Triton model directory and return every problem found (errors and warnings).

    Ensemble steps are looked up beside the model, in the same repository, and validated too (they
    ship in the same archive). A bad model is described, never raised: whatever the directory holds,
    no file outside the model is read, and FIFOs and other special files are never opened.

    Parameters:
        path: the model directory, e.g. ``"model_repository/resnet"``.
        local_stack: also warn (``local-stack-unsupported``) about every model the embedded stack
            (``mme_triton.local``, CPU only) cannot run, saying what runs instead: TensorFlow, TensorRT,
            DALI, FIL, OpenVINO, ... Such a model may still be fine for a SageMaker endpoint.
        triton_version: the SageMaker Triton release the model will run on (``"24.09"``; default
            :data:`~mme_triton.endpoint.images.DEFAULT_TRITON_VERSION`, what ``deploy_mme`` deploys):
            a python model's ``EXECUTION_ENV_PATH`` environment must be of the Python its python backend
            runs (``python-env-python-mismatch``; :data:`~mme_triton.endpoint.images.TRITON_PYTHON`).

    Returns:
        The problems, each with ``severity``, a stable ``code``, a ``message`` and the ``path`` (plus
        ``line``/``column`` for config.pbtxt parse errors). Empty when the model is fine.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotADirectoryError: ``path`` (or a parent of it) is not a directory.
        PermissionError: ``path`` cannot be listed.
        OSError: any other reason ``path`` cannot be listed (a symbolic link loop, ...).
        ValueError: ``triton_version`` is not a release SageMaker publishes.

    Example::

        for problem in validate_model("model_repository/resnet"):
            print(problem)
        # model_repository/resnet/config.pbtxt:3:1: error config-unknown-field: unknown field ...
    """
    release = python_of_release(triton_version)
    model = load_model(path)
    problems = list(model.problems)
    problems.extend(environment_problems(model.members, release))
    if local_stack:
        problems.extend(_local_stack_problems(model.members))
    return problems


def python_of_release(triton_version: str | None) -> tuple[str, str]:
    """``(release, Python)`` of a SageMaker Triton release (the default one for ``None``).

    Raises:
        ValueError: not a release SageMaker publishes.
    """
    from mme_triton._triton_releases import DEFAULT_TRITON_VERSION, TRITON_PYTHON

    release = DEFAULT_TRITON_VERSION if triton_version is None else triton_version
    python = TRITON_PYTHON.get(release)
    if python is None:
        raise ValueError(
            f"SageMaker publishes no Triton image {release!r}; known versions: {', '.join(TRITON_PYTHON)}"
        )
    return release, python


def environment_problems(members: tuple[Path, ...], release: tuple[str, str]) -> list[Problem]:
    """``python-env-python-mismatch`` for each python model of ``members`` whose ``EXECUTION_ENV_PATH``
    environment is not of the Python the ``release`` runs (``(YY.MM, X.Y)``)."""
    from mme_triton.model._python_env import EXECUTION_ENV_PATH, check_env_python
    from mme_triton.model.config import CONFIG_FILENAME, parse_config_file

    problems: list[Problem] = []
    for member in members:
        config_file = member / CONFIG_FILENAME
        if not config_file.is_file() or config_file.is_symlink():
            continue
        try:
            config, _ = parse_config_file(config_file)
        except OSError:
            continue
        if config is None or EXECUTION_ENV_PATH not in config.parameters:
            continue
        image = f"sagemaker-tritonserver:{release[0]}-py3"
        problems.extend(check_env_python(member, config, python=release[1], image=image))
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


def validate_repository(
    path: str | os.PathLike[str], *, triton_version: str | None = None
) -> dict[str, list[Problem]]:
    """Validate every model directory in a model repository; maps model name to its problems
    (``triton_version`` as for :func:`validate_model`).

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
        results[name] = validate_model(repository / name, triton_version=triton_version)
    return results
