"""A Triton model directory on disk: what it contains, which models ship with it, what is wrong with it.

:func:`load_model` reads one model directory (``repo/linear``), parses its ``config.pbtxt`` with Triton's
schema, follows ensemble steps to the component models beside it (``repo/scale``, ...) and validates all
of them. :meth:`TritonModel.entries` lists exactly the files and directories an archive of the model holds:
junk (``__pycache__``, ``.ipynb_checkpoints``, ``.DS_Store``) and symbolic links are left out.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mme_triton.model import _checks, codes
from mme_triton.model._bls import check_archive_bls
from mme_triton.model._ensemble import check_archive_ensemble, check_ensemble
from mme_triton.model._files import path_kind
from mme_triton.model._pb import ModelConfig
from mme_triton.model.config import CONFIG_FILENAME, parse_config_file
from mme_triton.model.problems import Problem

__all__ = ["JUNK_NAMES", "ModelEntry", "TritonModel", "load_model", "model_versions"]

JUNK_NAMES: frozenset[str] = frozenset({".ipynb_checkpoints", "__pycache__", ".DS_Store"})

# Subdirectories Triton skips when it looks for versions (model_lifecycle.cc): no warning for them.
_NON_VERSION_DIRS = frozenset({"warmup", "initial_state", "configs"})
_VERSION_NAME = re.compile(r"0|[1-9][0-9]*")
# Ensembles within ensembles are followed this deep (each level is a few stack frames); any nesting is an
# error for an archive already, so deeper chains are reported, not walked.
_MAX_NESTING = 32


@dataclass(frozen=True)
class ModelEntry:
    """One directory or regular file that belongs in a model's archive."""

    arcname: str
    """POSIX path inside the archive, starting with the model directory's name (``linear/1/model.onnx``)."""
    path: Path
    """Absolute path on disk."""
    is_dir: bool
    size: int
    """Size in bytes; 0 for directories."""
    executable: bool
    """Any execute bit is set (archives normalise modes to 0o755/0o644 from this)."""


