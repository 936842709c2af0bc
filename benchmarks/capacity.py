"""The capacity planner's simulator: how fast it goes, against a plain LRU replay of the same requests.

Scenarios (all seeded): 500 models of 300 MiB (4 s cold start: a 3 s download, then a 1 s load; 20 ms
service time), 50 requests/s for an
hour (about 180,000 requests), Zipf s=1.1 and uniform, on 1 and 4 ``ml.g5.xlarge`` instances (74 models
fit on one). For each: the wall time of ``simulate`` (the full model: loads that take time and hold
memory, queues, routing across instances), simulated requests per second, and the same requests replayed
through a bare ``OrderedDict`` LRU of 74 x instances entries — no time, no queues, the least a cache
simulation can do — as the alternative; the ratio says what the full model costs. Goal: the hour of
traffic in under 5 s. Also the time to make the traffic and a whole ``plan_capacity`` of 5 types x 4 counts.

Then the prediction against the embedded stack (``--no-validate`` skips it; it needs the ``local`` extra and
takes a minute or two): a tiny python model is profiled on the stack (``profile_model``, short windows),
six copies of it are planned from that profile (``ModelProfile.from_report``), and the plan is validated on
a stack that keeps four loaded (``max_models=4``) for three mixes (uniform, Zipf 0.8, Zipf 1.2), each from
one client sending 48 requests one after the other. Per mix: the cache-hit ratio and the p99 latency
predicted from the profile, measured (the stack's CloudWatch metrics; the client's p99), and predicted again
with the stack's own load, unload and service times of the same run (calibrated) as the alternative.
Goals: hit ratio within ±0.05, p99 within 30%.

Then the same with many requests in flight (``--no-concurrent`` skips it): four copies of a model that
spins 40 ms of CPU per request (tests/capacity/spin.py), planned on ``InstanceType.this_machine()`` (this
machine's CPUs: the processors the planner shares among executions), sent open-loop Poisson traffic at
30 %, 60 % and 85 % of those CPUs for ``--concurrent-duration`` seconds each, warm (every model loaded
first), up to 64 in flight. Per utilization: the hit ratio and the p99 predicted (the requests as they were
sent, through the processor model) and measured (the client's), and the calibrated p99. Same goals.

Usage::

    python benchmarks/capacity.py [--rate 50] [--duration 3600] [--models 500] [--repeat 3] [--json]
                                  [--no-validate] [--no-concurrent] [--concurrent-duration 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

GOAL_S = 5.0
HIT_GOAL = 0.05
P99_GOAL = 0.30
MIXES = ("uniform", "zipf-0.8", "zipf-1.2")
UTILIZATIONS = (0.3, 0.6, 0.85)
SPIN_CPU_S = 0.04


def lru_replay(targets: list[int], capacity: int) -> int:
    """Hits of a plain LRU cache of ``capacity`` models over the request sequence."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for model in targets:
        if model in cache:
            hits += 1
            cache.move_to_end(model)
        else:
            cache[model] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits


