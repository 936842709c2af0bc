"""The result of a profile: per candidate its cold start, unload, memory and load levels; the winner and why.

:class:`ProfileReport` holds one :class:`CandidateResult` per candidate (valid, refused or failed). The
winner is chosen as model-analyzer does: among the stable, error-free measurements (candidate x load level)
that meet the constraints (p99 within ``latency_budget``, throughput of at least ``min_throughput``, the
candidate's memory at most ``max_memory`` and its cold start at most ``max_cold_start``), the highest
throughput (``objective="throughput"``) or the lowest p99 (``objective="latency"``). Reading it: the
table (:meth:`ProfileReport.table`, a notebook's HTML), :meth:`~ProfileReport.to_csv`,
:meth:`~ProfileReport.to_json` / :meth:`~ProfileReport.from_json`, :meth:`~ProfileReport.plot`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mme_triton.profile.candidates import Candidate, describe_value
from mme_triton.profile.load import Level

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLUMNS", "CandidateResult", "Constraints", "ProfileReport"]

logger = logging.getLogger(__name__)

Objective = Literal["throughput", "latency"]

COLUMNS = (
    "candidate",
    "status",
    "concurrency",
    "request_rate",
    "throughput_per_s",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "mean_ms",
    "requests",
    "errors",
    "stable",
    "overloaded",
    "offered_per_s",
    "backlog",
    "queue_ms",
    "compute_input_ms",
    "compute_infer_ms",
    "compute_output_ms",
    "server_batch_size",
    "cold_start_s",
    "download_s",
    "extract_s",
    "load_s",
    "unload_s",
    "memory_bytes",
    "service_time_s",
    "service_time_source",
    "max_batch_size",
    "dynamic_batching",
    "instances",
    "model_dir",
    "target_model",
    "options",
    "best",
    "problems",
)
"""The columns of :meth:`ProfileReport.rows` and the CSV: one row per candidate and load level, the
per-candidate figures repeated on each of its rows (a refused or failed candidate has one row)."""


@dataclass(frozen=True)
class Constraints:
    """What a measurement must meet to win (``None``: no limit)."""

    latency_budget_ms: float | None = None
    """p99 latency at most this."""
    min_throughput: float | None = None
    """Inferences per second at least this."""
    max_memory: int | None = None
    """The candidate's memory once loaded, in bytes, at most this (unknown memory does not meet it)."""
    max_cold_start_s: float | None = None
    """The candidate's cold start at most this many seconds."""

    def describe(self) -> str:
        parts = []
        if self.latency_budget_ms is not None:
            parts.append(f"p99 <= {self.latency_budget_ms:g} ms")
        if self.min_throughput is not None:
            parts.append(f"throughput >= {self.min_throughput:g}/s")
        if self.max_memory is not None:
            parts.append(f"memory <= {_mib(self.max_memory)} MiB")
        if self.max_cold_start_s is not None:
            parts.append(f"cold start <= {self.max_cold_start_s:g} s")
        return ", ".join(parts)


