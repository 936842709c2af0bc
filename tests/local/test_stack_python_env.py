"""A python model with its own environment (EXECUTION_ENV_PATH, a conda-pack archive in the model directory)
on the embedded stack: served as the container serves it, or refused with the container's reason.

The environment is built here from a venv, in conda-pack's layout: ``bin/activate`` (relocatable, as
conda-pack writes it: it finds its directory when sourced), ``bin/python3``, ``lib/python3.X/site-packages``
with a module of its own (``envmarker``). Nothing is downloaded, so the environment cannot install numpy,
which the python backend's utilities import: a ``.pth`` file puts this venv's site-packages after its own,
standing in for the numpy a real environment carries.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import MMEClient, ModelLoadError, deploy_mme, validate_model

pytestmark = [pytest.mark.triton, pytest.mark.moto]

ENDPOINT = "python-env"
X = np.arange(8, dtype=np.float32).reshape(2, 4)
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"

ACTIVATE = """\
# conda-pack's kind of activate: relocatable, the environment is where this script is
_env_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONDA_PREFIX="$_env_dir"
export PATH="$_env_dir/bin:$PATH"
"""

MODEL_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils

import envmarker  # only the model's environment has it


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (data * envmarker.FACTOR).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""

CONFIG = """\
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
parameters: {{
  key: "EXECUTION_ENV_PATH"
  value: {{ string_value: "$$TRITON_MODEL_DIRECTORY/{env}" }}
}}
"""


def conda_pack_env(where: Path) -> Path:
    """``where/env.tar.gz``: a venv of this Python in conda-pack's layout, packed as conda-pack packs."""
    env = where / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (env / "bin" / "activate").write_text(ACTIVATE)
    site = env / "lib" / f"python{PYTHON}" / "site-packages"
    (site / "envmarker.py").write_text("FACTOR = 5.0\n")
    (site / "host-numpy.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    archive = where / "env.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        for item in sorted(env.rglob("*")):
            tar.add(item, arcname=str(item.relative_to(env)), recursive=False)
    shutil.rmtree(env)
    return archive


def _model(repository: Path, name: str, env: Path, *, env_name: str = "env.tar.gz", stub: bool) -> Path:
    model = repository / name
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(MODEL_PY)
    (model / "config.pbtxt").write_text(CONFIG.format(name=name, env=env_name))
    shutil.copy2(env, model / ("sd_env.tar.gz" if env_name == "hf_env.tar.gz" else env_name))
    if stub:
        # a stub built for the environment's Python in the model directory, as python_backend's README
        # tells to ship one: here the wheel's own stub for this Python
        from mme_triton.local.triton.wheel import find_triton

        shutil.copy2(find_triton().stubs / PYTHON / "triton_python_backend_stub", model)
    return model


@pytest.fixture(scope="module")
def deployed(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("python-env")
    env = conda_pack_env(root)
    repository = root / "model_repository"
    models = {
        "own_stub": _model(repository, "own_stub", env, stub=True),
        "image_stub": _model(repository, "image_stub", env, stub=False),
        "wrong_name": _model(repository, "wrong_name", env, env_name="hf_env.tar.gz", stub=True),
    }
    session = stack.boto3_session()
    url = stack.model_data_url("env/")
    deploy_mme(
        ENDPOINT,
        url,
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        environment={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216"},
        poll_interval=0.1,
        boto3_session=session,
    )
    # put as they are (upload_models refuses what validation finds wrong): the stack must see what the
    # container would
    for model in models.values():
        _put_archive(session, url, model)
    yield {
        "models": models,
        "client": MMEClient(ENDPOINT, boto3_session=session),
        "session": session,
        "url": url,
    }


def _put_archive(session: Any, url: str, model: Path) -> None:
    """``<url><model>.tar.gz`` as another tool would write it: the model directory at the archive root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(model, arcname=model.name)
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    session.client("s3").put_object(Bucket=bucket, Key=f"{prefix}{model.name}.tar.gz", Body=buffer.getvalue())


def test_stack_serves_an_environment_with_the_stub_of_its_python(deployed: dict[str, Any]) -> None:
    assert validate_model(deployed["models"]["own_stub"]) == []

    answer = deployed["client"].infer("own_stub.tar.gz", {"INPUT0": X})

    np.testing.assert_array_equal(answer["OUTPUT0"], 5 * X)  # envmarker came from the environment


def test_stack_refuses_an_environment_of_another_python_than_the_images(deployed: dict[str, Any]) -> None:
    """sagemaker-tritonserver:24.09-py3 runs Python 3.10 in its python backend; the environment is this
    interpreter's Python, which is not: the container's stub would not see its packages."""
    [problem] = validate_model(deployed["models"]["image_stub"])
    assert problem.code == "python-env-python-mismatch"

    with pytest.raises(ModelLoadError) as caught:
        deployed["client"].infer("image_stub.tar.gz", {"INPUT0": X})

    assert (
        f"env.tar.gz is a Python {PYTHON} environment and the python backend of "
        "sagemaker-tritonserver:24.09-py3 runs Python 3.10" in caught.value.reason
    )


def test_stack_environment_path_mistake_fails_as_in_the_container(deployed: dict[str, Any]) -> None:
    """The config names hf_env.tar.gz, the model ships sd_env.tar.gz (aws/amazon-sagemaker-examples#4416):
    Triton's python backend refuses the load with its own words, on the stack as in the container."""
    model = deployed["models"]["wrong_name"]
    [problem] = validate_model(model)
    assert (problem.code, problem.path, problem.line) == (
        "python-env-missing",
        str(model / "config.pbtxt"),
        8,
    )

    with pytest.raises(ModelLoadError) as caught:
        deployed["client"].infer("wrong_name.tar.gz", {"INPUT0": X})

    assert (
        "Failed to get the canonical path for wrong_name.tar.gz:wrong_name/hf_env.tar.gz"
        in caught.value.reason
    )


def test_stack_refuses_an_environment_that_unpacks_outside_itself(
    deployed: dict[str, Any], tmp_path: Path
) -> None:
    """The python backend's libarchive would write '../' members outside /tmp/python_env_*: the stack reads
    the archive first and refuses it."""
    model = tmp_path / "escape"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(MODEL_PY)
    (model / "config.pbtxt").write_text(CONFIG.format(name="escape", env="env.tar.gz"))
    activate = tmp_path / "activate"
    activate.write_text(ACTIVATE)
    with tarfile.open(model / "env.tar.gz", "w:gz") as tar:
        tar.add(activate, arcname="bin/activate")
        tar.add(activate, arcname="../../escaped.sh")
    _put_archive(deployed["session"], deployed["url"], model)

    with pytest.raises(
        ModelLoadError, match=r"member '\.\./\.\./escaped\.sh' is written outside the environment"
    ):
        deployed["client"].infer("escape.tar.gz", {"INPUT0": X})
    assert not (Path("/tmp") / "escaped.sh").exists()