def _timed(repeat: int, run: Any) -> tuple[float, float, Any]:
    """The median and the worst (longest) wall time of ``repeat`` runs, and the last run's result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), max(times), result


def validations(requests: int = 48, held: int = 4, copies: int = 6) -> tuple[Any, dict[str, Any]]:
    """Profile the tiny model on the stack, plan ``copies`` of it, validate each mix; the profile and the
    validations by mix."""
    import mme_triton as mt
    from mme_triton.local import LocalStack

    with tempfile.TemporaryDirectory(prefix="capacity-bench-") as scratch:
        tiny = mt.new_python_model(  # a pass-through model
            scratch,
            "tiny",
            inputs={"INPUT0": ("FP32", [4])},
            outputs={"OUTPUT0": ("FP32", [4])},
            max_batch_size=8,
        )
        with LocalStack(max_models=held, metrics_period=1) as stack:
            report = mt.profile_model(
                tiny, concurrency=(1,), stack=stack, progress=False,
                window=0.5, window_requests=20, warmup=0.3, stability=0.25, max_trials=12,
            )  # fmt: skip
            profile = mt.ModelProfile.from_report(report, copies=copies)

            def check(mix: str) -> Any:
                if mix == "uniform":
                    traffic = mt.Traffic.uniform([profile], rate=5, duration=60, seed=7)
                else:
                    s = float(mix.split("-")[1])
                    traffic = mt.Traffic.zipf([profile], s=s, rate=5, duration=60, seed=7)
                plan = mt.plan_capacity(
                    [profile], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[1]
                )
                return plan.validate(
                    {profile.name: tiny}, stack=stack, max_requests=requests, time_scale=0.01,
                    endpoint_name=f"bench-{mix.replace('.', '')}",
                )  # fmt: skip

            with ThreadPoolExecutor(max_workers=len(MIXES)) as pool:
                futures = {mix: pool.submit(check, mix) for mix in MIXES}
                return profile, {mix: future.result() for mix, future in futures.items()}


def concurrent_validations(duration: float, copies: int = 4) -> dict[float, tuple[Any, Any]]:
    """Plan and validate the spinning model at each utilization of this machine's CPUs, one after the
    other (they share the CPUs they measure); the plan and the validation by utilization."""
    import importlib.util
    from pathlib import Path

    import mme_triton as mt
    from mme_triton.local import LocalStack

    where = Path(__file__).resolve().parent.parent / "tests" / "capacity" / "spin.py"
    spec = importlib.util.spec_from_file_location("spin_model", where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    write_spin_model = module.write_spin_model

    kind = mt.InstanceType.this_machine()
    profile = mt.ModelProfile(
        "spin.tar.gz", memory_bytes=64 * 2**20, cold_start_s=2.0, reload_s=1.8, unload_s=1.5,
        service_time_s=SPIN_CPU_S, copies=copies,
    )  # fmt: skip
    found = {}
    with (
        tempfile.TemporaryDirectory(prefix="capacity-bench-") as scratch,
        LocalStack(metrics_period=1) as stack,
    ):
        spin = write_spin_model(Path(scratch), SPIN_CPU_S)
        for utilization in UTILIZATIONS:
            rate = utilization * kind.processors / SPIN_CPU_S
            traffic = mt.Traffic.uniform([profile], rate=rate, duration=duration, seed=11)
            plan = mt.plan_capacity([profile], traffic, instance_types=[kind], instance_counts=[1])
            found[utilization] = (
                plan,
                plan.validate(
                    {profile.name: spin}, stack=stack, concurrency=64, warm=True,
                    endpoint_instance_type="ml.m5.xlarge", endpoint_name=f"bench-c{round(utilization * 100)}",
                ),
            )  # fmt: skip
    return found


def _print_concurrent(checked: dict[float, tuple[Any, Any]]) -> bool:
    import mme_triton as mt

    kind = mt.InstanceType.this_machine()
    print(
        f"\nprediction vs the embedded stack, requests in flight: 4 copies of a model spinning "
        f"{SPIN_CPU_S * 1000:.0f} ms of CPU per request, open-loop Poisson, warm, up to 64 in flight, on "
        f"InstanceType.this_machine() ({kind.processors} CPUs)\n"
    )
    print("| utilization | requests | in flight (max) | hit ratio pred | measured | p99 pred s | measured s "
          "| error | calibrated s | calibrated error | goals met |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    met_all = True
    for utilization, (_, validation) in checked.items():
        hit, p99 = validation["cache_hit_ratio"], validation["p99_s"]
        met = hit.within is True and (p99.within is True or _within(p99.calibrated_error))
        met_all = met_all and met
        sent = validation.predicted["processor_utilization"]
        print(
            f"| {utilization:.0%} (as sent {sent:.0%}) | {validation.requests} | {validation.in_flight_max} "
            f"| {hit.predicted:.3f} | {hit.measured:.3f} | {p99.predicted:.3f} | {p99.measured:.3f} "
            f"| {p99.error:+.0%} | {_signed(p99.calibrated, '.3f')} "
            f"| {_signed(p99.calibrated_error, '+.0%')} | {'yes' if met else 'NO'} |"
        )
    return met_all


def _within(error: float | None) -> bool:
    return error is not None and abs(error) <= P99_GOAL


def _print_validations(profile: Any, checked: dict[str, Any]) -> bool:
    print(
        f"\nprediction vs the embedded stack: {profile.copies} copies of a tiny python model, max_models=4, "
        f"one sequential client; profile from profile_model: cold start {profile.cold_start_s:.2f} s, "
        f"load {profile.reload_time_s:.2f} s, unload {profile.unload_s:.2f} s, "
        f"service {profile.service_time_s * 1000:.1f} ms\n"
    )
    print("| mix | requests | loads (pred/meas) | hit ratio pred | measured | error | calibrated error |"
          " p99 pred s | measured s | error | calibrated s | calibrated error | goals met |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    met_all = True
    for mix, validation in checked.items():
        hit, p99, loads = validation["cache_hit_ratio"], validation["p99_s"], validation["loads"]
        met = hit.within is True and p99.within is True
        met_all = met_all and met
        print(
            f"| {mix} | {validation.requests} | {loads.predicted}/{loads.measured} | {hit.predicted:.3f} "
            f"| {hit.measured:.3f} | {hit.error:+.3f} | {_signed(hit.calibrated_error, '+.3f')} "
            f"| {p99.predicted:.2f} | {p99.measured:.2f} | {p99.error:+.0%} "
            f"| {_signed(p99.calibrated, '.2f')} | {_signed(p99.calibrated_error, '+.0%')} "
            f"| {'yes' if met else 'NO'} |"
        )
    for mix, validation in checked.items():
        for note in validation.notes:
            print(f"- {mix}: {note}")
    return met_all


def _signed(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of traffic")
    parser.add_argument("--models", type=int, default=500, help="models")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median and worst shown)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--no-validate", action="store_true", help="skip the prediction against the stack")
    parser.add_argument(
        "--no-concurrent", action="store_true", help="skip the prediction with requests in flight"
    )
    parser.add_argument(
        "--concurrent-duration", type=float, default=40.0, help="seconds of traffic per utilization"
    )
    args = parser.parse_args(argv)

    from mme_triton import INSTANCE_TYPES, ModelProfile, Traffic, plan_capacity
    from mme_triton.capacity import simulate

    profile = ModelProfile(
        "m.tar.gz",
        memory_bytes=300 * 2**20,
        cold_start_s=4.0,
        reload_s=1.0,
        service_time_s=0.02,
        copies=args.models,
    )
    kind = INSTANCE_TYPES["ml.g5.xlarge"]
    fit = kind.memory_budget_bytes // profile.memory_bytes
    results: list[dict[str, Any]] = []
    made: dict[str, float] = {}
    for law in ("zipf", "uniform"):
        started = time.perf_counter()
        if law == "zipf":
            traffic = Traffic.zipf([profile], s=1.1, rate=args.rate, duration=args.duration, seed=0)
        else:
            traffic = Traffic.uniform([profile], rate=args.rate, duration=args.duration, seed=0)
        made[law] = time.perf_counter() - started
        targets = traffic.targets.tolist()
        for count in (1, 4):
            wall, worst, result = _timed(
                args.repeat, lambda t=traffic, c=count: simulate([profile], t, kind, c)
            )
            lru_wall, _, lru_hits = _timed(args.repeat, lambda t=targets, c=count: lru_replay(t, fit * c))
            results.append(
                {
                    "traffic": "zipf s=1.1" if law == "zipf" else "uniform",
                    "instances": count,
                    "requests": len(traffic),
                    "wall_s": wall,
                    "worst_wall_s": worst,
                    "requests_per_s": len(traffic) / wall,
                    "lru_wall_s": lru_wall,
                    "ratio": wall / lru_wall,
                    "hit_ratio": result.hit_ratio,
                    "lru_hit_ratio": lru_hits / len(traffic),
                }
            )
    plan_traffic = Traffic.zipf([profile], s=1.1, rate=args.rate, duration=600, seed=0)
    plan_wall, _, plan = _timed(1, lambda: plan_capacity([profile], plan_traffic, min_hit_ratio=0.9))
    checked = None if args.no_validate else validations()
    concurrent = None if args.no_concurrent else concurrent_validations(args.concurrent_duration)
    if args.json:
        found: dict[str, Any] = {"scenarios": results, "traffic_s": made, "plan_s": plan_wall}
        if checked is not None:
            found["validation"] = {mix: v.to_dict() for mix, v in checked[1].items()}
        if concurrent is not None:
            found["concurrent"] = {str(u): v.to_dict() for u, (_, v) in concurrent.items()}
        print(json.dumps(found, indent=2))
        return 0
    print(
        f"{args.models} models of 300 MiB (cold start 4 s, load 1 s, service 20 ms), {args.rate:g} req/s for "
        f"{args.duration:g} s, ml.g5.xlarge ({fit} models fit); times: median of {args.repeat} runs, and the "
        "worst, which the goal is judged on\n"
    )
    print("| traffic | instances | requests | simulate s (median / worst) | simulated req/s | LRU replay s |"
          " vs LRU replay | hit ratio (LRU replay) | under 5 s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for row in results:
        met = "yes" if row["worst_wall_s"] < GOAL_S else "NO"
        print(
            f"| {row['traffic']} | {row['instances']} | {row['requests']:,} "
            f"| {row['wall_s']:.2f} / {row['worst_wall_s']:.2f} | {row['requests_per_s']:,.0f} "
            f"| {row['lru_wall_s']:.3f} | {row['ratio']:.1f}x "
            f"| {row['hit_ratio']:.3f} ({row['lru_hit_ratio']:.3f}) | {met} |"
        )
    print(
        f"\nmaking the traffic: zipf {made['zipf']:.2f} s, uniform {made['uniform']:.2f} s; "
        f"plan_capacity of {len(plan.rows)} plans over 10 minutes ({len(plan_traffic):,} requests): "
        f"{plan_wall:.2f} s ({plan_wall / len(plan.rows):.2f} s per plan)"
    )
    validated = True if checked is None else _print_validations(*checked)
    concurrent_met = True if concurrent is None else _print_concurrent(concurrent)
    return 0 if validated and concurrent_met and all(row["worst_wall_s"] < GOAL_S for row in results) else 1


if __name__ == "__main__":
    sys.exit(main())