@dataclass
class CandidateResult:
    """What was measured for one candidate (``status`` ``ok``), or why it could not be (``invalid``:
    refused by configure_model or validation, ``failed``: it did not load or did not answer)."""

    name: str
    candidate: Candidate
    model_dir: str
    status: Literal["ok", "invalid", "failed"] = "ok"
    problems: list[str] = field(default_factory=list)
    target_model: str | None = None
    """The TargetModel it was served under (the Triton model name on a Triton server)."""
    cold_start_s: float | None = None
    """The first request on the unloaded model, as the client saw it: download, extract, load, inference."""
    download_s: float | None = None
    extract_s: float | None = None
    load_s: float | None = None
    unload_s: float | None = None
    memory_bytes: int | None = None
    """Resident and shared memory of its model instances once loaded (the stack's measurement)."""
    levels: list[Level] = field(default_factory=list)
    max_batch_size: int | None = None
    """The candidate's ``max_batch_size`` (0: no batching)."""
    instances: int | None = None
    """How many model instances the candidate runs (its instance groups' counts; 1 without any)."""
    dynamic_batching: bool | None = None
    """Whether the candidate's config turns on Triton's dynamic batcher (its own, or the options')."""

    @property
    def service_time_s(self) -> float | None:
        """Seconds one request takes with no queueing (:attr:`service_time_source` says where it was taken):

        1. the mean latency of the lowest stable closed-loop level whose concurrency is at most the
           candidate's instance count (every request has a model instance of its own: nothing queues);
        2. else Triton's own statistics of a stable level: compute input + infer + output of an execution,
           without its queueing, at the level whose executions were the smallest batches;
        3. else ``None`` — never the latency of a level where requests waited for each other.
        """
        return self._service()[0]

    @property
    def service_time_source(self) -> str | None:
        """Where :attr:`service_time_s` comes from, in words (``None`` when there is none)."""
        return self._service()[1]

    def _service(self) -> tuple[float | None, str | None]:
        instances = self.instances or 1
        alone = [
            level
            for level in self.levels
            if level.stable and level.concurrency is not None and level.concurrency <= instances
        ]
        if alone:
            lowest = min(alone, key=lambda level: level.concurrency or 0)
            if lowest.mean_ms is not None:
                return lowest.mean_ms / 1000.0, f"mean latency at {lowest.load} ({instances} instance(s))"
        split = [level for level in self.levels if level.stable and level.server is not None]
        if split:
            smallest = min(split, key=lambda level: level.server.batch_size if level.server else 0.0)
            assert smallest.server is not None
            return smallest.server.compute_ms / 1000.0, (
                f"Triton's compute time at {smallest.load} (batches of {smallest.server.batch_size:.1f})"
            )
        return None, None

    @property
    def batch_item_s(self) -> float | None:
        """Seconds each request beyond the first adds to an execution, from Triton's statistics of two
        stable levels whose executions carried batches at least one request apart (``None`` otherwise, or
        when the larger batch was not slower)."""
        split = [level.server for level in self.levels if level.stable and level.server is not None]
        if len(split) < 2:
            return None
        small = min(split, key=lambda server: server.batch_size)
        large = max(split, key=lambda server: server.batch_size)
        apart = large.batch_size - small.batch_size
        if apart < 1.0:
            return None
        slope = (large.compute_ms - small.compute_ms) / apart / 1000.0
        return slope if slope > 0 else None

    def figures(self) -> dict[str, Any]:
        """The per-candidate measurements by column name (the CSV's, the JSON's, ``summary()``'s)."""
        return {
            "cold_start_s": self.cold_start_s,
            "download_s": self.download_s,
            "extract_s": self.extract_s,
            "load_s": self.load_s,
            "unload_s": self.unload_s,
            "memory_bytes": self.memory_bytes,
            "service_time_s": self.service_time_s,
            "service_time_source": self.service_time_source,
            "max_batch_size": self.max_batch_size,
            "dynamic_batching": self.dynamic_batching,
            "instances": self.instances,
        }

    @property
    def options(self) -> str:
        """The candidate's options as text (``max_batch_size=8, dynamic_batching=100us``)."""
        return ", ".join(f"{k}={describe_value(v)}" for k, v in self.candidate.options.items()) or "as-is"

    def best_level(
        self, objective: Objective = "throughput", constraints: Constraints | None = None
    ) -> Level | None:
        """This candidate's best measurement that meets ``constraints``, ``None`` if none does."""
        eligible = [level for level in self.levels if not _level_failures(self, level, constraints)]
        return _pick(eligible, objective)


