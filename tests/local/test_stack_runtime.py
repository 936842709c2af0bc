"""The platform's part on the embedded stack: the memory budget, unsafe and GPU-only artifacts, updates,
and several stacks side by side."""

from __future__ import annotations

import io
import logging
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

sys.path.insert(0, str(Path(__file__).parent))
from stack_deploy import deploy_on

from mme_triton import InferenceError, MMEClient, upload_models
from mme_triton.local import LocalStack
from mme_triton.local.route.endpoint_runtime import target_model_hash
from mme_triton.local.route.extract import directory_size

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.ones((1, 4), dtype=np.float32)


@pytest.fixture(scope="module")
def small_stack(repository: Path) -> Iterator[LocalStack]:
    """A stack whose budget holds ``linear`` or ``scale`` but never both."""
    sizes = [directory_size(repository / "linear"), directory_size(repository / "scale")]
    with LocalStack(memory_budget=sum(sizes) - 1) as running:
        yield running


def _served_by_triton(stack: LocalStack, endpoint_name: str) -> set[str]:
    """TargetModels with a model process in the endpoint's Triton (instances are ``<target>_<n>_<m>``)."""
    triton = stack.triton(endpoint_name)
    assert triton is not None
    return {process.model.rsplit("_", 2)[0] for process in triton.model_processes()}


def test_stack_unloads_the_least_recently_used_model_and_reloads_it_from_the_volume(
    small_stack: LocalStack, repository: Path, expected_linear: Any
) -> None:
    deploy_on(small_stack, "budget", [repository / "linear", repository / "scale"])
    client = MMEClient("budget", boto3_session=small_stack.boto3_session())
    runtime = small_stack.endpoint_runtime("budget")
    assert runtime is not None

    client.infer("linear.tar.gz", {"INPUT0": X})
    client.infer("scale.tar.gz", {"INPUT0": X})
    runtime.wait_for_unloads(timeout=60)

    assert small_stack.loaded_models("budget") == ["scale.tar.gz"]
    assert _served_by_triton(small_stack, "budget") == {"scale.tar.gz"}  # unloaded from Triton itself
    # the unloaded model stays extracted on the endpoint's volume
    assert (runtime.instances[0].workdir / "models" / target_model_hash("linear.tar.gz") / "model").is_dir()
    assert runtime.volume_models() == ["linear.tar.gz", "scale.tar.gz"]
    loads, downloads = runtime.loads, runtime.downloads

    again = client.infer("linear.tar.gz", {"INPUT0": X})
    runtime.wait_for_unloads(timeout=60)

    np.testing.assert_allclose(again["OUTPUT0"], expected_linear(X), rtol=1e-6)
    assert runtime.loads == loads + 1
    assert runtime.downloads == downloads  # loaded again from the volume, not from S3
    assert small_stack.loaded_models("budget") == ["linear.tar.gz"]
    assert _served_by_triton(small_stack, "budget") == {"linear.tar.gz"}


