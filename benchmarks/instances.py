"""What an idle instance of an endpoint costs on the embedded stack: time to start, processes, memory, CPU.

An instance is a ``tritonserver`` in a network namespace of its own, with the connector beside it (a small
Python process that opens connections inside the namespace) and the instance's share of the stack's
bookkeeping. For variants of 1, 2, 4 and 8 instances (``--counts``), one at a time in one stack, this
measures:

- the endpoint's start: ``CreateEndpoint`` until ``InService`` (its Tritons start side by side), and the
  Tritons' own start to a ``/ping`` that answers (median);
- a scale-out of one more instance with ``UpdateEndpointWeightsAndCapacities`` until ``InService``;
- processes and threads per instance, and their memory: resident (RSS) and proportional (PSS: shared pages
  divided among the processes sharing them, the fair share), summed over the processes;
- idle CPU: what the instances' processes use in ``--idle`` seconds with no request (percent of one core).

Each row's ratio is its per-instance PSS against the one-instance variant's, in the same run; the last
line says how many idle instances this machine's memory holds by these figures.

Usage::

    python benchmarks/instances.py [--counts 1 2 4 8 16] [--idle 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _pss_and_rss(pid: int) -> tuple[int, int]:
    """Bytes of proportional and resident memory of ``pid`` (``/proc/<pid>/smaps_rollup``)."""
    found = {"Pss": 0, "Rss": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                key = line.split(":")[0]
                if key in found:
                    found[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return found["Pss"], found["Rss"]


def _threads(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    from mme_triton.local.triton.procfs import children

    found, todo = [pid], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _wait_in_service(sagemaker: Any, name: str) -> float:
    started = time.perf_counter()
    while sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] != "InService":
        time.sleep(0.02)
    return time.perf_counter() - started


def measure(stack: Any, count: int, idle: float) -> dict[str, Any]:
    """One endpoint of ``count`` instances: its start, a scale-out, and its instances' idle cost."""
    from mme_triton.local.triton.procfs import cpu_seconds

    sagemaker = stack.client("sagemaker")
    name = f"idle-{count}"
    url = stack.model_data_url(f"{name}/")
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=stack.role_arn,
        PrimaryContainer={"Image": image, "ModelDataUrl": url, "Mode": "MultiModel"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": count,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    in_service = _wait_in_service(sagemaker, name)
    runtime = stack.endpoint_runtime(name)
    time.sleep(1.0)  # let the processes settle
    pids = [pid for instance in runtime.instances for pid in _tree(instance.triton.pid)]
    memory = [_pss_and_rss(pid) for pid in pids]
    threads = sum(_threads(pid) for pid in pids)
    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    time.sleep(idle)
    cpu_idle = (sum(cpu_seconds(pid) for pid in pids) - cpu_before) / idle * 100
    starts = [instance.triton.startup_seconds or 0.0 for instance in runtime.instances]
    sagemaker.update_endpoint_weights_and_capacities(
        EndpointName=name,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": count + 1}],
    )
    scale_out = _wait_in_service(sagemaker, name)
    sagemaker.delete_endpoint(EndpointName=name)
    return {
        "instances": count,
        "in_service_s": in_service,
        "triton_start_s": statistics.median(starts),
        "scale_out_s": scale_out,
        "processes": len(pids) / count,
        "threads": threads / count,
        "rss_mib": sum(rss for _, rss in memory) / count / 2**20,
        "pss_mib": sum(pss for pss, _ in memory) / count / 2**20,
        "idle_cpu_percent": cpu_idle / count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="instance counts")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measured")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    from mme_triton.local import LocalStack

    with tempfile.TemporaryDirectory() as scratch, LocalStack(workdir=Path(scratch)) as stack:
        rows = [measure(stack, count, args.idle) for count in args.counts]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    base = rows[0]["pss_mib"]
    print(f"idle instances on this machine ({os.cpu_count()} cores); per instance unless said\n")
    print(
        "| instances | in service s | Triton start s | scale-out +1 s | processes | threads | RSS MiB "
        "| PSS MiB | idle CPU % | PSS vs 1 |"
    )
    print(
        "|-----------|--------------|----------------|----------------|-----------|---------|---------"
        "|---------|------------|----------|"
    )
    for row in rows:
        print(
            f"| {row['instances']:>9} | {row['in_service_s']:>12.2f} | {row['triton_start_s']:>14.2f} "
            f"| {row['scale_out_s']:>14.2f} | {row['processes']:>9.0f} | {row['threads']:>7.0f} "
            f"| {row['rss_mib']:>7.1f} | {row['pss_mib']:>7.1f} | {row['idle_cpu_percent']:>10.2f} "
            f"| {row['pss_mib'] / base:>7.2f}x |"
        )
    rss = max(row["rss_mib"] for row in rows)
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    print(
        f"\n{total / 1024:.0f} GiB hold about {int(total / rss)} idle instances by their resident memory "
        f"({rss:.0f} MiB each, the most any row measured; PSS, the fair share, is less)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
