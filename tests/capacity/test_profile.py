"""Model profiles: validation, copies, and the JSON/CSV files that carry them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mme_triton import Candidate, ProfileReport
from mme_triton.capacity.profile import MAX_COPIES, ModelProfile, copy_name
from mme_triton.profile.load import Level, ServerSplit
from mme_triton.profile.report import CandidateResult

MiB = 1024**2


def _resnet(**changes: object) -> ModelProfile:
    fields: dict[str, object] = {"memory_bytes": 300 * MiB, "cold_start_s": 4.5, "service_time_s": 0.02}
    fields.update(changes)
    return ModelProfile("resnet.tar.gz", **fields)  # type: ignore[arg-type]


def test_model_profile_copies_are_named_before_the_suffix() -> None:
    assert _resnet(copies=200).names()[:2] == ["resnet-000.tar.gz", "resnet-001.tar.gz"]
    assert _resnet(copies=200).names()[-1] == "resnet-199.tar.gz"
    assert _resnet().names() == ["resnet.tar.gz"]
    assert copy_name("bert", 3, 10) == "bert-3"


def test_model_profile_reload_defaults_to_the_cold_start() -> None:
    assert _resnet().reload_time_s == 4.5
    assert _resnet(reload_s=1.0).reload_time_s == 1.0


def test_model_profile_batch_time_adds_the_per_request_cost() -> None:
    profile = _resnet(max_batch_size=8, batch_item_s=0.005)
    assert profile.batch_time_s(1) == pytest.approx(0.02)
    assert profile.batch_time_s(5) == pytest.approx(0.04)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memory_bytes": 0}, "memory_bytes must be an integer > 0"),
        ({"memory_bytes": 1.5}, "memory_bytes must be an integer > 0"),
        ({"cold_start_s": -1.0}, "cold_start_s must be >= 0"),
        ({"service_time_s": float("nan")}, "service_time_s must be a number"),
        ({"copies": 0}, "copies must be an integer >= 1"),
        ({"copies": MAX_COPIES + 1}, "copies is at most"),
        ({"instances": 2.0}, "instances must be an integer >= 1"),
        ({"max_batch_size": 0}, "max_batch_size must be an integer >= 1"),
        ({"unload_s": -0.1}, "unload_s must be >= 0"),
    ],
    ids=[
        "no-memory",
        "fractional-memory",
        "negative-cold-start",
        "nan",
        "no-copies",
        "too-many-copies",
        "float-instances",
        "no-batch",
        "negative-unload",
    ],
)
def test_model_profile_refuses_out_of_range_fields(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _resnet(**changes)


def test_model_profile_from_dict_reads_units_and_names_bad_fields() -> None:
    profile = ModelProfile.from_dict(
        {
            "name": "bert",
            "memory_bytes": "1.5GiB",
            "cold_start_s": "4s",
            "service_time_s": "20ms",
            "copies": "3",
        }
    )
    assert (profile.memory_bytes, profile.cold_start_s, profile.service_time_s, profile.copies) == (
        1536 * MiB,
        4.0,
        0.02,
        3,
    )
    with pytest.raises(ValueError, match=r"unknown model profile field\(s\) \['memory'\]"):
        ModelProfile.from_dict({"name": "bert", "memory": 1, "cold_start_s": 1, "service_time_s": 1})
    with pytest.raises(ValueError, match="bert: missing cold_start_s"):
        ModelProfile.from_dict({"name": "bert", "memory_bytes": 1, "service_time_s": 1})
    with pytest.raises(ValueError, match="bert: memory_bytes: not a size"):
        ModelProfile.from_dict(
            {"name": "bert", "memory_bytes": "lots", "cold_start_s": 1, "service_time_s": 1}
        )


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_model_profile_save_then_load_round_trips(tmp_path: Path, suffix: str) -> None:
    profiles = [
        _resnet(copies=100, instances=2),
        ModelProfile(
            "bert.tar.gz",
            memory_bytes=MiB,
            cold_start_s=2.0,
            service_time_s=0.01,
            reload_s=0.5,
            unload_s=0.25,
            max_batch_size=8,
            batch_item_s=0.001,
        ),
    ]
    path = ModelProfile.save(profiles, tmp_path / f"profiles{suffix}")
    assert ModelProfile.load(path) == profiles


def test_model_profile_load_takes_a_models_object_and_hand_written_csv(tmp_path: Path) -> None:
    as_json = tmp_path / "profile.json"
    as_json.write_text(
        json.dumps(
            {"models": [{"name": "a", "memory_bytes": "2GiB", "cold_start_s": 5, "service_time_s": "15ms"}]}
        )
    )
    assert ModelProfile.load(as_json)[0].memory_bytes == 2 * 1024**3
    as_csv = tmp_path / "profile.csv"
    as_csv.write_text("name,memory_bytes,cold_start_s,service_time_s,copies\nb,500MB,4.5,20ms,\n")
    [profile] = ModelProfile.load(as_csv)
    assert (profile.memory_bytes, profile.copies) == (500_000_000, 1)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "expected a list of model profile objects"),
        ("[]", "no model profile in the file"),
        (
            "name,memory_bytes,cold_start_s,service_time_s\na,1,x,1\n",
            r"line 2: a: cold_start_s: not a duration",
        ),
        (
            '[{"name": "a", "memory_bytes": 1, "cold_start_s": 1, "service_time_s": 1},'
            ' {"name": "a", "memory_bytes": 1, "cold_start_s": 1, "service_time_s": 1}]',
            "name the model 'a'",
        ),
        ("{not json", "not JSON"),
    ],
    ids=["not-objects", "empty", "bad-csv-value", "duplicate", "broken-json"],
)
def test_model_profile_load_refuses_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "profiles.txt"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        ModelProfile.load(path)


def test_model_profile_load_refuses_a_huge_file_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as sparse:
        sparse.truncate(64 * MiB)
    with pytest.raises(ValueError, match="a profile file is at most"):
        ModelProfile.load(path)


# -- from a profile report -----------------------------------------------------------------------------


def _measured(
    name: str,
    *,
    mean_ms: float,
    throughput: float,
    memory: int | None = 120 * MiB,
    parts: tuple[float | None, float | None, float | None] = (0.4, 0.3, 1.1),
    cold: float | None = 2.0,
    **options: object,
) -> CandidateResult:
    level = Level(1, None, True, throughput, mean_ms, mean_ms, mean_ms, mean_ms * 2, mean_ms, 200, 0)
    download, extract, load = parts
    return CandidateResult(
        name=name,
        candidate=Candidate(name, **options),
        model_dir="/models/repo/sleepy",
        target_model=f"sleepy-{name}.tar.gz",
        cold_start_s=cold,
        download_s=download,
        extract_s=extract,
        load_s=load,
        unload_s=0.25,
        memory_bytes=memory,
        levels=[level],
        max_batch_size=8,
        instances=2,
    )


def _report() -> ProfileReport:
    return ProfileReport(
        [
            _measured("slow", mean_ms=40.0, throughput=25.0),
            _measured("batching", mean_ms=20.0, throughput=90.0, memory=150 * MiB, dynamic_batching=True),
        ]
    )


def test_model_profile_from_report_takes_the_winner_by_default() -> None:
    report = _report()
    assert report.best is not None and report.best.name == "batching"
    profile = ModelProfile.from_report(report, copies=50)

    best = report.best
    assert profile.name == "sleepy.tar.gz"  # the profiled directory's name, not the scratch TargetModel
    assert profile.copies == 50 and len(profile.names()) == 50
    assert profile.memory_bytes == best.memory_bytes
    assert profile.service_time_s == pytest.approx(best.service_time_s)
    assert profile.cold_start_s == pytest.approx(0.4 + 0.3 + 1.1)  # download + extract + load
    assert profile.reload_s == pytest.approx(1.1)  # from the volume: the load alone
    assert profile.unload_s == pytest.approx(0.25)
    assert profile.instances == 2
    assert profile.max_batch_size == 8  # the candidate turns on dynamic batching


def test_model_profile_from_report_takes_a_named_or_given_candidate() -> None:
    report = _report()
    slow = ModelProfile.from_report(report, "slow", name="m.tar.gz")
    assert (slow.name, slow.service_time_s, slow.memory_bytes) == ("m.tar.gz", 0.04, 120 * MiB)
    assert slow.max_batch_size == 1  # no dynamic batcher: Triton does not merge requests
    given = ModelProfile.from_report(report, report.results[0], batch_item_s=0.002, instances=1)
    assert (given.batch_item_s, given.instances) == (0.002, 1)
    with pytest.raises(KeyError, match="no candidate 'fast'"):
        ModelProfile.from_report(report, "fast")


def test_model_profile_from_report_without_load_parts_takes_the_service_time_off_the_cold_start() -> None:
    report = ProfileReport([_measured("one", mean_ms=50.0, throughput=20.0, parts=(None, None, None))])
    profile = ModelProfile.from_report(report)
    assert profile.cold_start_s == pytest.approx(2.0 - 0.05)
    assert profile.reload_s is None


def test_model_profile_from_report_refuses_what_was_not_measured() -> None:
    failed = _measured("broken", mean_ms=10.0, throughput=5.0)
    failed.status, failed.problems = "failed", ["the first request failed: 500"]
    with pytest.raises(ValueError, match="no winner to profile"):
        ModelProfile.from_report(ProfileReport([failed]))
    with pytest.raises(ValueError, match=r"broken was not measured \(failed: the first request failed"):
        ModelProfile.from_report(ProfileReport([failed]), "broken")
    no_memory = ProfileReport([_measured("one", mean_ms=10.0, throughput=5.0, memory=None)])
    with pytest.raises(ValueError, match="no memory_bytes; give memory_bytes="):
        ModelProfile.from_report(no_memory)
    assert ModelProfile.from_report(no_memory, memory_bytes=MiB).memory_bytes == MiB


def _queued(concurrency: int, mean_ms: float, compute_ms: float, batch: float) -> Level:
    """A stable closed-loop level at ``concurrency`` whose requests waited for each other: the mean latency
    carries the queue, Triton's statistics say what one execution took."""
    split = ServerSplit(mean_ms - compute_ms, 0.1, compute_ms - 0.2, 0.1, batch)
    return Level(
        concurrency, None, True, 50.0, mean_ms, mean_ms, mean_ms, mean_ms, mean_ms, 200, 0, server=split
    )


