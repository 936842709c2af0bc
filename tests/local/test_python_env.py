"""What the stack does with an EXECUTION_ENV_PATH environment before Triton sees the model, decided on an
extracted archive (no server): which stub runs it, and what is refused with the container's reason."""

from __future__ import annotations

import gzip
import io
import sys
import tarfile
from pathlib import Path

import pytest

from mme_triton.local.route.extract import ExtractLimits
from mme_triton.local.route.python_env import prepare_environments
from mme_triton.local.route.support import UnsupportedModelError

PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:{}-py3-cpu"
CONFIG = """\
name: "scale"
backend: "python"
parameters: {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{value}" }} }}
"""


def _extracted(tmp_path: Path, value: str, members: list[str] | None = None) -> Path:
    """``tmp_path/model``: an extracted archive holding ``scale/`` with ``env.tar.gz`` of ``members``."""
    model = tmp_path / "model" / "scale"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (model / "config.pbtxt").write_text(CONFIG.format(value=value))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in members or []:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    (model / "env.tar.gz").write_bytes(gzip.compress(buffer.getvalue()))
    return tmp_path / "model"


def _conda(python: str, *, libpython: bool) -> list[str]:
    names = ["bin/activate", f"bin/python{python}", f"lib/python{python}/site-packages/x.py"]
    return [*names, f"lib/libpython{python}.so.1.0"] if libpython else names


# a release whose python backend runs another Python than this interpreter
OTHER = next((r, py) for r, py in (("24.09", "3.10"), ("25.04", "3.12")) if py != PYTHON)


@pytest.mark.triton
def test_prepare_environments_gives_an_environment_of_another_python_the_wheels_stub(tmp_path: Path) -> None:
    """The environment is of the release's Python, not of this interpreter: the wheel's stub for that
    Python goes into the extracted copy, where the python backend runs a model's own stub."""
    release, python = OTHER
    root = _extracted(tmp_path, "$$TRITON_MODEL_DIRECTORY/env.tar.gz", _conda(python, libpython=True))

    changes = prepare_environments(root, image=IMAGE.format(release), limits=ExtractLimits())

    stub = root / "scale" / "triton_python_backend_stub"
    assert changes == [f"scale: the wheel's Python {python} stub for its environment env.tar.gz"]
    assert f"libpython{python}".encode() in stub.read_bytes()


def test_prepare_environments_refuses_another_python_with_the_containers_reason(tmp_path: Path) -> None:
    root = _extracted(tmp_path, "$$TRITON_MODEL_DIRECTORY/env.tar.gz", _conda("3.12", libpython=True))

    with pytest.raises(UnsupportedModelError) as caught:
        prepare_environments(root, image=IMAGE.format("24.09"), limits=ExtractLimits())

    assert (
        "env.tar.gz is a Python 3.12 environment and the python backend of sagemaker-tritonserver:24.09-py3 "
        "runs Python 3.10: the stub does not see the environment's packages"
    ) in str(caught.value)


def test_prepare_environments_runs_a_models_own_stub_of_the_environments_python(tmp_path: Path) -> None:
    root = _extracted(tmp_path, "$$TRITON_MODEL_DIRECTORY/env.tar.gz", _conda("3.12", libpython=True))
    stub = root / "scale" / "triton_python_backend_stub"
    stub.write_bytes(b"\x7fELF ... libpython3.12.so.1.0 ...")
    assert prepare_environments(root, image=IMAGE.format("24.09"), limits=ExtractLimits()) == []
    stub.write_bytes(b"\x7fELF ... libpython3.11.so.1.0 ...")
    with pytest.raises(
        UnsupportedModelError, match=r"the model's own triton_python_backend_stub runs Python 3\.11"
    ):
        prepare_environments(root, image=IMAGE.format("24.09"), limits=ExtractLimits())


@pytest.mark.triton
def test_prepare_environments_needs_the_environments_libpython_for_another_python(tmp_path: Path) -> None:
    release, python = OTHER
    root = _extracted(tmp_path, "$$TRITON_MODEL_DIRECTORY/env.tar.gz", _conda(python, libpython=False))

    with pytest.raises(
        UnsupportedModelError, match=r"carries no lib/libpython3\.\d+\.so .* the container would serve"
    ):
        prepare_environments(root, image=IMAGE.format(release), limits=ExtractLimits())


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("/opt/conda/envs/env.tar.gz", "the container's file system"),
        ("env.tar.gz", "the server's working directory"),
        ("$$TRITON_MODEL_DIRECTORY/../../../etc/env.tar.gz", "leaves the archive"),
    ],
    ids=["absolute", "relative", "dot-dot"],
)
def test_prepare_environments_refuses_paths_outside_the_archive(
    tmp_path: Path, value: str, where: str
) -> None:
    root = _extracted(tmp_path, value, _conda("3.10", libpython=True))

    with pytest.raises(UnsupportedModelError) as caught:
        prepare_environments(root, image=IMAGE.format("24.09"), limits=ExtractLimits())

    assert f'"Failed to get the canonical path for {value}."' in str(caught.value)
    assert where in str(caught.value)


def test_prepare_environments_keeps_the_endpoints_limits(tmp_path: Path) -> None:
    root = _extracted(tmp_path, "$$TRITON_MODEL_DIRECTORY/env.tar.gz", _conda("3.10", libpython=True))

    with pytest.raises(UnsupportedModelError, match="unpacks to more than 2 bytes"):
        prepare_environments(root, image=IMAGE.format("24.09"), limits=ExtractLimits(max_bytes=2))


def test_prepare_environments_leaves_other_images_and_missing_files_to_triton(tmp_path: Path) -> None:
    """A custom image's Python is not known, and a missing file fails in Triton with the container's words."""
    root = _extracted(tmp_path, "$$TRITON_MODEL_DIRECTORY/env.tar.gz", _conda("3.12", libpython=False))
    assert (
        prepare_environments(root, image="123.dkr.ecr.us-east-1.amazonaws.com/mine:1", limits=ExtractLimits())
        == []
    )
    (root / "scale" / "env.tar.gz").unlink()
    assert prepare_environments(root, image=IMAGE.format("24.09"), limits=ExtractLimits()) == []
