"""The embedded stack's model cache as SageMaker's: unloaded models stay on the endpoint's volume, an
overwritten artifact keeps being served from there until its copy is deleted, ``ModelCacheSetting:
Disabled`` loads on every call, and the memory budget follows the instance type."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from stack_deploy import deploy_on

from mme_triton import MMEClient, upload_models
from mme_triton.endpoint.instance_specs import INSTANCE_TYPES
from mme_triton.local import LocalStack
from mme_triton.local.route.budget import machine_memory_limit
from mme_triton.local.route.extract import directory_size

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.ones((1, 4), dtype=np.float32)
GiB = 1024**3


def _times(repository: Path, name: str, factor: int) -> Path:
    """A python model ``OUTPUT0 = factor * INPUT0`` in ``repository/name``."""
    directory = repository / name
    (directory / "1").mkdir(parents=True, exist_ok=True)
    (directory / "1" / "model.py").write_text(
        "import numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor('OUTPUT0', "
        f"(pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy() * {factor}).astype(np.float32))]) "
        "for r in requests]\n"
    )
    (directory / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    return directory


@pytest.fixture(scope="module")
def model_size(tmp_path_factory: pytest.TempPathFactory) -> int:
    """What one of these models takes on the volume."""
    return directory_size(_times(tmp_path_factory.mktemp("sized"), "sized", 2))


@pytest.fixture(scope="module")
def one_slot(model_size: int) -> Iterator[LocalStack]:
    """Endpoints keep one model loaded and have a volume for two models' files."""
    with LocalStack(max_models=1, max_unpacked_bytes=int(model_size * 2.5)) as stack:
        yield stack


def _gets(caplog: pytest.LogCaptureFixture, key: str) -> int:
    """How many times the control plane's S3 served ``key`` (moto's request log)."""
    return sum(f'"GET /{key} ' in record.getMessage() for record in caplog.records)


def test_stack_serves_an_overwritten_artifact_from_its_volume_until_the_copy_leaves_it(
    one_slot: LocalStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mme_triton.local")
    url = deploy_on(one_slot, "overwrite", [_times(tmp_path / "v1", "art", 2), _times(tmp_path, "other", 5)])
    client = MMEClient("overwrite", boto3_session=one_slot.boto3_session())
    runtime = one_slot.endpoint_runtime("overwrite")
    assert runtime is not None
    key = url.removeprefix("s3://") + "art.tar.gz"
    np.testing.assert_allclose(client.infer("art.tar.gz", {"INPUT0": X})["OUTPUT0"], 2 * X)
    # a new version overwrites the artifact in place, then the model is evicted
    upload_models(
        [_times(tmp_path / "v2", "art", 3)], url, overwrite=True, boto3_session=one_slot.boto3_session()
    )
    client.infer("other.tar.gz", {"INPUT0": X})
    runtime.wait_for_unloads(timeout=60)
    assert one_slot.loaded_models("overwrite") == ["other.tar.gz"]
    assert runtime.volume_models() == ["art.tar.gz", "other.tar.gz"]

    again = client.infer("art.tar.gz", {"INPUT0": X})

    np.testing.assert_allclose(again["OUTPUT0"], 2 * X)  # the copy on the volume: the old version
    assert _gets(caplog, key) == 1  # downloaded once, before it was overwritten
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"s3://{key} was overwritten" in m and "serves the copy on its volume" in m for m in warnings)

    # a third model fills the volume (two models' files): the least recently used unused copy goes
    upload_models([_times(tmp_path, "third", 7)], url, boto3_session=one_slot.boto3_session())
    client.infer("third.tar.gz", {"INPUT0": X})
    assert "other.tar.gz" not in runtime.volume_models()
    client.infer("other.tar.gz", {"INPUT0": X})  # downloaded again; now art's copy is the oldest unused
    runtime.wait_for_unloads(timeout=60)
    assert "art.tar.gz" not in runtime.volume_models()

    latest = client.infer("art.tar.gz", {"INPUT0": X})

    np.testing.assert_allclose(latest["OUTPUT0"], 3 * X)  # its copy left the volume: the new version
    assert _gets(caplog, key) == 2


def test_stack_drops_a_copy_that_failed_to_load_so_a_fixed_artifact_is_served(
    one_slot: LocalStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A copy whose load failed serves nothing: it leaves the volume, and the artifact fixed under the same
    name in S3 is downloaded and served by the next call (it used to fail the same way until evicted)."""
    from mme_triton.errors import ModelLoadError

    caplog.set_level(logging.DEBUG, logger="mme_triton.local")
    broken = _times(tmp_path / "broken", "fixme", 6)
    model_py = broken / "1" / "model.py"
    model_py.write_text(
        model_py.read_text() + "\n    def initialize(self, args):\n        raise RuntimeError('boom')\n"
    )
    url = deploy_on(one_slot, "fixed", [broken])
    client = MMEClient("fixed", boto3_session=one_slot.boto3_session())
    runtime = one_slot.endpoint_runtime("fixed")
    assert runtime is not None
    with pytest.raises(ModelLoadError, match="boom"):
        client.infer("fixme.tar.gz", {"INPUT0": X})
    assert runtime.volume_models() == []
    upload_models(
        [_times(tmp_path / "good", "fixme", 6)], url, overwrite=True, boto3_session=one_slot.boto3_session()
    )

    out = client.infer("fixme.tar.gz", {"INPUT0": X})

    np.testing.assert_allclose(out["OUTPUT0"], 6 * X)
    assert runtime.downloads == 2 and runtime.volume_models() == ["fixme.tar.gz"]
    assert _gets(caplog, url.removeprefix("s3://") + "fixme.tar.gz") == 2


def test_stack_with_model_cache_disabled_loads_and_downloads_on_every_call(
    one_slot: LocalStack, tmp_path: Path
) -> None:
    """``ModelCacheSetting: Disabled``: "Asynchronously unloads the model from memory and deletes it from
    disk immediately after it is invoked" (SageMaker's multi-model caching guide)."""
    deploy_on(one_slot, "uncached", [_times(tmp_path, "once", 4)], model_cache="Disabled")
    client = MMEClient("uncached", boto3_session=one_slot.boto3_session())
    runtime = one_slot.endpoint_runtime("uncached")
    assert runtime is not None and runtime.cache_disabled

    for call in range(1, 4):
        out = client.infer("once.tar.gz", {"INPUT0": X})
        runtime.wait_for_unloads(timeout=60)

        np.testing.assert_allclose(out["OUTPUT0"], 4 * X)
        assert (runtime.loads, runtime.downloads) == (call, call)
        assert one_slot.loaded_models("uncached") == [] and runtime.volume_models() == []
    assert runtime.evictions == 0  # not unloaded for memory


def test_stack_memory_budget_follows_the_endpoints_instance_type(
    one_slot: LocalStack, tmp_path: Path
) -> None:
    deploy_on(one_slot, "sized", [_times(tmp_path, "any", 2)])
    runtime = one_slot.endpoint_runtime("sized")
    assert runtime is not None

    # ml.m5.large: 8 GiB, less what the instance keeps (the instance table's reserve, 1 GiB and 1/64 of
    # it); at most half of this machine's memory
    budget = INSTANCE_TYPES["ml.m5.large"].memory_budget_bytes
    assert budget == 8 * GiB - GiB - 128 * 1024**2
    limit = machine_memory_limit()
    assert runtime.memory_budget == (budget if limit is None else min(budget, limit))