def _one_instance(levels: list[Level], **fields: object) -> CandidateResult:
    result = _measured("one", mean_ms=1.0, throughput=1.0)
    result.levels, result.instances = levels, 1
    for key, value in fields.items():
        setattr(result, key, value)
    return result


def test_model_profile_service_time_is_never_a_queued_levels_latency() -> None:
    """A 20 ms model with one instance, profiled at concurrency 4 only: its mean latency is about 80 ms
    (each request waits for three others); the service time is Triton's compute time, 20 ms."""
    result = _one_instance([_queued(4, mean_ms=82.0, compute_ms=20.0, batch=1.0)])
    assert result.service_time_s == pytest.approx(0.020)
    assert (
        result.service_time_source is not None
        and "Triton's compute time at c=4" in result.service_time_source
    )
    profile = ModelProfile.from_report(ProfileReport([result]), result)
    assert profile.service_time_s == pytest.approx(0.020)


def test_model_profile_service_time_prefers_a_level_within_the_instance_count() -> None:
    alone = Level(1, None, True, 45.0, 21.0, 21.0, 21.0, 22.0, 21.5, 200, 0)
    result = _one_instance([_queued(4, mean_ms=82.0, compute_ms=20.0, batch=1.0), alone])
    assert result.service_time_s == pytest.approx(0.0215)
    assert result.service_time_source == "mean latency at c=1 (1 instance(s))"
    two = _one_instance([_queued(2, mean_ms=22.0, compute_ms=20.0, batch=1.0)], instances=2)
    assert two.service_time_s == pytest.approx(0.022)  # two clients, two instances: nothing queued


