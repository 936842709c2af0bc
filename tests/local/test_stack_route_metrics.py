"""The InvokeEndpoint route publishes what really happens on the stack as SageMaker's endpoint metrics, read
back with plain boto3 CloudWatch calls written as for AWS; and ``local status`` shows what each endpoint
holds. One stack whose endpoints keep two models loaded, metrics published every second."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, str(Path(__file__).parent))
from stack_deploy import deploy_on

import mme_triton as mt
from mme_triton import MMEClient
from mme_triton.errors import LocalStackError
from mme_triton.local import LocalStack
from mme_triton.local.cli import add_local_commands

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.ones((1, 4), dtype=np.float32)
SLOTS = 2


@pytest.fixture(scope="module")
def two_slots() -> Iterator[LocalStack]:
    """Endpoints keep two models loaded; metrics are published every second."""
    with LocalStack(max_models=SLOTS, metrics_period=1) as stack:
        yield stack


def _lru_by_hand(requests: list[str], slots: int) -> tuple[int, int]:
    """(hits, evictions) of ``requests`` through an LRU cache of ``slots`` models."""
    cache: OrderedDict[str, None] = OrderedDict()
    hits = evictions = 0
    for name in requests:
        if name in cache:
            hits += 1
            cache.move_to_end(name)
            continue
        if len(cache) == slots:
            cache.popitem(last=False)
            evictions += 1
        cache[name] = None
    return hits, evictions


def _dimensions(endpoint_name: str) -> list[dict[str, str]]:
    return [{"Name": "EndpointName", "Value": endpoint_name}, {"Name": "VariantName", "Value": "AllTraffic"}]


def _statistics(cloudwatch: Any, namespace: str, metric: str, endpoint_name: str, since: datetime) -> Any:
    """GetMetricStatistics over the whole test, as one would call it on AWS: Sum, SampleCount, Maximum."""
    points = cloudwatch.get_metric_statistics(
        Namespace=namespace,
        MetricName=metric,
        Dimensions=_dimensions(endpoint_name),
        StartTime=since,
        EndTime=datetime.now(timezone.utc) + timedelta(minutes=2),
        Period=60,
        Statistics=["Sum", "SampleCount", "Maximum"],
    )["Datapoints"]
    return {
        "Sum": sum(p["Sum"] for p in points),
        "SampleCount": sum(p["SampleCount"] for p in points),
        "Maximum": max((p["Maximum"] for p in points), default=None),
    }


def _since() -> datetime:
    return datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=1)


def test_stack_route_publishes_cache_hits_loads_and_unloads_as_sagemaker(
    two_slots: LocalStack, model_writers: dict[str, Any], tmp_path: Path
) -> None:
    since = _since()
    deploy_on(two_slots, "zipf", [model_writers["scale"](tmp_path, name) for name in ("a", "b", "c")])
    client = MMEClient("zipf", boto3_session=two_slots.boto3_session())
    requests = [f"{name}.tar.gz" for name in "aabbcabcca"]
    hits, evictions = _lru_by_hand(requests, SLOTS)
    runtime = two_slots.endpoint_runtime("zipf")
    assert runtime is not None

    for target_model in requests:
        np.testing.assert_allclose(client.infer(target_model, {"INPUT0": X})["OUTPUT0"], 2 * X)
    runtime.wait_for_unloads(timeout=60)
    two_slots.metrics.flush()

    cloudwatch = two_slots.client("cloudwatch")  # plain boto3 calls, as on AWS
    invocations = _statistics(cloudwatch, "AWS/SageMaker", "Invocations", "zipf", since)
    cache_hit = _statistics(cloudwatch, "AWS/SageMaker", "ModelCacheHit", "zipf", since)
    load_wait = _statistics(cloudwatch, "AWS/SageMaker", "ModelLoadingWaitTime", "zipf", since)
    unloading = _statistics(cloudwatch, "AWS/SageMaker", "ModelUnloadingTime", "zipf", since)
    loading = _statistics(cloudwatch, "AWS/SageMaker", "ModelLoadingTime", "zipf", since)
    downloading = _statistics(cloudwatch, "AWS/SageMaker", "ModelDownloadingTime", "zipf", since)
    errors = _statistics(cloudwatch, "AWS/SageMaker", "InvocationModelErrors", "zipf", since)
    loaded = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "loaded",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "/aws/sagemaker/Endpoints",
                        "MetricName": "LoadedModelCount",
                        "Dimensions": _dimensions("zipf"),
                    },
                    "Period": 1,
                    "Stat": "Maximum",
                },
            }
        ],
        StartTime=since,
        EndTime=datetime.now(timezone.utc) + timedelta(minutes=1),
    )["MetricDataResults"][0]["Values"]

    misses = len(requests) - hits
    assert invocations["Sum"] == len(requests)
    assert cache_hit["Sum"] / cache_hit["SampleCount"] == pytest.approx(hits / len(requests))
    assert load_wait["SampleCount"] == misses
    assert unloading["SampleCount"] == evictions == runtime.evictions
    assert loading["SampleCount"] == misses  # every miss loads its model once
    assert downloading["SampleCount"] == 3  # a model loaded again comes from the endpoint's volume
    assert errors["Sum"] == 0
    assert loaded and max(loaded) <= SLOTS

    summary = mt.endpoint_metrics(
        "zipf", start=since, end=datetime.now(timezone.utc) + timedelta(minutes=1),
        boto3_session=two_slots.boto3_session(),
    ).summary()  # fmt: skip
    assert summary["invocations"] == len(requests)
    assert summary["cache_hit_ratio"] == pytest.approx(hits / len(requests))
    assert (summary["cache_hits"], summary["cache_misses"]) == (hits, misses)
    assert summary["unloads"] == evictions
    assert summary["loads"] == misses
    assert summary["loaded_models_max"] <= SLOTS
    assert summary["load_wait_max_s"] > 0
    assert (summary["errors_4xx"], summary["errors_5xx"]) == (0, 0)


def test_stack_route_counts_errors_by_class(
    two_slots: LocalStack, model_writers: dict[str, Any], tmp_path: Path
) -> None:
    since = _since()
    deploy_on(two_slots, "errors", [model_writers["scale"](tmp_path, "good")])
    client = MMEClient("errors", boto3_session=two_slots.boto3_session())
    runtime_client = two_slots.client("sagemaker-runtime")
    client.infer("good.tar.gz", {"INPUT0": X})
    with pytest.raises(ClientError, match="ModelError"):  # the container answers 400: a model error
        runtime_client.invoke_endpoint(
            EndpointName="errors", TargetModel="good.tar.gz", Body=b'{"inputs": []}',
            ContentType="application/json",
        )  # fmt: skip
    with pytest.raises(ClientError, match="ValidationError"):  # not in S3: refused for the model
        runtime_client.invoke_endpoint(EndpointName="errors", TargetModel="absent.tar.gz", Body=b"{}")
    with pytest.raises(ClientError, match="ValidationError"):  # no TargetModel: never reaches the variant
        runtime_client.invoke_endpoint(EndpointName="errors", Body=b"{}")
    two_slots.metrics.flush()

    cloudwatch = two_slots.client("cloudwatch")
    figures = {
        metric: _statistics(cloudwatch, "AWS/SageMaker", metric, "errors", since)["Sum"]
        for metric in ("Invocations", "Invocation4XXErrors", "Invocation5XXErrors", "InvocationModelErrors")
    }

    assert figures == {
        "Invocations": 3,
        "Invocation4XXErrors": 2,
        "Invocation5XXErrors": 0,
        "InvocationModelErrors": 2,
    }


def test_stack_route_load_wait_leaves_out_requests_for_a_model_not_in_s3(
    two_slots: LocalStack, model_writers: dict[str, Any], tmp_path: Path
) -> None:
    """A TargetModel without .tar.gz (not in S3) is a miss and a 4xx, not a wait: the mean wait is the one
    served miss's, which spans its model's download and load."""
    since = _since()
    deploy_on(two_slots, "waits", [model_writers["scale"](tmp_path, "resnet")])
    client = MMEClient("waits", boto3_session=two_slots.boto3_session())
    runtime_client = two_slots.client("sagemaker-runtime")
    for _ in range(2):
        client.infer("resnet.tar.gz", {"INPUT0": X})
    for _ in range(4):
        with pytest.raises(ClientError, match="ValidationError"):
            runtime_client.invoke_endpoint(EndpointName="waits", TargetModel="resnet", Body=b"{}")
    two_slots.metrics.flush()

    summary = mt.endpoint_metrics(
        "waits", start=since, end=datetime.now(timezone.utc) + timedelta(minutes=1),
        boto3_session=two_slots.boto3_session(),
    ).summary()  # fmt: skip

    assert (summary["invocations"], summary["cache_hits"], summary["cache_misses"]) == (6, 1, 5)
    assert summary["errors_4xx"] == 4 and summary["loads"] == 1
    load_wait = _statistics(
        two_slots.client("cloudwatch"), "AWS/SageMaker", "ModelLoadingWaitTime", "waits", since
    )
    assert load_wait["SampleCount"] == 1
    assert summary["load_wait_mean_s"] == summary["load_wait_max_s"]
    assert summary["load_wait_mean_s"] >= summary["download_mean_s"] + summary["load_mean_s"]


def test_stack_route_publishes_the_triton_process_utilization(
    two_slots: LocalStack, model_writers: dict[str, Any], tmp_path: Path
) -> None:
    since = _since()
    deploy_on(two_slots, "busy", [model_writers["scale"](tmp_path, "busy")])
    MMEClient("busy", boto3_session=two_slots.boto3_session()).infer("busy.tar.gz", {"INPUT0": X})
    time.sleep(2.5)  # two windows: CPU is a difference between two samples
    two_slots.metrics.flush()

    cloudwatch = two_slots.client("cloudwatch")
    figures = {
        metric: _statistics(cloudwatch, "/aws/sagemaker/Endpoints", metric, "busy", since)
        for metric in ("CPUUtilization", "MemoryUtilization", "DiskUtilization")
    }

    assert all(f["SampleCount"] >= 1 for f in figures.values()), figures
    assert 0 < figures["MemoryUtilization"]["Maximum"] < 100
    assert 0 < figures["DiskUtilization"]["Maximum"] < 100
    assert figures["CPUUtilization"]["Maximum"] >= 0


def test_stack_status_lists_loaded_models_with_memory_and_loads_and_those_not_loaded(
    two_slots: LocalStack, model_writers: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deploy_on(two_slots, "listed", [model_writers["scale"](tmp_path, name) for name in ("p", "q", "r")])
    client = MMEClient("listed", boto3_session=two_slots.boto3_session())
    for name in ("p", "q", "p"):
        client.infer(f"{name}.tar.gz", {"INPUT0": X})

    status = {s.endpoint_name: s for s in two_slots.status()}["listed"]

    assert [(m.target_model, m.loads) for m in status.loaded] == [("q.tar.gz", 1), ("p.tar.gz", 1)]
    assert all(m.memory_bytes > 0 for m in status.loaded)
    assert status.not_loaded == ["r.tar.gz"]
    assert (status.loads, status.evictions) == (2, 0)

    parser = argparse.ArgumentParser(prog="mme-triton")
    add_local_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["local", "status", "--url", two_slots.runtime_url])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    assert "endpoint listed (AllTraffic, ml.m5.large): 2 loaded" in printed
    assert "q.tar.gz" in printed and "loaded 1x" in printed
    assert "not loaded: r.tar.gz" in printed

    args = parser.parse_args(["local", "status", "--url", two_slots.runtime_url, "--json"])
    assert args.handler(args) == 0
    document = json.loads(capsys.readouterr().out)
    listed = {e["endpoint_name"]: e for e in document["endpoints"]}["listed"]
    assert [m["target_model"] for m in listed["loaded"]] == ["q.tar.gz", "p.tar.gz"]


def test_local_status_says_when_no_stack_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from mme_triton.local.cli import local_status

    monkeypatch.delenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", raising=False)
    with pytest.raises(LocalStackError, match="local up"):
        local_status(argparse.Namespace(url=None, json=False))
    with pytest.raises(LocalStackError, match=re.escape("no embedded stack answers at http://127.0.0.1:9")):
        local_status(argparse.Namespace(url="http://127.0.0.1:9", json=False))


def test_stack_route_closes_the_sink_of_a_deleted_endpoint(
    two_slots: LocalStack, model_writers: dict[str, Any], tmp_path: Path
) -> None:
    deploy_on(two_slots, "gone", [model_writers["scale"](tmp_path, "gone")])
    MMEClient("gone", boto3_session=two_slots.boto3_session()).infer("gone.tar.gz", {"INPUT0": X})
    sink = two_slots.metrics.endpoint("gone")  # the route's own

    mt.teardown("gone", boto3_session=two_slots.boto3_session())

    deadline = time.monotonic() + 30
    while two_slots.endpoint_runtime("gone") is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert two_slots.endpoint_runtime("gone") is None
    assert two_slots.metrics.endpoint("gone") is not sink  # closed: the recorder forgot it
