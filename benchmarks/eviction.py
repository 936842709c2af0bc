"""Eviction churn on the embedded stack: more models than an endpoint keeps loaded, many clients at once.

Five small python-backend models (``times<k>``: ``OUTPUT0 = k * INPUT0``) on one endpoint, 8 client
threads calling them in a random order through ``MMEClient``, every answer checked against its own
request. Three runs in one process, the same requests:

- ``churn`` — the endpoint keeps 2 models loaded (``max_models=2``): most requests find their model
  evicted, wait for its reload (and for its own unload, if one is still under way);
- ``churn, 2 instances`` — the same budget per instance, on a variant of two instances (``--instances``):
  requests go where their model is loaded, a model no instance holds to the one with the most room;
- ``all fit`` — the endpoint keeps every model: each model loads once.

For each run: requests/s, p50/p99 latency, loads and evictions, and the most models one Triton held at
once (sampled every 20 ms from its stub processes); and, measured first, what Triton itself needs to load
(``POST /models``) and unload (``DELETE /models/<hash>``) one of these models, which is what a request that
misses cannot do without.

Then the hot model under contention: with room for two, a model called in a loop by 4 clients and one
other model loaded, two models whose ``initialize`` takes 4 s (``finalize`` 2 s) are requested at the
same moment; the hot model's p99 and longest call while they load and evict each other, against the same
calls with nothing else happening.

Usage::

    python benchmarks/eviction.py [--requests 96] [--models 5] [--fit 2] [--concurrency 8] [--instances 2]
                                  [--hot-seconds 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def write_models(repository: Path, count: int, *, first: int = 2, sleeps: str = "") -> list[Path]:
    """``times<first>`` ... : python models that multiply their input (``sleeps``: an ``initialize`` and a
    ``finalize`` of that many seconds, ``"4,2"``)."""
    models = []
    initialize, finalize = sleeps.split(",") if sleeps else ("0", "0")
    for factor in range(first, first + count):
        model = repository / f"times{factor}"
        (model / "1").mkdir(parents=True)
        (model / "1" / "model.py").write_text(
            "import time\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n"
            "class TritonPythonModel:\n"
            f"    def initialize(self, args):\n        time.sleep({initialize})\n\n"
            f"    def finalize(self):\n        time.sleep({finalize})\n\n"
            "    def execute(self, requests):\n"
            "        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor('OUTPUT0', "
            f"(pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy() * {factor}).astype(np.float32))]) "
            "for r in requests]\n"
        )
        (model / "config.pbtxt").write_text(
            f'name: "times{factor}"\nbackend: "python"\nmax_batch_size: 8\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        )
        models.append(model)
    return models


def triton_load_time(model: Path, scratch: Path, rounds: int = 3) -> dict[str, float]:
    """Seconds Triton's SageMaker front-end takes to load and to unload ``model`` (median of ``rounds``)."""
    import shutil

    from mme_triton.local.triton.server import TritonServer

    loads, unloads = [], []
    with TritonServer(workdir=scratch / "direct") as server:
        for index in range(rounds):
            copy = scratch / f"direct-model-{index}"
            shutil.copytree(model, copy / model.name)
            started = time.perf_counter()
            server.load(f"{index:032x}", copy, f"{model.name}.tar.gz")
            loads.append(time.perf_counter() - started)
            started = time.perf_counter()
            server.unload(f"{index:032x}")
            unloads.append(time.perf_counter() - started)
    return {"load_s": statistics.median(loads), "unload_s": statistics.median(unloads)}


