"""What the embedded stack can serve: an extracted archive checked before Triton sees it.

- Backends: the stack runs the python backend and its own python-based ``onnxruntime`` and ``pytorch``
  backends (:data:`~mme_triton.model.backends.EMBEDDED_STACK_BACKENDS`). A model for another backend
  (TensorFlow, DALI, FIL, TensorRT, ...) gets one clear error naming the backend and what runs instead,
  the same sentence :func:`~mme_triton.validate_model` reports with ``local_stack=True``.
- Only the models Triton loads are checked: in an archive of several model directories without one
  ensemble, the one the SageMaker front-end picks
  (:attr:`~mme_triton.local.route.extract.ExtractedModel.unserved`).
- Names: every model runs in a python stub started through a shell with its path unquoted (see
  :mod:`mme_triton.local.route.names`). A single model's directory with other characters is renamed (the
  SageMaker front-end serves it under the TargetModel whatever the directory is called); ensemble steps
  are referenced by directory name and cannot be, so an unsafe one is refused, as is a
  ``default_model_filename`` the shell would split.
"""

from __future__ import annotations

from pathlib import Path

from mme_triton.errors import LocalStackError
from mme_triton.local.route.extract import ExtractedModel
from mme_triton.local.route.names import is_shell_safe

__all__ = ["UnsupportedModelError", "check_servable"]

_RENAMED = "model"


class UnsupportedModelError(LocalStackError):
    """The embedded stack cannot serve a model of the archive; ``model`` names its directory."""

    def __init__(self, message: str, *, model: str) -> None:
        self.model = model
        super().__init__(message)


def _backend(model_dir: Path) -> tuple[str | None, str, str]:
    """``(backend, platform, default_model_filename)`` as Triton resolves them for ``model_dir``."""
    from mme_triton.model._layout import Layout
    from mme_triton.model.backends import first_version_contents, resolve_backend
    from mme_triton.model.config import CONFIG_FILENAME, parse_config_file
    from mme_triton.model.repository import model_versions

    config = None
    config_file = model_dir / CONFIG_FILENAME
    if config_file.is_file():
        try:
            config, _ = parse_config_file(config_file)
        except OSError:
            config = None
    layout = Layout(model_dir, model_versions(model_dir), config_present=config_file.exists())
    backend, platform = resolve_backend(config, first_version_contents(layout))
    filename = str(config.default_model_filename) if config is not None else ""
    return backend, platform, filename


def check_servable(extracted: ExtractedModel) -> ExtractedModel:
    """Refuse what the stack cannot serve; rename a single model's unsafe directory. Returns the model.

    Raises:
        UnsupportedModelError: a model needs a backend the stack does not have, or a name the python
            backend's shell cannot take (an ensemble step's directory, a ``default_model_filename``).
    """
    from mme_triton.model.backends import local_stack_problem

    served = [name for name in extracted.model_dirs if name not in extracted.unserved]
    for name in served:
        backend, platform, filename = _backend(extracted.path / name)
        problem = local_stack_problem(backend, platform)
        if problem is not None:
            what = f'platform "{platform}"' if platform else f'backend "{backend}"'
            raise UnsupportedModelError(f"model {name!r} ({what}): {problem}", model=name)
        if filename and not all(is_shell_safe(part) for part in filename.split("/")):
            raise UnsupportedModelError(
                f"model {name!r}: default_model_filename {filename!r} holds characters Triton's python "
                "backend cannot pass through the shell it starts models with (use letters, digits, '.', "
                "'_' and '-')",
                model=name,
            )
    unsafe = [name for name in served if not is_shell_safe(name)]
    if not unsafe:
        return extracted
    if len(served) > 1:
        raise UnsupportedModelError(
            f"model directory {unsafe[0]!r} holds characters Triton's python backend cannot pass through "
            "the shell it starts models with, and an ensemble names its steps by directory; rename it "
            "(letters, digits, '.', '_' and '-')",
            model=unsafe[0],
        )
    if any(name == _RENAMED for name in extracted.model_dirs):
        raise UnsupportedModelError(
            f"model directory {unsafe[0]!r} holds characters Triton's python backend cannot pass through the "
            "shell it starts models with; rename it (letters, digits, '.', '_' and '-')",
            model=unsafe[0],
        )
    (extracted.path / unsafe[0]).rename(extracted.path / _RENAMED)
    rest = tuple(name for name in extracted.model_dirs if name != unsafe[0])
    return ExtractedModel(extracted.path, (_RENAMED, *rest), extracted.size, unserved=extracted.unserved)
