"""``engine="perf_analyzer"``: NVIDIA's perf_analyzer measures the load levels, read into the same report.

perf_analyzer needs Triton's own KServe v2 endpoint (it asks for the model's metadata and statistics
first), so it runs against the embedded stack's Triton HTTP port (a stack with ``triton_ports=True``, the
one a profile starts) or against ``triton_url``; it cannot drive InvokeEndpoint. The cold start, the
unload and the memory are measured as with the built-in generator; each load level is one perf_analyzer
run with the same settings (``--measurement-mode count_windows``, the window, ``--stability-percentage``,
``--max-trials``), the same inputs (a ``--input-data`` file written with
:func:`~mme_triton.model.perf_analyzer_data`) and ``-f`` CSV output. A level perf_analyzer could not
stabilise is reported unstable. A request rate perf_analyzer could not keep up with (it sent more than 1 %
of the requests late: the target did not answer fast enough to free its contexts) is reported
``overloaded``, without latencies, as the built-in engine reports one. Its percentiles are nearest-rank, the
definition the built-in engine uses too (:mod:`mme_triton._stats`).

Which binary: ``perf_analyzer=`` (a path), else ``$MME_TRITON_PERF_ANALYZER``, else ``perf_analyzer`` on
``PATH``. The ``perf-analyzer`` wheels (2.58 and later) need glibc >= 2.38; the perf_analyzer 2.51 inside the
``tritonclient==2.51.0`` wheel runs on older systems with ``libb64.so.0d`` and ``libcudart.so.12`` on the
library path (``.ci/install-perf-analyzer`` sets that up). Do not pass ``--collect-metrics`` against a
CPU-only server: it hangs.
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from mme_triton.errors import ProfileError
from mme_triton.profile.inputs import Request
from mme_triton.profile.load import Level, Measurement, ServerSplit

__all__ = ["ENVIRONMENT_VARIABLE", "find_perf_analyzer", "run_level"]

logger = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "MME_TRITON_PERF_ANALYZER"
"""The variable that names the perf_analyzer binary when ``perf_analyzer=`` is not given."""

_UNSTABLE = re.compile(r"Failed to obtain stable measurement")
_REQUEST_COUNT = re.compile(r"Request count:\s*(\d+)")
_AVG_LATENCY = re.compile(r"Avg latency:\s*(\d+)\s*usec")
_BATCH_STATS = re.compile(r"Inference count:\s*(\d+)\s*\n\s*Execution count:\s*(\d+)")
_DELAYED = re.compile(r"not able to keep up with the desired request rate\.\s*([\d.]+)% of the requests")
_SEND_RATE = re.compile(r"Avg send request rate:\s*([\d.]+)")
_OUTPUT_TAIL = 1500


def find_perf_analyzer(path: str | os.PathLike[str] | None = None) -> str:
    """The perf_analyzer binary to run (see the module's docstring for where it is looked for).

    Raises:
        ProfileError: none is found, or the one named does not run.
    """
    named = str(path) if path is not None else os.environ.get(ENVIRONMENT_VARIABLE)
    found = shutil.which(named) if named else shutil.which("perf_analyzer")
    if found is None:
        where = f"{named!r} is not an executable" if named else "no perf_analyzer on PATH"
        raise ProfileError(
            f"engine='perf_analyzer' needs NVIDIA's perf_analyzer: {where}. Install it (docs/profile.md: "
            f"the tritonclient 2.51 binary, or .ci/install-perf-analyzer) and pass perf_analyzer= or set "
            f"{ENVIRONMENT_VARIABLE}"
        )
    try:
        done = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise ProfileError(f"{found} does not run: {exc}") from exc
    if done.returncode != 0 and "Perf Analyzer" not in done.stdout + done.stderr:
        raise ProfileError(f"{found} does not run: {(done.stderr or done.stdout)[-_OUTPUT_TAIL:]}")
    return found


def run_level(
    binary: str,
    http_url: str,
    model_name: str,
    requests: list[Request],
    model_dir: Path,
    *,
    concurrency: int | None = None,
    request_rate: float | None = None,
    settings: Measurement | None = None,
    batch_size: int = 1,
    timeout: float | None = None,
) -> Level:
    """One load level measured by perf_analyzer against Triton's HTTP endpoint at ``http_url``.

    Raises:
        ProfileError: perf_analyzer failed for another reason than an unstable measurement.
    """
    from mme_triton.model.perf_data import perf_analyzer_data

    settings = settings or Measurement()

    with tempfile.TemporaryDirectory(prefix="mme-triton-perf-analyzer-") as scratch:
        data = Path(scratch) / "data.json"
        perf_analyzer_data([request.arrays for request in requests], data, model_dir=model_dir)
        report = Path(scratch) / "report.csv"
        command = [
            binary,
            "-m",
            model_name,
            "-u",
            http_url.removeprefix("http://").rstrip("/"),
            "-i",
            "http",
            "-b",
            str(batch_size),
            "--input-data",
            str(data),
            "--measurement-mode",
            "count_windows",
            "--measurement-interval",
            str(max(1, round(settings.window * 1000))),
            "--measurement-request-count",
            str(settings.window_requests),
            "--stability-percentage",
            f"{settings.stability * 100:g}",
            "--max-trials",
            str(settings.max_trials),
            "-f",
            str(report),
        ]
        if concurrency is not None:
            command += ["--concurrency-range", f"{concurrency}:{concurrency}"]
        else:
            assert request_rate is not None
            command += [
                "--request-rate-range",
                f"{request_rate:g}:{request_rate:g}",
                "--request-distribution",
                "poisson",
                "--max-threads",
                str(settings.max_in_flight),
            ]
        limit = timeout or 60.0 + settings.max_trials * settings.window * 12
        logger.debug("running %s", " ".join(command))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired as exc:
            raise ProfileError(f"perf_analyzer did not finish in {limit:.0f} s: {' '.join(command)}") from exc
        output = done.stdout + done.stderr
        rows = _read_csv(report)
        if done.returncode != 0 or not rows:
            if _UNSTABLE.search(output):
                return _unstable(concurrency, request_rate, output)
            raise ProfileError(
                f"perf_analyzer exited with status {done.returncode}: {output[-_OUTPUT_TAIL:].strip()}"
            )
        return _level(rows[-1], output, concurrency, request_rate, batch_size)


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    # the CSV ends at the first blank line (perf_analyzer may append other sections after it)
    table = text.split("\n\n", 1)[0]
    return list(csv.DictReader(io.StringIO(table)))


def _us(row: dict[str, str], column: str) -> float | None:
    value = row.get(column)
    return float(value) / 1000.0 if value not in (None, "") else None


def _level(
    row: dict[str, str], output: str, concurrency: int | None, request_rate: float | None, batch_size: int
) -> Level:
    count = _REQUEST_COUNT.search(output)
    mean = _AVG_LATENCY.search(output)
    batches = _BATCH_STATS.search(output)
    parts: dict[str, Any] = {
        "queue_ms": _us(row, "Server Queue"),
        "compute_input_ms": _us(row, "Server Compute Input"),
        "compute_infer_ms": _us(row, "Server Compute Infer"),
        "compute_output_ms": _us(row, "Server Compute Output"),
    }
    server = None
    if all(value is not None for value in parts.values()):
        inferences, executions = (int(batches.group(1)), int(batches.group(2))) if batches else (0, 0)
        server = ServerSplit(**parts, batch_size=inferences / executions if executions else float(batch_size))
    delayed = _DELAYED.search(output) if request_rate is not None else None
    if delayed is not None:
        sent = _SEND_RATE.search(output)
        return Level(
            concurrency=concurrency,
            request_rate=request_rate,
            stable=False,
            throughput_per_s=float(row["Inferences/Second"]),
            p50_ms=None,
            p90_ms=None,
            p95_ms=None,
            p99_ms=None,
            mean_ms=None,
            requests=int(count.group(1)) if count else 0,
            errors=0,
            server=server,
            error=(
                f"overloaded: perf_analyzer sent {delayed.group(1)}% of the requests late"
                + (f" (it managed {float(sent.group(1)):.1f} of {request_rate:g} requests/s)" if sent else "")
            ),
            overloaded=True,
            offered_per_s=request_rate,
        )
    return Level(
        concurrency=concurrency,
        request_rate=request_rate,
        stable=True,
        throughput_per_s=float(row["Inferences/Second"]),
        p50_ms=_us(row, "p50 latency"),
        p90_ms=_us(row, "p90 latency"),
        p95_ms=_us(row, "p95 latency"),
        p99_ms=_us(row, "p99 latency"),
        mean_ms=float(mean.group(1)) / 1000.0 if mean else None,
        requests=int(count.group(1)) if count else 0,
        errors=0,  # perf_analyzer stops at the first failed request instead of counting it
        server=server,
    )


def _unstable(concurrency: int | None, request_rate: float | None, output: str) -> Level:
    reason = next((line.strip() for line in output.splitlines() if _UNSTABLE.search(line)), "unstable")
    return Level.unstable(concurrency, request_rate, error=reason)
