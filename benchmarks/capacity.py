"""The capacity planner's simulator: how fast it goes, against a plain LRU replay of the same requests.

Scenarios (all seeded): 500 models of 300 MiB (4 s cold start: a 3 s download, then a 1 s load; 20 ms
service time), 50 requests/s for an
hour (about 180,000 requests), Zipf s=1.1 and uniform, on 1 and 4 ``ml.g5.xlarge`` instances (74 models
fit on one). For each: the wall time of ``simulate`` (the full model: loads that take time and hold
memory, queues, routing across instances), simulated requests per second, and the same requests replayed
through a bare ``OrderedDict`` LRU of 74 x instances entries — no time, no queues, the least a cache
simulation can do — as the alternative; the ratio says what the full model costs. Goal: the hour of
traffic in under 5 s. Also the time to make the traffic and a whole ``plan_capacity`` of 5 types x 4 counts.

Usage::

    python benchmarks/capacity.py [--rate 50] [--duration 3600] [--models 500] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import OrderedDict
from typing import Any

GOAL_S = 5.0


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


def _best_of(repeat: int, run: Any) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of traffic")
    parser.add_argument("--models", type=int, default=500, help="models")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the best is kept)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
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
            wall, result = _best_of(args.repeat, lambda t=traffic, c=count: simulate([profile], t, kind, c))
            lru_wall, lru_hits = _best_of(args.repeat, lambda t=targets, c=count: lru_replay(t, fit * c))
            results.append(
                {
                    "traffic": "zipf s=1.1" if law == "zipf" else "uniform",
                    "instances": count,
                    "requests": len(traffic),
                    "wall_s": wall,
                    "requests_per_s": len(traffic) / wall,
                    "lru_wall_s": lru_wall,
                    "ratio": wall / lru_wall,
                    "hit_ratio": result.hit_ratio,
                    "lru_hit_ratio": lru_hits / len(traffic),
                }
            )
    plan_traffic = Traffic.zipf([profile], s=1.1, rate=args.rate, duration=600, seed=0)
    plan_wall, plan = _best_of(1, lambda: plan_capacity([profile], plan_traffic, min_hit_ratio=0.9))
    if args.json:
        print(json.dumps({"scenarios": results, "traffic_s": made, "plan_s": plan_wall}, indent=2))
        return 0
    print(
        f"{args.models} models of 300 MiB (cold start 4 s, load 1 s, service 20 ms), {args.rate:g} req/s for "
        f"{args.duration:g} s, ml.g5.xlarge ({fit} models fit); best of {args.repeat}\n"
    )
    print("| traffic | instances | requests | simulate s | simulated req/s | LRU replay s | vs LRU replay |"
          " hit ratio (LRU replay) | under 5 s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for row in results:
        met = "yes" if row["wall_s"] < GOAL_S else "NO"
        print(
            f"| {row['traffic']} | {row['instances']} | {row['requests']:,} | {row['wall_s']:.2f} "
            f"| {row['requests_per_s']:,.0f} | {row['lru_wall_s']:.3f} | {row['ratio']:.1f}x "
            f"| {row['hit_ratio']:.3f} ({row['lru_hit_ratio']:.3f}) | {met} |"
        )
    print(
        f"\nmaking the traffic: zipf {made['zipf']:.2f} s, uniform {made['uniform']:.2f} s; "
        f"plan_capacity of {len(plan.rows)} plans over 10 minutes ({len(plan_traffic):,} requests): "
        f"{plan_wall:.2f} s ({plan_wall / len(plan.rows):.2f} s per plan)"
    )
    return 0 if all(row["wall_s"] < GOAL_S for row in results) else 1


if __name__ == "__main__":
    sys.exit(main())