@dataclass
class ProfileReport:
    """Every candidate's measurements, the winner (:attr:`best`) and why (:attr:`reason`).

    Example::

        report = profile_model("repo/resnet", candidates=Candidate.grid(max_batch_size=[1, 8]))
        print(report)                       # the table, winner marked
        report.best.name, report.reason
        report.apply("repo/resnet")         # write the winner's config
        report.to_csv("profile.csv"); report.plot().savefig("profile.png")
    """

    results: list[CandidateResult]
    objective: Objective = "throughput"
    constraints: Constraints = field(default_factory=Constraints)
    target: str = "stack"
    engine: str = "builtin"

    # -- the winner ----------------------------------------------------------------------------------

    @property
    def best(self) -> CandidateResult | None:
        """The winning candidate's result (``.name``, ``.candidate``, ...), ``None`` if none qualifies."""
        return self._choice()[0]

    @property
    def best_level(self) -> Level | None:
        """The measurement the winner won with."""
        return self._choice()[1]

    @property
    def reason(self) -> str:
        """Why the winner won, or why no candidate did."""
        return self._choice()[2]

    def result(self, name: str | None = None) -> CandidateResult:
        """A candidate's result by name; the winner's when ``name`` is ``None``.

        Raises:
            KeyError: no candidate has that name, or no candidate won.
        """
        if name is None:
            best = self.best
            if best is None:
                raise KeyError(f"no candidate won: {self.reason}")
            return best
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no candidate {name!r}; candidates are {', '.join(r.name for r in self.results)}")

    def apply(self, model_dir: str | os.PathLike[str], *, candidate: str | None = None) -> Path:
        """Write the winner's (or ``candidate``'s) options into ``model_dir``'s config.pbtxt through
        :func:`~mme_triton.configure_model` (validated, atomic); return the directory.

        Raises:
            KeyError: no candidate won (the message says why), or no candidate has that name.
            ModelValidationError, ValueError: configure_model refuses the options for this model.
        """
        from mme_triton.model.authoring import configure_model

        chosen = self.result(candidate)
        directory = Path(model_dir)
        if Path(chosen.model_dir).resolve() != directory.resolve():
            logger.info("applying %s (profiled from %s) to %s", chosen.name, chosen.model_dir, directory)
        options = dict(chosen.candidate.options)
        if not options:
            logger.info("%s keeps its model's config: nothing to write into %s", chosen.name, directory)
            return directory
        return configure_model(directory, **options)

    def _choice(self) -> tuple[CandidateResult | None, Level | None, str]:
        eligible: list[tuple[CandidateResult, Level]] = []
        why_not: list[str] = []
        measured = 0
        for result in self.results:
            if result.status != "ok":
                why_not.append(f"{result.name}: {result.status} ({'; '.join(result.problems[:1]) or '-'})")
                continue
            reasons = []
            for level in result.levels:
                measured += 1
                failures = _level_failures(result, level, self.constraints)
                if failures:
                    reasons.append(f"{level.load}: {', '.join(failures)}")
                else:
                    eligible.append((result, level))
            if not any(r is result for r, _ in eligible):
                why_not.append(f"{result.name}: " + ("; ".join(reasons) or "no measurement"))
        if not eligible:
            return None, None, "no candidate qualifies: " + " | ".join(why_not)
        best_level = _pick([level for _, level in eligible], self.objective)
        winner = next(result for result, level in eligible if level is best_level)
        assert best_level is not None
        metric = (
            f"highest throughput, {best_level.throughput_per_s:.1f}/s"
            if self.objective == "throughput"
            else f"lowest p99 latency, {best_level.p99_ms:.1f} ms"
        )
        limits = self.constraints.describe()
        reason = (
            f"{winner.name}: {metric} at {best_level.load} (p50 {best_level.p50_ms:.1f} ms, p99 "
            f"{best_level.p99_ms:.1f} ms), among {len(eligible)} of {measured} measurements that are stable, "
            f"error-free{' and meet ' + limits if limits else ''}"
        )
        return winner, best_level, reason

    # -- reading it ----------------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """One record per candidate and load level with :data:`COLUMNS` (see there)."""
        from mme_triton.profile._format import rows

        return rows(self)

    def summary(self) -> list[dict[str, Any]]:
        """One record per candidate: its own figures (cold start and its parts, unload, memory, service time,
        ``max_batch_size``, instances) and its best measurement that meets the limits (``best_load``,
        ``throughput_per_s``, ``p50_ms``, ``p99_ms``; ``None`` when none does), ``best`` for the winner."""
        records = []
        for result in self.results:
            level = result.best_level(self.objective, self.constraints)
            records.append(
                {
                    "candidate": result.name,
                    "status": result.status,
                    "model_dir": result.model_dir,
                    **result.figures(),
                    "best_load": level.load if level is not None else None,
                    "throughput_per_s": level.throughput_per_s if level is not None else None,
                    "p50_ms": level.p50_ms if level is not None else None,
                    "p99_ms": level.p99_ms if level is not None else None,
                    "best": result is self.best,
                }
            )
        return records

    def table(self) -> str:
        """The report as a text table: candidates best first, the winner's row marked ``*``."""
        from mme_triton.profile._format import text_table

        return text_table(self)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        best = self.best
        return (
            f"<ProfileReport of {len(self.results)} candidates on the {self.target} ({self.engine}), "
            f"best: {best.name if best is not None else None!r}>"
        )

    def _repr_html_(self) -> str:
        from mme_triton.profile._format import html_table

        return html_table(self)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str:
        """The rows as CSV (:data:`COLUMNS`), written to ``path`` when given; the text is returned."""
        from mme_triton.profile._format import to_csv

        return to_csv(self, path)

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str:
        """Every measurement (windows and server split included) as JSON, written to ``path`` when given;
        :meth:`from_json` reads it back."""
        from mme_triton.profile._format import to_json

        return to_json(self, path)

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> ProfileReport:
        """A report from :meth:`to_json`'s file (a path) or text."""
        from mme_triton.profile._format import from_json

        return from_json(source)

    def plot(self, path: str | os.PathLike[str] | None = None) -> Figure:
        """A matplotlib figure: throughput against p99 latency per candidate across its load levels, and
        the cold start per candidate (download, extract, load stacked where known); saved to ``path``."""
        from mme_triton.profile.plot import plot_report

        return plot_report(self, path)


