"""Checks on one model directory: backend resolution, layout and config semantics, as Triton does them.

The checks themselves live by subject: :mod:`~mme_triton.model.backends` (which backend serves the
model), :mod:`~mme_triton.model._layout` (versions and model files) and
:mod:`~mme_triton.model._semantics` (config semantics); this module runs them in Triton's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mme_triton.model import codes
from mme_triton.model._layout import (
    Layout,
    check_model_files,
    check_python_class,
    onnx_file,
    versions_to_load,
)
from mme_triton.model._pb import ModelConfig
from mme_triton.model._semantics import check_config
from mme_triton.model.backends import (
    ENSEMBLE,
    check_missing_config,
    check_platform,
    first_version_contents,
    resolve_backend,
)
from mme_triton.model.problems import Problem

__all__ = ["Layout", "check_config", "check_model", "effective_config"]


def check_model(
    layout: Layout, config: ModelConfig | None, *, component: bool = False
) -> tuple[str | None, list[Problem]]:
    """Resolve the backend and run every single-model check; returns ``(backend, problems)``.

    ``component`` marks a model loaded as an ensemble step (its config name must match its directory).
    """
    problems: list[Problem] = []
    first_version = first_version_contents(layout)

    if config is None:
        backend, platform = resolve_backend(None, first_version)
        if not layout.config_present:
            problems.extend(check_missing_config(layout, backend, platform))
    else:
        backend, platform = resolve_backend(config, first_version)
        problems.extend(check_platform(layout, config, backend))

    if not layout.versions:
        problems.append(
            Problem(
                "error",
                codes.VERSION_MISSING,
                "no version directory: Triton loads models from numbered subdirectories; put the model "
                "files in 1/ (an ensemble needs an empty 1/ too)",
                str(layout.path),
            )
        )

    loaded = versions_to_load(layout, config, problems)
    if layout.versions and not loaded:
        problems.append(
            Problem(
                "error",
                codes.VERSION_MISSING,
                f"version_policy selects none of the versions present "
                f"({', '.join(map(str, layout.versions))}); Triton needs at least one to load the model",
                layout.config_file,
            )
        )
    if backend is not None and backend != ENSEMBLE:
        problems.extend(check_model_files(layout, config, backend, platform, loaded))
    if backend == "python":
        problems.extend(check_python_class(layout, config, loaded))
    if backend == "python" and config is not None:
        from mme_triton.model._python_env import check_python_env

        problems.extend(check_python_env(layout.path, config))
    if config is not None:
        problems.extend(
            check_config(
                config, layout.config_file, backend=backend, directory=layout.path.name, component=component
            )
        )
    if backend == "onnxruntime":
        from mme_triton.model.onnx_check import check_onnx

        for version in loaded:
            onnx_path = onnx_file(layout.path / str(version), config)
            if onnx_path is not None:
                problems.extend(check_onnx(onnx_path, config, where=layout.config_file))
    return backend, problems


def effective_config(
    path: Path, config: ModelConfig | None, backend: str | None, versions: Sequence[int]
) -> ModelConfig | None:
    """The config Triton will run the model with: the file's, or for ONNX what auto-complete infers."""
    if backend != "onnxruntime" or (config is not None and (len(config.input) or len(config.output))):
        return config
    if not versions:
        return config
    onnx_path = onnx_file(path / str(max(versions)), config)
    if onnx_path is None:
        return config
    from mme_triton.model.onnx_check import autocomplete_config

    return autocomplete_config(onnx_path, config) or config
