"""What the stack tells about its Tritons: their own ports (``triton_ports=True``), the Triton name of each
TargetModel, how long each load took by part, and unloading a model on request."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import MMEClient, deploy_mme
from mme_triton.local import LocalStack

pytestmark = [pytest.mark.triton, pytest.mark.moto]

ENDPOINT = "ports"
X = np.ones((1, 4), dtype=np.float32)


@pytest.fixture(scope="module")
def served(repository: Path) -> Iterator[dict[str, Any]]:
    """A stack with Triton's ports open and an endpoint that has served ``linear`` and ``scale`` once."""
    with LocalStack(triton_ports=True) as stack:
        session = stack.boto3_session()
        deploy_mme(
            ENDPOINT,
            stack.model_data_url("ports/"),
            models=[repository / "linear", repository / "scale"],
            role=stack.role_arn,
            instance_type="ml.m5.large",
            poll_interval=0.1,
            boto3_session=session,
        )
        client = MMEClient(ENDPOINT, boto3_session=session)
        for target in ("linear.tar.gz", "scale.tar.gz"):
            client.infer(target, {"INPUT0": X})
        yield {"stack": stack, "client": client}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = answer.read()
        return json.loads(body) if answer.headers.get_content_type() == "application/json" else body


def test_stack_triton_endpoints_name_each_loaded_target_model(served: dict[str, Any]) -> None:
    found = served["stack"].triton_endpoints(ENDPOINT)
    assert found is not None
    assert found.models == {"linear.tar.gz": "linear.tar.gz", "scale.tar.gz": "scale.tar.gz"}
    assert found.http_url.startswith("http://127.0.0.1:")
    assert found.grpc_url.startswith("127.0.0.1:")
    metadata = _get(f"{found.http_url}/v2/models/linear.tar.gz")
    assert metadata["name"] == "linear.tar.gz" and metadata["inputs"][0]["name"] == "INPUT0"
    stats = _get(f"{found.http_url}/v2/models/scale.tar.gz/stats")
    assert stats["model_stats"][0]["inference_stats"]["success"]["count"] >= 1
    assert b"nv_inference_count" in _get(found.metrics_url)
    assert served["stack"].triton_endpoints("no-such-endpoint") is None


def _listening(ports: set[int]) -> dict[int, str]:
    """Local address of each listening TCP socket on ``ports``, from the kernel's own table."""
    found: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(port, 16) in ports:  # 0A: LISTEN
                found[int(port, 16)] = address
    return found


# 127.0.0.1 as /proc/net/tcp writes it, and as tcp6 does (IPv4-mapped ::ffff:127.0.0.1, gRPC's choice)
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


def test_stack_triton_ports_listen_on_loopback_only(served: dict[str, Any]) -> None:
    triton = served["stack"].triton(ENDPOINT)
    ports = triton.triton_ports
    wanted = {ports.http_port, ports.grpc_port, ports.metrics_port}
    listening = _listening(wanted)
    assert set(listening) == wanted
    assert {port: address for port, address in listening.items() if address not in LOOPBACK} == {}


def test_stack_load_timings_split_the_cold_start(served: dict[str, Any]) -> None:
    timings = served["stack"].load_timings(ENDPOINT)
    assert set(timings) == {"linear.tar.gz", "scale.tar.gz"}
    for part in timings.values():
        assert part.download_s > 0 and part.extract_s > 0 and part.load_s > 0
        assert part.wait_s >= 0 and not part.from_volume
        assert part.total_s == pytest.approx(part.download_s + part.extract_s + part.wait_s + part.load_s)
        assert part.unload_s is None


def test_stack_unload_model_unloads_now_and_the_next_request_loads_again(served: dict[str, Any]) -> None:
    stack, client = served["stack"], served["client"]
    runtime = stack.endpoint_runtime(ENDPOINT)
    loads, evictions, downloads = runtime.loads, runtime.evictions, runtime.downloads

    assert stack.unload_model(ENDPOINT, "scale.tar.gz") is True

    assert stack.loaded_models(ENDPOINT) == ["linear.tar.gz"]
    unloaded = stack.load_timings(ENDPOINT)["scale.tar.gz"]
    assert unloaded.unload_s is not None and unloaded.unload_s > 0
    assert stack.unload_model(ENDPOINT, "scale.tar.gz") is False
    assert stack.unload_model("no-such-endpoint", "scale.tar.gz") is False
    np.testing.assert_allclose(client.infer("scale.tar.gz", {"INPUT0": X})["OUTPUT0"], 2 * X)
    assert (runtime.loads, runtime.evictions) == (loads + 1, evictions)  # asked for, not evicted
    reloaded = stack.load_timings(ENDPOINT)["scale.tar.gz"]
    assert reloaded.unload_s is None  # the new load's parts
    # its copy stayed on the endpoint's volume: loaded again without a download or an extraction
    assert runtime.downloads == downloads and "scale.tar.gz" in runtime.volume_models()
    assert reloaded.from_volume and (reloaded.download_s, reloaded.extract_s) == (0.0, 0.0)
    assert reloaded.load_s > 0
