"""``profile_model``'s arguments: what it refuses before it starts anything, and what it leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

import mme_triton as mt
from mme_triton import Candidate

from .conftest import write_sleepy


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"concurrency": ()}, "nothing to measure"),
        ({"objective": "cheapest"}, "objective is"),
        ({"engine": "locust"}, "engine is"),
        ({"endpoint": "a", "triton_url": "http://b"}, "not both"),
        ({"stack": object(), "triton_url": "http://b"}, "stack= goes with"),
        ({"latency_budget": "fast"}, "latency_budget: not a duration"),
        ({"stability": 10}, "stability is a fraction"),
        ({"stability": "150%"}, "stability is a fraction"),
        ({"window": "soon"}, "window: not a duration"),
        ({"max_memory": "lots"}, "max_memory: not a size"),
        ({"min_throughput": -1}, "min_throughput is inferences per second"),
    ],
    ids=[
        "no-levels",
        "objective",
        "engine",
        "two-targets",
        "stack-and-triton",
        "budget",
        "stability",
        "stability-percent",
        "window",
        "memory",
        "throughput",
    ],
)
def test_profile_model_refuses_bad_arguments_before_starting_anything(
    tmp_path: Path, arguments: dict[str, object], error: str
) -> None:
    model = write_sleepy(tmp_path / "repository")
    with pytest.raises(ValueError, match=error):
        mt.profile_model(model, progress=False, workdir=tmp_path / "work", **arguments)  # type: ignore[arg-type]


def test_profile_model_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a model directory"):
        mt.profile_model(tmp_path / "nothing-here", progress=False)


def test_profile_model_with_repeated_names_leaves_nothing_behind(tmp_path: Path) -> None:
    model = write_sleepy(tmp_path / "repository")
    work = tmp_path / "work"
    with pytest.raises(ValueError, match="unique; repeated: x"):
        mt.profile_model(model, candidates=[Candidate("x"), Candidate("x")], progress=False, workdir=work)
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    ("budget", "milliseconds"),
    [(0.05, 50.0), (2, 2000.0), ("50ms", 50.0), ("0.2s", 200.0), ("800us", 0.8), ("75", 75_000.0)],
    ids=["float-seconds", "int-seconds", "ms", "s", "us", "bare-text-is-seconds"],
)
def test_latency_budget_is_seconds_unless_it_says_otherwise(budget: float | str, milliseconds: float) -> None:
    """One rule with plan_capacity(p99=...) and every *_s field: a bare number is seconds."""
    from mme_triton.profile.run import _constraints

    assert _constraints(budget, None, None, None).latency_budget_ms == pytest.approx(milliseconds)


def test_profile_model_of_an_invalid_model_raises_before_starting_anything(tmp_path: Path) -> None:
    model = write_sleepy(tmp_path / "repository")
    (model / "config.pbtxt").write_text('name: "sleepy"\nbackend: "python"\nmax_batch_size: x\n')
    candidates = [Candidate("a"), Candidate("b", max_batch_size=4)]
    with pytest.raises(mt.ProfileError, match="no candidate can be profiled") as raised:
        mt.profile_model(model, candidates=candidates, progress=False, workdir=tmp_path / "work")
    message = str(raised.value)
    assert message.count("\n  a: ") == 1 and message.count("\n  b: ") == 1  # each candidate once
    assert "config.pbtxt" in message and "max_batch_size" in message
    for line in message.splitlines()[1:]:  # no problem repeated within a candidate's line
        problems = line.split(": ", 1)[1].split("; ")
        assert len(problems) == len(set(problems)), line
