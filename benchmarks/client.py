"""The data plane's speed: ``MMEClient`` and ``AsyncMMEClient`` against Triton's own port and the raw route.

One embedded stack with Triton's own ports open (``LocalStack(triton_ports=True)``), the quickstart's ONNX
model (``linear``: [1,4] -> [1,3], binary tensors), and in one run, each mode for ``--seconds``:

- ``tritonclient.http`` — NVIDIA's client on Triton's own KServe v2 HTTP port (``/v2/models/<m>/infer``),
  ``--threads`` threads with a client each (tritonclient's clients are not shared between threads);
- ``route, raw HTTP`` — the stack's InvokeEndpoint route (``POST /endpoints/<name>/invocations``, the
  request SageMaker's runtime receives) driven by a raw load generator: the body encoded once, no SigV4,
  one keep-alive ``http.client`` connection per thread, ``--threads`` threads;
- ``route, raw aiohttp`` — the same route from aiohttp (in the ``dev`` extra), ``--in-flight`` requests
  on one event loop;
- ``MMEClient`` — ``infer`` end to end (encode, sign, send, decode) through the route, ``--threads``
  threads sharing one client (its fast path);
- ``MMEClient (botocore)`` — the same with ``fast_path=False``: every request through boto3's
  ``invoke_endpoint``, as the client sent before it had a path of its own;
- ``AsyncMMEClient`` — ``await infer`` end to end, ``--in-flight`` tasks on one event loop.

Every mode gives requests/s; its ratios are against ``tritonclient.http`` and against the raw generator of
its kind (threads or asyncio) **in the same run**. The run is repeated ``--runs`` times, the modes in a
rotated order each time; the table shows the median and the worst (lowest) of each ratio over the runs.
Goals: ``MMEClient`` at 0.6x of ``tritonclient.http`` or more; ``AsyncMMEClient`` at least as fast as
``MMEClient``.

The stack runs in this process; the load comes from a child process (with ``LocalStack.environment()``,
so the clients reach the stack as they would reach AWS), so the clients do not share the stack's GIL.
Client, route and Triton share the machine's cores: on a machine with other work the numbers move, the
ratios within a run much less.

Usage::

    python benchmarks/client.py [--runs 5] [--seconds 3] [--threads 8] [--in-flight 64] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
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
TRITON = "tritonclient.http"
RAW = "route, raw HTTP"
RAW_ASYNC = "route, raw aiohttp"
THREADED = ("MMEClient", "MMEClient (botocore)")
ASYNC = ("AsyncMMEClient",)


def _threads(make_call: Callable[[], Callable[[], None]], threads: int, seconds: float) -> float:
    """Requests/s of ``threads`` threads, each calling its own ``make_call()`` for ``seconds``."""
    counts = [0] * threads
    failures: list[BaseException] = []
    ready = threading.Barrier(threads + 1)
    box = {"stop": 0.0}

    def work(index: int) -> None:
        call = make_call()
        call()  # warm: a connection, the first request
        ready.wait()
        done = 0
        try:
            while time.perf_counter() < box["stop"]:
                call()
                done += 1
        except BaseException as exc:  # reported after the run
            failures.append(exc)
        counts[index] = done

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    box["stop"] = time.perf_counter() + 3600
    ready.wait()
    started = time.perf_counter()
    box["stop"] = started + seconds
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]
    return sum(counts) / (time.perf_counter() - started)


def _modes(spec: dict[str, Any]) -> dict[str, Callable[[], float]]:
    import boto3
    import tritonclient.http as tritonhttp
    from botocore.config import Config

    from mme_triton import AsyncMMEClient, MMEClient, encode_request

    x = np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)
    expected = x @ np.asarray(spec["weights"], np.float32) + np.asarray(spec["bias"], np.float32)
    threads, in_flight, seconds = spec["threads"], spec["in_flight"], spec["seconds"]
    body, content_type = encode_request({"INPUT0": x})
    body = bytes(body)
    route = urlsplit(spec["runtime_url"])
    path = f"/endpoints/{ENDPOINT}/invocations"
    headers = {"Content-Type": content_type, "X-Amzn-SageMaker-Target-Model": TARGET}
    pool = Config(max_pool_connections=max(threads, in_flight))

    def triton_call() -> Callable[[], None]:
        client = tritonhttp.InferenceServerClient(urlsplit(spec["triton_url"]).netloc)
        tensor = tritonhttp.InferInput("INPUT0", [1, 4], "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        wanted = [tritonhttp.InferRequestedOutput("OUTPUT0", binary_data=True)]

        def call() -> None:
            client.infer(spec["triton_model"], [tensor], outputs=wanted).as_numpy("OUTPUT0")

        return call

    def raw_call() -> Callable[[], None]:
        connection = http.client.HTTPConnection(route.hostname or "127.0.0.1", route.port, timeout=60)

        def call() -> None:
            connection.request("POST", path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            if answer.status != 200:
                raise RuntimeError(f"HTTP {answer.status}: {data[:200]!r}")

        return call

    def client_call(client: MMEClient) -> Callable[[], Callable[[], None]]:
        np.testing.assert_allclose(client.infer(TARGET, {"INPUT0": x})["OUTPUT0"], expected, rtol=1e-5)

        def call() -> None:
            client.infer(TARGET, {"INPUT0": x})

        return lambda: call

    def raw_async() -> float:
        import aiohttp

        async def main() -> float:
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=in_flight), auto_decompress=False
            ) as session:

                async def call() -> None:
                    async with session.post(spec["runtime_url"] + path, data=body, headers=headers) as answer:
                        await answer.read()
                        if answer.status != 200:
                            raise RuntimeError(f"HTTP {answer.status}")

                return await _measure_async(call, in_flight, seconds)

        return asyncio.run(main())

    def async_client() -> float:
        async def main() -> float:
            async with AsyncMMEClient(ENDPOINT, boto3_session=boto3.Session(), boto_config=pool) as client:
                out = await client.infer(TARGET, {"INPUT0": x})
                np.testing.assert_allclose(out["OUTPUT0"], expected, rtol=1e-5)
                assert client.fast_path
                return await _measure_async(lambda: client.infer(TARGET, {"INPUT0": x}), in_flight, seconds)

        return asyncio.run(main())

    fast = MMEClient(ENDPOINT, boto3_session=boto3.Session(), boto_config=pool)
    slow = MMEClient(ENDPOINT, boto3_session=boto3.Session(), boto_config=pool, fast_path=False)
    assert fast.fast_path and not slow.fast_path
    return {
        TRITON: lambda: _threads(triton_call, threads, seconds),
        RAW: lambda: _threads(raw_call, threads, seconds),
        RAW_ASYNC: raw_async,
        "MMEClient": lambda: _threads(client_call(fast), threads, seconds),
        "MMEClient (botocore)": lambda: _threads(client_call(slow), threads, seconds),
        "AsyncMMEClient": async_client,
    }


async def _measure_async(call: Callable[[], Any], in_flight: int, seconds: float) -> float:
    await asyncio.gather(*(call() for _ in range(in_flight)))  # warm: the connections
    stop = time.perf_counter() + seconds
    done = [0]

    async def task() -> None:
        while time.perf_counter() < stop:
            await call()
            done[0] += 1

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(in_flight)))
    return done[0] / (time.perf_counter() - started)


def measure(spec: dict[str, Any]) -> list[dict[str, list[float]]]:
    """Every mode once per run, the order rotated between runs: ``[{mode: [requests/s, client CPU
    microseconds per request]}, ...]`` (the CPU of this process, the load generator, over the mode)."""
    modes = _modes(spec)
    names = list(modes)
    runs = []
    for run in range(spec["runs"]):
        order = names[run % len(names) :] + names[: run % len(names)]
        measured = {}
        for name in order:
            cpu = time.process_time()
            rps = modes[name]()
            cpu_us = (time.process_time() - cpu) / (rps * spec["seconds"]) * 1e6
            measured[name] = [rps, cpu_us]
        runs.append(measured)
        print(
            f"run {run + 1}: " + ", ".join(f"{k} {v[0]:.0f}/s" for k, v in measured.items()), file=sys.stderr
        )
    return runs


def _table(runs: list[dict[str, list[float]]]) -> str:
    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}x / {min(values):.2f}x"

    lines = [
        "| mode | req/s | client CPU/req | vs tritonclient.http | vs raw route generator |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in runs[0]:
        rps = [run[name][0] for run in runs]
        cpu = [run[name][1] for run in runs]
        baseline = RAW_ASYNC if name in (*ASYNC, RAW_ASYNC) else RAW
        to_triton = [run[name][0] / run[TRITON][0] for run in runs]
        to_raw = [run[name][0] / run[baseline][0] for run in runs]
        lines.append(
            f"| {name} | {statistics.median(rps):,.0f} | {statistics.median(cpu):,.0f} us "
            f"| {cell(to_triton)} | {cell(to_raw)} |"
        )
    async_vs = [run["AsyncMMEClient"][0] / run["MMEClient"][0] for run in runs]
    lines += [
        "",
        "req/s and client CPU (the load generator's process) per request: medians over the runs;",
        "ratios: median / worst of each run's own ratio.",
        f"AsyncMMEClient / MMEClient: median {statistics.median(async_vs):.2f}x, worst {min(async_vs):.2f}x",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of every mode (median and worst shown)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds each mode runs per run")
    parser.add_argument("--threads", type=int, default=8, help="threads of the threaded modes")
    parser.add_argument("--in-flight", type=int, default=64, help="requests in flight of the asyncio modes")
    parser.add_argument("--json", action="store_true", help="print every run's requests/s as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # JSON spec: run as the load generator
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return 0

    from mme_triton import MMEClient, deploy_mme
    from mme_triton.local import LocalStack
    from mme_triton.local.quickstart import _LINEAR_B, _LINEAR_W, write_quickstart_models

    with tempfile.TemporaryDirectory() as scratch, LocalStack(workdir=scratch, triton_ports=True) as stack:
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
        found = stack.triton_endpoints(ENDPOINT)
        assert found is not None
        spec = {
            "runtime_url": stack.runtime_url,
            "triton_url": found.http_url,
            "triton_model": found.models[TARGET],
            "weights": _LINEAR_W,
            "bias": _LINEAR_B,
            "runs": args.runs,
            "seconds": args.seconds,
            "threads": args.threads,
            "in_flight": args.in_flight,
        }
        worker = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            env={**os.environ, **stack.environment()},
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        if worker.returncode != 0:
            return 1
        runs = json.loads(worker.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    print(
        f"linear ONNX model, [1,4] FP32, binary; {args.threads} threads / {args.in_flight} in flight; "
        f"{args.runs} runs of {args.seconds:g} s per mode\n"
    )
    print(_table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
