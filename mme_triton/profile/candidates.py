"""Candidates: config variants of a model directory, each written to a scratch copy and validated.

A :class:`Candidate` is a name and the options :func:`~mme_triton.model.authoring.configure_model` takes
(``preset=`` included); :meth:`Candidate.grid` builds the cartesian product of option lists with readable
names. :func:`prepare` writes each candidate into a scratch copy of its model (the model directory and,
for an ensemble, its steps; files are hard links where the filesystem allows, configure_model replaces the
config without writing through them) and validates it: a candidate that configure_model or validation
refuses comes back with its problems, to be reported, never dropped.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Candidate", "PreparedCandidate", "parse_grid", "prepare"]

logger = logging.getLogger(__name__)

# Short names for the options a grid most often varies (the others keep their own names).
_SHORT = {
    "max_batch_size": "max_batch",
    "dynamic_batching": "dyn",
    "instance_group": "instances",
    "graph_optimization_level": "graph_opt",
    "preset": "preset",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Candidate:
    """One config variant of a model: a name and :func:`~mme_triton.model.configure_model` options.

    ``Candidate("batch8", max_batch_size=8, dynamic_batching=DynamicBatching(100))`` configures the model
    that way (``options={...}`` is the same as keywords); ``Candidate("as-is")`` keeps its config.
    ``model_dir`` ties the candidate to one model directory (the ONNX export beside the TorchScript one);
    without it the candidate applies to every model directory given to :func:`~mme_triton.profile_model`.

    Example::

        Candidate("two-instances", instance_group=InstanceGroup(2, "KIND_CPU"))
        Candidate.grid(max_batch_size=[1, 8], instance_group=[InstanceGroup(1, "KIND_CPU"),
                                                                InstanceGroup(2, "KIND_CPU")])
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    model_dir: Path | None = None

    def __init__(
        self,
        name: str,
        *,
        model_dir: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
        **more_options: Any,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a candidate needs a non-empty name, got {name!r}")
        options = {**(options or {}), **more_options}
        _check_options(options)
        object.__setattr__(self, "name", name.strip())
        object.__setattr__(self, "options", dict(options))
        object.__setattr__(self, "model_dir", Path(model_dir) if model_dir is not None else None)

    def __hash__(self) -> int:
        return hash((self.name, self.model_dir))

    @classmethod
    def grid(
        cls,
        *,
        model_dir: str | os.PathLike[str] | None = None,
        prefix: str = "",
        **option_lists: Sequence[Any],
    ) -> list[Candidate]:
        """The cartesian product of ``option_lists``: one candidate per combination, named after the options
        that vary (``max_batch=8,dyn=100us,instances=2cpu``), ``prefix`` first.

        Each value is a list of what the option takes (``None`` removes the setting, as in
        configure_model). ``model_dir`` ties every candidate to one model directory.

        Raises:
            ValueError: an option is unknown, or a list is empty.
            TypeError: a value is not a list.

        Examples:
            >>> [c.name for c in Candidate.grid(max_batch_size=[1, 8], response_cache=[False])]
            ['max_batch=1', 'max_batch=8']
        """
        lists: dict[str, list[Any]] = {}
        for option, values in option_lists.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise TypeError(f"Candidate.grid takes a list of values per option; {option}={values!r}")
            if not values:
                raise ValueError(f"Candidate.grid: {option} has no values")
            lists[option] = list(values)
        _check_options(lists)
        varying = [option for option, values in lists.items() if len(values) > 1] or list(lists)
        candidates = []
        for combination in itertools.product(*lists.values()):
            options = dict(zip(lists, combination, strict=True))
            label = ",".join(f"{_SHORT.get(o, o)}={describe_value(options[o])}" for o in varying)
            name = f"{prefix}{',' if prefix and label else ''}{label}" or prefix or "as-is"
            candidates.append(cls(name, model_dir=model_dir, **options))
        return candidates


def describe_value(value: Any) -> str:
    """A short readable form of an option value, for names and tables.

    Example:
        >>> from mme_triton.model.options import DynamicBatching, InstanceGroup
        >>> describe_value(DynamicBatching(100)), describe_value(InstanceGroup(2, "KIND_CPU"))
        ('100us', '2cpu')
    """
    from mme_triton.model.options import DynamicBatching, InstanceGroup, ModelWarmup, TensorRT

    if value is None or value is False:
        return "off"
    if value is True:
        return "on"
    if isinstance(value, DynamicBatching):
        text = f"{value.max_queue_delay_microseconds}us"
        if value.preferred_batch_size:
            text += "/pref" + "+".join(map(str, value.preferred_batch_size))
        return text
    if isinstance(value, InstanceGroup):
        kind = value.kind.removeprefix("KIND_").lower()
        return f"{value.count}{kind}" + (f"@{'+'.join(map(str, value.gpus))}" if value.gpus else "")
    if isinstance(value, TensorRT):
        return f"trt-{value.precision_mode.lower()}"
    if isinstance(value, ModelWarmup):
        return f"warmup-{value.data if isinstance(value.data, str) else 'samples'}"
    if isinstance(value, (list, tuple)):
        return "+".join(describe_value(item) for item in value)
    return str(value)


def _check_options(options: Mapping[str, Any]) -> None:
    from mme_triton.model._options_table import OPTIONS

    unknown = sorted(set(options) - set(OPTIONS) - {"preset"})
    if unknown:
        raise ValueError(
            f"unknown configure_model option(s) {', '.join(unknown)}; "
            f"options are preset, {', '.join(OPTIONS)}"
        )


@dataclass
class PreparedCandidate:
    """A candidate written into its scratch copy (``model_dir``), or refused (``problems`` has errors)."""

    candidate: Candidate
    name: str
    """The candidate's name in the report (the model directory's name first when several are profiled)."""
    source: Path
    """The model directory the candidate was made from."""
    model_dir: Path | None
    """The validated scratch copy, ``None`` when the candidate was refused."""
    problems: list[str] = field(default_factory=list)
    """Why it was refused (configure_model's or validation's errors), or warnings."""

    @property
    def valid(self) -> bool:
        return self.model_dir is not None


def prepare(
    model_dirs: Sequence[Path],
    candidates: Sequence[Candidate] | None,
    scratch: Path,
    *,
    local_stack: bool = False,
) -> list[PreparedCandidate]:
    """Write every candidate into a scratch copy under ``scratch`` and validate it.

    A candidate without ``model_dir`` applies to each of ``model_dirs``; with several model directories its
    name is prefixed with the directory's (``resnet_onnx/max_batch=8``). No candidates: each model
    directory as it is (named after it).

    Raises:
        ValueError: two candidates would have the same name, or a candidate's model_dir is not a directory.
    """
    plans = _plans(model_dirs, candidates)
    names = [name for name, _, _ in plans]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"candidate names must be unique; repeated: {', '.join(duplicates)}")
    prepared = []
    for index, (name, source, candidate) in enumerate(plans):
        directory = scratch / f"{index:03d}-{_UNSAFE.sub('_', name)[:60]}"
        prepared.append(_prepare_one(candidate, name, source, directory, local_stack=local_stack))
    return prepared


