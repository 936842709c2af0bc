"""``LocalStack(metrics_period=...)`` and ``local up --metrics-period``: the stack's recorder publishes to its
own CloudWatch, and what is left when the stack stops still gets there. No endpoint, so no Triton starts."""

from __future__ import annotations

import argparse
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from mme_triton.local.cli import add_local_commands, parse_period

pytestmark = [pytest.mark.triton, pytest.mark.moto]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mme-triton")
    add_local_commands(parser.add_subparsers(dest="command", required=True))
    return parser


@pytest.mark.parametrize(("text", "seconds"), [("1s", 1), ("10s", 10), ("1m", 60), ("60", 60), ("5m", 300)])
def test_parse_period_reads_seconds_and_minutes(text: str, seconds: int) -> None:
    assert parse_period(text) == seconds


@pytest.mark.parametrize("text", ["", "2s", "90s", "1h", "fast", "0"])
def test_parse_period_refuses_what_cloudwatch_cannot_read(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_period(text)


def test_local_stack_refuses_a_metrics_period_cloudwatch_cannot_read() -> None:
    from mme_triton.local import LocalStack

    with pytest.raises(ValueError, match="metrics_period"):
        LocalStack(metrics_period=7)


def test_local_stack_publishes_its_metrics_to_its_cloudwatch_every_period() -> None:
    from mme_triton.local import LocalStack

    with LocalStack(metrics_period=1) as stack:
        start = datetime.now(timezone.utc) - timedelta(seconds=5)
        stack.metrics.endpoint("published").model_loaded(0.25)
        cloudwatch = stack.client("cloudwatch")
        deadline = time.monotonic() + 30
        points: list[dict[str, Any]] = []
        while not points and time.monotonic() < deadline:
            time.sleep(0.2)
            points = cloudwatch.get_metric_statistics(
                Namespace="AWS/SageMaker",
                MetricName="ModelLoadingTime",
                Dimensions=[
                    {"Name": "EndpointName", "Value": "published"},
                    {"Name": "VariantName", "Value": "AllTraffic"},
                ],
                StartTime=start,
                EndTime=start + timedelta(minutes=2),
                Period=1,
                Statistics=["Sum", "SampleCount"],
            )["Datapoints"]

        assert stack.metrics_period == 1
        assert [(p["SampleCount"], p["Sum"], p["Unit"]) for p in points] == [(1.0, 250_000.0, "Microseconds")]


def test_local_stack_stop_publishes_what_is_left_before_cloudwatch_goes() -> None:
    from mme_triton.local import LocalStack

    stack = LocalStack().start()  # a minute per window: nothing is due before stop
    published: list[int] = []
    stack.metrics.client.meta.events.register(
        "after-call.cloudwatch.PutMetricData",
        lambda http_response, **_: published.append(http_response.status_code),
    )
    stack.metrics.endpoint("stopping").model_unloaded(1.0)

    stack.stop()

    assert published == [200]


def test_local_up_prints_its_metrics_period(capsys: pytest.CaptureFixture[str]) -> None:
    from mme_triton.local.cli import local_up

    args = _parser().parse_args(["local", "up", "--metrics-period", "1s", "--memory-budget", "64MiB"])
    stop = threading.Event()
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(local_up(args, stop=stop)))
    thread.start()
    deadline = time.monotonic() + 60
    printed = ""
    while "Press Ctrl-C" not in printed and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.1)
        printed += capsys.readouterr().out
    stop.set()
    thread.join(timeout=60)

    assert done == [0]
    assert "metrics:        to the stack's CloudWatch every 1s" in printed
