"""The profile stage's load generator against NVIDIA's perf_analyzer, and what a profile costs.

Three parts, one process, ratios within the run:

1. ``generator vs perf_analyzer`` — one Triton with its own HTTP port; the same model, the same
   concurrency (1, 4, 8) and the same measurement settings (windows, stability, trials) for
   ``mme_triton.profile``'s generator (``measure`` over Triton's KServe v2 route) and perf_analyzer
   (``-i http``, its CSV). Two models: ``busy``, a python model that computes for ``--compute-ms``
   (2.5 ms by default, a busy loop: real CPU, as a small network's forward pass) per execute, and
   ``trivial``, which answers at once (both generators' own overhead shows). The ratio is the generator's
   throughput over perf_analyzer's, pass mark 0.9x on ``busy``. Each pair runs ``--rounds`` times per
   concurrency, which one goes first alternating; the tables show each round and the ratio of the medians.
2. ``generator ceiling`` — requests/s the generator drives through the embedded stack's InvokeEndpoint
   route (``POST /endpoints/<name>/invocations``) with ``trivial``, at concurrency 1, 4, 8 and 16.
3. ``profile cost`` — the wall time of ``profile_model`` with 4 candidates x 3 concurrency levels of the
   shipped ONNX ``linear`` example on a stack of its own (default measurement settings), split into
   set-up (stack, endpoint), per-candidate deploy, cold start, measurement, unload, and tear-down; goal
   under 3 minutes, most of it measurement.

Needs perf_analyzer (``.ci/install-perf-analyzer DIR``; ``--perf-analyzer PATH`` or on PATH).

Usage::

    python benchmarks/profile.py [--rounds 1] [--compute-ms 2.5] [--window 1.0] [--skip-cost] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LINEAR = ROOT / "examples" / "model_repository" / "linear"

MODEL_PY = """\
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        end = time.perf_counter() + {seconds}
        while time.perf_counter() < end:  # computing, not sleeping: it holds a core
            pass
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]
"""


def write_model(repository: Path, name: str, seconds: float) -> Path:
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(MODEL_PY.format(seconds=seconds))
    (directory / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
    )
    return directory


def _settings(args: argparse.Namespace) -> Any:
    from mme_triton.profile.load import Measurement

    return Measurement(
        window=args.window,
        window_requests=50,
        stability=args.stability,
        max_trials=args.max_trials,
        warmup=1.0,
    )


def generator_vs_perf_analyzer(args: argparse.Namespace, scratch: Path) -> list[dict[str, Any]]:
    from mme_triton.local.triton.server import TritonServer
    from mme_triton.profile.inputs import build_requests
    from mme_triton.profile.perf_analyzer import find_perf_analyzer

    binary = find_perf_analyzer(args.perf_analyzer)
    settings = _settings(args)
    rows: list[dict[str, Any]] = []
    with TritonServer(workdir=scratch / "triton", triton_ports=True) as server:
        assert server.triton_ports is not None
        url = server.triton_ports.http_url
        for index, (name, seconds) in enumerate((("busy", args.compute_ms / 1000), ("trivial", 0.0))):
            model = write_model(scratch / f"load-{name}", name, seconds)
            server.load(f"{index:032x}", model.parent, name)
            requests = build_requests(model, count=4)
            for concurrency in args.concurrency:
                for round_ in range(args.rounds):
                    first = round_ % 2 == 0
                    ours_level, theirs_level = _pair(
                        binary, url, name, model, requests, concurrency, settings, generator_first=first
                    )
                    rows.append(
                        {
                            "model": name,
                            "concurrency": concurrency,
                            "round": round_ + 1,
                            "generator_per_s": ours_level.throughput_per_s,
                            "generator_p50_ms": ours_level.p50_ms,
                            "generator_p99_ms": ours_level.p99_ms,
                            "perf_analyzer_per_s": theirs_level.throughput_per_s,
                            "perf_analyzer_p50_ms": theirs_level.p50_ms,
                            "perf_analyzer_p99_ms": theirs_level.p99_ms,
                            "ratio": (ours_level.throughput_per_s / theirs_level.throughput_per_s)
                            if ours_level.throughput_per_s and theirs_level.throughput_per_s
                            else None,
                        }
                    )
                    print(_row_text(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _pair(
    binary: str,
    url: str,
    name: str,
    model: Path,
    requests: list[Any],
    concurrency: int,
    settings: Any,
    *,
    generator_first: bool,
) -> tuple[Any, Any]:
    """The generator's and perf_analyzer's measurement of one level; which runs first alternates from round
    to round, so a machine getting busier favours neither."""
    from mme_triton.profile.load import measure
    from mme_triton.profile.perf_analyzer import run_level
    from mme_triton.profile.transports import HTTPConnection

    def ours() -> Any:
        return measure(
            lambda: HTTPConnection(url, f"/v2/models/{name}/infer", kserve=True),
            requests,
            concurrency=concurrency,
            settings=settings,
        )

    def theirs() -> Any:
        return run_level(binary, url, name, requests, model, concurrency=concurrency, settings=settings)

    if generator_first:
        return ours(), theirs()
    theirs_level = theirs()
    return ours(), theirs_level


def generator_ceiling(args: argparse.Namespace, scratch: Path) -> list[dict[str, Any]]:
    from mme_triton import deploy_mme, upload_models
    from mme_triton.local import LocalStack
    from mme_triton.profile.inputs import build_requests
    from mme_triton.profile.load import measure
    from mme_triton.profile.transports import HTTPConnection

    model = write_model(scratch / "ceiling", "trivial", 0.0)
    requests = build_requests(model, count=4)
    rows = []
    with LocalStack() as stack:
        session = stack.boto3_session()
        url = stack.model_data_url("ceiling/")
        upload_models([model], url, boto3_session=session)
        deploy_mme(
            "ceiling",
            url,
            role=stack.role_arn,
            instance_type="ml.m5.xlarge",
            poll_interval=0.1,
            boto3_session=session,
        )
        path = "/endpoints/ceiling/invocations"
        for concurrency in (1, 4, 8, 16):
            level = measure(
                lambda: HTTPConnection(stack.runtime_url, path, target_model="trivial.tar.gz"),
                requests,
                concurrency=concurrency,
                settings=_settings(args),
            )
            rows.append(
                {
                    "concurrency": concurrency,
                    "per_s": level.throughput_per_s,
                    "p50_ms": level.p50_ms,
                    "p99_ms": level.p99_ms,
                    "stable": level.stable,
                }
            )
            print(f"ceiling c={concurrency}: {level.throughput_per_s}", file=sys.stderr, flush=True)
    return rows


_PHASES = {
    "set-up": "set-up (stack, endpoint)",
    "deploy": "deploy (package, upload)",
    "cold start": "cold start",
    "c": "measurement",
    "unload": "unload, remove (the last: and tear-down)",
}


def profile_cost(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    import mme_triton as mt
    from mme_triton import Candidate

    model = Path(shutil.copytree(LINEAR, scratch / "cost" / "linear"))
    marks: list[tuple[float, str, str]] = []
    started = time.perf_counter()

    def progress(candidate: str, step: str) -> None:
        marks.append((time.perf_counter(), candidate, step))

    report = mt.profile_model(
        model,
        candidates=Candidate.grid(
            dynamic_batching=[None, mt.DynamicBatching(max_queue_delay_microseconds=100)],
            instance_group=[mt.InstanceGroup(1, "KIND_CPU"), mt.InstanceGroup(2, "KIND_CPU")],
        ),
        concurrency=(1, 4, 8),
        progress=progress,
    )
    ended = time.perf_counter()
    phases = dict.fromkeys(_PHASES.values(), 0.0)
    phases["set-up (stack, endpoint)"] = marks[0][0] - started
    for index, (at, _candidate, step) in enumerate(marks):
        following = marks[index + 1][0] if index + 1 < len(marks) else ended
        phases[_PHASES.get(step, "measurement")] += following - at
    print(report, file=sys.stderr)
    return {
        "wall_s": ended - started,
        "phases": phases,
        "candidates": len(report.results),
        "levels": sum(len(r.levels) for r in report.results),
        "stable": sum(1 for r in report.results for lv in r.levels if lv.stable),
        "best": report.best.name if report.best else None,
    }


def _fmt(value: Any, spec: str = "{:.1f}") -> str:
    return "-" if value is None else spec.format(value)


def _row_text(row: dict[str, Any]) -> str:
    return (
        f"| {row['model']} | {row['concurrency']} | {row['round']} | {_fmt(row['generator_per_s'])} | "
        f"{_fmt(row['generator_p50_ms'], '{:.2f}')} | {_fmt(row['perf_analyzer_per_s'])} | "
        f"{_fmt(row['perf_analyzer_p50_ms'], '{:.2f}')} | {_fmt(row['ratio'], '{:.2f}x')} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=1, help="generator/perf_analyzer pairs per level")
    parser.add_argument("--compute-ms", type=float, default=2.5, help="what `busy` computes per execute")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--window", type=float, default=1.0, help="seconds per measurement window")
    parser.add_argument("--stability", type=float, default=0.2, help="tolerance (0.2: perf_analyzer -s 20)")
    parser.add_argument("--max-trials", type=int, default=10)
    parser.add_argument("--perf-analyzer", default=None, help="the binary (default: on PATH)")
    parser.add_argument("--skip-cost", action="store_true", help="leave out the profile's cost")
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    results: dict[str, Any] = {"load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as directory:
        scratch = Path(directory)
        results["versus"] = generator_vs_perf_analyzer(args, scratch)
        results["ceiling"] = generator_ceiling(args, scratch)
        if not args.skip_cost:
            results["cost"] = profile_cost(args, scratch)

    print("\n## generator vs perf_analyzer (Triton's HTTP port, same settings)\n")
    print("| model | concurrency | round | generator req/s | p50 ms | perf_analyzer req/s | p50 ms | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for row in results["versus"]:
        print(_row_text(row))
    print("\n| model | concurrency | generator req/s (median) | perf_analyzer req/s (median) | ratio |")
    print("|---|---|---|---|---|")
    for name in ("busy", "trivial"):
        for concurrency in args.concurrency:
            rows = [r for r in results["versus"] if r["model"] == name and r["concurrency"] == concurrency]
            ours = [r["generator_per_s"] for r in rows if r["generator_per_s"]]
            theirs = [r["perf_analyzer_per_s"] for r in rows if r["perf_analyzer_per_s"]]
            if ours and theirs:
                mine, others = statistics.median(ours), statistics.median(theirs)
                print(f"| {name} | {concurrency} | {mine:.1f} | {others:.1f} | {mine / others:.2f}x |")
    print("\n## generator ceiling (the stack's InvokeEndpoint route, `trivial`)\n")
    print("| concurrency | req/s | p50 ms | p99 ms | stable |")
    print("|---|---|---|---|---|")
    for row in results["ceiling"]:
        print(
            f"| {row['concurrency']} | {_fmt(row['per_s'])} | {_fmt(row['p50_ms'], '{:.2f}')} | "
            f"{_fmt(row['p99_ms'], '{:.2f}')} | {row['stable']} |"
        )
    cost = results.get("cost")
    if cost:
        print(f"\n## profile cost: {cost['candidates']} candidates x 3 levels on a stack of its own\n")
        print("| phase | seconds | share |")
        print("|---|---|---|")
        for phase, seconds in cost["phases"].items():
            print(f"| {phase} | {seconds:.1f} | {seconds / cost['wall_s']:.0%} |")
        print(f"| **total** | **{cost['wall_s']:.1f}** | goal < 180 s |")
        print(f"\nstable levels: {cost['stable']} of {cost['levels']}; best: {cost['best']}")
    print(f"\nload average at start: {results['load_average']}")
    if args.json:
        print(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
