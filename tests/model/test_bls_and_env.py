"""Python models as AWS's samples ship them: BLS calls found in model.py (file and line) with what will not be
there on a multi-model endpoint, and EXECUTION_ENV_PATH environments checked as the python backend uses
them (the path, the archive, its Python against the image's)."""

from __future__ import annotations

import gzip
import io
import lzma
import shutil
import tarfile
from pathlib import Path

import pytest

from mme_triton import ModelValidationError, package_model, validate_model
from mme_triton.model import _python_env
from mme_triton.model._bls import bls_calls


def _copy(fixture_repos: Path, case: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(fixture_repos / case, tmp_path / case))


# --- BLS ---------------------------------------------------------------------------------------------


def test_validate_model_reports_a_bls_target_with_file_and_line(fixture_repos: Path) -> None:
    model = fixture_repos / "bls_target_not_loaded" / "bls"

    [problem] = validate_model(model)

    assert (problem.code, problem.severity) == ("bls-target-not-loaded", "error")
    assert (problem.path, problem.line, problem.column) == (str(model / "1" / "model.py"), 11, 22)
    assert "bls/1/model.py line 11 calls model 'scale' through BLS (InferenceRequest ... exec())" in (
        problem.message
    )
    assert "\"Model 'scale' is not ready\"" in problem.message
    assert "put this model and 'scale' in one ensemble (build_ensemble)" in problem.message
    assert str(problem).startswith(f"{model / '1' / 'model.py'}:11:22: error bls-target-not-loaded: ")


def test_package_model_refuses_a_bls_target_that_will_not_be_there(
    fixture_repos: Path, tmp_path: Path
) -> None:
    with pytest.raises(ModelValidationError) as caught:
        package_model(fixture_repos / "bls_target_not_loaded" / "bls", tmp_path)
    assert [p.code for p in caught.value.problems] == ["bls-target-not-loaded"]
    assert list(tmp_path.iterdir()) == []


def test_validate_model_bls_step_alone_is_reported_but_not_inside_its_ensemble(fixture_repos: Path) -> None:
    """The same python model: packaged alone its target is missing; as a step of the ensemble that has the
    target as another step, the front-end loads both."""
    assert validate_model(fixture_repos / "valid_ensemble_bls" / "pipeline") == []
    assert [p.code for p in validate_model(fixture_repos / "valid_ensemble_bls" / "bls")] == [
        "bls-target-not-loaded"
    ]


def test_bls_calls_finds_every_form_of_call() -> None:
    source = """
import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import InferenceRequest

PREPROCESS = "preprocess"


class TritonPythonModel:
    def initialize(self, args):
        self.classifier = "classifier"

    async def execute(self, requests):
        first = await pb_utils.InferenceRequest(
            model_name=PREPROCESS, inputs=[], requested_output_names=[]
        ).async_exec()
        call = pb_utils.InferenceRequest(model_name=self.classifier, inputs=[], requested_output_names=[])
        answer = call.exec()
        for part in InferenceRequest("generator", [], []).exec(decoupled=True):
            pass
        later = pb_utils.InferenceRequest(model_name=f"model-{len(requests)}", inputs=[])
        return [later]
"""
    found = [(c.line, c.target, c.how, c.expression) for c in bls_calls(source)]

    assert found == [
        (13, "preprocess", "async_exec()", "PREPROCESS"),
        (16, "classifier", "exec()", "self.classifier"),
        (18, "generator", "exec(decoupled=True)", "'generator'"),
        (20, None, "executed elsewhere", "f'model-{len(requests)}'"),
    ]


@pytest.mark.parametrize(
    ("case", "code", "fragment"),
    [
        ("bls_target_target_model", "bls-target-target-model", "'scale.tar.gz', a TargetModel"),
        ("bls_target_unknown", "bls-target-unknown", "a model named at run time (request.parameters())"),
    ],
    ids=["target-model", "computed"],
)
def test_validate_model_warns_about_bls_targets_it_cannot_promise(
    fixture_repos: Path, case: str, code: str, fragment: str
) -> None:
    [problem] = validate_model(fixture_repos / case / "bls")
    assert (problem.code, problem.severity, problem.line) == (code, "warning", 11)
    assert fragment in problem.message


# --- EXECUTION_ENV_PATH: the path ------------------------------------------------------------------


def test_validate_model_reports_the_environment_path_mistake_with_file_and_line(fixture_repos: Path) -> None:
    """aws/amazon-sagemaker-examples#4416: the config names hf_env.tar.gz, the model ships sd_env.tar.gz."""
    model = fixture_repos / "python_env_wrong_name" / "pipeline_py"

    [problem] = validate_model(model)

    assert (problem.code, problem.severity) == ("python-env-missing", "error")
    assert (problem.path, problem.line, problem.column) == (str(model / "config.pbtxt"), 20, 26)
    assert "'hf_env.tar.gz' is not in the model directory (the model directory has sd_env.tar.gz)" in (
        problem.message
    )
    assert '"Failed to get the canonical path for <model directory>/hf_env.tar.gz."' in problem.message


def test_validate_model_relative_environment_path_is_resolved_elsewhere(fixture_repos: Path) -> None:
    [problem] = validate_model(fixture_repos / "python_env_relative" / "scale")
    assert problem.code == "python-env-missing" and problem.line == 20
    assert "write '$$TRITON_MODEL_DIRECTORY/env.tar.gz'" in problem.message


def test_validate_model_environment_outside_the_model_directory(fixture_repos: Path, tmp_path: Path) -> None:
    model = _copy(fixture_repos, "valid_python_env", tmp_path) / "scale"
    config = model / "config.pbtxt"
    config.write_text(config.read_text().replace("/env.tar.gz", "/../env.tar.gz"))

    [problem] = validate_model(model)

    assert problem.code == "python-env-missing"
    assert "outside the model directory" in problem.message


