"""What users bring and do, against ``mme-triton local up`` run as they run it: a separate process, reached
from this one through the variables it prints, with plain boto3 calls as AWS's sample notebooks make them.

- a TorchScript model and an ONNX model on one endpoint;
- an endpoint with the full Environment of AWS's multi-model samples (unknown variables, a single-model
  variable, a 2 GiB shared-memory request, here under a ``--shm-limit`` of 4 MiB): it serves, and what
  the machine committed (``/dev/shm``, the stubs' memory) is measured;
- Triton killed mid-traffic: the calls in flight get SageMaker's error shape, later calls succeed;
- a gzip bomb, an archive of 100,000 members and one bigger than the limit: refused, nothing left;
- eviction churn: more models than the stack keeps loaded, every answer checked against its request.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from mme_triton import MMEClient, deploy_mme, encode_request, upload_models
from mme_triton.local.triton.procfs import stack_shm_prefix

pytestmark = [pytest.mark.triton, pytest.mark.moto]
# each test drives a whole endpoint through local up: dealt into 2 xdist groups (tests/conftest.py)
XDIST_GROUPS = 2

MiB = 1024 * 1024
SHM_LIMIT = 4 * MiB
REQUESTED_SHM = 2 * 1024 * MiB
# AWS's RoBERTa and ResNet MME samples, every variable they set; the shared memory is the size a CI machine
# survives if the ceiling were missing (the samples ask for 16 GB).
AWS_SAMPLE_ENVIRONMENT = {
    "SAGEMAKER_TRITON_BATCH_SIZE": "16",
    "SAGEMAKER_TRITON_MAX_BATCH_DELAY": "1000",
    "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": str(REQUESTED_SHM),
    "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "104857600",
    "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
    "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "resnet",
    "SAGEMAKER_TRITON_THREAD_COUNT": "10",
    "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "5",
}
IMAGE = "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"


# -- the local up process -------------------------------------------------------------------------------


def _tree(pid: int) -> list[int]:
    """Every live process under ``pid`` (Triton runs in a session of its own, so walk the parents)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if fields and fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        here = frontier.pop()
        children = [child for child, parent in parents.items() if parent == here]
        found.extend(children)
        frontier.extend(children)
    return found


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def _anon_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


class LocalUp:
    """``mme-triton local up`` in a child process, its printed lines and its log."""

    def __init__(self, tmp: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["TMPDIR"] = str(tmp)
        self.log = tmp / "local-up.log"
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mme_triton.cli", "-v", "local", "up", *args],
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"local up exited: {self.lines}\n{self.log.read_text()}")
            self.lines.append(line)

    def exports(self) -> dict[str, str]:
        found = {}
        for line in self.lines:
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                found[name] = shlex.split(value)[0]
        return found

    def printed(self, prefix: str) -> str:
        return next(line.split(": ", 1)[1] for line in self.lines if line.startswith(prefix))

    def tritons(self) -> list[int]:
        return [pid for pid in _tree(self.process.pid) if _argv(pid)[0].endswith("tritonserver")]

    def stubs(self) -> list[list[str]]:
        return [
            argv
            for pid in _tree(self.process.pid)
            if (argv := _argv(pid)) and argv[0].endswith("triton_python_backend_stub")
        ]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                for pid in _tree(self.process.pid):
                    os.kill(pid, signal.SIGKILL)
                self.process.kill()
                self.process.wait(timeout=30)
        self._log_file.close()


@pytest.fixture(scope="module")
def local_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalUp]:
    """``local up`` with small limits, and this process's environment set to reach it (and only it)."""
    tmp = tmp_path_factory.mktemp("local-up")
    running = LocalUp(
        tmp,
        "--shm-limit",
        "4MiB",
        "--max-unpacked-bytes",
        "8MiB",
        "--max-models",
        "2",
        "--bucket",
        "users-bucket",
    )
    with pytest.MonkeyPatch.context() as patch:
        try:
            running.wait_for("Press Ctrl-C to stop.", timeout=120)
            for name in [k for k in os.environ if k.startswith("AWS_")]:
                patch.delenv(name)
            patch.setenv("AWS_CONFIG_FILE", str(tmp / "no-config"))
            patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp / "no-credentials"))
            for name, value in running.exports().items():
                patch.setenv(name, value)
            yield running
        finally:
            running.stop()


