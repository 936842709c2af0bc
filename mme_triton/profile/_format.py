"""A :class:`~mme_triton.profile.report.ProfileReport` as rows, a text or HTML table, CSV and JSON."""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.profile.candidates import Candidate
from mme_triton.profile.load import Level, ServerSplit, Window

if TYPE_CHECKING:
    from mme_triton.profile.report import CandidateResult, ProfileReport

__all__ = ["from_json", "html_table", "rows", "text_table", "to_csv", "to_json"]

_FORMAT_VERSION = 1
# The table: (heading, column of rows(), format)
_SHOWN = (
    ("candidate", "candidate", "{}"),
    ("load", "load", "{}"),
    ("thr/s", "throughput_per_s", "{:.1f}"),
    ("p50 ms", "p50_ms", "{:.1f}"),
    ("p99 ms", "p99_ms", "{:.1f}"),
    ("err", "errors", "{}"),
    ("stable", "state", "{}"),
    ("batch", "server_batch_size", "{:.1f}"),
    ("cold s", "cold_start_s", "{:.2f}"),
    ("load s", "load_s", "{:.2f}"),
    ("mem MiB", "memory_mib", "{:.0f}"),
)


def rows(report: ProfileReport) -> list[dict[str, Any]]:
    best, best_level = report.best, report.best_level
    out = []
    for result in report.results:
        common = {
            "candidate": result.name,
            "status": result.status,
            **result.figures(),
            "model_dir": result.model_dir,
            "target_model": result.target_model,
            "options": result.options,
            "problems": "; ".join(result.problems),
        }
        levels: list[Level | None] = list(result.levels) or [None]
        for level in levels:
            row = dict.fromkeys(_level_columns(), None) | common
            row["best"] = level is not None and level is best_level and result is best
            if level is not None:
                split = level.server
                row |= {
                    "concurrency": level.concurrency,
                    "request_rate": level.request_rate,
                    "throughput_per_s": level.throughput_per_s,
                    "p50_ms": level.p50_ms,
                    "p90_ms": level.p90_ms,
                    "p95_ms": level.p95_ms,
                    "p99_ms": level.p99_ms,
                    "mean_ms": level.mean_ms,
                    "requests": level.requests,
                    "errors": level.errors,
                    "stable": level.stable,
                    "overloaded": level.overloaded,
                    "offered_per_s": level.offered_per_s,
                    "backlog": level.backlog,
                    "queue_ms": split.queue_ms if split else None,
                    "compute_input_ms": split.compute_input_ms if split else None,
                    "compute_infer_ms": split.compute_infer_ms if split else None,
                    "compute_output_ms": split.compute_output_ms if split else None,
                    "server_batch_size": split.batch_size if split else None,
                }
            out.append(row)
    return out


def _level_columns() -> tuple[str, ...]:
    from mme_triton.profile.report import COLUMNS

    return COLUMNS


def _ordered(report: ProfileReport) -> list[dict[str, Any]]:
    """Rows with the table's extra fields: the winner first, then the candidates that qualify by their best
    measurement, then those measured that do not, then those refused or failed."""

    def rank(result: CandidateResult) -> tuple[int, float]:
        if result is report.best:
            return (0, 0.0)
        level = result.best_level(report.objective, report.constraints)
        if level is None:
            return (2, 0.0) if result.status == "ok" else (3, 0.0)
        value = level.throughput_per_s if report.objective == "throughput" else -(level.p99_ms or 0.0)
        return (1, -(value or 0.0))

    order = {result.name: index for index, result in enumerate(sorted(report.results, key=rank))}
    table = []
    for row in rows(report):
        shown = dict(row)
        if row["concurrency"] is not None:
            shown["load"] = f"c={row['concurrency']}"
        elif row["request_rate"] is not None:
            shown["load"] = f"{row['request_rate']:g}/s"
        else:
            shown["load"] = row["status"]
        shown["memory_mib"] = row["memory_bytes"] / 2**20 if row["memory_bytes"] is not None else None
        if row["stable"] is not None:
            shown["state"] = "yes" if row["stable"] else "OVERLOAD" if row["overloaded"] else "NO"
        table.append(shown)
    return sorted(table, key=lambda row: order[row["candidate"]])


def _cell(row: Mapping[str, Any], key: str, spec: str) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return spec.format(value)


