"""``profile``: measure config candidates of a model where they will run and choose one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mme_triton.cli._common import SubParsers, add_command, aws_session, emit, err
from mme_triton.cli._errors import EXIT_FAILURE, EXIT_OK

__all__ = ["concurrency_levels", "register"]


def concurrency_levels(text: str) -> list[int]:
    """``1:8`` doubles from 1 to 8 (1, 2, 4, 8), as model-analyzer sweeps; ``1:8:2`` steps by 2 (1, 3, 5, 7),
    as perf_analyzer's ``--concurrency-range``; ``1,4,8`` lists them.

    Raises:
        argparse.ArgumentTypeError: not one of those forms, or a level under 1.
    """
    try:
        if ":" in text:
            parts = [int(part) for part in text.split(":")]
            if len(parts) == 2:
                start, end = parts
                levels = []
                level = start
                while 0 < level <= end:
                    levels.append(level)
                    level *= 2
            elif len(parts) == 3 and parts[2] > 0:
                levels = list(range(parts[0], parts[1] + 1, parts[2]))
            else:
                raise ValueError(text)
        else:
            levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--concurrency takes START:END (doubling), START:END:STEP or a list such as 1,4,8; got {text!r}"
        ) from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"--concurrency levels are >= 1, got {text!r}")
    return levels


def _rates(text: str) -> list[float]:
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--request-rate takes rates per second, e.g. 10,50; got {text!r}"
        ) from None
    if not rates or min(rates) <= 0:
        raise argparse.ArgumentTypeError(f"--request-rate takes rates > 0, got {text!r}")
    return rates


def _size(text: str) -> int:
    from mme_triton.local.cli import parse_size

    return parse_size(text)


def _seconds(flag: str) -> Any:
    def parse(text: str) -> float:
        from mme_triton._units import parse_duration

        try:
            return parse_duration(text, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _fraction(text: str) -> float:
    from mme_triton._units import parse_fraction

    try:
        value = parse_fraction(text, "--stability")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0 or value >= 1:
        raise argparse.ArgumentTypeError(
            f"--stability is a fraction in (0, 1), e.g. 0.1 or 10%; got {text!r}"
        )
    return value


def _profile(args: argparse.Namespace) -> int:
    from mme_triton.model.authoring import read_config
    from mme_triton.profile.candidates import parse_grid
    from mme_triton.profile.run import DEFAULT_CONCURRENCY, profile_model

    kind = "KIND_AUTO"
    groups = read_config(args.model_dirs[0]).instance_group
    if groups:
        from mme_triton.model._pb import model_config_pb2

        kind = model_config_pb2().ModelInstanceGroup.Kind.Name(groups[0].kind)
    candidates = parse_grid(args.grid, instance_kind=kind) or None
    quiet = bool(getattr(args, "quiet", False) or getattr(args, "json", False))
    report = profile_model(
        args.model_dirs,
        candidates=candidates,
        concurrency=args.concurrency or (() if args.request_rate else DEFAULT_CONCURRENCY),
        request_rate=args.request_rate,
        inputs=args.input_data,
        objective=args.objective,
        latency_budget=args.latency_budget,
        min_throughput=args.min_throughput,
        max_memory=args.max_memory,
        max_cold_start=args.max_cold_start,
        endpoint=args.endpoint,
        triton_url=args.triton_url,
        engine=args.engine,
        perf_analyzer=args.perf_analyzer,
        progress=not quiet,
        batch_size=args.batch_size,
        window=args.window,
        stability=args.stability,
        max_trials=args.max_trials,
        warmup=args.warmup,
        keep=args.keep,
        boto3_session=aws_session(args) if args.endpoint else None,
    )
    if args.csv is not None:
        report.to_csv(args.csv)
    if args.plot is not None:
        report.plot(args.plot)
    applied = None
    best = report.best
    if args.apply and best is not None:
        applied = report.apply(best.model_dir)
        if not quiet:
            err(f"applied {best.name} to {applied}")
    import json

    document = json.loads(report.to_json())
    document["applied"] = str(applied) if applied is not None else None
    emit(args, report.table, document)
    if best is None:
        err(f"error: {report.reason}" + (" (nothing applied)" if args.apply else ""))
        return EXIT_FAILURE
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """Add ``profile``."""
    p = add_command(
        sub,
        "profile",
        help="measure config candidates of a model (cold start, latency, throughput, memory) and pick one",
        description=(
            "Measure config candidates of one or more model directories where they will run: on the "
            "embedded stack (default) through the MME route, on a live endpoint (--endpoint) or on a Triton "
            "server (--triton-url). Prints a table (winner marked *); docs/profile.md explains the numbers. "
            "Exit 0 when a candidate meets the limits, 1 when none does (the table is printed, the reason "
            "on stderr) or when no candidate can be profiled."
        ),
        examples=[
            "mme-triton profile repo/resnet --grid max_batch_size=1,8 --grid instance_count=1,2 \\",
            "    --concurrency 1:8",
            "mme-triton profile export/onnx export/torchscript --concurrency 1,4 --latency-budget 50ms \\",
            "    --apply",
            "mme-triton profile repo/resnet --grid dynamic_batching=off,100us --input-data data.json \\",
            "    --csv p.csv --plot p.png --triton-url http://gpu-box:8000",
        ],
        handler=_profile,
        aws=True,
    )
    p.add_argument("model_dirs", nargs="+", type=Path, metavar="MODEL_DIR")
    what = p.add_argument_group("candidates and load")
    what.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="OPTION=V1,V2",
        help="a configure_model option and its values (candidates are every combination); instance_count=N "
        "is short for instance_group, dynamic_batching takes off, on or a delay (100us, 2ms)",
    )
    what.add_argument(
        "--concurrency",
        type=concurrency_levels,
        default=None,
        help="closed-loop levels: 1:8 (1,2,4,8), 1:8:2 or 1,4,8 (default: 1:8, unless --request-rate)",
    )
    what.add_argument("--request-rate", type=_rates, default=None, help="open-loop Poisson rates per second")
    what.add_argument("--input-data", default=None, help="a perf_analyzer --input-data JSON file")
    what.add_argument("--batch-size", type=int, default=1, help="rows per request of random data (default 1)")
    where = p.add_argument_group("where (default: the embedded stack)").add_mutually_exclusive_group()
    where.add_argument("--endpoint", default=None, help="a live endpoint (AWS, or `local up`'s)")
    where.add_argument(
        "--triton-url", default=None, help="a Triton server's HTTP URL (explicit model control)"
    )
    choose = p.add_argument_group("choosing")
    choose.add_argument("--objective", choices=("throughput", "latency"), default="throughput")
    choose.add_argument(
        "--latency-budget",
        type=_seconds("--latency-budget"),
        default=None,
        help="p99 limit: seconds, or with a unit (50ms)",
    )
    choose.add_argument("--min-throughput", type=float, default=None, help="inferences per second at least")
    choose.add_argument(
        "--max-memory", type=_size, default=None, help="memory once loaded at most, e.g. 1GiB"
    )
    choose.add_argument(
        "--max-cold-start",
        type=_seconds("--max-cold-start"),
        default=None,
        help="cold start at most: seconds, or with a unit (5s)",
    )
    choose.add_argument("--apply", action="store_true", help="write the winner's config into its MODEL_DIR")
    measure = p.add_argument_group("measurement")
    measure.add_argument(
        "--window", type=_seconds("--window"), default=1.0, help="seconds per window at least (default 1)"
    )
    measure.add_argument(
        "--stability",
        type=_fraction,
        default=0.1,
        help="a fraction, or a percentage with its sign: 0.1 or 10%% (default 0.1)",
    )
    measure.add_argument("--max-trials", type=int, default=10, help="windows at most per level (default 10)")
    measure.add_argument(
        "--warmup", type=_seconds("--warmup"), default=1.0, help="seconds not counted first (default 1)"
    )
    measure.add_argument("--engine", choices=("builtin", "perf_analyzer"), default="builtin")
    measure.add_argument(
        "--perf-analyzer", default=None, help="the perf_analyzer binary (--engine perf_analyzer)"
    )
    measure.add_argument("--keep", action="store_true", help="keep the candidates' artifacts (--endpoint)")
    files = p.add_argument_group("files")
    files.add_argument("--csv", type=Path, default=None, help="write every measurement as CSV")
    files.add_argument("--plot", type=Path, default=None, help="write the figure (PNG, SVG, PDF)")
