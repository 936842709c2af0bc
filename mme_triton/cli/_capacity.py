"""``plan-capacity``: which instance type and how many, for these models and this traffic."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.cli._common import SubParsers, add_command, emit, err
from mme_triton.cli._errors import EXIT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from mme_triton.capacity.profile import ModelProfile
    from mme_triton.capacity.traffic import Traffic

__all__ = ["parse_traffic", "register"]

_TRAFFIC_HELP = (
    "zipf[:N][,s=1.1][,rate=50/s], uniform[:N][,rate=50/s] or trace:FILE (a CSV of timestamp,TargetModel); "
    "N: the number of models (with one profile and no --copies, N copies of it)"
)


def _csv_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def _counts(text: str) -> list[int]:
    try:
        return [int(item) for item in _csv_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"instance counts are integers, e.g. 1,2,4; got {text!r}") from None


def _duration(flag: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        from mme_triton._units import parse_duration

        try:
            parse_duration(text, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return check


def _number(text: str) -> float:
    try:
        return float(text.strip().lstrip("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _with_copies(profiles: list[ModelProfile], copies: int | None, wanted: int | None) -> list[ModelProfile]:
    """The profiles with ``--copies`` applied, then the ``N`` of ``zipf:N``/``uniform:N`` checked."""
    import dataclasses

    if copies is not None:
        profiles = [dataclasses.replace(profile, copies=copies) for profile in profiles]
    total = sum(profile.copies for profile in profiles)
    if wanted is None or wanted == total:
        return profiles
    if len(profiles) == 1 and copies is None and profiles[0].copies == 1:
        return [dataclasses.replace(profiles[0], copies=wanted)]
    raise ValueError(
        f"the traffic names {wanted} models but the profiles give {total}; drop the count or change --copies"
    )


def parse_traffic(
    spec: str, profiles: list[ModelProfile], *, duration: str | None, seed: int, copies: int | None = None
) -> tuple[list[ModelProfile], Traffic]:
    """``--traffic SPEC`` → the profiles (copies applied) and the traffic.

    Raises:
        ValueError: an unknown law, a bad option, a count that disagrees with the profiles.
    """
    from mme_triton.capacity.traffic import Traffic

    law, _, rest = spec.partition(":")
    law = law.strip().lower()
    if law == "trace":
        if not rest.strip():
            raise ValueError("trace: needs a file, e.g. trace:requests.csv")
        profiles = _with_copies(profiles, copies, None)
        return profiles, Traffic.trace(Path(rest.strip()), duration=None if duration is None else duration)
    if law not in ("zipf", "uniform"):
        raise ValueError(f"unknown traffic {law!r}: {_TRAFFIC_HELP}")
    wanted: int | None = None
    options: dict[str, str] = {}
    for index, part in enumerate(item.strip() for item in rest.split(",") if item.strip()):
        key, sep, value = part.partition("=")
        if not sep and index == 0 and key.isdigit():
            wanted = int(key)
        elif sep and key.strip() in ("s", "rate"):
            options[key.strip()] = value.strip()
        else:
            raise ValueError(f"{law}: unknown option {part!r} ({_TRAFFIC_HELP})")
    if law == "uniform" and "s" in options:
        raise ValueError("uniform takes no s= (that is zipf's exponent)")
    if "rate" not in options:
        raise ValueError(f"{law} needs rate=, e.g. {law}:rate=50/s")
    profiles = _with_copies(profiles, copies, wanted)
    length = duration or "10m"
    if law == "uniform":
        return profiles, Traffic.uniform(profiles, rate=options["rate"], duration=length, seed=seed)
    try:
        exponent = float(options.get("s", "1.0"))
    except ValueError:
        raise ValueError(f"zipf: s must be a number, got {options['s']!r}") from None
    return profiles, Traffic.zipf(profiles, s=exponent, rate=options["rate"], duration=length, seed=seed)


def _progress(args: argparse.Namespace) -> Callable[[int, int], None] | None:
    if getattr(args, "quiet", False) or getattr(args, "json", False):
        return None
    from tqdm.auto import tqdm

    bar: Any = None

    def hook(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(
                total=total, desc="simulating", unit="plan", leave=False, disable=None, file=sys.stderr
            )
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return hook


def _plan_capacity(args: argparse.Namespace) -> int:
    from mme_triton.capacity.plan import plan_capacity
    from mme_triton.capacity.profile import ModelProfile

    if args.copies is not None and args.copies < 1:
        raise ValueError(f"--copies must be >= 1, got {args.copies}")
    profiles, traffic = parse_traffic(
        args.traffic,
        ModelProfile.load(args.models),
        duration=args.duration,
        seed=args.seed,
        copies=args.copies,
    )
    plan = plan_capacity(
        profiles,
        traffic,
        instance_types=args.instance_types,
        instance_counts=args.instance_counts,
        min_hit_ratio=args.min_hit_ratio,
        p99=args.target_p99,
        max_cost=args.max_cost,
        seed=args.seed,
        progress=_progress(args),
        hosting=args.hosting,
        routing=args.routing,
    )
    if args.csv is not None:
        plan.to_csv(args.csv)
    if args.plot is not None:
        try:
            figure = plan.plot()
        except ImportError as exc:
            raise ValueError(f"--plot needs matplotlib ({exc}): pip install matplotlib") from None
        figure.savefig(args.plot)
    emit(args, lambda: str(plan), plan.to_dict())
    if plan.best is None:
        err("error: no plan meets the targets (each row's reason says why)")
        return EXIT_FAILURE
    return EXIT_OK


def register(sub: SubParsers) -> None:
    """Add ``plan-capacity``."""
    parser = add_command(
        sub,
        "plan-capacity",
        help="predict cache-hit ratio, latency and cost per instance type and count for models and traffic",
        description=(
            "Simulate the traffic on every instance type x count (docs/capacity.md states the model) and "
            "print a table per plan: cache-hit ratio, loads and unloads per minute, load wait, p50/p99 "
            "latency, memory headroom, cost per hour and per million requests, and why a plan misses the "
            "targets. Exit 1 when no plan meets them."
        ),
        examples=[
            "mme-triton plan-capacity --models profile.json --traffic zipf:200,s=1.1,rate=50/s "
            "--instance-types ml.g5.xlarge,ml.g5.2xlarge --target-p99 200ms --min-hit-ratio 0.95",
            "mme-triton plan-capacity --models profiles.csv --copies 50 --traffic uniform:rate=20/s "
            "--duration 1h --instance-counts 1,2,4 --csv plans.csv --plot plans.png",
            "mme-triton plan-capacity --models profile.json --traffic trace:requests.csv --json",
        ],
        handler=_plan_capacity,
    )
    parser.add_argument(
        "--models", required=True, type=Path, metavar="FILE", help="model profiles (JSON or CSV)"
    )
    parser.add_argument("--copies", type=int, help="copies of every profile (overrides the file's copies)")
    parser.add_argument("--traffic", required=True, metavar="SPEC", help=_TRAFFIC_HELP)
    parser.add_argument(
        "--duration",
        type=_duration("--duration"),
        help="how long zipf/uniform traffic lasts (default 10m; for a trace, its span)",
    )
    parser.add_argument(
        "--instance-types",
        type=_csv_list,
        metavar="TYPES",
        help="comma-separated (default: five common MME types)",
    )
    parser.add_argument(
        "--instance-counts", type=_counts, default=[1, 2, 3, 4], metavar="COUNTS", help="default 1,2,3,4"
    )
    parser.add_argument(
        "--target-p99",
        type=_duration("--target-p99"),
        metavar="DURATION",
        help="highest p99 latency, e.g. 200ms",
    )
    parser.add_argument(
        "--min-hit-ratio", type=float, metavar="RATIO", help="lowest cache-hit ratio, e.g. 0.95"
    )
    parser.add_argument(
        "--max-cost", type=_number, metavar="USD", help="highest cost per hour of the endpoint"
    )
    parser.add_argument(
        "--hosting",
        type=_csv_list,
        default=["mme"],
        metavar="WAYS",
        help="mme, inference-components, or both comma-separated to compare them (default mme)",
    )
    parser.add_argument(
        "--routing",
        choices=("LEAST_OUTSTANDING_REQUESTS", "RANDOM"),
        default="LEAST_OUTSTANDING_REQUESTS",
        help="inference components: how requests are shared among a model's copies",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the traffic and of routing (default 0)")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write every plan's figures as CSV")
    parser.add_argument("--plot", type=Path, metavar="FILE", help="also save the plot (PNG, SVG or PDF)")