def _level_failures(result: CandidateResult, level: Level, constraints: Constraints | None) -> list[str]:
    failures = []
    if level.overloaded:
        failures.append("overloaded")
    elif not level.stable:
        failures.append("unstable")
    if level.errors:
        failures.append(f"{level.errors} errors")
    if not level.stable or constraints is None:
        return failures
    if constraints.latency_budget_ms is not None and (level.p99_ms or 0) > constraints.latency_budget_ms:
        failures.append(f"p99 {level.p99_ms:.1f} ms > {constraints.latency_budget_ms:g} ms")
    if constraints.min_throughput is not None and (level.throughput_per_s or 0) < constraints.min_throughput:
        failures.append(f"{level.throughput_per_s:.1f}/s < {constraints.min_throughput:g}/s")
    memory = result.memory_bytes
    if constraints.max_memory is not None and (memory is None or memory > constraints.max_memory):
        failures.append(f"memory {_mib(result.memory_bytes)} MiB > {_mib(constraints.max_memory)} MiB")
    if constraints.max_cold_start_s is not None and (
        result.cold_start_s is None or result.cold_start_s > constraints.max_cold_start_s
    ):
        failures.append(f"cold start {result.cold_start_s or 0:.2f} s > {constraints.max_cold_start_s:g} s")
    return failures


def _pick(levels: Sequence[Level], objective: Objective) -> Level | None:
    if not levels:
        return None
    if objective == "latency":
        return min(levels, key=lambda lv: (lv.p99_ms or 0.0, -(lv.throughput_per_s or 0.0)))
    return max(levels, key=lambda lv: (lv.throughput_per_s or 0.0, -(lv.p99_ms or 0.0)))


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:.0f}"
