"""One fixture repository per valid and per broken layout, and the problem codes each one yields.

The table is the specification: a valid layout yields no problem at all, a broken one yields exactly the
codes listed (a fixture shows one mistake, so a check that fires too eagerly fails here as well).
Layouts git cannot carry (symbolic links, FIFOs, cache directories) are built in tmp_path by their tests.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mme_triton.model import load_model, validate_model

# (fixture directory, model directory inside it, codes expected)
LAYOUTS: list[tuple[str, str, set[str]]] = [
    ("valid_python", "scale", set()),
    ("valid_onnx", "linear", set()),
    ("valid_onnx_no_config", "linear", set()),
    ("valid_ensemble", "pipeline", set()),
    ("valid_ensemble_onnx_autocomplete", "pipeline", set()),
    ("valid_tensorrt_no_config", "detector", set()),
    ("valid_savedmodel_no_config", "classifier", set()),
    ("valid_python_auto_complete", "scale", set()),
    ("valid_default_model_filename", "scale", set()),
    ("valid_reshape", "scale", set()),
    ("unreadable", "scale", {"unreadable"}),
    ("config_missing", "classifier", {"config-missing"}),
    ("python_config_missing", "scale", {"python-config-missing"}),
    ("config_encoding", "scale", {"config-encoding"}),
    ("config_syntax", "scale", {"config-syntax"}),
    ("config_unknown_field", "scale", {"config-unknown-field"}),
    ("config_invalid_value", "scale", {"config-invalid-value"}),
    ("config_name_mismatch", "scale", {"config-name-mismatch"}),
    ("component_name_mismatch", "pipeline", {"component-name-mismatch"}),
    ("platform_missing", "scale", {"platform-missing"}),
    ("platform_unknown", "scale", {"platform-unknown"}),
    ("backend_unknown", "scale", {"backend-unknown"}),
    ("platform_backend_mismatch", "scale", {"platform-backend-mismatch"}),
    ("version_missing", "scale", {"version-missing"}),
    ("version_directory_ignored", "scale", {"version-directory-ignored"}),
    ("version_policy_unsatisfied", "scale", {"version-policy-unsatisfied"}),
    ("model_file_missing", "scale", {"model-file-missing"}),
    ("python_model_class_missing", "scale", {"python-model-class-missing"}),
    ("python_syntax_error", "scale", {"python-syntax-error"}),
    ("python_env_missing", "scale", {"python-env-missing"}),
    ("python_env_relative", "scale", {"python-env-missing"}),
    ("python_env_wrong_name", "pipeline_py", {"python-env-missing"}),
    ("python_env_outside_model", "scale", {"python-env-outside-model"}),
    ("python_env_invalid", "scale", {"python-env-invalid"}),
    ("python_env_python_mismatch", "scale", {"python-env-python-mismatch"}),
    ("valid_python_env", "scale", set()),
    ("bls_target_not_loaded", "bls", {"bls-target-not-loaded"}),
    ("bls_target_target_model", "bls", {"bls-target-target-model"}),
    ("bls_target_unknown", "bls", {"bls-target-unknown"}),
    ("valid_ensemble_bls", "pipeline", set()),
    ("max_batch_size_invalid", "scale", {"max-batch-size-invalid"}),
    ("tensor_name_missing", "scale", {"tensor-name-missing"}),
    ("tensor_name_duplicate", "scale", {"tensor-name-duplicate"}),
    ("datatype_invalid", "scale", {"datatype-invalid"}),
    ("dims_invalid", "scale", {"dims-invalid"}),
    ("reshape_invalid", "scale", {"reshape-invalid"}),
    ("dynamic_batching_without_batching", "scale", {"dynamic-batching-without-batching"}),
    ("preferred_batch_size_invalid", "scale", {"preferred-batch-size-invalid"}),
    ("instance_group_invalid", "scale", {"instance-group-invalid"}),
    ("inter_op_threads_ignored", "linear", {"inter-op-threads-ignored"}),
    ("ensemble_scheduling_missing", "pipeline", {"ensemble-scheduling-missing"}),
    ("ensemble_scheduling_unexpected", "scale", {"ensemble-scheduling-unexpected"}),
    ("ensemble_step_model_missing", "pipeline", {"ensemble-step-model-missing"}),
    # Ensembles that contain each other are nested ensembles too, which SageMaker cannot tell apart.
    ("ensemble_cycle", "outer", {"ensemble-cycle", "ensemble-archive-ambiguous"}),
    ("ensemble_input_map_invalid", "pipeline", {"ensemble-input-map-invalid"}),
    ("ensemble_output_map_invalid", "pipeline", {"ensemble-output-map-invalid"}),
    ("ensemble_output_unproduced", "pipeline", {"ensemble-output-unproduced"}),
    ("ensemble_tensor_unused", "pipeline", {"ensemble-tensor-unused"}),
    ("ensemble_datatype_mismatch", "pipeline", {"ensemble-datatype-mismatch"}),
    ("ensemble_shape_mismatch", "pipeline", {"ensemble-shape-mismatch"}),
    ("ensemble_batch_size_mismatch", "pipeline", {"ensemble-batch-size-mismatch"}),
    ("ensemble_not_detected", "pipeline", {"ensemble-not-detected"}),
    ("ensemble_archive_ambiguous", "app", {"ensemble-archive-ambiguous"}),
    ("onnx_unreadable", "linear", {"onnx-unreadable"}),
    ("onnx_external_data_missing", "linear", {"onnx-external-data-missing"}),
    ("onnx_tensor_missing", "linear", {"onnx-tensor-missing"}),
    ("onnx_datatype_mismatch", "linear", {"onnx-datatype-mismatch"}),
    ("onnx_datatype_unsupported", "complex", {"onnx-datatype-unsupported"}),
    ("onnx_rank_mismatch", "linear", {"onnx-rank-mismatch"}),
    ("onnx_dim_mismatch", "linear", {"onnx-dim-mismatch"}),
    ("onnx_batch_dim_fixed", "linear", {"onnx-batch-dim-fixed"}),
]


@pytest.mark.parametrize(("case", "model", "expected"), LAYOUTS, ids=[case for case, _, _ in LAYOUTS])
def test_validate_model_reports_exactly_the_layouts_codes(
    fixture_repos: Path, case: str, model: str, expected: set[str]
) -> None:
    problems = validate_model(fixture_repos / case / model)
    assert {problem.code for problem in problems} == expected, "\n".join(map(str, problems))
    for problem in problems:
        assert problem.message
        assert Path(problem.path).is_relative_to(fixture_repos / case)


def test_fixture_directories_all_appear_in_the_table(fixture_repos: Path) -> None:
    # the generated copy: some cases hold nothing but a generated ONNX file, which git does not carry
    on_disk = {path.name for path in fixture_repos.iterdir() if path.is_dir()}
    in_table = {case for case, _, _ in LAYOUTS} | {"onnx_check_skipped"}
    assert on_disk == in_table


def test_validate_model_reports_symlink_as_error_and_never_follows_it(
    python_model: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("not part of the model")
    (python_model / "1" / "notes.txt").symlink_to(secret)

    model = load_model(python_model)

    [problem] = model.problems
    assert (problem.code, problem.severity) == ("symlink", "error")
    assert problem.path == str(python_model / "1" / "notes.txt")
    assert all(entry.path != python_model / "1" / "notes.txt" for entry in model.entries())


def test_validate_model_reports_symlinked_directory_once(python_model: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "weights.bin").write_bytes(b"\0" * 8)
    (python_model / "1" / "assets").symlink_to(outside, target_is_directory=True)

    problems = validate_model(python_model)

    assert [(p.code, p.path) for p in problems] == [("symlink", str(python_model / "1" / "assets"))]


def test_validate_model_reports_special_file(python_model: Path) -> None:
    os.mkfifo(python_model / "1" / "pipe")

    problems = validate_model(python_model)

    assert [(p.code, p.severity) for p in problems] == [("special-file", "error")]


@pytest.mark.parametrize(
    "junk", ["__pycache__/model.cpython-311.pyc", ".ipynb_checkpoints/model-checkpoint.py", ".DS_Store"]
)
def test_validate_model_warns_about_junk_and_entries_leave_it_out(python_model: Path, junk: str) -> None:
    target = python_model / "1" / junk
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"cache")

    model = load_model(python_model)

    [problem] = model.problems
    assert (problem.code, problem.severity) == ("junk-file", "warning")
    assert problem.path == str(python_model / "1" / junk.split("/")[0])
    assert model.errors == ()
    assert [entry.arcname for entry in model.entries()] == [
        "scale",
        "scale/1",
        "scale/1/model.py",
        "scale/config.pbtxt",
    ]


def test_validate_model_accepts_triton_non_version_directories(python_model: Path) -> None:
    (python_model / "warmup").mkdir()
    (python_model / "warmup" / "input.bin").write_bytes(b"\0" * 16)

    assert validate_model(python_model) == []


def test_validate_model_ignores_leading_zero_version_like_triton(python_model: Path) -> None:
    shutil.move(python_model / "1", python_model / "01")

    codes = sorted(p.code for p in validate_model(python_model))

    assert codes == ["version-directory-ignored", "version-missing"]


def test_validate_model_checks_only_versions_triton_loads(python_model: Path) -> None:
    # The default policy loads the latest version only; an older, incomplete version does not matter.
    (python_model / "0").mkdir()
    assert validate_model(python_model) == []

    (python_model / "2").mkdir()
    [problem] = validate_model(python_model)
    assert (problem.code, problem.path) == ("model-file-missing", str(python_model / "2"))


@pytest.mark.parametrize(
    "policy",
    ["version_policy: { specific: { versions: [ 5 ] } }", "version_policy: { latest: { num_versions: 0 } }"],
    ids=["specific-absent", "latest-zero"],
)
def test_validate_model_reports_a_policy_that_selects_no_version(python_model: Path, policy: str) -> None:
    config = python_model / "config.pbtxt"
    config.write_text(config.read_text() + policy + "\n")

    errors = [p for p in validate_model(python_model) if p.severity == "error"]

    assert [(p.code, p.path) for p in errors] == [("version-missing", str(config))]


def test_validate_model_reports_a_step_version_the_model_lacks(fixture_repos: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(fixture_repos / "valid_ensemble", repo)
    config = repo / "pipeline" / "config.pbtxt"
    config.write_text(
        config.read_text().replace(
            'model_name: "scale"\n      model_version: -1', 'model_name: "scale"\n      model_version: 3'
        )
    )

    [problem] = validate_model(repo / "pipeline")

    assert problem.code == "ensemble-step-model-missing"
    assert "version 3 of 'scale'" in problem.message


def test_validate_model_accepts_step_models_linked_into_the_repository(
    fixture_repos: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(fixture_repos / "valid_ensemble" / "pipeline", repo / "pipeline")
    for name in ("scale", "linear"):
        (repo / name).symlink_to(fixture_repos / "valid_ensemble" / name, target_is_directory=True)

    model = load_model(repo / "pipeline")

    assert model.problems == ()
    assert [member.name for member in model.members] == ["linear", "pipeline", "scale"]
    assert "scale/1/model.py" in [entry.arcname for entry in model.entries()]


@pytest.mark.parametrize("name", ["../outside", "..", "a/b"], ids=["parent-path", "dotdot", "nested"])
def test_validate_model_never_leaves_the_repository_for_a_step_model(
    fixture_repos: Path, tmp_path: Path, name: str
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(fixture_repos / "valid_ensemble", repo)
    shutil.copytree(fixture_repos / "valid_python" / "scale", tmp_path / "outside")
    config = repo / "pipeline" / "config.pbtxt"
    config.write_text(config.read_text().replace('model_name: "scale"', f'model_name: "{name}"'))

    model = load_model(repo / "pipeline")

    assert "ensemble-step-model-missing" in {p.code for p in model.errors}
    assert all(member.parent == repo.resolve() for member in model.members)