def _boto(service: str, **config: Any) -> Any:
    """A client from a new session, which reads the environment now (boto3.client() would reuse a
    default session, and credentials, another test resolved before)."""
    import boto3

    return boto3.Session().client(service, config=Config(**config) if config else None)


def _create_endpoint(
    name: str, local_up: LocalUp, environment: dict[str, str], prefix: str
) -> dict[str, Any]:
    """CreateModel, CreateEndpointConfig and CreateEndpoint as the sample notebooks call them."""
    sagemaker = _boto("sagemaker")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=local_up.printed("execution role"),
        PrimaryContainer={
            "Image": IMAGE,
            "ModelDataUrl": f"s3://users-bucket/{prefix}",
            "Mode": "MultiModel",
            "Environment": environment,
        },
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.g5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    sagemaker.get_waiter("endpoint_in_service").wait(
        EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )
    return dict(sagemaker.describe_endpoint(EndpointName=name))


def _json_invoke(
    runtime: Any, endpoint: str, target_model: str, x: np.ndarray[Any, Any], name: str = "INPUT0"
) -> Any:
    body, content_type = encode_request({name: x}, binary=False)
    answer = runtime.invoke_endpoint(
        EndpointName=endpoint, TargetModel=target_model, Body=bytes(body), ContentType=content_type
    )
    return json.loads(answer["Body"].read())


# -- models ---------------------------------------------------------------------------------------------


