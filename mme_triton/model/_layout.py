"""A model directory's layout as Triton reads it: which versions load, and the files each must hold.

The rules follow Triton core's ``model_lifecycle.cc`` (``version_policy``) and the backends' own defaults
for the model file each loads from a version directory. A python model's ``EXECUTION_ENV_PATH`` is checked
in :mod:`~mme_triton.model._python_env`, its BLS calls in :mod:`~mme_triton.model._bls`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mme_triton.model import codes
from mme_triton.model._files import path_kind, read_regular
from mme_triton.model._pb import ModelConfig
from mme_triton.model.backends import BACKEND_FILES, PLATFORM_FILES
from mme_triton.model.config import CONFIG_FILENAME
from mme_triton.model.problems import Problem

__all__ = [
    "Layout",
    "check_model_files",
    "check_python_class",
    "model_filename",
    "onnx_file",
    "versions_to_load",
]

_DEFAULT_NUM_VERSIONS = 1


@dataclass(frozen=True)
class Layout:
    """What the directory scan found: the model directory, its numeric versions, whether a config exists."""

    path: Path
    versions: tuple[int, ...]
    config_present: bool

    @property
    def config_file(self) -> str:
        return str(self.path / CONFIG_FILENAME)


def versions_to_load(layout: Layout, config: ModelConfig | None, problems: list[Problem]) -> list[int]:
    available = sorted(layout.versions, reverse=True)
    if config is None or not config.HasField("version_policy"):
        return available[:_DEFAULT_NUM_VERSIONS]
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return available
    if choice == "specific":
        wanted = list(policy.specific.versions)
        missing = [v for v in wanted if v not in layout.versions]
        if missing:
            problems.append(
                Problem(
                    "warning",
                    codes.VERSION_POLICY_UNSATISFIED,
                    f"version_policy asks for version(s) {', '.join(map(str, missing))} but the model has "
                    f"{', '.join(map(str, sorted(layout.versions))) or 'none'}; Triton loads only the ones "
                    "that exist, so add the directories or fix the policy",
                    layout.config_file,
                )
            )
        return [v for v in wanted if v in layout.versions]
    count = policy.latest.num_versions if choice == "latest" else _DEFAULT_NUM_VERSIONS
    return available[:count]


def model_filename(config: ModelConfig | None, default: str) -> str | None:
    """``default_model_filename`` if set, else ``default``; ``None`` when the name points outside."""
    name: str = config.default_model_filename if config is not None else ""
    if not name:
        return default
    return name if _inside_version_directory(name) else None


def _inside_version_directory(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and "\0" not in name and not name.startswith("/") and ".." not in parts


def _expected_files(config: ModelConfig | None, backend: str, platform: str) -> tuple[str, ...]:
    if config is not None and config.default_model_filename:
        names: tuple[str, ...] = (config.default_model_filename,)
    else:
        names = PLATFORM_FILES.get(platform) or BACKEND_FILES.get(backend, ())
    if names and config is not None:
        names += tuple(config.cc_model_filenames.values())
    return names


def check_model_files(
    layout: Layout, config: ModelConfig | None, backend: str, platform: str, versions: Iterable[int]
) -> list[Problem]:
    names = _expected_files(config, backend, platform)
    if not names:
        return []
    outside = [name for name in names if not _inside_version_directory(name)]
    if outside:
        return [
            Problem(
                "error",
                codes.MODEL_FILE_MISSING,
                f"model file name {outside[0]!r} (default_model_filename or cc_model_filenames) is not a "
                "relative path inside the version directory; Triton looks for it in each version "
                "directory and only the model directory goes into the archive, so name a file there",
                layout.config_file,
            )
        ]
    problems: list[Problem] = []
    for version in versions:
        directory = layout.path / str(version)
        if any(_is_model_file(directory / name, backend) for name in names):
            continue
        wanted = " or ".join(names)
        problems.append(
            Problem(
                "error",
                codes.MODEL_FILE_MISSING,
                f"version {version} has no {wanted}, the file the {backend} backend loads; add it or set "
                "default_model_filename to the file's name",
                str(directory),
            )
        )
    return problems


def _is_model_file(path: Path, backend: str) -> bool:
    kind = path_kind(path)
    if backend == "onnxruntime" and kind == "dir":
        # A large ONNX model can be a directory holding model.onnx and its external data.
        return path_kind(path / "model.onnx") == "file"
    if backend == "python":
        return kind == "file"
    return kind is not None


def onnx_file(version_dir: Path, config: ModelConfig | None) -> Path | None:
    name = model_filename(config, "model.onnx")
    if name is None:
        return None
    candidate = version_dir / name
    if path_kind(candidate) == "dir":
        candidate = candidate / "model.onnx"
    if path_kind(candidate) == "file" and not candidate.is_symlink():
        return candidate
    return None


def check_python_class(layout: Layout, config: ModelConfig | None, versions: Iterable[int]) -> list[Problem]:
    filename = model_filename(config, "model.py")
    if filename is None:
        return []  # reported as model-file-missing
    problems: list[Problem] = []
    for version in versions:
        path = layout.path / str(version) / filename
        try:
            source = read_regular(path)
        except OSError:
            continue  # not a file: reported as model-file-missing (or special-file, symlink)
        syntax = _syntax_error(source, filename)
        if syntax is not None:
            message, line, column = syntax
            problems.append(
                Problem("error", codes.PYTHON_SYNTAX_ERROR, message, str(path), line=line, column=column)
            )
            continue
        if b"TritonPythonModel" not in source:
            problems.append(
                Problem(
                    "error",
                    codes.PYTHON_MODEL_CLASS_MISSING,
                    f"{filename} does not define class TritonPythonModel, which the python backend "
                    "instantiates; define it with an execute(self, requests) method",
                    str(path),
                )
            )
    return problems


def _syntax_error(source: bytes, filename: str) -> tuple[str, int | None, int | None] | None:
    """``(message, line, column)`` when ``source`` does not compile (the stub would fail to import it)."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "somewhere"
        return (
            f"{filename} does not compile ({exc.msg}, {where}); the python backend imports it when the "
            "model loads and refuses the model",
            exc.lineno,
            exc.offset,
        )
    except ValueError as exc:  # NUL bytes
        return f"{filename} does not compile ({exc}); the python backend refuses the model", None, None
    return None