def _malicious_archive(kind: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        config = b'name: "m"\nbackend: "python"\n'
        info = tarfile.TarInfo("m/config.pbtxt")
        info.size = len(config)
        tar.addfile(info, io.BytesIO(config))
        evil = tarfile.TarInfo(
            {"absolute": "/tmp/mme-evil", "dotdot": "m/../../mme-evil"}.get(kind, "m/1/evil")
        )
        if kind == "symlink":
            evil.type, evil.linkname = tarfile.SYMTYPE, "/etc/passwd"
        elif kind == "device":
            evil.type = tarfile.CHRTYPE
        else:
            evil.size = 4
        tar.addfile(evil, io.BytesIO(b"evil") if evil.isreg() else None)
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink", "device"])
def test_stack_refuses_a_malicious_artifact(small_stack: LocalStack, kind: str) -> None:
    deploy_on(small_stack, "evil", [])
    session = small_stack.boto3_session()
    session.client("s3").put_object(
        Bucket=small_stack.default_bucket, Key=f"evil/{kind}.tar.gz", Body=_malicious_archive(kind)
    )

    with pytest.raises(ClientError) as raw:
        session.client("sagemaker-runtime").invoke_endpoint(
            EndpointName="evil", TargetModel=f"{kind}.tar.gz", Body=b"{}", ContentType="application/json"
        )

    assert raw.value.response["Error"]["Code"] == "ValidationError"
    assert "refusing archive member" in raw.value.response["Error"]["Message"]
    assert small_stack.loaded_models("evil") == []
    assert not Path("/tmp/mme-evil").exists()


def test_stack_serves_a_gpu_config_from_an_adapted_copy(
    small_stack: LocalStack, repository: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gpu_model = tmp_path / "scale_gpu"
    (gpu_model / "1").mkdir(parents=True)
    (gpu_model / "1" / "model.py").write_bytes((repository / "scale" / "1" / "model.py").read_bytes())
    config = (repository / "scale" / "config.pbtxt").read_text().replace('name: "scale"', 'name: "scale_gpu"')
    (gpu_model / "config.pbtxt").write_text(
        config + "instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]\n"
    )
    url = deploy_on(small_stack, "gpu", [])
    upload_models([gpu_model], url, boto3_session=small_stack.boto3_session())
    caplog.set_level(logging.WARNING, logger="mme_triton.local.route.runtime")

    out = MMEClient("gpu", boto3_session=small_stack.boto3_session()).infer("scale_gpu.tar.gz", {"INPUT0": X})

    np.testing.assert_allclose(out["OUTPUT0"], X * 2)
    assert any("adapted copy" in r.getMessage() and "KIND_GPU" in r.getMessage() for r in caplog.records)
    # the artifact in S3 is unchanged
    body = (
        small_stack.client("s3")
        .get_object(Bucket=small_stack.default_bucket, Key="gpu/scale_gpu.tar.gz")["Body"]
        .read()
    )
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        stored = tar.extractfile("scale_gpu/config.pbtxt")
        assert stored is not None and b"KIND_GPU" in stored.read()


def test_stack_refuses_a_tensorrt_plan_with_a_model_error(small_stack: LocalStack, tmp_path: Path) -> None:
    plan = tmp_path / "engine"
    (plan / "1").mkdir(parents=True)
    (plan / "1" / "model.plan").write_bytes(b"\0" * 16)
    (plan / "config.pbtxt").write_text(
        'name: "engine"\nplatform: "tensorrt_plan"\nmax_batch_size: 1\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(plan, arcname="engine")
    deploy_on(small_stack, "plan", [])
    small_stack.client("s3").put_object(
        Bucket=small_stack.default_bucket, Key="plan/engine.tar.gz", Body=buffer.getvalue()
    )

    with pytest.raises(InferenceError, match="GPU") as caught:
        MMEClient("plan", boto3_session=small_stack.boto3_session()).infer("engine.tar.gz", {"INPUT0": X})

    assert caught.value.error_code == "ModelError"


def test_stack_update_endpoint_replaces_the_triton(
    small_stack: LocalStack, repository: Path, is_alive: Any
) -> None:
    deploy_on(small_stack, "updated", [repository / "scale"], prefix="upd/")
    first = small_stack.triton("updated")
    assert first is not None and first.pid is not None
    old_pid = first.pid

    deploy_on(
        small_stack,
        "updated",
        [repository / "scale"],
        prefix="upd/",
        environment={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"},
    )
    second = small_stack.triton("updated")

    assert second is not None and second is not first
    out = MMEClient("updated", boto3_session=small_stack.boto3_session()).infer("scale.tar.gz", {"INPUT0": X})
    np.testing.assert_allclose(out["OUTPUT0"], X * 2)
    deadline = time.monotonic() + 10  # the old server is stopped in the background
    while is_alive(old_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not is_alive(old_pid)


def test_two_stacks_serve_side_by_side(small_stack: LocalStack, repository: Path) -> None:
    deploy_on(small_stack, "twin", [repository / "scale"])
    with LocalStack() as other:
        deploy_on(other, "twin", [repository / "scale"])

        mine = MMEClient("twin", boto3_session=small_stack.boto3_session()).infer(
            "scale.tar.gz", {"INPUT0": X}
        )
        theirs = MMEClient("twin", boto3_session=other.boto3_session()).infer(
            "scale.tar.gz", {"INPUT0": 3 * X}
        )

        np.testing.assert_allclose(mine["OUTPUT0"], 2 * X)
        np.testing.assert_allclose(theirs["OUTPUT0"], 6 * X)
        other_triton, my_triton = other.triton("twin"), small_stack.triton("twin")
        assert other_triton is not None and my_triton is not None
        assert other_triton.connector.socket_path != my_triton.connector.socket_path
        assert other.account_id != small_stack.account_id
    assert other_triton is not None and other_triton.pid is None
    assert small_stack.triton("twin") is not None


def test_stack_refuses_a_target_model_for_a_single_model_endpoint(
    endpoint_by_hand: Any, small_stack: LocalStack
) -> None:
    described = endpoint_by_hand(
        small_stack,
        "single",
        {"ModelDataUrl": f"s3://{small_stack.default_bucket}/single/model.tar.gz", "Mode": "SingleModel"},
    )
    assert described["EndpointStatus"] == "InService"

    with pytest.raises(ClientError) as raw:
        small_stack.client("sagemaker-runtime").invoke_endpoint(
            EndpointName="single", TargetModel="linear.tar.gz", Body=b"{}", ContentType="application/json"
        )

    assert raw.value.response["Error"]["Code"] == "ValidationError"
    assert raw.value.response["Error"]["Message"] == (
        "Endpoint single is not a multi-model endpoint and does not support target model header."
    )


SLOW_MODEL_PY = """\
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(4)  # a model that takes a while to load

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor(
                        "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 2
                    )
                ]
            )
            for r in requests
        ]
"""


def test_stack_answers_model_not_ready_while_a_long_load_goes_on(repository: Path, tmp_path: Path) -> None:
    from botocore.config import Config

    slow = tmp_path / "slow"
    (slow / "1").mkdir(parents=True)
    (slow / "1" / "model.py").write_text(SLOW_MODEL_PY)
    config = (repository / "scale" / "config.pbtxt").read_text().replace('name: "scale"', 'name: "slow"')
    (slow / "config.pbtxt").write_text(config)
    with LocalStack(model_ready_timeout=1.0) as stack:
        deploy_on(stack, "slow", [slow])
        no_retries = stack.boto3_session().client(
            "sagemaker-runtime", config=Config(retries={"total_max_attempts": 1})
        )

        with pytest.raises(ClientError) as raw:
            no_retries.invoke_endpoint(
                EndpointName="slow",
                TargetModel="slow.tar.gz",
                Body=b'{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":[1,1,1,1]}]}',
                ContentType="application/json",
            )
        # MMEClient retries ModelNotReadyException until the load that went on has finished
        out = MMEClient("slow", boto3_session=stack.boto3_session()).infer("slow.tar.gz", {"INPUT0": X})
        runtime = stack.endpoint_runtime("slow")

        assert raw.value.response["Error"]["Code"] == "ModelNotReadyException"
        assert raw.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
        np.testing.assert_allclose(out["OUTPUT0"], X * 2)
        assert runtime is not None and runtime.loads == 1
