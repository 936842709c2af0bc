"""``mme-triton local up`` as a user runs it: a separate process, used from another through the environment.

The command runs in a child process; this test reads what it prints, exports those variables (and nothing
else from AWS) and then deploys and invokes with sessions built from the environment alone, as the AWS CLI
or a script in another shell would. Stopping the command must stop every Triton it started.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


def _descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (Triton runs in a session of its own, so walk the parents)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found.extend(children)
        frontier.extend(children)
    return found


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


class _Running:
    """The ``local up`` child process and the lines it printed so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_errors, daemon=True).start()

    def _pump_errors(self) -> None:
        # read stderr as it comes: a child blocked on a full pipe would look like a hang
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line.rstrip("\n"))

    def stopped(self, timeout: float) -> int:
        """The exit code once the process stops; if it does not within ``timeout``, its threads' stacks
        (``-X faulthandler`` prints them on SIGABRT) in the failure."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=30)
            time.sleep(0.5)  # the stderr pump catches up
            raise AssertionError(
                f"local up did not stop within {timeout}s; its stderr:\n" + "\n".join(self.errors)
            ) from None

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} not printed within {timeout}s; printed: {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.process.wait(timeout=30)
                time.sleep(0.5)  # the stderr pump catches up
                stderr = "\n".join(self.errors)
                raise AssertionError(f"local up exited ({self.process.poll()}): {self.lines}\n{stderr}")
            self.lines.append(line)

    def rest(self, timeout: float) -> list[str]:
        """The lines printed until the process closes its output."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return self.lines
            if line is None:
                return self.lines
            self.lines.append(line)


LOCAL_UP = ("local", "up", "--memory-budget", "256MiB")


def _local_up(tmp_path: Path, *extra: str) -> Iterator[_Running]:
    """``python -m mme_triton.cli local up`` in a child process with no AWS variables of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["TMPDIR"] = str(tmp_path)
    process = subprocess.Popen(
        # -X faulthandler: a child that hangs prints its threads' stacks when the test aborts it
        [sys.executable, "-X", "faulthandler", "-m", "mme_triton.cli", *LOCAL_UP, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    running = _Running(process)
    try:
        yield running
    finally:
        if process.poll() is None:  # the test failed before stopping it: do not leave it behind
            for pid in _descendants(process.pid):
                if "tritonserver" in _command_line(pid):
                    os.kill(pid, signal.SIGKILL)
            process.kill()
        process.wait(timeout=60)


@pytest.fixture
def local_up(tmp_path: Path) -> Iterator[_Running]:
    """``mme-triton local up`` in a child process."""
    yield from _local_up(tmp_path)


@pytest.fixture
def local_up_ports(tmp_path: Path) -> Iterator[_Running]:
    """``mme-triton local up --triton-ports`` in a child process."""
    yield from _local_up(tmp_path, "--triton-ports")


def _exports(lines: list[str]) -> dict[str, str]:
    exports: dict[str, str] = {}
    for line in lines:
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            exports[name] = shlex.split(value)[0]
    return exports


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_local_up_serves_another_process_through_the_printed_environment(
    local_up: _Running,
    repository: Path,
    expected_linear: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    stop_signal: signal.Signals,
    is_alive: Any,
) -> None:
    import boto3

    from mme_triton import MMEClient, deploy_mme

    local_up.wait_for("Press Ctrl-C to stop.", timeout=120)
    exports = _exports(local_up.lines)
    role = next(line.split(": ", 1)[1] for line in local_up.lines if line.startswith("execution role: "))
    url = next(line.split(": ", 1)[1] for line in local_up.lines if line.startswith("model data url: "))
    assert f"running at {exports['AWS_ENDPOINT_URL']}" in local_up.lines[0]
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"} <= set(exports)

    # another shell: only the exported variables, no profile or config file of the user's
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name, value in exports.items():
        monkeypatch.setenv(name, value)

    deploy_mme(
        "from-env",
        url,
        models=[repository / "linear", repository / "scale"],
        role=role,
        instance_type="ml.m5.xlarge",
        poll_interval=0.1,
    )
    runtime = boto3.Session().client("sagemaker-runtime")  # reads the environment now
    answer = runtime.invoke_endpoint(
        EndpointName="from-env",
        TargetModel="scale.tar.gz",
        Body=b'{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}',
        ContentType="application/json",
    )
    linear = MMEClient("from-env").infer("linear.tar.gz", {"INPUT0": X})

    assert b'"data":[2.0,4.0,6.0,8.0]' in answer["Body"].read()
    np.testing.assert_allclose(linear["OUTPUT0"], expected_linear(X), rtol=1e-6)
    started = _descendants(local_up.process.pid)
    tritons = [pid for pid in started if "tritonserver" in _command_line(pid)]
    stubs = [pid for pid in started if "triton_python_backend_stub" in _command_line(pid)]
    assert len(tritons) == 1  # the endpoint's server, with a stub process per model instance
    served = {_command_line(pid).split()[8].rsplit("_", 2)[0] for pid in stubs}  # argv[8]: instance name
    assert served == {"linear.tar.gz", "scale.tar.gz"}

    local_up.process.send_signal(stop_signal)

    assert local_up.stopped(timeout=60) == 0
    assert "stopping ..." in local_up.rest(timeout=10)
    assert [pid for pid in started if is_alive(pid)] == []


def test_local_up_triton_ports_prints_each_endpoints_ports_and_model_names(
    local_up_ports: _Running, repository: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json
    import urllib.request

    from mme_triton import MMEClient, deploy_mme

    local_up_ports.wait_for("Press Ctrl-C to stop.", timeout=120)
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    for name, value in _exports(local_up_ports.lines).items():
        monkeypatch.setenv(name, value)
    printed = dict(line.split(": ", 1) for line in local_up_ports.lines if ": " in line)
    role, url = printed["execution role"], printed["model data url"]
    deploy_mme(
        "ports", url, models=[repository / "scale"], role=role, instance_type="ml.m5.large", poll_interval=0.1
    )
    MMEClient("ports").infer("scale.tar.gz", {"INPUT0": X})

    local_up_ports.wait_for("scale.tar.gz is loaded as Triton model 'scale.tar.gz'", timeout=30)

    ports = next(line for line in local_up_ports.lines if line.startswith("endpoint ports: Triton HTTP "))
    http_url = ports.split()[4].rstrip(",")
    assert http_url.startswith("http://127.0.0.1:") and "gRPC 127.0.0.1:" in ports
    loaded = next(line for line in local_up_ports.lines if "is loaded as Triton model" in line)
    assert f"perf_analyzer -m scale.tar.gz -u {http_url.removeprefix('http://')}" in loaded
    with urllib.request.urlopen(f"{http_url}/v2/models/scale.tar.gz/stats", timeout=10) as answer:
        stats = json.loads(answer.read())
    assert stats["model_stats"][0]["inference_stats"]["success"]["count"] == 1
    local_up_ports.process.send_signal(signal.SIGINT)
    assert local_up_ports.process.wait(timeout=60) == 0