def text_table(report: ProfileReport) -> str:
    table = _ordered(report)
    header = ["", *(heading for heading, _, _ in _SHOWN)]
    body = [
        ["*" if row["best"] else "", *(_cell(row, key, spec) for _, key, spec in _SHOWN)] for row in table
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append("")
    lines.append(f"best: {report.reason}")
    problems = [f"  {r.name}: {p}" for r in report.results if r.status != "ok" for p in r.problems[:3]]
    if problems:
        lines.append("not measured:")
        lines.extend(problems)
    return "\n".join(lines)


def html_table(report: ProfileReport) -> str:
    table = _ordered(report)
    head = "".join(f"<th>{html.escape(heading)}</th>" for heading, _, _ in _SHOWN)
    body = []
    for row in table:
        cells = "".join(f"<td>{html.escape(_cell(row, key, spec))}</td>" for _, key, spec in _SHOWN)
        style = ' style="font-weight:bold"' if row["best"] else ""
        mark = "&#9733;" if row["best"] else ""
        body.append(f"<tr{style}><td>{mark}</td>{cells}</tr>")
    return (
        f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<p><b>best</b>: {html.escape(report.reason)}</p>"
    )


def to_csv(report: ProfileReport, path: str | os.PathLike[str] | None) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(_level_columns()), lineterminator="\n")
    writer.writeheader()
    for row in rows(report):
        writer.writerow({key: "" if value is None else value for key, value in row.items()})
    text = buffer.getvalue()
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def to_json(report: ProfileReport, path: str | os.PathLike[str] | None) -> str:
    best = report.best
    document = {
        "format": _FORMAT_VERSION,
        "objective": report.objective,
        "constraints": dataclasses.asdict(report.constraints),
        "target": report.target,
        "engine": report.engine,
        "best": best.name if best is not None else None,
        "reason": report.reason,
        "candidates": [_result(result) for result in report.results],
        "rows": rows(report),
    }
    text = json.dumps(document, indent=1, default=str)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _result(result: CandidateResult) -> dict[str, Any]:
    figures = result.figures()  # the service time is derived from the levels again when read back
    return {
        "name": result.name,
        "options": {key: _encode(value) for key, value in result.candidate.options.items()},
        "candidate_model_dir": str(result.candidate.model_dir) if result.candidate.model_dir else None,
        "model_dir": result.model_dir,
        "status": result.status,
        "problems": result.problems,
        "target_model": result.target_model,
        **figures,
        "levels": [dataclasses.asdict(level) for level in result.levels],
    }


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **fields}
    if isinstance(value, (list, tuple)):
        return [_encode(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _encode(item) for key, item in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)  # warm-up arrays and the like: kept as text, not applied again


def _decode(value: Any) -> Any:
    from mme_triton.model import options

    if isinstance(value, list):
        return [_decode(item) for item in value]
    if isinstance(value, dict):
        kind = value.get("__type__")
        fields = {key: _decode(item) for key, item in value.items() if key != "__type__"}
        if kind in ("DynamicBatching", "InstanceGroup", "ModelWarmup", "TensorRT"):
            cls = getattr(options, kind)
            tuples = {f.name for f in dataclasses.fields(cls) if str(f.type).startswith("tuple")}
            return cls(
                **{k: tuple(v) if k in tuples and isinstance(v, list) else v for k, v in fields.items()}
            )
        return fields
    return value


def from_json(source: str | os.PathLike[str]) -> ProfileReport:
    from mme_triton.profile.report import CandidateResult, Constraints, ProfileReport

    text = str(source)
    if not text.lstrip().startswith("{"):
        text = Path(source).read_text(encoding="utf-8")
    document = json.loads(text)
    if document.get("format") != _FORMAT_VERSION:
        raise ValueError(f"not a profile report of format {_FORMAT_VERSION}: {document.get('format')!r}")
    results = []
    for item in document["candidates"]:
        options = {key: _decode(value) for key, value in item["options"].items()}
        candidate = Candidate(item["name"], model_dir=item.get("candidate_model_dir"), options=options)
        levels = [_level(level) for level in item["levels"]]
        results.append(
            CandidateResult(
                name=item["name"],
                candidate=candidate,
                model_dir=item["model_dir"],
                status=item["status"],
                problems=list(item["problems"]),
                target_model=item.get("target_model"),
                cold_start_s=item.get("cold_start_s"),
                download_s=item.get("download_s"),
                extract_s=item.get("extract_s"),
                load_s=item.get("load_s"),
                unload_s=item.get("unload_s"),
                memory_bytes=item.get("memory_bytes"),
                levels=levels,
                max_batch_size=item.get("max_batch_size"),
                instances=item.get("instances"),
                dynamic_batching=item.get("dynamic_batching"),
            )
        )
    return ProfileReport(
        results=results,
        objective=document["objective"],
        constraints=Constraints(**document["constraints"]),
        target=document["target"],
        engine=document["engine"],
    )


def _level(item: Mapping[str, Any]) -> Level:
    fields = dict(item)
    fields["windows"] = tuple(Window(**window) for window in fields.get("windows", ()))
    server = fields.get("server")
    fields["server"] = ServerSplit(**server) if server else None
    return Level(**fields)