@dataclass(frozen=True)
class TritonModel:
    """A parsed and validated Triton model directory.

    ``config`` is the parsed ``inference.ModelConfig`` message, or ``None`` when config.pbtxt is missing
    or does not parse. ``members`` are the model directories that go into one archive: this model and,
    for an ensemble, the models its steps name (recursively), sorted by name. ``problems`` covers all of
    them, each problem naming the file it is about.
    """

    name: str
    path: Path
    repository: Path
    config: ModelConfig | None
    versions: tuple[int, ...]
    members: tuple[Path, ...]
    problems: tuple[Problem, ...]
    backend: str | None = field(default=None)
    """The backend Triton will use (``onnxruntime``, ``python``, ...), ``ensemble`` for ensembles, ``None``
    when it cannot be told."""

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems of severity ``error`` (a model with any of them will not load)."""
        return tuple(p for p in self.problems if p.is_error)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """The problems of severity ``warning``."""
        return tuple(p for p in self.problems if not p.is_error)

    def entries(self) -> list[ModelEntry]:
        """Every directory and regular file of every member, as an archive of this model holds them.

        Junk (any path component in :data:`JUNK_NAMES`), symbolic links and special files are left out.
        The list is sorted by the UTF-8 bytes of ``arcname``, so it is the same on every machine. The
        disk is read again on each call.

        Raises:
            OSError: a member directory cannot be read.

        Example::

            [e.arcname for e in load_model("repo/linear").entries()]
            # ['linear', 'linear/1', 'linear/1/model.onnx', 'linear/config.pbtxt']
        """
        found: list[ModelEntry] = []
        for member in self.members:
            for item in _walk(member, member.name):
                if item.kind == "dir":
                    found.append(ModelEntry(item.arcname, item.path, True, 0, False))
                elif item.kind == "file":
                    assert item.stat is not None
                    executable = bool(item.stat.st_mode & 0o111)
                    found.append(ModelEntry(item.arcname, item.path, False, item.stat.st_size, executable))
        found.sort(key=lambda entry: _sort_key(entry.arcname))
        return found


def load_model(path: str | os.PathLike[str]) -> TritonModel:
    """Parse and validate one model directory, and the ensemble components beside it.

    Parameters:
        path: the model directory (``model_repository/resnet``). Models that ensemble steps name are
            looked up in its parent directory.

    Returns:
        A :class:`TritonModel`; a bad model is described by its ``problems``, never raised.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotADirectoryError: ``path`` (or a parent of it) is not a directory.
        PermissionError: ``path`` cannot be listed.
        OSError: any other reason ``path`` cannot be listed (a symbolic link loop, ...).

    Example:
        >>> model = load_model("examples/model_repository/linear")
        >>> model.name, model.versions, model.errors
        ('linear', (1,), ())
    """
    model_path = _model_path(path)
    with os.scandir(model_path):
        pass  # raises FileNotFoundError / NotADirectoryError / PermissionError for the caller
    return _Loader().load(model_path)


# --------------------------------------------------------------------------------------------------


def _model_path(path: str | os.PathLike[str]) -> Path:
    absolute = Path(os.path.abspath(os.fspath(path)))
    if absolute.parent == absolute:
        return absolute
    # The repository is resolved; the model directory keeps the name it has there.
    return absolute.parent.resolve() / absolute.name


def _sort_key(arcname: str) -> bytes:
    return arcname.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class _Item:
    arcname: str
    path: Path
    kind: str  # "dir", "file", "symlink", "special", "junk", "unreadable"
    stat: os.stat_result | None = None
    error: str = ""


def _walk(root: Path, arcname: str) -> Iterator[_Item]:
    """Walk ``root`` without following symbolic links: each directory before its contents, children by name.

    The root itself is yielded first, as a directory; an ``OSError`` listing it propagates, a directory
    below it that cannot be listed is yielded as ``unreadable``. Iterative, so any depth the file system
    allows is fine.
    """
    yield _Item(arcname, root, "dir")
    stack = [_children(root, arcname, top=True)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        yield item
        if item.kind == "dir":
            stack.append(_children(item.path, item.arcname))


def _children(directory: Path, arcname: str, *, top: bool = False) -> Iterator[_Item]:
    try:
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        if top:
            raise
        yield _Item(arcname, directory, "unreadable", error=exc.strerror or str(exc))
        return
    for child in children:
        child_path = directory / child.name
        child_arc = f"{arcname}/{child.name}"
        if child.name in JUNK_NAMES:
            yield _Item(child_arc, child_path, "junk")
            continue
        try:
            info = child.stat(follow_symlinks=False)
        except OSError as exc:
            yield _Item(child_arc, child_path, "unreadable", error=exc.strerror or str(exc))
            continue
        if stat.S_ISLNK(info.st_mode):
            kind = "symlink"
        elif stat.S_ISDIR(info.st_mode):
            kind = "dir"
        elif stat.S_ISREG(info.st_mode):
            kind = "file"
        else:
            kind = "special"
        yield _Item(child_arc, child_path, kind, info)


def _hygiene(model_path: Path) -> list[Problem]:
    problems: list[Problem] = []
    for item in _walk(model_path, model_path.name):
        where = str(item.path)
        if item.kind == "symlink":
            target = os.readlink(item.path)
            problems.append(
                Problem(
                    "error",
                    codes.SYMLINK,
                    f"symbolic link to {target!r}: SageMaker's extraction does not keep links and a link can "
                    "pull in files from outside the model; replace it with a copy of the file",
                    where,
                )
            )
        elif item.kind == "special":
            problems.append(
                Problem(
                    "error",
                    codes.SPECIAL_FILE,
                    "not a regular file or directory (FIFO, socket or device); remove it",
                    where,
                )
            )
        elif item.kind == "junk":
            problems.append(
                Problem(
                    "warning",
                    codes.JUNK_FILE,
                    f"{item.path.name} is left out of the archive; delete it to silence this warning",
                    where,
                )
            )
        elif item.kind == "unreadable":
            problems.append(
                Problem(
                    "error",
                    codes.UNREADABLE,
                    f"cannot be read ({item.error}); make it readable or remove it",
                    where,
                )
            )
    return problems


class _Loader:
    """Loads a model and, recursively, the ensemble components it names (each once, cycles reported)."""

    def __init__(self) -> None:
        self._done: dict[Path, TritonModel] = {}
        self._in_progress: list[Path] = []

    def load(self, model_path: Path) -> TritonModel:
        cached = self._done.get(model_path)
        if cached is not None:
            return cached
        self._in_progress.append(model_path)
        try:
            model = self._load(model_path)
        finally:
            self._in_progress.pop()
        self._done[model_path] = model
        return model

    def _load(self, model_path: Path) -> TritonModel:
        problems = _hygiene(model_path)
        versions, ignored = _versions(model_path)
        for name in ignored:
            problems.append(
                Problem(
                    "warning",
                    codes.VERSION_DIRECTORY_IGNORED,
                    f"Triton loads only directories named by a number without leading zeros as versions; "
                    f"{name!r} ships in the archive but is not loaded",
                    str(model_path / name),
                )
            )

        config: ModelConfig | None = None
        config_path = model_path / CONFIG_FILENAME
        config_state = _config_state(config_path)
        if config_state == "readable":
            try:
                config, parse_problems = parse_config_file(config_path)
            except OSError as exc:
                parse_problems = [
                    Problem(
                        "error", codes.UNREADABLE, f"cannot be read ({exc.strerror or exc})", str(config_path)
                    )
                ]
            problems.extend(parse_problems)

        is_component = len(self._in_progress) > 1
        layout = _checks.Layout(model_path, versions, config_present=config_state != "missing")
        backend, layout_problems = _checks.check_model(layout, config, component=is_component)
        problems.extend(layout_problems)

        members = [model_path]
        if config is not None and backend == "ensemble":
            components, ensemble_problems = self._components(model_path, config)
            problems.extend(ensemble_problems)
            for component in components.values():
                if component is None:
                    continue
                problems.extend(component.problems)
                members.extend(component.members)

        unique_members = sorted(set(members), key=lambda p: _sort_key(p.name))
        if not is_component and backend == "ensemble" and len(unique_members) > 1:
            problems.extend(check_archive_ensemble(model_path, unique_members))
        if not is_component:
            described = [(model_path, config, backend, versions)] + [
                (found.path, found.config, found.backend, found.versions)
                for member in unique_members
                if member != model_path and (found := self._done.get(member)) is not None
            ]
            ensemble = model_path.name if backend == "ensemble" else None
            problems.extend(check_archive_bls(described, ensemble=ensemble))
        return TritonModel(
            name=model_path.name,
            path=model_path,
            repository=model_path.parent,
            config=config,
            versions=versions,
            members=tuple(unique_members),
            problems=tuple(_dedupe(problems)),
            backend=backend,
        )

    def _components(
        self, model_path: Path, config: ModelConfig
    ) -> tuple[dict[str, TritonModel | None], list[Problem]]:
        problems: list[Problem] = []
        components: dict[str, TritonModel | None] = {}
        where = str(model_path / CONFIG_FILENAME)
        for step in config.ensemble_scheduling.step:
            name = step.model_name
            if not name or name in components:
                continue
            if name in (".", "..") or "/" in name or "\0" in name:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_STEP_MODEL_MISSING,
                        f"step model name {name!r} is not a model directory name; name a model beside "
                        "this ensemble in the same repository",
                        where,
                    )
                )
                components[name] = None
                continue
            component_path = model_path.parent / name
            if len(self._in_progress) > _MAX_NESTING:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_ARCHIVE_AMBIGUOUS,
                        f"ensembles nested more than {_MAX_NESTING} deep; step model {name!r} and what it "
                        "contains are not checked. SageMaker cannot serve ensembles nested in one archive: "
                        "flatten them into one ensemble",
                        where,
                    )
                )
                components[name] = None
                continue
            if component_path in self._in_progress:
                cycle = " -> ".join(p.name for p in [*self._in_progress, component_path])
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_CYCLE,
                        f"ensembles contain each other ({cycle}); Triton cannot load them",
                        where,
                    )
                )
                components[name] = None
                continue
            if path_kind(component_path) != "dir":
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_STEP_MODEL_MISSING,
                        f"step model {name!r} is not a directory beside this ensemble "
                        f"({component_path}); put the model's directory in the same repository",
                        where,
                    )
                )
                components[name] = None
                continue
            try:
                loaded = components[name] = self.load(component_path)
            except OSError as exc:
                problems.append(
                    Problem(
                        "error",
                        codes.UNREADABLE,
                        f"step model {name!r} cannot be read ({exc.strerror or exc})",
                        str(component_path),
                    )
                )
                components[name] = None
                continue
            problems.extend(_check_step_versions(config, name, loaded, where))
        component_configs = {
            name: _checks.effective_config(model.path, model.config, model.backend, model.versions)
            for name, model in components.items()
            if model is not None
        }
        problems.extend(check_ensemble(config, where, component_configs))
        return components, problems


def _check_step_versions(config: ModelConfig, name: str, model: TritonModel, where: str) -> list[Problem]:
    problems: list[Problem] = []
    for index, step in enumerate(config.ensemble_scheduling.step):
        if step.model_name == name and step.model_version > 0 and step.model_version not in model.versions:
            available = ", ".join(map(str, model.versions)) or "none"
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_STEP_MODEL_MISSING,
                    f"step {index + 1} asks for version {step.model_version} of {name!r}, which has versions "
                    f"{available}; use model_version: -1 (latest) or add the version",
                    where,
                )
            )
    return problems


def _config_state(config_path: Path) -> str:
    try:
        info = config_path.lstat()
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "readable"  # reading it reports the error
    if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return "readable"  # a directory fails to read, which reports it
    return "special"  # a link or a FIFO, socket or device: reported by the hygiene check, never opened


def model_versions(model_path: Path) -> tuple[int, ...]:
    """The numeric version directories of a model, sorted (the ones Triton may load)."""
    try:
        return _versions(model_path)[0]
    except OSError:
        return ()


def _versions(model_path: Path) -> tuple[tuple[int, ...], list[str]]:
    versions: list[int] = []
    ignored: list[str] = []
    with os.scandir(model_path) as it:
        for entry in it:
            if entry.name in JUNK_NAMES or entry.name in _NON_VERSION_DIRS or entry.name == CONFIG_FILENAME:
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            if _VERSION_NAME.fullmatch(entry.name):
                versions.append(int(entry.name))
            else:
                ignored.append(entry.name)
    return tuple(sorted(versions)), sorted(ignored)


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[Problem] = set()
    unique: list[Problem] = []
    for problem in problems:
        if problem not in seen:
            seen.add(problem)
            unique.append(problem)
    return unique