def _plans(
    model_dirs: Sequence[Path], candidates: Sequence[Candidate] | None
) -> list[tuple[str, Path, Candidate]]:
    several = len(model_dirs) > 1
    if not candidates:
        return [(source.name, source, Candidate(source.name)) for source in model_dirs]
    plans = []
    for candidate in candidates:
        if not isinstance(candidate, Candidate):
            raise TypeError(f"candidates takes Candidate objects, got {candidate!r}")
        if candidate.model_dir is not None:
            if not candidate.model_dir.is_dir():
                raise ValueError(f"candidate {candidate.name!r}: {candidate.model_dir} is not a directory")
            plans.append((candidate.name, candidate.model_dir, candidate))
            continue
        for source in model_dirs:
            name = f"{source.name}/{candidate.name}" if several else candidate.name
            plans.append((name, source, candidate))
    return plans


def _prepare_one(
    candidate: Candidate, name: str, source: Path, directory: Path, *, local_stack: bool
) -> PreparedCandidate:
    from mme_triton.errors import ModelValidationError
    from mme_triton.model.authoring import configure_model
    from mme_triton.model.repository import load_model
    from mme_triton.model.validate import validate_model

    result = PreparedCandidate(candidate, name, source, None)
    model = load_model(source)
    if model.errors:
        result.problems = [str(problem) for problem in model.problems if problem.is_error]
        return result
    directory.mkdir(parents=True)
    for member in model.members:
        shutil.copytree(member, directory / member.name, symlinks=True, copy_function=_link_or_copy)
    copy = directory / source.name
    try:
        if candidate.options:
            configure_model(copy, **candidate.options)
    except ModelValidationError as exc:
        result.problems = [str(p).replace(str(directory), str(source.parent)) for p in exc.problems]
        return result
    except (ValueError, TypeError) as exc:
        result.problems = [str(exc)]
        return result
    problems = validate_model(copy, local_stack=local_stack)
    shown = [str(problem).replace(str(directory), str(source.parent)) for problem in problems]
    if any(problem.is_error for problem in problems):
        result.problems = shown
        return result
    result.model_dir = copy
    result.problems = shown
    logger.debug("candidate %s written to %s", name, copy)
    return result


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def parse_grid(entries: Iterable[str], *, instance_kind: str = "KIND_AUTO") -> list[Candidate]:
    """The CLI's ``--grid OPTION=V1,V2`` entries as :meth:`Candidate.grid` (no entries: no candidates).

    Values read as integers, ``on``/``off``/``true``/``false``/``none``, or text; ``dynamic_batching``
    takes ``off``, ``on`` or a delay (``100us``, ``2ms``); ``instance_count=1,2`` is shorthand for
    ``instance_group`` entries of that many instances of ``instance_kind``.

    Raises:
        ValueError: an entry is not ``OPTION=VALUES``, or a value does not read.

    Example:
        >>> [c.name for c in parse_grid(["max_batch_size=1,8", "instance_count=1,2"])]
        ['max_batch=1,instances=1auto', 'max_batch=1,instances=2auto', 'max_batch=8,instances=1auto', \
'max_batch=8,instances=2auto']
    """
    from mme_triton.model.options import InstanceGroup

    lists: dict[str, list[Any]] = {}
    for entry in entries:
        option, sep, text = entry.partition("=")
        option = option.strip().replace("-", "_")
        if not sep or not option or not text.strip():
            raise ValueError(f"--grid takes OPTION=VALUE[,VALUE...], got {entry!r}")
        values = [value.strip() for value in text.split(",")]
        if option == "instance_count":
            counts = [_integer(value, option) for value in values]
            lists["instance_group"] = [InstanceGroup(count, instance_kind) for count in counts]  # type: ignore[arg-type]
        elif option == "dynamic_batching":
            lists[option] = [_batching(value) for value in values]
        else:
            lists[option] = [_scalar(value) for value in values]
    grid: Any = Candidate.grid
    return list(grid(**lists)) if lists else []


def _integer(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--grid {option} takes integers, got {text!r}") from None


def _scalar(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("on", "true", "yes"):
        return True
    if lowered in ("off", "false", "no"):
        return False
    try:
        return int(text)
    except ValueError:
        return text


_DELAY = re.compile(r"(\d+(?:\.\d+)?)\s*(us|µs|ms|s)?")


def _batching(text: str) -> Any:
    from mme_triton.model.options import DynamicBatching

    value = _scalar(text)
    if value is None or isinstance(value, bool):
        return value
    match = _DELAY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"--grid dynamic_batching takes off, on or a queue delay (100us, 2ms), got {text!r}")
    scale = {"us": 1, "µs": 1, None: 1, "ms": 1_000, "s": 1_000_000}[match.group(2)]
    return DynamicBatching(max_queue_delay_microseconds=round(float(match.group(1)) * scale))
