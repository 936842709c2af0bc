"""``profile_model``'s arguments: what it refuses before it starts anything, and what it leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

import mme_triton as mt
from mme_triton import Candidate
from mme_triton.profile.run import parse_duration_ms

from .conftest import write_sleepy


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"concurrency": ()}, "nothing to measure"),
        ({"objective": "cheapest"}, "objective is"),
        ({"engine": "locust"}, "engine is"),
        ({"endpoint": "a", "triton_url": "http://b"}, "not both"),
        ({"stack": object(), "triton_url": "http://b"}, "stack= goes with"),
        ({"latency_budget": "fast"}, "a duration is"),
        ({"stability": 10}, "stability is a fraction"),
    ],
    ids=["no-levels", "objective", "engine", "two-targets", "stack-and-triton", "budget", "stability"],
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
    ("value", "milliseconds"),
    [(50, 50.0), (2.5, 2.5), ("50ms", 50.0), ("0.2s", 200.0), ("800us", 0.8), ("75", 75.0)],
    ids=["int", "float", "ms", "s", "us", "bare-text"],
)
def test_parse_duration_ms_reads_numbers_and_units(value: float | str, milliseconds: float) -> None:
    assert parse_duration_ms(value) == pytest.approx(milliseconds)
