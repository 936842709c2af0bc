"""Candidates: names, grids, the CLI's shorthand, and scratch copies that are validated, never dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

import mme_triton as mt
from mme_triton import Candidate, DynamicBatching, InstanceGroup
from mme_triton.profile.candidates import describe_value, parse_grid, prepare


def test_candidate_keeps_name_options_and_model_dir(tmp_path: Path) -> None:
    candidate = Candidate("fast", model_dir=tmp_path, max_batch_size=8, options={"response_cache": True})
    assert candidate.name == "fast"
    assert candidate.options == {"response_cache": True, "max_batch_size": 8}
    assert candidate.model_dir == tmp_path


@pytest.mark.parametrize(
    ("name", "options", "error"),
    [
        ("", {}, "non-empty name"),
        ("x", {"max_batch": 8}, "unknown configure_model option"),
    ],
    ids=["empty-name", "unknown-option"],
)
def test_candidate_refuses_bad_arguments(name: str, options: dict[str, int], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Candidate(name, **options)


def test_candidate_grid_is_the_cartesian_product_named_after_what_varies() -> None:
    grid = Candidate.grid(
        max_batch_size=[1, 8],
        dynamic_batching=[None, DynamicBatching(100)],
        instance_group=[InstanceGroup(2, "KIND_CPU")],
    )
    assert [c.name for c in grid] == [
        "max_batch=1,dyn=off",
        "max_batch=1,dyn=100us",
        "max_batch=8,dyn=off",
        "max_batch=8,dyn=100us",
    ]
    assert grid[3].options == {
        "max_batch_size": 8,
        "dynamic_batching": DynamicBatching(100),
        "instance_group": InstanceGroup(2, "KIND_CPU"),
    }


def test_candidate_grid_takes_a_prefix_and_a_model_dir(tmp_path: Path) -> None:
    grid = Candidate.grid(model_dir=tmp_path, prefix="onnx", graph_optimization_level=["basic", "all"])
    assert [(c.name, c.model_dir) for c in grid] == [
        ("onnx,graph_opt=basic", tmp_path),
        ("onnx,graph_opt=all", tmp_path),
    ]


@pytest.mark.parametrize(
    ("lists", "error"),
    [({"max_batch_size": []}, ValueError), ({"max_batch_size": 8}, TypeError)],
    ids=["empty", "not-a-list"],
)
def test_candidate_grid_refuses_what_is_not_a_list_of_values(lists: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        Candidate.grid(**lists)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "off"),
        (True, "on"),
        (DynamicBatching(100, (4, 8)), "100us/pref4+8"),
        (InstanceGroup(2, "KIND_GPU", (0,)), "2gpu@0"),
        ([InstanceGroup(1, "KIND_CPU"), InstanceGroup(1, "KIND_GPU")], "1cpu+1gpu"),
        ("basic", "basic"),
    ],
    ids=["none", "true", "batching", "gpu-group", "groups", "text"],
)
def test_describe_value_is_short_and_readable(value: object, text: str) -> None:
    assert describe_value(value) == text


def test_parse_grid_reads_the_cli_shorthand() -> None:
    grid = parse_grid(
        ["max_batch_size=1,8", "instance_count=1,2", "dynamic_batching=off,2ms"], instance_kind="KIND_CPU"
    )
    assert len(grid) == 8
    assert grid[-1].options == {
        "max_batch_size": 8,
        "instance_group": InstanceGroup(2, "KIND_CPU"),
        "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=2000),
    }
    assert parse_grid([]) == []


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("max_batch_size", "OPTION=VALUE"),
        ("instance_count=two", "integers"),
        ("dynamic_batching=soon", "queue delay"),
        ("no_such_option=1", "unknown configure_model option"),
    ],
    ids=["no-values", "count-not-int", "bad-delay", "unknown"],
)
def test_parse_grid_refuses_what_it_cannot_read(entry: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_grid([entry])


def _model(tmp_path: Path, name: str = "m") -> Path:
    return mt.new_python_model(
        tmp_path / "repo", name, inputs={"X": ("FP32", [4])}, outputs={"Y": ("FP32", [4])}, max_batch_size=8
    )


def test_prepare_writes_each_candidate_to_a_validated_scratch_copy(tmp_path: Path) -> None:
    source = _model(tmp_path)
    before = (source / "config.pbtxt").read_text()
    prepared = prepare(
        [source],
        [Candidate("as-is"), Candidate("batch4", max_batch_size=4, dynamic_batching=True)],
        tmp_path / "scratch",
    )
    assert [(p.name, p.valid) for p in prepared] == [("as-is", True), ("batch4", True)]
    copy = prepared[1].model_dir
    assert copy is not None and copy.name == "m" and copy.parent.parent == tmp_path / "scratch"
    assert mt.read_config(copy).max_batch_size == 4
    assert mt.read_config(copy).HasField("dynamic_batching")
    assert (source / "config.pbtxt").read_text() == before  # the user's model is never touched
    assert (copy / "1" / "model.py").read_text() == (source / "1" / "model.py").read_text()


def test_prepare_reports_a_refused_candidate_with_its_problems(tmp_path: Path) -> None:
    source = _model(tmp_path)
    prepared = prepare(
        [source],
        [
            Candidate("no-batching-but-batcher", max_batch_size=0, dynamic_batching=True),
            Candidate("onnx-only", graph_optimization_level="basic"),
            Candidate("fine", max_batch_size=2),
        ],
        tmp_path / "scratch",
    )
    assert [(p.name, p.valid) for p in prepared] == [
        ("no-batching-but-batcher", False),
        ("onnx-only", False),
        ("fine", True),
    ]
    assert "dynamic_batching needs max_batch_size > 0" in prepared[0].problems[0]
    assert "onnxruntime" in prepared[1].problems[0]


def test_prepare_crosses_candidates_with_several_model_dirs(tmp_path: Path) -> None:
    first, second = _model(tmp_path, "a"), _model(tmp_path, "b")
    only_b = Candidate("pinned", model_dir=second, max_batch_size=2)
    prepared = prepare([first, second], [Candidate("x", max_batch_size=4), only_b], tmp_path / "scratch")
    assert [(p.name, p.source.name) for p in prepared] == [("a/x", "a"), ("b/x", "b"), ("pinned", "b")]
    assert [p.name for p in prepare([first, second], None, tmp_path / "scratch2")] == ["a", "b"]


def test_prepare_refuses_two_candidates_of_one_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unique; repeated: x"):
        prepare([_model(tmp_path)], [Candidate("x"), Candidate("x", max_batch_size=2)], tmp_path / "s")
