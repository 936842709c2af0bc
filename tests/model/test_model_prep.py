"""new_python_model, build_ensemble and perf_analyzer_data on their own (no server)."""

from __future__ import annotations

import base64
import json
import tarfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from mme_triton import (
    EnsembleStep,
    InferInput,
    ModelValidationError,
    TensorSpec,
    build_ensemble,
    encode_request,
    new_python_model,
    package_model,
    perf_analyzer_data,
    read_config,
    validate_model,
)
from mme_triton.model.config import datatype_name


def _io(config: Any, kind: str) -> list[tuple[str, str, list[int]]]:
    return [(t.name, datatype_name(t.data_type), list(t.dims)) for t in getattr(config, kind)]


# --- new_python_model --------------------------------------------------------------------------------


def test_new_python_model_writes_a_valid_skeleton(tmp_path: Path) -> None:
    model_dir = new_python_model(
        tmp_path / "repo",
        "tokenize",
        inputs={"TEXT": ("BYTES", [1])},
        outputs=[TensorSpec("input_ids", "INT64", (-1,)), TensorSpec("attention_mask", "TYPE_INT64", (-1,))],
        max_batch_size=8,
    )
    assert model_dir == tmp_path / "repo" / "tokenize"
    assert validate_model(model_dir) == []
    config = read_config(model_dir)
    assert config.backend == "python" and config.max_batch_size == 8
    assert _io(config, "input") == [("TEXT", "TYPE_STRING", [1])]
    assert _io(config, "output") == [
        ("input_ids", "TYPE_INT64", [-1]),
        ("attention_mask", "TYPE_INT64", [-1]),
    ]
    assert [g.kind for g in config.instance_group] == [2]  # KIND_CPU
    source = (model_dir / "1" / "model.py").read_text()
    for part in (
        "class TritonPythonModel",
        "def initialize",
        "def execute",
        "def finalize",
        "passes data through",
    ):
        assert part in source
    compile(source, "model.py", "exec")
    assert "'input_ids': 'TEXT'" in source and "'attention_mask': 'TEXT'" in source


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"name": "my model"}, ValueError, "without whitespace"),
        ({"inputs": {}}, ValueError, "at least one input"),
        ({"inputs": {"A": ("FLOAT", [1])}}, ValueError, "unknown datatype 'FLOAT'"),
        ({"inputs": {"A": ("FP32", [0])}}, ValueError, r"dims \[0\]"),
        ({"inputs": {"A": ("FP32", [])}}, ValueError, "at least one dim"),
        ({"inputs": {"A": "FP32"}}, TypeError, "give \\(datatype, dims\\)"),
        (
            {"outputs": [TensorSpec("B", "FP32", (1,)), TensorSpec("B", "FP32", (1,))]},
            ValueError,
            "appears twice",
        ),
        ({"max_batch_size": -1}, ValueError, "max_batch_size must be an integer >= 0"),
    ],
    ids=[
        "space-in-name",
        "no-inputs",
        "bad-datatype",
        "zero-dim",
        "no-dims",
        "not-a-pair",
        "duplicate",
        "negative",
    ],
)
def test_new_python_model_rejects_bad_arguments(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {
        "name": "pre",
        "inputs": {"A": ("FP32", [1])},
        "outputs": {"B": ("FP32", [1])},
        **kwargs,
    }
    name = arguments.pop("name")
    with pytest.raises(error, match=message):
        new_python_model(tmp_path, name, **arguments)
    assert list(tmp_path.iterdir()) == []


def test_new_python_model_refuses_an_existing_directory(tmp_path: Path) -> None:
    spec = {"A": ("FP32", [1])}
    new_python_model(tmp_path, "pre", inputs=spec, outputs=spec)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        new_python_model(tmp_path, "pre", inputs=spec, outputs=spec)
    new_python_model(tmp_path, "pre", inputs=spec, outputs={"C": ("INT32", [2])}, overwrite=True)
    assert _io(read_config(tmp_path / "pre"), "output") == [("C", "TYPE_INT32", [2])]


# --- build_ensemble ----------------------------------------------------------------------------------


@pytest.fixture
def steps(tmp_path: Path) -> Path:
    """``tokenize`` (TEXT -> ids, mask) and ``encode`` (ids, mask -> hidden, pooled), both batching."""
    repository = tmp_path / "repo"
    new_python_model(
        repository,
        "tokenize",
        inputs={"TEXT": ("BYTES", [1])},
        outputs={"input_ids": ("INT64", [-1]), "attention_mask": ("INT64", [-1])},
        max_batch_size=8,
    )
    new_python_model(
        repository,
        "encode",
        inputs={"input_ids": ("INT64", [-1]), "attention_mask": ("INT64", [-1])},
        outputs={"hidden": ("FP32", [-1, 4]), "pooled": ("FP32", [4])},
        max_batch_size=16,
    )
    return repository


def test_build_ensemble_generates_the_maps_from_the_steps(steps: Path) -> None:
    ensemble = build_ensemble(steps, "pipeline", ["encode", "tokenize"], inputs=["TEXT"], outputs=["pooled"])

    assert validate_model(ensemble) == []
    config = read_config(ensemble)
    assert config.platform == "ensemble" and config.max_batch_size == 8
    assert _io(config, "input") == [("TEXT", "TYPE_STRING", [1])]
    assert _io(config, "output") == [("pooled", "TYPE_FP32", [4])]
    maps = [(s.model_name, dict(s.input_map), dict(s.output_map)) for s in config.ensemble_scheduling.step]
    assert maps == [
        ("encode", {"input_ids": "input_ids", "attention_mask": "attention_mask"}, {"pooled": "pooled"}),
        ("tokenize", {"TEXT": "TEXT"}, {"input_ids": "input_ids", "attention_mask": "attention_mask"}),
    ]
    assert (ensemble / "1").is_dir()
    assert 'platform: "ensemble"' in (ensemble / "config.pbtxt").read_text()

    artifact = package_model(ensemble, steps.parent / "out")
    with tarfile.open(artifact.path) as archive:
        roots = {name.split("/")[0] for name in archive.getnames()}
    assert roots == {"pipeline", "tokenize", "encode"}


def test_build_ensemble_renames_tensors(steps: Path) -> None:
    ensemble = build_ensemble(
        steps,
        "renamed",
        [
            EnsembleStep("tokenize", inputs={"TEXT": "SENTENCE"}),
            EnsembleStep("encode", outputs={"hidden": "EMBEDDINGS"}),
        ],
        inputs=["SENTENCE"],
        outputs=["EMBEDDINGS", "pooled"],
    )
    config = read_config(ensemble)
    assert [t.name for t in config.input] == ["SENTENCE"]
    assert dict(config.ensemble_scheduling.step[1].output_map) == {"hidden": "EMBEDDINGS", "pooled": "pooled"}
    assert validate_model(ensemble) == []


def _mismatched_encoder(repository: Path) -> None:
    new_python_model(
        repository,
        "encode32",
        inputs={"input_ids": ("INT32", [-1]), "attention_mask": ("INT64", [-1])},
        outputs={"pooled": ("FP32", [4])},
        max_batch_size=8,
    )


def _flat_step(repository: Path) -> None:
    new_python_model(repository, "flat", inputs={"pooled": ("FP32", [4])}, outputs={"score": ("FP32", [1])})


def _cycle(repository: Path) -> None:
    new_python_model(
        repository, "ping", inputs={"a": ("FP32", [1])}, outputs={"b": ("FP32", [1])}, max_batch_size=2
    )
    new_python_model(
        repository, "pong", inputs={"b": ("FP32", [1])}, outputs={"a": ("FP32", [1])}, max_batch_size=2
    )


@pytest.mark.parametrize(
    ("setup", "steps_", "inputs", "outputs", "message"),
    [
        (None, ["tokenize", "missing"], ["TEXT"], ["input_ids"], "step model 'missing' has no"),
        (
            _mismatched_encoder,
            ["tokenize", "encode32"],
            ["TEXT"],
            ["pooled"],
            "is TYPE_INT64 as .* but TYPE_INT32",
        ),
        (None, ["encode"], ["input_ids"], ["pooled"], "reads 'attention_mask', which is neither"),
        (None, ["tokenize", "encode"], ["TEXT", "EXTRA"], ["pooled"], "input 'EXTRA' is read by no step"),
        (None, ["tokenize", "encode"], ["TEXT"], ["logits"], "output 'logits' is written by no step"),
        (None, ["tokenize", "tokenize"], ["TEXT"], ["input_ids"], "written by step 1 and by step 2"),
        (_flat_step, ["tokenize", "encode", "flat"], ["TEXT"], ["score"], "all batch or none"),
        (_cycle, ["ping", "pong"], [], ["a"], "at least one input"),
        (None, ["tokenize", "encode"], "TEXT", ["pooled"], "not one string"),
        (None, "tokenize", ["TEXT"], ["input_ids"], r"not one string: write \['tokenize'\]"),
        (None, ["tokenize"], ["TEXT"], ["input_ids", "input_ids"], "names a tensor twice"),
    ],
    ids=[
        "missing-step",
        "datatype-mismatch",
        "unproduced-input",
        "unused-input",
        "unproduced-output",
        "two-producers",
        "mixed-batching",
        "no-inputs",
        "inputs-string",
        "steps-string",
        "duplicate-output",
    ],
)
def test_build_ensemble_refuses_broken_flows(
    steps: Path, setup: Any, steps_: list[str], inputs: Any, outputs: list[str], message: str
) -> None:
    if setup is not None:
        setup(steps)
    before = sorted(p.name for p in steps.iterdir())
    with pytest.raises((ValueError, TypeError), match=message):
        build_ensemble(steps, "broken", steps_, inputs=inputs, outputs=outputs)
    assert sorted(p.name for p in steps.iterdir()) == before


def test_build_ensemble_refuses_a_cycle(steps: Path) -> None:
    _cycle(steps)
    new_python_model(
        steps, "start", inputs={"x": ("FP32", [1])}, outputs={"c": ("FP32", [1])}, max_batch_size=2
    )
    with pytest.raises(ValueError, match="wait for each other's outputs"):
        build_ensemble(steps, "loop", ["start", "ping", "pong"], inputs=["x"], outputs=["a"])


def test_build_ensemble_validation_error_leaves_nothing(steps: Path) -> None:
    # the step model itself is broken: the ensemble validates with its steps and is refused
    (steps / "tokenize" / "1" / "model.py").write_text("print('no class here')\n")
    with pytest.raises(ModelValidationError) as caught:
        build_ensemble(steps, "pipeline", ["tokenize", "encode"], inputs=["TEXT"], outputs=["pooled"])
    assert "python-model-class-missing" in {p.code for p in caught.value.problems}
    assert not (steps / "pipeline").exists()
    assert sorted(p.name for p in steps.iterdir()) == ["encode", "tokenize"]


# --- the names of the models the library creates -----------------------------------------------------

_NAME_RULE = "must be a non-empty directory name without whitespace or '/', not starting with '.'"


@pytest.mark.parametrize("name", ["", "my model", "tab\tname", ".hidden", "..", "a/b"])
def test_created_model_names_follow_one_rule(steps: Path, tmp_path: Path, name: str) -> None:
    """new_python_model, build_ensemble and the exporters (their model_dir's name) refuse the same names:
    a leading dot included, which the exporters used to let through."""
    from mme_triton.export._common import prepare_target

    before = sorted(p.name for p in steps.iterdir())
    with pytest.raises(ValueError, match=_NAME_RULE):
        new_python_model(steps, name, inputs={"A": ("FP32", [1])}, outputs={"B": ("FP32", [1])})
    with pytest.raises(ValueError, match=_NAME_RULE):
        build_ensemble(steps, name, ["tokenize", "encode"], inputs=["TEXT"], outputs=["pooled"])
    if "/" not in name:  # the exporters take a path: its last part is the model's name
        with pytest.raises(ValueError, match=_NAME_RULE):
            prepare_target(tmp_path / "repo" / name if name else Path(name), overwrite=False)
    assert sorted(p.name for p in steps.iterdir()) == before


# --- perf_analyzer_data ------------------------------------------------------------------------------


def test_perf_analyzer_data_writes_content_and_shape(tmp_path: Path) -> None:
    path = perf_analyzer_data(
        [
            {"INPUT0": np.arange(6, dtype=np.float32).reshape(2, 3), "FLAG": np.array([True, False])},
            {"INPUT0": np.zeros((1, 3), np.float32), "FLAG": np.array([True])},
        ],
        tmp_path / "data.json",
    )
    assert json.loads(path.read_text()) == {
        "data": [
            {
                "INPUT0": {"content": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "shape": [2, 3]},
                "FLAG": {"content": [True, False], "shape": [2]},
            },
            {
                "INPUT0": {"content": [0.0, 0.0, 0.0], "shape": [1, 3]},
                "FLAG": {"content": [True], "shape": [1]},
            },
        ]
    }


def test_perf_analyzer_data_bytes_and_b64(tmp_path: Path) -> None:
    half = np.array([1.0, -2.5], dtype=np.float16)
    path = perf_analyzer_data(
        {
            "TEXT": ["hello", "wörld"],
            "RAW": np.array([b"\xff\x00"], dtype=object),
            "HALF": half,
            "BF": np.array([1.0], dtype=ml_dtypes.bfloat16),
            "NAN": np.array([np.nan], dtype=np.float32),
        },
        tmp_path / "data.json",
    )
    (entry,) = json.loads(path.read_text())["data"]
    assert entry["TEXT"] == {"content": ["hello", "wörld"], "shape": [2]}
    assert base64.b64decode(entry["RAW"]["content"]["b64"]) == b"\x02\x00\x00\x00\xff\x00"
    assert base64.b64decode(entry["HALF"]["content"]["b64"]) == half.astype("<f2").tobytes()
    assert len(base64.b64decode(entry["BF"]["content"]["b64"])) == 2
    assert np.isnan(np.frombuffer(base64.b64decode(entry["NAN"]["content"]["b64"]), "<f4")).all()


@pytest.mark.parametrize("elements", [[1, 2], [None], [b"ok", 3.5]], ids=["ints", "none", "bytes-and-float"])
def test_perf_analyzer_data_refuses_bytes_elements_that_are_not_text(
    tmp_path: Path, elements: list[Any]
) -> None:
    # the client codec's rule: bytes(2) would be two NUL bytes, written without a word
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    with pytest.raises(TypeError, match=r"BYTES tensor 'IN' holds a \w+; elements must be bytes or str"):
        perf_analyzer_data({"IN": array}, tmp_path / "data.json")
    assert not (tmp_path / "data.json").exists()
    with pytest.raises(TypeError, match="elements must be bytes or str"):
        encode_request({"IN": array})


def test_perf_analyzer_data_accepts_infer_inputs(tmp_path: Path) -> None:
    x = InferInput("INPUT0", [1, 2], "INT64").set_data_from_numpy(np.array([[3, 4]], dtype=np.int64))
    path = perf_analyzer_data([x], tmp_path / "data.json")
    assert json.loads(path.read_text()) == {"data": [{"INPUT0": {"content": [3, 4], "shape": [1, 2]}}]}


def test_perf_analyzer_data_splits_batches_for_a_batching_model(steps: Path, tmp_path: Path) -> None:
    path = perf_analyzer_data(
        {"TEXT": np.array([[b"a"], [b"b"]], dtype=object)},
        tmp_path / "data.json",
        model_dir=steps / "tokenize",
    )
    assert json.loads(path.read_text())["data"] == [
        {"TEXT": {"content": ["a"], "shape": [1]}},
        {"TEXT": {"content": ["b"], "shape": [1]}},
    ]


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ({"TEXT": np.array([[1]], dtype=np.int64)}, "input 'TEXT' is BYTES but the array is INT64"),
        ({"TEXT": np.array([b"a"], dtype=object)}, r"has shape \[1\] but the model takes \[-1, 1\]"),
        ({"TEXT": np.array([[b"a"]], dtype=object), "OTHER": np.ones(1)}, "sends 'OTHER'"),
        ({}, "lacks input 'TEXT'"),
    ],
    ids=["datatype", "missing-batch-dim", "unknown-input", "missing-input"],
)
def test_perf_analyzer_data_checks_against_the_model(
    steps: Path, tmp_path: Path, samples: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        perf_analyzer_data(samples, tmp_path / "data.json", model_dir=steps / "tokenize")
    assert not (tmp_path / "data.json").exists()


def test_perf_analyzer_data_requests_list_the_same_inputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="every entry of the data lists the same inputs"):
        perf_analyzer_data([{"A": np.ones(1)}, {"B": np.ones(1)}], tmp_path / "data.json")
    with pytest.raises(ValueError, match="samples is empty"):
        perf_analyzer_data([], tmp_path / "data.json")
    with pytest.raises(TypeError, match="samples take"):
        perf_analyzer_data("INPUT0", tmp_path / "data.json")