def test_model_profile_without_an_unqueued_measure_asks_for_the_service_time() -> None:
    queued = Level(4, None, True, 50.0, 80.0, 80.0, 80.0, 81.0, 80.0, 200, 0)  # no Triton statistics
    result = _one_instance([queued])
    assert result.service_time_s is None and result.service_time_source is None
    with pytest.raises(ValueError, match="no service_time_s; give service_time_s="):
        ModelProfile.from_report(ProfileReport([result]), result)


def test_model_profile_keeps_the_models_own_dynamic_batching() -> None:
    """Profiled as it is (no options), a config with dynamic_batching {} and max_batch_size 8 batches."""
    result = _one_instance([_queued(1, mean_ms=21.0, compute_ms=20.0, batch=1.0)], dynamic_batching=True)
    assert result.candidate.options == {}
    profile = ModelProfile.from_report(ProfileReport([result]), result)
    assert profile.max_batch_size == 8
    plain = _one_instance([_queued(1, mean_ms=21.0, compute_ms=20.0, batch=1.0)], dynamic_batching=False)
    assert ModelProfile.from_report(ProfileReport([plain]), plain).max_batch_size == 1


def test_model_profile_batch_item_time_from_two_batch_sizes() -> None:
    small = _queued(1, mean_ms=21.0, compute_ms=20.0, batch=1.0)
    large = _queued(8, mean_ms=60.0, compute_ms=34.0, batch=4.5)
    result = _one_instance([small, large], dynamic_batching=True)
    assert result.batch_item_s == pytest.approx(0.004)  # (34 - 20) ms over 3.5 more requests
    profile = ModelProfile.from_report(ProfileReport([result]), result)
    assert profile.batch_item_s == pytest.approx(0.004) and profile.max_batch_size == 8
    assert profile.batch_time_s(8) == pytest.approx(profile.service_time_s + 7 * 0.004)
