"""A profile's numbers outside the easy regime, against models whose cost is known by construction.

``one_row`` cannot batch (``max_batch_size: 0``), has one instance and sleeps ``SERVICE_S`` per execute:
it answers at most ``1 / SERVICE_S`` requests (and rows) per second, whatever ``batch_size`` says; at
concurrency 4 each request waits for three others, so its latency is about four service times while one
execution still takes one. ``own_batching`` has ``dynamic_batching {}`` and ``max_batch_size: 8`` in its
own config and is profiled as it is. Both sleep ``FINALIZE_S`` in ``finalize``: an unload ends a little
after that, while Triton's SageMaker front-end answers it only at its next 1 s poll.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mme_triton as mt
from mme_triton import ModelProfile, ProfileReport

from .conftest import FAST

pytestmark = [pytest.mark.triton, pytest.mark.moto]

SERVICE_S = 0.02
FINALIZE_S = 0.2
CAP = 1 / SERVICE_S
BATCH = 4
RATE = 2 * CAP

MODEL_PY = f"""\
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep({SERVICE_S})  # once per call, whatever it carries
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]
            )
            for r in requests
        ]

    def finalize(self):
        time.sleep({FINALIZE_S})
"""


def _write(repository: Path, name: str, config: str) -> Path:
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(MODEL_PY)
    (directory / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n' + textwrap.dedent(config))
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    repository = tmp_path_factory.mktemp("repository")
    one_row = _write(
        repository,
        "one_row",
        """\
        max_batch_size: 0
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        instance_group [ { count: 1 kind: KIND_CPU } ]
        """,
    )
    own_batching = _write(
        repository,
        "own_batching",
        """\
        max_batch_size: 8
        input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
        instance_group [ { count: 1 kind: KIND_CPU } ]
        dynamic_batching { }
        """,
    )
    return one_row, own_batching


@pytest.fixture(scope="module")
def report(stack: Any, models: tuple[Path, Path]) -> ProfileReport:
    return mt.profile_model(
        list(models),
        concurrency=(4,),
        request_rate=(RATE,),
        batch_size=BATCH,
        stack=stack,
        progress=False,
        **FAST,
    )


def test_throughput_counts_the_rows_a_model_without_batching_was_sent(report: ProfileReport) -> None:
    """batch_size=4 does not make a max_batch_size 0 model serve four rows per request."""
    level = report.result("one_row").levels[0]
    assert level.load == "c=4" and level.stable, level
    assert level.throughput_per_s is not None and level.throughput_per_s <= 1.15 * CAP
    batched = report.result("own_batching").levels[0]
    assert batched.stable and batched.throughput_per_s is not None
    assert batched.throughput_per_s > 1.15 * CAP  # four rows per request, batched: more rows than CAP


def test_an_open_loop_rate_past_capacity_is_overloaded_not_stable(report: ProfileReport) -> None:
    level = report.result("one_row").levels[1]
    assert level.load == f"{RATE:g}/s"
    assert level.overloaded and not level.stable, level
    assert level.p99_ms is None and level.p50_ms is None
    assert level.throughput_per_s is not None and level.throughput_per_s <= 1.15 * CAP
    assert level.offered_per_s is not None and level.offered_per_s >= 1.5 * CAP
    assert report.best_level is not level
    row = next(r for r in report.rows() if r["candidate"] == "one_row" and r["request_rate"] == RATE)
    assert row["overloaded"] is True and row["p99_ms"] is None


def test_service_time_is_not_taken_from_a_queued_level(report: ProfileReport) -> None:
    one_row = report.result("one_row")
    queued = one_row.levels[0]
    assert queued.mean_ms is not None and queued.mean_ms >= 2.5 * SERVICE_S * 1000  # it waited
    assert one_row.service_time_s is not None
    assert 0.9 * SERVICE_S <= one_row.service_time_s <= 1.6 * SERVICE_S
    assert one_row.service_time_source is not None and "Triton's compute time" in one_row.service_time_source
    profile = ModelProfile.from_report(report, "one_row")
    assert profile.service_time_s == pytest.approx(one_row.service_time_s)


def test_a_models_own_dynamic_batching_reaches_the_capacity_profile(report: ProfileReport) -> None:
    result = report.result("own_batching")
    assert result.candidate.options == {} and result.dynamic_batching is True
    assert ModelProfile.from_report(report, "own_batching").max_batch_size == 8
    assert ModelProfile.from_report(report, "one_row").max_batch_size == 1


def test_unload_is_measured_to_its_end_not_to_tritons_next_poll(
    report: ProfileReport, stack: Any, models: tuple[Path, Path]
) -> None:
    """The unload ends when the model's stub process has left (its memory free): after ``finalize``, and
    before Triton's SageMaker front-end answers the DELETE at its next whole-second poll."""
    for result in report.results:
        assert result.unload_s is not None and result.unload_s >= FINALIZE_S, result
    session = stack.boto3_session()
    url = stack.model_data_url("unload-clock/")
    mt.upload_models([models[1]], url, boto3_session=session)
    endpoint = mt.deploy_mme(
        "unload-clock", url, role=stack.role_arn, instance_type="ml.m5.xlarge", boto3_session=session
    )
    try:
        endpoint.client().infer("own_batching.tar.gz", {"INPUT0": np.ones((1, 4), np.float32)})
        assert stack.unload_model("unload-clock", "own_batching.tar.gz")
        timings = stack.load_timings("unload-clock")["own_batching.tar.gz"]
    finally:
        mt.teardown("unload-clock", delete_artifacts=True, boto3_session=session)
    assert timings.unload_s is not None and timings.unload_answer_s is not None
    assert FINALIZE_S <= timings.unload_s <= timings.unload_answer_s, timings
    assert timings.unload_answer_s >= 1.0  # the front-end's poll: a whole second at least