def run(
    models: list[Path],
    plan: list[tuple[int, np.ndarray[Any, Any]]],
    *,
    fit: int | None,
    concurrency: int,
    instances: int = 1,
) -> dict[str, Any]:
    """Serve ``plan`` (model index, input) from a fresh stack keeping ``fit`` models loaded per instance, on
    ``instances`` instances."""
    from mme_triton import MMEClient, deploy_mme
    from mme_triton.local import LocalStack

    with tempfile.TemporaryDirectory() as scratch, LocalStack(workdir=scratch, max_models=fit) as stack:
        session = stack.boto3_session()
        deploy_mme(
            "churn",
            stack.model_data_url("churn/"),
            models=models,
            role=stack.role_arn,
            instance_type="ml.m5.xlarge",
            instance_count=instances,
            poll_interval=0.25,
            boto3_session=session,
        )
        client = MMEClient("churn", boto3_session=session, max_concurrency=concurrency)
        names = [f"{model.name}.tar.gz" for model in models]
        factors = [float(model.name.removeprefix("times")) for model in models]
        latencies: list[float] = []
        wrong: list[int] = []
        lock = threading.Lock()

        def call(step: tuple[int, np.ndarray[Any, Any]]) -> None:
            index, x = step
            started = time.perf_counter()
            out = client.infer(names[index], {"INPUT0": x})
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if not np.allclose(out["OUTPUT0"], x * factors[index]):
                    wrong.append(index)

        runtime = stack.endpoint_runtime("churn")
        assert runtime is not None
        tritons = [instance.triton for instance in runtime.instances]
        held: list[int] = []
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.02):
                held.append(
                    max(len({p.model.rsplit("_", 2)[0] for p in t.model_processes()}) for t in tritons)
                )

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(call, plan))
        elapsed = time.perf_counter() - started
        done.set()
        watcher.join()
        runtime.wait_for_unloads(timeout=120)
        return {
            "requests": len(latencies),
            "rps": len(latencies) / elapsed,
            "p50_s": statistics.median(latencies),
            "p99_s": _percentile(latencies, 99),
            "loads": runtime.loads,
            "evictions": runtime.evictions,
            "held": max(held, default=0),
            "wrong": len(wrong),
        }