def _scale_by(repository: Path, factor: int) -> Path:
    """A python model ``OUTPUT0 = factor * INPUT0`` named ``times<factor>``."""
    name = f"times{factor}"
    model = repository / name
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(
        "import numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor('OUTPUT0', "
        f"(pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy() * {factor}).astype(np.float32))]) "
        "for r in requests]\n"
    )
    (model / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    return model


# -- the tests ------------------------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")
def test_local_up_serves_a_torchscript_and_an_onnx_model_on_one_endpoint(
    local_up: LocalUp, repository: Path, expected_linear: Any, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")

    class Affine(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return x * 2 + 1

    affine = tmp_path / "affine"
    (affine / "1").mkdir(parents=True)
    torch.jit.trace(Affine(), torch.zeros(1, 3)).save(str(affine / "1" / "model.pt"))
    (affine / "config.pbtxt").write_text(
        'platform: "pytorch_libtorch"\nmax_batch_size: 8\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
    )
    url = local_up.printed("model data url").replace("models/", "torch-onnx/")
    deploy_mme(
        "torch-onnx",
        url,
        models=[affine, repository / "linear"],
        role=local_up.printed("execution role"),
        instance_type="ml.m5.xlarge",
        poll_interval=0.2,
    )
    client = MMEClient("torch-onnx")
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8

    torchscript = client.infer("affine.tar.gz", {"INPUT__0": x[:, :3]})
    onnx = client.infer("linear.tar.gz", {"INPUT0": x})

    np.testing.assert_allclose(torchscript["OUTPUT__0"], x[:, :3] * 2 + 1)
    np.testing.assert_allclose(onnx["OUTPUT0"], expected_linear(x), rtol=1e-6)
    served = {argv[8].rsplit("_", 2)[0] for argv in local_up.stubs()}
    assert {"affine.tar.gz", "linear.tar.gz"} <= served


def test_local_up_serves_an_aws_sample_environment_within_its_memory_limits(
    local_up: LocalUp, repository: Path, expected_linear: Any
) -> None:
    url = local_up.printed("model data url").replace("models/", "aws-sample/")
    upload_models([repository / "linear", repository / "scale"], url)
    described = _create_endpoint("aws-sample", local_up, AWS_SAMPLE_ENVIRONMENT, "aws-sample/")
    runtime = _boto("sagemaker-runtime")
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8

    linear = _json_invoke(runtime, "aws-sample", "linear.tar.gz", x)
    scale = _json_invoke(runtime, "aws-sample", "scale.tar.gz", x)

    assert described["EndpointStatus"] == "InService"
    np.testing.assert_allclose(
        np.reshape(linear["outputs"][0]["data"], (2, 3)), expected_linear(x), rtol=1e-6
    )
    assert scale["outputs"][0]["data"] == (x * 2).ravel().tolist()
    # what the machine committed for the model instances: /dev/shm regions within the ceiling (without
    # it, 2 GiB each), the sizes each stub was started with, and the stubs' own memory
    stubs = [argv for argv in local_up.stubs() if "/aws-sample-" in argv[1]]
    regions = [os.stat(f"/dev/shm/{argv[2]}").st_blocks * 512 for argv in stubs]
    assert {argv[8].rsplit("_", 2)[0] for argv in stubs} == {"linear.tar.gz", "scale.tar.gz"}
    assert max(regions) <= SHM_LIMIT and sum(regions) <= SHM_LIMIT * len(stubs)
    assert all(int(argv[3]) == SHM_LIMIT and int(argv[4]) == SHM_LIMIT for argv in stubs)
    pids = [pid for pid in _tree(local_up.process.pid) if "/aws-sample-" in " ".join(_argv(pid)[:2])]
    assert pids and max(_anon_bytes(pid) for pid in pids) < 512 * MiB
    log = local_up.log.read_text()
    assert f"shm-default-byte-size lowered from {REQUESTED_SHM} to {SHM_LIMIT}" in log
    assert "shm-growth-byte-size lowered from 104857600" in log
    assert "ignoring SAGEMAKER_TRITON_MAX_BATCH_DELAY: the serve script does not read it" in log
    assert (
        "ignoring SAGEMAKER_TRITON_DEFAULT_MODEL_NAME: the serve script reads it in single-model mode" in log
    )


def test_local_up_starts_a_killed_triton_again_and_later_calls_succeed(
    local_up: LocalUp, repository: Path
) -> None:
    url = local_up.printed("model data url").replace("models/", "crash/")
    upload_models([repository / "scale"], url)
    _create_endpoint("crash", local_up, {}, "crash/")
    runtime = _boto("sagemaker-runtime", retries={"total_max_attempts": 1})
    x = np.ones((1, 4), dtype=np.float32)
    _json_invoke(runtime, "crash", "scale.tar.gz", x)  # loaded
    before = set(local_up.tritons())
    outcomes: list[str] = []
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            try:
                answer = _json_invoke(runtime, "crash", "scale.tar.gz", x)
                outcomes.append("ok" if answer["outputs"][0]["data"] == [2.0] * 4 else "WRONG")
            except ClientError as exc:
                outcomes.append(exc.response["Error"]["Code"])
            time.sleep(0.01)

    threads = [threading.Thread(target=traffic) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    crashed_at = len(outcomes)
    triton = next(pid for pid in before if "crash" in " ".join(_argv(pid)))
    os.kill(triton, signal.SIGKILL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and outcomes[crashed_at:][-20:].count("ok") < 20:
        time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)

    after_crash = outcomes[crashed_at:]
    assert "ok" in outcomes[:crashed_at]
    assert set(after_crash) <= {"ok", "ServiceUnavailable", "ModelNotReadyException"}, after_crash
    assert "ServiceUnavailable" in after_crash
    assert after_crash[-20:] == ["ok"] * 20
    assert _boto("sagemaker").describe_endpoint(EndpointName="crash")["EndpointStatus"] == "InService"
    assert triton not in local_up.tritons()
    live_regions = {argv[2] for argv in local_up.stubs()}
    prefix = stack_shm_prefix(local_up.process.pid)  # local up runs in this PID namespace
    assert {name for name in os.listdir("/dev/shm") if name.startswith(prefix)} == live_regions


def _gzip_bomb(unpacked: int) -> bytes:
    header = tarfile.TarInfo("bomb/1/model.onnx")
    header.size = unpacked
    mib = gzip.compress(b"\0" * MiB, compresslevel=9)
    return (
        gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT))
        + mib * (unpacked // MiB)
        + gzip.compress(b"\0" * 1024)
    )


def _many_members(count: int) -> bytes:
    template = bytearray(tarfile.TarInfo("m/f0000000").tobuf(format=tarfile.GNU_FORMAT))
    template[148:156] = b" " * 8
    base = sum(template) - sum(template[0:10])
    blocks = []
    for index in range(count):
        name = f"m/f{index:07d}".encode()
        block = template[:]
        block[0:10] = name
        block[148:155] = f"{base + sum(name):06o}\0".encode()
        blocks.append(bytes(block))
    return gzip.compress(b"".join(blocks) + b"\0" * 1024, compresslevel=1)


def _too_big() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        data = os.urandom(9 * MiB)  # over local up's --max-unpacked-bytes 8MiB, incompressible
        info = tarfile.TarInfo("big/1/model.onnx")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda: _gzip_bomb(4 * 1024 * MiB), "the archive unpacks to more than 8.0 MiB"),
        (lambda: _many_members(100_000), "more than 10000 entries"),
        (_too_big, "more than the 8.0 MiB it may unpack to"),
    ],
    ids=["gzip-bomb", "100000-members", "bigger-than-the-limit"],
)
def test_local_up_refuses_hostile_archives_early_and_leaves_nothing(
    local_up: LocalUp, repository: Path, build: Any, reason: str, request: pytest.FixtureRequest
) -> None:
    name = f"hostile-{request.node.callspec.id}"
    prefix = f"{name}/"
    upload_models([repository / "scale"], local_up.printed("model data url").replace("models/", prefix))
    _create_endpoint(name, local_up, {}, prefix)
    archive = build()
    _boto("s3").put_object(Bucket="users-bucket", Key=f"{prefix}hostile.tar.gz", Body=archive)
    runtime = _boto("sagemaker-runtime")

    with pytest.raises(ClientError) as raw:
        _json_invoke(runtime, name, "hostile.tar.gz", np.ones((1, 4), np.float32))

    assert len(archive) < 16 * MiB
    assert raw.value.response["Error"]["Code"] == "ValidationError"
    assert reason in raw.value.response["Error"]["Message"]
    scratch = Path(local_up.log.parent)
    assert not [p for p in scratch.rglob("models/*") if p.name == _md5("hostile.tar.gz")]
    assert (
        _json_invoke(runtime, name, "scale.tar.gz", np.ones((1, 4), np.float32))["outputs"][0]["data"]
        == [2.0] * 4
    )


def _md5(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode()).hexdigest()


def test_local_up_eviction_churn_answers_every_request_with_its_own_model(
    local_up: LocalUp, tmp_path: Path
) -> None:
    factors = [2, 3, 4, 5, 6]  # five models; local up keeps two loaded
    models = [_scale_by(tmp_path, factor) for factor in factors]
    url = local_up.printed("model data url").replace("models/", "churn/")
    deploy_mme(
        "churn", url, models=models, role=local_up.printed("execution role"), instance_type="ml.m5.large"
    )
    client = MMEClient("churn", max_concurrency=8)
    rng = np.random.default_rng(0)
    plan = [
        (int(rng.integers(len(factors))), rng.standard_normal((1, 4)).astype(np.float32)) for _ in range(48)
    ]

    def call(step: tuple[int, np.ndarray[Any, Any]]) -> bool:
        index, x = step
        out = client.infer(f"times{factors[index]}.tar.gz", {"INPUT0": x})
        return bool(np.allclose(out["OUTPUT0"], x * factors[index]))

    with ThreadPoolExecutor(max_workers=8) as pool:
        verdicts = list(pool.map(call, plan))

    assert verdicts == [True] * len(plan)
