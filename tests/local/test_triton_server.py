"""TritonServer: a real tritonserver from nvidia-pytriton with its SageMaker front-end in multi-model mode."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from triton_fixtures import (
    json_outputs,
    json_request,
    linear_expected,
    make_linear_model,
    make_python_model,
    triton,
)

import mme_triton.local.triton.server as triton_module
from mme_triton.errors import LocalStackError
from mme_triton.local.triton import netns
from mme_triton.local.triton._http import ConnectorHTTPConnection
from mme_triton.local.triton.procfs import stack_shm_prefix
from mme_triton.local.triton.server import TritonLoadError, TritonServer, find_triton

pytestmark = pytest.mark.triton

__all__ = ["triton"]  # the fixture, imported for pytest


def _hash() -> str:
    return uuid.uuid4().hex


def _get(server: TritonServer, path: str) -> int:
    conn = ConnectorHTTPConnection(server.connector, server.port or 0, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def test_find_triton_locates_the_wheels_binary_libs_and_stubs() -> None:
    found = find_triton()
    assert found.server.is_file()
    assert (found.backends / "python" / "libtriton_python.so").is_file()
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert (found.stubs / version / "triton_python_backend_stub").is_file()
    assert found.libs.name == "nvidia_pytriton.libs"


def test_find_triton_without_pytriton_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytriton" else real_find_spec(name, *a)
    )
    with pytest.raises(LocalStackError, match=r"pip install 'mme-triton\[local\]'"):
        find_triton()


def test_triton_server_answers_ping_in_its_own_network_namespace(triton: TritonServer) -> None:
    assert triton.port == 8080  # SageMaker's container port, inside the namespace
    assert triton.connector.socket_path is not None
    assert _get(triton, "/ping") == 200
    assert triton.pid is not None
    assert triton.log_path.is_file()


def test_triton_server_loads_invokes_and_unloads_an_onnx_model(triton: TritonServer, tmp_path: Path) -> None:
    root = make_linear_model(tmp_path / "extracted")
    model_hash = _hash()
    triton.load(model_hash, root, "linear.tar.gz")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    status, headers, body = triton.invoke(
        model_hash, "linear.tar.gz", json_request({"INPUT0": x}), "application/json"
    )

    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["model_name"] == "linear.tar.gz"
    np.testing.assert_allclose(json_outputs(body)["OUTPUT0"], linear_expected(x), rtol=1e-6)

    triton.unload(model_hash)
    status, _, _ = triton.invoke(model_hash, "linear.tar.gz", json_request({"INPUT0": x}), "application/json")
    assert status == 404


def test_triton_server_load_twice_is_not_an_error(triton: TritonServer, tmp_path: Path) -> None:
    root = make_python_model(tmp_path / "extracted")
    model_hash = _hash()
    triton.load(model_hash, root, "add_one.tar.gz")
    triton.load(model_hash, root, "add_one.tar.gz")  # 409 from Triton: already loaded

    status, _, body = triton.invoke(
        model_hash, "add_one.tar.gz", json_request({"X": np.array([1, 2], np.int32)}), "application/json"
    )

    assert status == 200, body
    np.testing.assert_array_equal(json_outputs(body)["Y"], [2, 3])
    triton.unload(model_hash)


def test_triton_server_unload_of_an_unknown_hash_is_not_an_error(triton: TritonServer) -> None:
    triton.unload(_hash(), target_model="never-loaded.tar.gz")


def test_triton_server_load_failure_carries_status_and_tritons_message(
    triton: TritonServer, tmp_path: Path
) -> None:
    root = tmp_path / "extracted"
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "config.pbtxt").write_text('backend: "no_such_backend"\n')

    with pytest.raises(TritonLoadError) as caught:
        triton.load(_hash(), root, "broken.tar.gz")

    assert caught.value.status == 400
    assert "no_such_backend" in caught.value.message


def test_triton_server_invoke_returns_tritons_error_unchanged(triton: TritonServer, tmp_path: Path) -> None:
    root = make_linear_model(tmp_path / "extracted")
    model_hash = _hash()
    triton.load(model_hash, root, "linear.tar.gz")
    bad = json_request({"BAD": np.zeros((1, 4), np.float32)})

    status, _, body = triton.invoke(model_hash, "linear.tar.gz", bad, "application/json")

    assert status == 400
    assert "BAD" in json.loads(body)["error"]
    triton.unload(model_hash)


def test_triton_server_model_processes_reports_stub_memory(triton: TritonServer, tmp_path: Path) -> None:
    root = make_python_model(tmp_path / "extracted", name="memory_probe")
    model_hash = _hash()
    triton.load(model_hash, root, "memory_probe.tar.gz")

    stubs = [p for p in triton.model_processes() if p.model.startswith("memory_probe.tar.gz")]

    assert len(stubs) == 1  # instance_group count 1
    assert stubs[0].rss_bytes > 1_000_000
    assert stubs[0].model_path.startswith(str(root))
    assert triton.rss_bytes() > 1_000_000
    triton.unload(model_hash)


def test_triton_servers_run_side_by_side_and_stop_cleanly(tmp_path: Path) -> None:
    first = TritonServer(workdir=tmp_path)
    second = TritonServer(workdir=tmp_path)
    with first, second:
        assert first.connector.socket_path != second.connector.socket_path
        assert _get(first, "/ping") == _get(second, "/ping") == 200
        pids = (first.pid, second.pid)
    assert first.pid is None and second.pid is None
    assert all(pid is not None and not Path(f"/proc/{pid}").exists() for pid in pids)
    assert list(tmp_path.iterdir()) == []  # scratch directories removed
    first.stop()  # idempotent


def test_triton_server_start_failure_raises_with_the_log_tail(tmp_path: Path) -> None:
    server = TritonServer(workdir=tmp_path, extra_args=["--no-such-option=1"])

    with pytest.raises(LocalStackError, match="no-such-option"):
        server.start()

    assert server.pid is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"extra_args": "--log-verbose=1"}, TypeError),
        ({"log_verbose": -1}, ValueError),
        ({"startup_timeout": 0}, ValueError),
    ],
    ids=["extra-args-string", "negative-verbosity", "zero-timeout"],
)
def test_triton_server_rejects_misuse(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        TritonServer(**kwargs)  # type: ignore[arg-type]


def test_triton_server_retries_when_its_port_is_taken_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without network namespaces (a kernel that refuses them) the server takes a free port of this host."""
    monkeypatch.setattr(netns, "namespace_problem", lambda: "refused for this test")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        offered = iter([taken])
        real_free_port = triton_module.free_port
        monkeypatch.setattr(triton_module, "free_port", lambda: next(offered, None) or real_free_port())

        with TritonServer(workdir=tmp_path) as server:
            assert server.port != taken
            assert server.connector.socket_path is None
            assert _get(server, "/ping") == 200


def test_server_start_removes_regions_a_killed_stack_left_in_dev_shm(tmp_path: Path) -> None:
    """A process that is SIGKILLed cannot remove its servers' python-backend regions; the next server
    started on the machine removes those of processes that no longer run, and only those."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead_pid = int(finished.stdout)
    live_pid = os.getppid()  # a process that runs, not this one
    shm = Path("/dev/shm")
    orphan = shm / f"{stack_shm_prefix(dead_pid)}0123abcd_{uuid.uuid4()}"
    alive = shm / f"{stack_shm_prefix(live_pid)}0123abcd_{uuid.uuid4()}"
    unrelated = shm / f"mme_triton_notes_{uuid.uuid4()}"
    for region in (orphan, alive, unrelated):
        region.write_bytes(b"\0" * 4096)
    try:
        with TritonServer(workdir=tmp_path) as server:
            assert server.shm_prefix.startswith(stack_shm_prefix())
            assert not orphan.exists()
            assert alive.exists() and unrelated.exists()
    finally:
        for region in (orphan, alive, unrelated):
            region.unlink(missing_ok=True)
