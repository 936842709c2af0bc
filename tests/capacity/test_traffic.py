"""Traffic: Poisson arrivals over a popularity law, and recorded traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mme_triton.capacity.profile import ModelProfile
from mme_triton.capacity.traffic import MAX_REQUESTS, MAX_TRACE_FILE_BYTES, Traffic

MODELS = [f"m{k}.tar.gz" for k in range(10)]


def test_traffic_zipf_is_repeatable_with_its_seed() -> None:
    first = Traffic.zipf(MODELS, s=1.1, rate=20, duration=60, seed=3)
    again = Traffic.zipf(MODELS, s=1.1, rate=20, duration=60, seed=3)
    other = Traffic.zipf(MODELS, s=1.1, rate=20, duration=60, seed=4)
    assert np.array_equal(first.times, again.times) and np.array_equal(first.targets, again.targets)
    assert not np.array_equal(first.times[:50], other.times[:50])


def test_traffic_poisson_arrivals_are_sorted_within_the_duration() -> None:
    traffic = Traffic.uniform(MODELS, rate="50/s", duration="10m", seed=0)
    assert traffic.duration == 600.0
    assert np.all(np.diff(traffic.times) >= 0)
    assert traffic.times[0] >= 0 and traffic.times[-1] <= 600
    # a Poisson count of mean 30000 has a standard deviation of 173
    assert abs(len(traffic) - 30_000) < 5 * 173
    gaps = np.diff(traffic.times)
    assert gaps.std() == pytest.approx(gaps.mean(), rel=0.05)  # exponential gaps: std = mean


def test_traffic_zipf_draws_rank_k_with_weight_k_to_the_minus_s() -> None:
    traffic = Traffic.zipf(MODELS, s=1.2, rate=200, duration=600, seed=1)
    weights = np.array([1 / k**1.2 for k in range(1, 11)])
    shares = np.bincount(traffic.targets, minlength=10) / len(traffic)
    assert shares == pytest.approx(weights / weights.sum(), abs=0.005)
    counts = traffic.counts()
    assert list(counts) == MODELS and sum(counts.values()) == len(traffic)


def test_traffic_zipf_with_s_zero_is_uniform() -> None:
    traffic = Traffic.zipf(MODELS, s=0, rate=200, duration=600, seed=1)
    shares = np.bincount(traffic.targets, minlength=10) / len(traffic)
    assert shares == pytest.approx([0.1] * 10, abs=0.005)


def test_traffic_rates_give_each_model_its_rate() -> None:
    traffic = Traffic.rates({"a": 30, "b": "120/min", "c": 0.5}, duration="20m", seed=0)
    counts = traffic.counts()
    for name, rate in (("a", 30), ("b", 2), ("c", 0.5)):
        expected = rate * 1200
        assert abs(counts[name] - expected) < 5 * expected**0.5, name  # Poisson: sd = sqrt(mean)
    with pytest.raises(ValueError, match="rate of c: a rate is a number of requests per second > 0"):
        Traffic.rates({"a": 1, "c": 0}, duration=10)


def test_traffic_expands_profiles_with_copies() -> None:
    profile = ModelProfile("resnet.tar.gz", memory_bytes=1, cold_start_s=1, service_time_s=0.01, copies=200)
    traffic = Traffic.uniform([profile, "bert.tar.gz"], rate=1, duration=10)
    assert len(traffic.names) == 201
    assert traffic.names[0] == "resnet-000.tar.gz" and traffic.names[-1] == "bert.tar.gz"


def test_traffic_trace_rows_are_sorted_and_timed_from_the_first() -> None:
    traffic = Traffic.trace([(105.0, "b"), (100.0, "a"), (101.5, "b"), (100.0, "c")])
    assert traffic.times.tolist() == [0.0, 0.0, 1.5, 5.0]
    assert [traffic.names[k] for k in traffic.targets] == ["a", "c", "b", "b"]
    assert traffic.duration == 5.0
    assert Traffic.trace([(7, "a")]).duration == 1.0


def test_traffic_trace_reads_iso_timestamps_from_csv(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(
        "TargetModel,timestamp\n"
        "a.tar.gz,2024-05-01T10:00:00Z\n"
        "b.tar.gz,2024-05-01T10:00:02.5+00:00\n"
        "a.tar.gz,2024-05-01T10:01:00Z\n"
    )
    traffic = Traffic.trace(path)
    assert traffic.times.tolist() == [0.0, 2.5, 60.0]
    assert traffic.names == ("a.tar.gz", "b.tar.gz")


def test_traffic_to_csv_then_trace_round_trips(tmp_path: Path) -> None:
    traffic = Traffic.zipf(MODELS, s=0.8, rate=5, duration=60, seed=2)
    again = Traffic.trace(traffic.to_csv(tmp_path / "t.csv"), duration=60)
    assert again.rows() == [(t - traffic.times[0], name) for t, name in traffic.rows()]
    assert again.duration == 60


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Traffic.uniform(MODELS, rate=0, duration=60),
            "a rate is a number of requests per second > 0",
        ),
        (lambda: Traffic.uniform(MODELS, rate="fast", duration=60), "not a rate"),
        (lambda: Traffic.uniform(MODELS, rate=1, duration=0), "duration must be > 0"),
        (lambda: Traffic.zipf(MODELS, s=-1, rate=1, duration=1), "Zipf exponent s must be a number >= 0"),
        (lambda: Traffic.uniform([], rate=1, duration=1), "at least one model"),
        (lambda: Traffic.uniform(["a", "a"], rate=1, duration=1), "named twice"),
        (lambda: Traffic.uniform(MODELS, rate=MAX_REQUESTS, duration=60), f"at most {MAX_REQUESTS:,}"),
        (lambda: Traffic.trace([]), "no request"),
        (lambda: Traffic.trace([(0, "a"), ("soon", "b")]), "row 1: not a time: 'soon'"),
        (lambda: Traffic.trace([(0, "a"), (1,)]), r"row 1: expected \(timestamp_s, target_model\)"),
        (lambda: Traffic.trace([(0, "a"), (9, "a")], duration=5), "shorter than the trace's span"),
    ],
    ids=[
        "zero-rate",
        "bad-rate",
        "zero-duration",
        "negative-s",
        "no-models",
        "twice",
        "too-many",
        "empty",
        "bad-time",
        "short-row",
        "short-duration",
    ],
)
def test_traffic_refuses_bad_input(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_traffic_trace_csv_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("timestamp,TargetModel\n0,a\n1\n")
    with pytest.raises(ValueError, match=r"line 3: expected 2 columns"):
        Traffic.trace(path)
    path.write_text("when,what\n0,a\n")
    with pytest.raises(ValueError, match="must name the columns timestamp and TargetModel"):
        Traffic.trace(path)
    with pytest.raises(FileNotFoundError):
        Traffic.trace(tmp_path / "missing.csv")


def test_traffic_trace_refuses_a_field_past_csv_limits_and_a_huge_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("timestamp,TargetModel\n0," + "m" * 200_000 + "\n")
    with pytest.raises(ValueError, match="line 2: not CSV: field larger than field limit"):
        Traffic.trace(path)
    with path.open("r+b") as sparse:
        sparse.truncate(MAX_TRACE_FILE_BYTES + 1)
    with pytest.raises(ValueError, match="a trace file is at most"):
        Traffic.trace(path)
