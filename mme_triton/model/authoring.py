"""config.pbtxt authoring: typed tuning options written through Triton's own ``ModelConfig`` schema.

:func:`configure_model` rewrites a model's config.pbtxt in place with a preset and/or options;
:func:`read_config` reads it back for inspection. Every option is one entry of :data:`OPTIONS` (what it
writes, which backends read it); docs/model-prep.md has the table with when each one helps and what
it costs. The new config is validated with the model's files before it replaces the old one, and the
replacement is atomic (a temporary file in the model directory, fsync, ``os.replace``).

The onnxruntime settings are written as Triton's onnxruntime backend reads them (its README and
``src/onnxruntime.cc``): ``parameters { key: "intra_op_thread_count" value: { string_value: "2" } }``,
``optimization { graph { level: 1 } }``, and accelerators under
``optimization { execution_accelerators { gpu_execution_accelerator [...] } }``.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.errors import ModelValidationError
from mme_triton.model._options_table import OPTIONS, check_backend, check_combinations
from mme_triton.model._pb import ModelConfig
from mme_triton.model._warmup import apply_warmup
from mme_triton.model.backends import model_backend
from mme_triton.model.config import CONFIG_FILENAME
from mme_triton.model.options import WARMUP_DIR, ConfigOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OPTIONS", "configure_model", "model_backend", "read_config"]


logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# read_config / configure_model


def read_config(model_dir: str | os.PathLike[str]) -> ModelConfig:
    """Read and parse ``<model_dir>/config.pbtxt`` into Triton's ``inference.ModelConfig`` message.

    ``print(config)`` shows it as config.pbtxt text; fields read as attributes
    (``config.max_batch_size``, ``config.input[0].dims``, ``config.parameters["key"].string_value``).

    Raises:
        FileNotFoundError: there is no config.pbtxt.
        ModelValidationError: it does not parse (the problem carries line and column).

    Example::

        read_config("model_repository/bert").max_batch_size  # 8
    """
    from mme_triton.model.config import parse_config_file

    path = Path(model_dir) / CONFIG_FILENAME
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "the model has no config.pbtxt", str(path))
    config, problems = parse_config_file(path)
    if config is None:
        raise ModelValidationError(str(model_dir), problems)
    return config


def configure_model(
    model_dir: str | os.PathLike[str],
    *,
    preset: str | None = None,
    **options: Unpack[ConfigOptions],
) -> Path:
    """Rewrite a model's config.pbtxt with a preset and options, validated, atomically.

    The preset's options are applied first and the keyword options override them one by one (an
    option given here replaces the preset's value of that option entirely). Everything else in the
    config is kept; comments are not (the file is written from the parsed message). ``None`` removes
    a setting. Options that no backend of this model reads are refused, and so are combinations
    Triton refuses (dynamic batching or preferred batch sizes beyond ``max_batch_size``, warm-up
    samples that do not match the inputs). GPU settings are written as given: an instance without a
    GPU (the embedded stack) adapts its own copy.

    Parameters:
        model_dir: the model directory (``model_repository/bert``), which has a config.pbtxt.
        preset: a name from :data:`mme_triton.model.presets.PRESETS` (``onnx-gpu-throughput``,
            ``onnx-gpu-latency``, ``onnx-cpu``, ``onnx-tensorrt-fp16``, ``torchscript-gpu``,
            ``torchscript-cpu``).
        options: see :class:`ConfigOptions` and docs/model-prep.md.

    Returns:
        ``model_dir``.

    Raises:
        FileNotFoundError: the model has no config.pbtxt.
        ModelValidationError: the new config (or the old one) does not validate with the model's files;
            the old config is left as it was.
        ValueError: an unknown preset or option, an option the model's backend does not read, or a
            combination Triton refuses.
        TypeError: an option value of the wrong type.

    Example::

        configure_model("model_repository/bert", preset="onnx-gpu-throughput",
                        max_batch_size=16, model_warmup="zero")  # PosixPath('model_repository/bert')
    """
    from mme_triton.model._pb import new_model_config
    from mme_triton.model.presets import PRESETS

    directory = Path(model_dir)
    config = read_config(directory)
    backend = model_backend(config)
    merged: dict[str, Any] = {}
    if preset is not None:
        found = PRESETS.get(preset)
        if found is None:
            raise ValueError(f"unknown preset {preset!r}; presets are {', '.join(sorted(PRESETS))}")
        if backend not in found.backends:
            raise ValueError(
                f"preset {preset!r} is for {' or '.join(sorted(found.backends))} models, but "
                f"{directory.name!r} is a {backend or 'model of unknown'} backend model"
            )
        merged.update(found.options)
    merged.update(options)
    unknown = sorted(set(merged) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; options are {', '.join(OPTIONS)}")

    updated = new_model_config()
    updated.CopyFrom(config)
    warmup_files: dict[str, bytes] = {}
    ordered = sorted(merged, key=lambda name: (name != "max_batch_size", list(OPTIONS).index(name)))
    for name in ordered:
        option = OPTIONS[name]
        value = merged[name]
        check_backend(option, backend, directory.name)
        if name == "model_warmup":
            warmup_files = apply_warmup(updated, value)
        else:
            option.apply(updated, value, directory)
    check_combinations(updated, directory.name)
    _replace_config(directory, updated, warmup_files)
    logger.info(
        "configured %s%s: %s",
        directory,
        f" from preset {preset}" if preset else "",
        ", ".join(ordered) or "-",
    )
    return directory


# --------------------------------------------------------------------------------------------------
# validated, atomic replacement


def _replace_config(directory: Path, config: ModelConfig, warmup_files: Mapping[str, bytes]) -> None:
    from mme_triton.model._staging import unstaged
    from mme_triton.model.config import format_config
    from mme_triton.model.repository import load_model
    from mme_triton.model.validate import validate_model

    text = format_config(config)
    members = load_model(directory).members
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.configure-", dir=directory.parent))
    try:
        for member in members:
            _link_tree(member, staging / member.name)
        staged = staging / directory.name
        (staged / CONFIG_FILENAME).unlink()
        (staged / CONFIG_FILENAME).write_text(text, encoding="utf-8")
        for filename, payload in warmup_files.items():
            (staged / WARMUP_DIR).mkdir(exist_ok=True)
            target = staged / WARMUP_DIR / filename
            if target.exists():
                target.unlink()  # a hard link to the model's file: never write through it
            target.write_bytes(payload)
        problems = [unstaged(problem, staging, directory.parent) for problem in validate_model(staged)]
        if any(problem.severity == "error" for problem in problems):
            raise ModelValidationError(str(directory), problems)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if warmup_files:
        (directory / WARMUP_DIR).mkdir(exist_ok=True)
        for filename, payload in warmup_files.items():
            _write_atomically(directory / WARMUP_DIR / filename, payload)
    _write_atomically(directory / CONFIG_FILENAME, text.encode("utf-8"))


def _link_tree(source: Path, destination: Path) -> None:
    """Mirror ``source`` with hard links (copies where linking fails); links stay links."""
    for root, dirs, files in os.walk(source):
        relative = Path(root).relative_to(source)
        (destination / relative).mkdir(parents=True, exist_ok=True)
        for name in dirs:
            path = Path(root) / name
            if path.is_symlink():
                os.symlink(os.readlink(path), destination / relative / name)
        dirs[:] = [name for name in dirs if not (Path(root) / name).is_symlink()]
        for name in files:
            path = Path(root) / name
            target = destination / relative / name
            if path.is_symlink():
                os.symlink(os.readlink(path), target)
                continue
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)


def _write_atomically(path: Path, payload: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            shutil.copymode(path, temporary)
        else:
            os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)
