"""What the planner knows of a model: its memory once loaded, its cold start and its service time.

A :class:`ModelProfile` is given by hand or read from a JSON or CSV file of the same fields
(:meth:`ModelProfile.load`, :meth:`ModelProfile.save`). One profile may stand for many models ("200
copies of this one"): ``copies=200`` names them ``<name>-000`` ... ``<name>-199`` (before a ``.tar.gz``
suffix). Only the standard library is imported.

How the service time scales, kept simple on purpose (docs/capacity.md):

- **Concurrency.** A loaded model runs ``instances`` requests at once (Triton's ``instance_group`` count):
  each model instance is a server taking ``service_time_s`` per execution, whatever else runs on the
  machine. Measure ``service_time_s`` under the concurrency you expect.
- **Batching.** With ``max_batch_size`` > 1, requests that wait for the same model instance run as one
  execution of up to ``max_batch_size`` requests (Triton's dynamic batcher, no queue delay), which takes
  ``service_time_s + (b - 1) * batch_item_s`` for ``b`` requests.
- **Loads.** A model not on the instance's volume is downloaded from S3 (``cold_start_s - reload_s``
  seconds, holding no memory for models), then loaded (``reload_s`` seconds, holding its memory from the
  start); a model the instance unloaded before is still on its volume (SageMaker keeps unloaded models
  there) and is only loaded again. Without ``reload_s``, the whole ``cold_start_s`` is taken as the load,
  memory held throughout. An unload takes ``unload_s``, during which the model's memory is still held.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._units import parse_duration, parse_size

if TYPE_CHECKING:
    from mme_triton.profile.report import CandidateResult, ProfileReport

__all__ = [
    "COMPONENT_OVERHEAD_BYTES",
    "MAX_COPIES",
    "MAX_PROFILE_FILE_BYTES",
    "ModelProfile",
    "copy_name",
    "expand",
]

MAX_COPIES = 100_000
"""Copies one profile may stand for (and models a plan may hold): the names are kept in memory."""
MAX_PROFILE_FILE_BYTES = 16 * 1024 * 1024
"""The largest profile file :meth:`ModelProfile.load` reads."""

_FIELDS = (
    "name",
    "memory_bytes",
    "cold_start_s",
    "service_time_s",
    "copies",
    "instances",
    "reload_s",
    "unload_s",
    "max_batch_size",
    "batch_item_s",
    "component_memory_bytes",
    "component_cpus",
    "component_accelerators",
)
_SUFFIX = ".tar.gz"
COMPONENT_OVERHEAD_BYTES = 256 * 2**20
"""What an inference component copy reserves beyond its model by default: its own container (Triton, the
serve script, a python backend stub); an assumption — give ``component_memory_bytes`` when you know it."""


def copy_name(name: str, index: int, copies: int) -> str:
    """The TargetModel of copy ``index`` of ``copies``: ``resnet.tar.gz`` → ``resnet-007.tar.gz``.

    Example:
        >>> copy_name("resnet.tar.gz", 7, 200), copy_name("bert", 0, 1)
        ('resnet-007.tar.gz', 'bert')
    """
    if copies == 1:
        return name
    width = len(str(copies - 1))
    stem, suffix = (name[: -len(_SUFFIX)], _SUFFIX) if name.endswith(_SUFFIX) else (name, "")
    return f"{stem}-{index:0{width}d}{suffix}"


def _number(value: Any, field: str, *, minimum: float = 0.0, strict: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{field} must be a number of seconds, got {value!r}")
    if value < minimum or (strict and value <= minimum):
        raise ValueError(f"{field} must be {'>' if strict else '>='} {minimum:g}, got {value!r}")
    return float(value)


def _count(value: Any, field: str, *, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be an integer >= 1, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{field} is at most {maximum:,}, got {value:,}")
    return value


@dataclass(frozen=True)
class ModelProfile:
    """One model (or ``copies`` identical ones) as the capacity planner sees it.

    Parameters:
        name: the TargetModel, e.g. ``"resnet.tar.gz"`` (copies get ``-000``, ``-001`` ... before the
            suffix).
        memory_bytes: what the model holds once loaded (GPU memory on a GPU instance, host memory on a
            CPU one).
        cold_start_s: seconds from a request for a model not on the instance to the model being ready:
            download, extract and load (the ``ModelLoadingWaitTime`` of a first request).
        service_time_s: seconds one execution takes on one model instance.
        copies: how many models this profile stands for.
        instances: executions the model runs at once (Triton's model instance count).
        reload_s: seconds to load a model whose files are on the instance's volume (unloaded before, or
            just downloaded): the load alone, which holds memory; ``None``: ``cold_start_s``.
        unload_s: seconds an unload takes; the memory is held until it ends.
        max_batch_size: requests one execution may take (Triton's dynamic batching); 1: none.
        batch_item_s: seconds each request beyond the first adds to an execution.
        component_memory_bytes: hosted as an inference component, the memory each copy reserves
            (``MinMemoryRequiredInMb``); ``None``: ``memory_bytes`` and :data:`COMPONENT_OVERHEAD_BYTES`.
        component_cpus: hosted as an inference component, the CPU cores each copy reserves
            (``NumberOfCpuCoresRequired``, at least 0.25); its executions share them.
        component_accelerators: on a GPU instance type, the GPUs each copy reserves
            (``NumberOfAcceleratorDevicesRequired``); its executions share them.

    Raises:
        ValueError: an empty name, a size or time below 0, a count below 1, more than
            :data:`MAX_COPIES` copies.

    Example:
        >>> resnet = ModelProfile("resnet.tar.gz", memory_bytes=300 * 2**20, cold_start_s=4.5,
        ...                       service_time_s=0.02, copies=3)
        >>> resnet.names()
        ['resnet-0.tar.gz', 'resnet-1.tar.gz', 'resnet-2.tar.gz']
    """

    name: str
    _: dataclasses.KW_ONLY
    memory_bytes: int
    cold_start_s: float
    service_time_s: float
    copies: int = 1
    instances: int = 1
    reload_s: float | None = None
    unload_s: float = 0.0
    max_batch_size: int = 1
    batch_item_s: float = 0.0
    component_memory_bytes: int | None = None
    component_cpus: float = 1.0
    component_accelerators: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a model profile needs a name (its TargetModel), got {self.name!r}")
        size = self.memory_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"{self.name}: memory_bytes must be an integer > 0, got {size!r}")
        _number(self.cold_start_s, f"{self.name}: cold_start_s")
        _number(self.service_time_s, f"{self.name}: service_time_s")
        _count(self.copies, f"{self.name}: copies", maximum=MAX_COPIES)
        _count(self.instances, f"{self.name}: instances")
        if self.reload_s is not None:
            _number(self.reload_s, f"{self.name}: reload_s")
        _number(self.unload_s, f"{self.name}: unload_s")
        _count(self.max_batch_size, f"{self.name}: max_batch_size")
        _number(self.batch_item_s, f"{self.name}: batch_item_s")
        reserved = self.component_memory_bytes
        if reserved is not None and (
            isinstance(reserved, bool) or not isinstance(reserved, int) or reserved < 128 * 2**20
        ):
            raise ValueError(
                f"{self.name}: component_memory_bytes is at least 128 MiB (MinMemoryRequiredInMb >= 128), "
                f"got {reserved!r}"
            )
        if _number(self.component_cpus, f"{self.name}: component_cpus") < 0.25:
            raise ValueError(
                f"{self.name}: component_cpus is at least 0.25 (NumberOfCpuCoresRequired), got "
                f"{self.component_cpus}"
            )
        _count(self.component_accelerators, f"{self.name}: component_accelerators")

    @property
    def component_memory(self) -> int:
        """What each inference component copy of the model reserves: ``component_memory_bytes``, else the
        model's memory and its container's (:data:`COMPONENT_OVERHEAD_BYTES`)."""
        if self.component_memory_bytes is not None:
            return self.component_memory_bytes
        return self.memory_bytes + COMPONENT_OVERHEAD_BYTES

    @property
    def reload_time_s(self) -> float:
        """Seconds a reload takes: ``reload_s``, else ``cold_start_s``."""
        return self.cold_start_s if self.reload_s is None else self.reload_s

    def batch_time_s(self, size: int) -> float:
        """Seconds one execution of ``size`` requests takes.

        Example:
            >>> ModelProfile("m", memory_bytes=1, cold_start_s=1, service_time_s=0.01,
            ...              max_batch_size=8, batch_item_s=0.002).batch_time_s(4)
            0.016
        """
        return self.service_time_s + (size - 1) * self.batch_item_s

    def names(self) -> list[str]:
        """The TargetModels this profile stands for, in order (one per copy)."""
        return [copy_name(self.name, index, self.copies) for index in range(self.copies)]

    @classmethod
    def from_report(
        cls,
        report: ProfileReport,
        candidate: str | CandidateResult | None = None,
        *,
        name: str | None = None,
        copies: int = 1,
        **fields: Any,
    ) -> ModelProfile:
        """The profile of one candidate of a :func:`~mme_triton.profile_model` report: the winner
        (:attr:`ProfileReport.best`) by default, else the candidate of that name (or that result).

        What is carried over: ``memory_bytes``; ``cold_start_s`` = download + extract + load (the
        report's ``cold_start_s`` is the whole first request, its inference included: without the parts,
        the service time is taken off it); ``reload_s`` = the load alone (an unloaded model is loaded again
        from the volume); ``unload_s``; ``service_time_s`` as the report took it
        (:attr:`~mme_triton.profile.report.CandidateResult.service_time_s`: a level without queueing, or
        Triton's compute time, never a queued level's latency); ``instances``; ``max_batch_size`` when the
        candidate's config turns on dynamic batching — its own ``dynamic_batching {}`` or the candidate's
        options — (else 1: without Triton's dynamic batcher, requests are not merged), with
        ``batch_item_s`` from Triton's statistics of two levels of different batch sizes when the report
        has them. ``fields`` replace any of them (``batch_item_s=``, ``max_batch_size=``, ...).

        Parameters:
            report: a :class:`~mme_triton.profile.report.ProfileReport`.
            candidate: a candidate's name or its ``CandidateResult``; ``None``: the winner.
            name: the TargetModel; default: the profiled model directory's name + ``.tar.gz``.
            copies: how many models the profile stands for.

        Raises:
            ValueError: no candidate won, the candidate was not measured (``invalid`` or ``failed``), or
                a figure the profile needs was not measured (give it in ``fields``).
            KeyError: no candidate of that name.

        Example::

            report = mt.profile_model("repo/resnet", candidates=Candidate.grid(max_batch_size=[1, 8]))
            resnet = mt.ModelProfile.from_report(report, copies=100)
        """
        result = _candidate(report, candidate)
        if result.status != "ok":
            problems = "; ".join(result.problems[:1]) or "no measurement"
            raise ValueError(f"candidate {result.name} was not measured ({result.status}: {problems})")
        label = name or f"{Path(result.model_dir).name}.tar.gz"
        service = result.service_time_s
        parts = [result.download_s, result.extract_s]
        if result.load_s is not None:
            cold: float | None = sum(part or 0.0 for part in parts) + result.load_s
            reload: float | None = result.load_s
        elif result.cold_start_s is not None:
            cold, reload = max(0.0, result.cold_start_s - (service or 0.0)), None
        else:
            cold = reload = None
        batching = result.dynamic_batching
        if batching is None:  # a report written before the config's own batching was recorded
            batching = bool(result.candidate.options.get("dynamic_batching"))
        values: dict[str, Any] = {
            "memory_bytes": result.memory_bytes,
            "cold_start_s": cold,
            "service_time_s": service,
            "copies": copies,
            "instances": result.instances or 1,
            "reload_s": reload,
            "unload_s": result.unload_s or 0.0,
            "max_batch_size": max(1, result.max_batch_size or 1) if batching else 1,
        }
        if batching and result.batch_item_s is not None:
            values["batch_item_s"] = result.batch_item_s
        values.update(fields)
        missing = [key for key in ("memory_bytes", "cold_start_s", "service_time_s") if values[key] is None]
        if missing:
            raise ValueError(
                f"candidate {result.name}: the report has no {', '.join(missing)}; give "
                + ", ".join(f"{key}=" for key in missing)
            )
        return cls(label, **values)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values (what :meth:`from_dict` and the profile files take)."""
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelProfile:
        """A profile from a mapping of its fields; sizes may carry units (``"300MiB"``) and times too
        (``"20ms"``, ``"4.5s"``); empty values take the default.

        Raises:
            ValueError: an unknown or missing field, or a value out of range.
        """
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise ValueError(f"unknown model profile field(s) {unknown}; the fields are {', '.join(_FIELDS)}")
        values = {key: value for key, value in data.items() if value is not None and value != ""}
        missing = [
            key for key in ("name", "memory_bytes", "cold_start_s", "service_time_s") if key not in values
        ]
        if missing:
            label = values.get("name", "a model profile")
            raise ValueError(f"{label}: missing {', '.join(missing)}")
        name = str(values.pop("name"))
        fields: dict[str, Any] = {}
        for key, value in values.items():
            if key in ("memory_bytes", "component_memory_bytes"):
                fields[key] = parse_size(value, f"{name}: {key}")
            elif key == "component_cpus":
                fields[key] = _float(value, f"{name}: {key}")
            elif key in ("copies", "instances", "max_batch_size", "component_accelerators"):
                fields[key] = _integer(value, f"{name}: {key}")
            else:
                fields[key] = parse_duration(value, f"{name}: {key}")
        return cls(name, **fields)

    @classmethod
    def load(cls, path: str | Path) -> list[ModelProfile]:
        """The profiles in a JSON file (a list of objects, or ``{"models": [...]}``) or a CSV file (a
        header of field names, one profile per row), told apart by the suffix (``.csv``) or content.

        Raises:
            FileNotFoundError: no such file.
            ValueError: a file over :data:`MAX_PROFILE_FILE_BYTES`, not JSON/CSV of profiles, a bad field
                (named with its row), no profile, or two profiles of one name.
        """
        path = Path(path)
        size = path.stat().st_size
        if size > MAX_PROFILE_FILE_BYTES:
            raise ValueError(f"{path}: {size:,} bytes; a profile file is at most {MAX_PROFILE_FILE_BYTES:,}")
        text = path.read_text(encoding="utf-8")
        looks_json = text.lstrip()[:1] in ("[", "{")
        rows = (
            _json_rows(text, path) if looks_json and path.suffix.lower() != ".csv" else _csv_rows(text, path)
        )
        profiles = []
        for where, row in rows:
            try:
                profiles.append(cls.from_dict(row))
            except ValueError as exc:
                raise ValueError(f"{path}: {where}: {exc}") from None
        if not profiles:
            raise ValueError(f"{path}: no model profile in the file")
        expand(profiles)  # refuses duplicate names
        return profiles

    @staticmethod
    def save(profiles: Iterable[ModelProfile], path: str | Path) -> Path:
        """Write ``profiles`` as CSV (a ``.csv`` path) or JSON (any other); :meth:`load` reads it back."""
        path = Path(path)
        rows = [profile.to_dict() for profile in profiles]
        if path.suffix.lower() == ".csv":
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=list(_FIELDS), lineterminator="\n")
            writer.writeheader()
            writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
            path.write_text(buffer.getvalue(), encoding="utf-8")
        else:
            path.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return path


def _candidate(report: ProfileReport, candidate: str | CandidateResult | None) -> CandidateResult:
    if candidate is None:
        best = report.best
        if best is None:
            raise ValueError(f"the report has no winner to profile: {report.reason}")
        return best
    if isinstance(candidate, str):
        return report.result(candidate)
    return candidate


def _float(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None


def _integer(value: Any, what: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def _json_rows(text: str, path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if isinstance(data, dict) and "models" in data:
        data = data["models"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ValueError(f'{path}: expected a list of model profile objects (or {{"models": [...]}})')
    return [(f"model {index}", item) for index, item in enumerate(data)]


def _csv_rows(text: str, path: Path) -> list[tuple[str, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    try:
        fields = reader.fieldnames
    except csv.Error as exc:
        raise ValueError(f"{path}: not CSV: {exc}") from None
    if not fields:
        raise ValueError(f"{path}: empty CSV (a header of field names comes first: {', '.join(_FIELDS)})")
    rows = []
    try:
        for row in reader:
            if None in row:
                raise ValueError(f"{path}: line {reader.line_num}: more values than header fields")
            rows.append((f"line {reader.line_num}", {k.strip(): (v or "").strip() for k, v in row.items()}))
    except csv.Error as exc:  # a field over csv's size limit, a NUL byte ...
        raise ValueError(f"{path}: line {reader.line_num}: not CSV: {exc}") from None
    return rows


def expand(profiles: Sequence[ModelProfile]) -> dict[str, ModelProfile]:
    """TargetModel → profile for every copy of every profile, in order.

    Raises:
        ValueError: two models of one name, or more than :data:`MAX_COPIES` models in all.
    """
    total = sum(profile.copies for profile in profiles)
    if total > MAX_COPIES:
        raise ValueError(f"{total:,} models in all; the planner takes at most {MAX_COPIES:,}")
    found: dict[str, ModelProfile] = {}
    for profile in profiles:
        if not isinstance(profile, ModelProfile):
            raise TypeError(f"expected ModelProfile objects, got {type(profile).__name__}")
        for name in profile.names():
            if name in found:
                raise ValueError(f"two model profiles name the model {name!r}")
            found[name] = profile
    return found