def test_validate_model_environment_as_a_directory(fixture_repos: Path, tmp_path: Path) -> None:
    """The backend also takes an unpacked environment: a directory with bin/activate."""
    model = _copy(fixture_repos, "valid_python_env", tmp_path) / "scale"
    with tarfile.open(model / "env.tar.gz") as tar:
        tar.extractall(model / "env", filter="data")
    (model / "env.tar.gz").unlink()
    config = model / "config.pbtxt"
    config.write_text(config.read_text().replace("/env.tar.gz", "/env"))

    # Triton says it does not load env/ as a version, as for any directory of a model
    assert [p.code for p in validate_model(model)] == ["version-directory-ignored"]
    assert [p.code for p in validate_model(model, triton_version="25.04")] == [
        "version-directory-ignored",
        "python-env-python-mismatch",
    ]


# --- EXECUTION_ENV_PATH: the archive ---------------------------------------------------------------


def _archive(
    path: Path, names: list[str], *, compress: str = "gz", link: tuple[str, str] | None = None
) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if link is not None:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.SYMTYPE, link[1]
            tar.addfile(info)
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"x=1"))
    data = buffer.getvalue()
    path.write_bytes(gzip.compress(data) if compress == "gz" else lzma.compress(data))


@pytest.mark.parametrize(
    ("names", "options", "reason"),
    [
        (["bin/activate", "lib/python3.10/x.py"], {"compress": "xz"}, "not gzip-compressed or a plain tar"),
        (["bin/activate", "../outside.py"], {}, "member '../outside.py' is written outside the environment"),
        (
            ["bin/activate", "lib/etc/passwd"],
            {"link": ("lib/etc", "/etc")},
            "member 'lib/etc/passwd' is written through a symbolic link",
        ),
    ],
    ids=["xz", "dot-dot", "through-a-link"],
)
def test_validate_model_environment_the_backend_cannot_unpack(
    fixture_repos: Path, tmp_path: Path, names: list[str], options: dict[str, object], reason: str
) -> None:
    model = _copy(fixture_repos, "valid_python_env", tmp_path) / "scale"
    _archive(model / "env.tar.gz", names, **options)  # type: ignore[arg-type]

    [problem] = validate_model(model)

    assert problem.code == "python-env-invalid"
    assert reason in problem.message


def test_validate_model_environment_without_activate(fixture_repos: Path) -> None:
    [problem] = validate_model(fixture_repos / "python_env_invalid" / "scale")
    assert "env.tar.gz has no bin/activate" in problem.message


def test_validate_model_warns_about_a_large_environment(
    fixture_repos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threshold is lowered here: an environment of the real threshold's size has no place in a test."""
    monkeypatch.setattr(_python_env, "LARGE_ENV_BYTES", 8)
    model = fixture_repos / "valid_python_env" / "scale"

    [problem] = validate_model(model)

    assert (problem.code, problem.severity) == ("python-env-large", "warning")
    assert "unpacks it into /tmp on every cold load" in problem.message


# --- EXECUTION_ENV_PATH: its Python against the image's --------------------------------------------


@pytest.mark.parametrize(
    ("case", "release", "codes"),
    [
        ("valid_python_env", None, []),  # 24.09, the default: Python 3.10
        ("valid_python_env", "23.03", ["python-env-python-mismatch"]),  # Python 3.8
        ("python_env_python_mismatch", None, ["python-env-python-mismatch"]),  # a 3.12 environment
        ("python_env_python_mismatch", "25.04", []),
    ],
)
def test_validate_model_checks_the_environments_python_against_the_release(
    fixture_repos: Path, case: str, release: str | None, codes: list[str]
) -> None:
    problems = validate_model(fixture_repos / case / "scale", triton_version=release)
    assert [p.code for p in problems] == codes


def test_validate_model_environment_mismatch_names_both_pythons(fixture_repos: Path) -> None:
    model = fixture_repos / "python_env_python_mismatch" / "scale"
    [problem] = validate_model(model)
    assert (problem.path, problem.line) == (str(model / "config.pbtxt"), 20)
    assert problem.message.startswith(
        "env.tar.gz is a Python 3.12 environment but the python backend of sagemaker-tritonserver:24.09-py3 "
        "runs Python 3.10"
    )


def test_validate_model_environment_with_its_own_stub(fixture_repos: Path, tmp_path: Path) -> None:
    """A triton_python_backend_stub in the model directory is what the backend runs: its Python counts."""
    model = _copy(fixture_repos, "python_env_python_mismatch", tmp_path) / "scale"
    (model / "triton_python_backend_stub").write_bytes(b"\x7fELF ... libpython3.12.so.1.0\x00 ...")
    assert validate_model(model) == []
    (model / "triton_python_backend_stub").write_bytes(b"\x7fELF ... libpython3.11.so.1.0\x00 ...")
    [problem] = validate_model(model)
    assert "the model's own triton_python_backend_stub runs Python 3.11" in problem.message


def test_validate_model_refuses_an_unknown_release(fixture_repos: Path) -> None:
    with pytest.raises(ValueError, match=r"SageMaker publishes no Triton image '24\.10'"):
        validate_model(fixture_repos / "valid_python_env" / "scale", triton_version="24.10")


def test_package_model_leaves_the_release_check_to_validate_and_deploy(
    fixture_repos: Path, tmp_path: Path
) -> None:
    """Packaging does not know the image: a 3.12 environment packages (deploy_mme checks it against its
    release before uploading)."""
    artifact = package_model(fixture_repos / "python_env_python_mismatch" / "scale", tmp_path)
    assert artifact.name == "scale.tar.gz"
