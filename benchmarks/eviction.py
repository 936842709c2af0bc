"""Eviction churn on the embedded stack: more models than an endpoint keeps loaded, many clients at once.

Five small python-backend models (``times<k>``: ``OUTPUT0 = k * INPUT0``) on one endpoint, 8 client
threads calling them in a random order through ``MMEClient``, every answer checked against its own
request. Two runs in one process, the same requests:

- ``churn`` — the endpoint keeps 2 models loaded (``max_models=2``): most requests find their model
  evicted, wait for its reload (and for its own unload, if one is still under way);
- ``all fit`` — the endpoint keeps every model: each model loads once.

For each run: requests/s, p50/p99 latency, loads and evictions, and the most models Triton held at once
(sampled every 20 ms from its stub processes); and, measured first, what Triton itself needs to load
(``POST /models``) and unload (``DELETE /models/<hash>``) one of these models, which is what a request that
misses cannot do without.

Usage::

    python benchmarks/eviction.py [--requests 96] [--models 5] [--fit 2] [--concurrency 8] [--json]
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


def write_models(repository: Path, count: int) -> list[Path]:
    """``times2`` ... ``times<count+1>``: python models that multiply their input."""
    models = []
    for factor in range(2, count + 2):
        model = repository / f"times{factor}"
        (model / "1").mkdir(parents=True)
        (model / "1" / "model.py").write_text(
            "import numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n"
            "class TritonPythonModel:\n"
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
    models: list[Path], plan: list[tuple[int, np.ndarray[Any, Any]]], *, fit: int | None, concurrency: int
) -> dict[str, Any]:
    """Serve ``plan`` (model index, input) from a fresh stack keeping ``fit`` models loaded."""
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

        triton = stack.triton("churn")
        assert triton is not None
        held: list[int] = []
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.02):
                held.append(len({p.model.rsplit("_", 2)[0] for p in triton.model_processes()}))

        watcher = threading.Thread(target=watch)
        watcher.start()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(call, plan))
        elapsed = time.perf_counter() - started
        done.set()
        watcher.join()
        runtime = stack.endpoint_runtime("churn")
        assert runtime is not None
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=96, help="requests per run")
    parser.add_argument("--models", type=int, default=5, help="models on the endpoint")
    parser.add_argument("--fit", type=int, default=2, help="models the churn run keeps loaded")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
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
        results = {
            "churn": run(models, plan, fit=args.fit, concurrency=args.concurrency),
            "all fit": run(models, plan, fit=None, concurrency=args.concurrency),
        }
    if args.json:
        print(json.dumps({"triton": direct, **results}, indent=2))
        return 0
    print(
        f"{args.models} python models, {args.concurrency} client threads, {args.requests} requests in a "
        f"random order; churn keeps {args.fit} loaded\n"
    )
    print(f"Triton alone: load {direct['load_s']:.2f} s, unload {direct['unload_s']:.2f} s per model\n")
    base = results["all fit"]
    head = f"| {'run':<8} | {'req/s':>6} | {'p50 s':>6} | {'p99 s':>6} |"
    print(head + " loads | evictions | most held | wrong | req/s vs all fit |")
    print(
        "|----------|--------|--------|--------|-------|-----------|-----------|-------|------------------|"
    )
    for name, row in results.items():
        print(
            f"| {name:<8} | {row['rps']:>6.2f} | {row['p50_s']:>6.2f} | {row['p99_s']:>6.2f} "
            f"| {row['loads']:>5} | {row['evictions']:>9} | {row['held']:>9} | {row['wrong']:>5} "
            f"| {row['rps'] / base['rps']:>15.2f}x |"
        )
    churn = results["churn"]
    own = direct["load_s"]
    print(
        f"\nchurn p50 {churn['p50_s']:.2f} s = {churn['p50_s'] / own:.2f}x Triton's own load time, "
        f"p99 {churn['p99_s']:.2f} s = {churn['p99_s'] / (own + direct['unload_s']):.2f}x its unload + load"
    )
    return 1 if any(row["wrong"] for row in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
