"""Latency and throughput of the embedded stack's InvokeEndpoint route, against what it sits on.

For the quickstart's ONNX model (``linear``: [n,4] -> [n,3], dynamic batching), in one run and at
concurrency 1 and 8, this measures requests/s and p50/p99 latency of:

- ``stack route`` — raw HTTP POST to ``/endpoints/<name>/invocations`` on the stack's InvokeEndpoint
  server (``LocalStack.runtime_url``, where boto3's ``sagemaker-runtime`` clients go), no SigV4, over a
  keep-alive connection as boto3 keeps one;
- ``stack route (moto)`` — the same route answered in front of moto's server (``LocalStack.endpoint_url``,
  for clients that know one URL only), a new connection per request as boto3 gets from that HTTP/1.0
  server;
- ``triton front-end`` — raw HTTP POST to Triton's SageMaker front-end, ``/models/<hash>/invoke``, the
  call the route forwards, over a keep-alive connection opened as the route opens its own (through the
  server's connector, into its network namespace);
- ``onnxruntime`` — ``InferenceSession.run`` in this process (no HTTP, no Triton);
- ``MMEClient`` — ``MMEClient.infer`` end to end (encode, SigV4, the route, Triton, decode); the clients
  against tritonclient on Triton's own port are ``benchmarks/client.py``'s.

The goals: the stack's route adds under 2 ms at p50 over Triton's own front-end at concurrency 1, and
serves at least half of its requests/s at concurrency 8. Every row's ratio is against Triton's front-end
at the same concurrency, in the same run.

The stack runs in this process; the load comes from a child process (with the variables of
``LocalStack.environment()``), so the client's threads do not compete with the stack for the GIL. Pass
``--same-process`` to generate the load from this process instead.

Usage::

    python benchmarks/local_endpoint.py [--requests 500] [--concurrency 1 8] [--same-process] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

ENDPOINT = "bench"
TARGET = "linear.tar.gz"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _run(call: Callable[[], None], requests: int, concurrency: int) -> dict[str, float]:
    """Run ``requests`` calls spread over ``concurrency`` threads; latency per call in ms."""
    latencies: list[float] = []
    lock = threading.Lock()
    per_thread = max(1, requests // concurrency)
    barrier = threading.Barrier(concurrency + 1)
    failures: list[BaseException] = []

    def worker() -> None:
        mine: list[float] = []
        barrier.wait()
        try:
            for _ in range(per_thread):
                started = time.perf_counter()
                call()
                mine.append((time.perf_counter() - started) * 1000)
        except BaseException as exc:  # reported after the run
            failures.append(exc)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies),
        "p99_ms": _percentile(latencies, 99),
    }


class _KeepAlive(threading.local):
    conn: http.client.HTTPConnection | None = None


def _poster(
    url: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    *,
    keep_alive: bool,
    connect: Callable[[], http.client.HTTPConnection] | None = None,
) -> Callable[[], None]:
    parts = urlsplit(url)
    local = _KeepAlive()

    def post() -> None:
        conn = local.conn if keep_alive else None
        if conn is None:
            if connect is not None:
                conn = connect()
            else:
                conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
            if keep_alive:
                local.conn = conn
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {data[:200]!r}")
        if not keep_alive or response.will_close:
            conn.close()
            local.conn = None

    return post


def measure(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run every mode at every concurrency against a deployed stack described by ``spec``."""
    import boto3
    import onnxruntime

    from mme_triton import MMEClient, encode_request
    from mme_triton.local.triton._http import ConnectorHTTPConnection
    from mme_triton.local.triton.netns import Connector

    socket_path = spec["triton_socket"]
    triton = Connector(Path(socket_path) if socket_path else None)
    x = np.random.default_rng(0).standard_normal((spec["batch"], 4)).astype(np.float32)
    body, content_type = encode_request({"INPUT0": x}, binary=True)
    body = bytes(body)
    headers = {"X-Amzn-SageMaker-Target-Model": TARGET, "Content-Type": content_type}
    client = MMEClient(ENDPOINT, boto3_session=boto3.Session(), max_concurrency=max(spec["concurrency"]))
    ort = onnxruntime.InferenceSession(spec["onnx"], providers=["CPUExecutionProvider"])

    def in_process() -> None:
        ort.run(None, {"INPUT0": x})

    def end_to_end() -> None:
        client.infer(TARGET, {"INPUT0": x})

    modes: dict[str, Callable[[], None]] = {
        "stack route": _poster(
            spec["runtime_url"], f"/endpoints/{ENDPOINT}/invocations", headers, body, keep_alive=True
        ),
        "stack route (moto)": _poster(
            spec["stack_url"], f"/endpoints/{ENDPOINT}/invocations", headers, body, keep_alive=False
        ),
        "triton front-end": _poster(
            "",
            f"/models/{spec['model_hash']}/invoke",
            headers,
            body,
            keep_alive=True,
            connect=lambda: ConnectorHTTPConnection(triton, spec["triton_port"], timeout=60),
        ),
        "onnxruntime": in_process,
        "MMEClient": end_to_end,
    }
    results: list[dict[str, Any]] = []
    for concurrency in spec["concurrency"]:
        for mode, call in modes.items():
            for _ in range(20):
                call()  # warm-up: connections, thread pools, ORT arenas
            measured = _run(call, spec["requests"], concurrency)
            results.append({"mode": mode, "concurrency": concurrency, **measured})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per mode and concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--batch", type=int, default=1, help="rows per request")
    parser.add_argument("--same-process", action="store_true", help="generate the load from this process")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # JSON spec: run as the load generator
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return 0

    from mme_triton import MMEClient, deploy_mme
    from mme_triton.local import LocalStack
    from mme_triton.local.quickstart import write_quickstart_models
    from mme_triton.local.route.endpoint_runtime import target_model_hash

    with tempfile.TemporaryDirectory() as scratch, LocalStack(workdir=scratch) as stack:
        linear, _ = write_quickstart_models(Path(scratch) / "repo")
        session = stack.boto3_session()
        deploy_mme(
            ENDPOINT,
            stack.model_data_url("bench/"),
            models=[linear],
            role=stack.role_arn,
            instance_type="ml.m5.xlarge",
            poll_interval=0.25,
            boto3_session=session,
        )
        MMEClient(ENDPOINT, boto3_session=session).infer(TARGET, {"INPUT0": np.ones((1, 4), np.float32)})
        triton = stack.triton(ENDPOINT)
        assert triton is not None
        spec = {
            "stack_url": stack.endpoint_url,
            "runtime_url": stack.runtime_url,
            "triton_socket": str(triton.connector.socket_path or ""),
            "triton_port": triton.port,
            "model_hash": target_model_hash(TARGET),
            "onnx": str(linear / "1" / "model.onnx"),
            "requests": args.requests,
            "concurrency": args.concurrency,
            "batch": args.batch,
        }
        if args.same_process:
            results = measure(spec)
        else:
            worker = subprocess.run(
                [sys.executable, __file__, "--worker", json.dumps(spec)],
                env={**os.environ, **stack.environment()},
                capture_output=True,
                text=True,
                check=False,
            )
            if worker.returncode != 0:
                sys.stderr.write(worker.stderr)
                return 1
            results = json.loads(worker.stdout.strip().splitlines()[-1])

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    where = "this process" if args.same_process else "a separate process"
    print(
        f"linear ONNX model, {args.batch} row(s) of FP32[4] per request, binary encoding, load from {where}\n"
    )
    by_key = {(r["mode"], r["concurrency"]): r for r in results}
    print(f"| {'mode':<19}| conc | {'req/s':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'req/s vs Triton':>15} |")
    print("|--------------------|------|----------|---------|---------|-----------------|")
    for row in results:
        base = by_key.get(("triton front-end", row["concurrency"]))
        ratio = f"{row['rps'] / base['rps']:.2f}x" if base else "-"
        print(
            f"| {row['mode']:<19}| {row['concurrency']:>4} | {row['rps']:>8.0f} | {row['p50_ms']:>7.3f} "
            f"| {row['p99_ms']:>7.3f} | {ratio:>15} |"
        )
    if ("stack route", 1) in by_key and ("triton front-end", 1) in by_key:
        overhead = by_key[("stack route", 1)]["p50_ms"] - by_key[("triton front-end", 1)]["p50_ms"]
        verdict = "within" if overhead < 2.0 else "OVER"
        print(f"\nstack route overhead at concurrency 1, p50: {overhead:.3f} ms ({verdict} the 2 ms goal)")
    if ("stack route", 8) in by_key and ("triton front-end", 8) in by_key:
        ratio = by_key[("stack route", 8)]["rps"] / by_key[("triton front-end", 8)]["rps"]
        verdict = "meets" if ratio >= 0.5 else "MISSES"
        print(f"stack route at concurrency 8: {ratio:.2f}x Triton's requests/s ({verdict} the 0.5x goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