def contention(repository: Path, *, seconds: float) -> dict[str, Any]:
    """The hot model's calls (4 clients in a loop) for ``seconds`` alone, then while two slow models are
    requested at once with room for two (the hot one and another loaded)."""
    from mme_triton import MMEClient, deploy_mme
    from mme_triton.local import LocalStack

    hot, other = write_models(repository / "hot", 2)
    slow = write_models(repository / "slow", 2, first=8, sleeps="4,2")
    x = np.ones((1, 4), np.float32)
    with tempfile.TemporaryDirectory() as scratch, LocalStack(workdir=scratch, max_models=2) as stack:
        session = stack.boto3_session()
        deploy_mme(
            "hot",
            stack.model_data_url("hot/"),
            models=[hot, other, *slow],
            role=stack.role_arn,
            instance_type="ml.m5.xlarge",
            poll_interval=0.25,
            boto3_session=session,
        )
        client = MMEClient("hot", boto3_session=session, max_concurrency=8)
        client.infer("times2.tar.gz", {"INPUT0": x})
        client.infer("times3.tar.gz", {"INPUT0": x})

        def hot_calls(during: Any) -> tuple[list[float], Any]:
            stop = threading.Event()
            latencies: list[float] = []

            def call() -> None:
                while not stop.is_set():
                    started = time.perf_counter()
                    out = client.infer("times2.tar.gz", {"INPUT0": x})
                    latencies.append(time.perf_counter() - started)
                    assert np.allclose(out["OUTPUT0"], 2 * x)

            callers = [threading.Thread(target=call) for _ in range(4)]
            for caller in callers:
                caller.start()
            try:
                result = during()
            finally:
                stop.set()
                for caller in callers:
                    caller.join()
            return latencies, result

        alone, _ = hot_calls(lambda: time.sleep(seconds))

        def slow_pair() -> list[float]:
            def call(name: str) -> float:
                started = time.perf_counter()
                client.infer(f"{name}.tar.gz", {"INPUT0": x})
                return time.perf_counter() - started

            with ThreadPoolExecutor(max_workers=2) as pool:
                took = list(pool.map(call, ["times8", "times9"]))
            time.sleep(1.0)
            return took

        busy, slow_s = hot_calls(slow_pair)
        runtime = stack.endpoint_runtime("hot")
        assert runtime is not None
        runtime.wait_for_unloads(timeout=60)
        return {
            "alone": {"calls": len(alone), "p99_s": _percentile(alone, 99), "max_s": max(alone)},
            "contention": {"calls": len(busy), "p99_s": _percentile(busy, 99), "max_s": max(busy)},
            "slow_s": slow_s,
            "hot_loads": runtime.load_counts["times2.tar.gz"],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=96, help="requests per run")
    parser.add_argument("--models", type=int, default=5, help="models on the endpoint")
    parser.add_argument("--fit", type=int, default=2, help="models the churn run keeps loaded")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
    parser.add_argument("--instances", type=int, default=2, help="instances of the multi-instance run")
    parser.add_argument(
        "--hot-seconds", type=float, default=4.0, help="seconds of the hot model's calls alone"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        models = write_models(Path(scratch) / "repo", args.models)
        direct = triton_load_time(models[0], Path(scratch))
        rng = np.random.default_rng(0)
        plan = [
            (int(rng.integers(args.models)), rng.standard_normal((1, 4)).astype(np.float32))
            for _ in range(args.requests)
        ]
        several = f"churn, {args.instances} instances"
        results = {
            "churn": run(models, plan, fit=args.fit, concurrency=args.concurrency),
            several: run(models, plan, fit=args.fit, concurrency=args.concurrency, instances=args.instances),
            "all fit": run(models, plan, fit=None, concurrency=args.concurrency),
        }
        hot = contention(Path(scratch), seconds=args.hot_seconds)
    if args.json:
        print(json.dumps({"triton": direct, **results, "hot": hot}, indent=2))
        return 0
    print(
        f"{args.models} python models, {args.concurrency} client threads, {args.requests} requests in a "
        f"random order; churn keeps {args.fit} loaded\n"
    )
    print(f"Triton alone: load {direct['load_s']:.2f} s, unload {direct['unload_s']:.2f} s per model\n")
    base = results["all fit"]
    width = max(len(name) for name in results)
    head = f"| {'run':<{width}} | {'req/s':>6} | {'p50 s':>6} | {'p99 s':>6} |"
    print(head + " loads | evictions | most held | wrong | req/s vs all fit |")
    print(
        f"|{'-' * (width + 2)}|--------|--------|--------|-------|-----------|-----------|-------|"
        "------------------|"
    )
    for name, row in results.items():
        print(
            f"| {name:<{width}} | {row['rps']:>6.2f} | {row['p50_s']:>6.2f} | {row['p99_s']:>6.2f} "
            f"| {row['loads']:>5} | {row['evictions']:>9} | {row['held']:>9} | {row['wrong']:>5} "
            f"| {row['rps'] / base['rps']:>15.2f}x |"
        )
    churn = results["churn"]
    own = direct["load_s"]
    print(
        f"\nchurn p50 {churn['p50_s']:.2f} s = {churn['p50_s'] / own:.2f}x Triton's own load time, "
        f"p99 {churn['p99_s']:.2f} s = {churn['p99_s'] / (own + direct['unload_s']):.2f}x its unload + load"
    )
    alone, busy = hot["alone"], hot["contention"]
    print(
        "\nthe hot model (4 clients) while two models whose initialize takes 4 s are requested at once, "
        "with room for two\n"
    )
    print("| hot model's calls | calls | p99 s | max s | p99 vs alone |")
    print("|-------------------|-------|-------|-------|--------------|")
    for name, row in (("alone", alone), ("under contention", busy)):
        print(
            f"| {name:<17} | {row['calls']:>5} | {row['p99_s']:>5.3f} | {row['max_s']:>5.3f} "
            f"| {row['p99_s'] / alone['p99_s']:>11.2f}x |"
        )
    print(
        f"\nthe two slow models answered in {', '.join(f'{s:.1f}' for s in hot['slow_s'])} s; "
        f"the hot model was loaded {hot['hot_loads']} time(s)"
    )
    return 1 if any(row["wrong"] for row in results.values()) or hot["hot_loads"] != 1 else 0


if __name__ == "__main__":
    sys.exit(main())
