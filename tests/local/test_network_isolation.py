"""Nothing the embedded stack starts accepts connections from another host.

Triton's SageMaker front-end binds every interface and has no address option: the stack runs it in a
network namespace of its own (with only a loopback interface) and reaches it through a unix socket. The
tests read the kernel's socket tables; none connects to a non-loopback address to find out.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import MMEClient, deploy_mme
from mme_triton.local import LocalStack
from mme_triton.local.triton import netns
from mme_triton.local.triton._http import ConnectorHTTPConnection
from mme_triton.local.triton.netns import PortForward, namespace_problem
from mme_triton.local.triton.server import TritonServer

pytestmark = [pytest.mark.triton]

_TABLES = ("tcp", "tcp6", "udp", "udp6")


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it, from the parent pid in ``/proc/<pid>/stat``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    found = {root}
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as ``/proc/net/tcp`` writes it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _exposed_sockets(root: int) -> tuple[list[str], dict[str, int]]:
    """The sockets of ``root``'s process tree bound to an address another host could reach, and how many
    sockets of the tree each network namespace holds.

    A socket belongs to the namespace it was created in, and only that namespace's tables list it: every
    namespace of the tree is read (``/proc/<pid>/net/*`` shows the namespace of ``<pid>``). An address is
    reachable from another host only in a namespace with an interface other than ``lo``."""
    pids = _descendants(root)
    owners: dict[int, int] = {}
    namespaces: dict[str, int] = {}
    for pid in pids:
        try:
            namespaces.setdefault(os.readlink(f"/proc/{pid}/ns/net"), pid)
            owners.update(dict.fromkeys(_socket_inodes(pid), pid))
        except OSError:
            continue  # exited meanwhile
    exposed: list[str] = []
    counted: dict[str, int] = {}
    for namespace, pid in namespaces.items():
        interfaces = {
            line.split(":")[0].strip() for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
        }
        for table in _TABLES:
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                inode = int(fields[9])
                if inode not in owners:
                    continue
                counted[namespace] = counted.get(namespace, 0) + 1
                address = _address(fields[1].split(":")[0])
                if not _is_loopback(address) and interfaces != {"lo"}:
                    exe = os.path.basename(os.readlink(f"/proc/{owners[inode]}/exe"))
                    exposed.append(f"{table} {address}:{int(fields[1].split(':')[1], 16)} ({exe})")
    return exposed, counted


@pytest.fixture(scope="module", params=[False, True], ids=["sagemaker-port", "triton-ports"])
def serving(repository: Path, request: pytest.FixtureRequest) -> Iterator[LocalStack]:
    """A stack serving ``linear`` on one endpoint, with Triton's own ports open or not."""
    with LocalStack(triton_ports=request.param) as stack:
        session = stack.boto3_session()
        deploy_mme(
            "isolated",
            stack.model_data_url("isolated/"),
            models=[repository / "linear"],
            role=stack.role_arn,
            instance_type="ml.m5.large",
            poll_interval=0.1,
            boto3_session=session,
        )
        MMEClient("isolated", boto3_session=session).infer(
            "linear.tar.gz", {"INPUT0": np.ones((1, 4), np.float32)}
        )
        yield stack


@pytest.mark.moto
def test_stack_sockets_are_reachable_from_this_host_only_while_it_serves(serving: LocalStack) -> None:
    if namespace_problem() is not None:
        pytest.skip(f"this kernel refuses unprivileged network namespaces: {namespace_problem()}")
    triton = serving.triton("isolated")
    assert triton is not None and triton.pid is not None
    assert serving.loaded_models("isolated") == ["linear.tar.gz"]

    exposed, counted = _exposed_sockets(os.getpid())

    assert exposed == []
    # Triton's own sockets were seen, in its namespace, which is not this host's
    ours, theirs = os.readlink("/proc/self/ns/net"), os.readlink(f"/proc/{triton.pid}/ns/net")
    assert theirs != ours
    ports = triton.triton_ports
    # Triton's listeners: the SageMaker front-end, and HTTP, gRPC and metrics when open
    assert counted.get(theirs, 0) >= (1 if ports is None else 4)
    # the control plane's and the route's listeners, and the forwards of Triton's own ports
    assert counted.get(ours, 0) >= (2 if ports is None else 5)
    if ports is not None:  # reached through their forwards on this host's loopback
        with urllib.request.urlopen(f"{ports.http_url}/v2/models/linear.tar.gz", timeout=10) as answer:
            assert json.load(answer)["name"] == "linear.tar.gz"
        with urllib.request.urlopen(ports.metrics_url, timeout=10) as answer:
            assert b"nv_inference_count" in answer.read()
    # only the network is separate: the stack still sees the process tree, its stubs and /dev/shm
    assert os.readlink(f"/proc/{triton.pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
    stubs = triton.model_processes()
    assert {p.model.rsplit("_", 2)[0] for p in stubs} == {"linear.tar.gz"}
    assert stubs[0].shm_bytes > 0 and Path("/dev/shm", stubs[0].shm_region).exists()


def test_socket_tables_show_a_server_that_listens_on_every_interface(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The check above can fail: a server started as on a kernel without namespaces is found."""
    monkeypatch.setattr(netns, "namespace_problem", lambda: "refused for this test")
    with TritonServer(workdir=tmp_path) as server:
        exposed, _ = _exposed_sockets(os.getpid())
    assert exposed == [f"tcp 0.0.0.0:{server.port} (tritonserver)"]


def test_connector_reaches_ports_inside_the_namespace_only(tmp_path: Path) -> None:
    with TritonServer(workdir=tmp_path) as server:
        if server.connector.socket_path is None:
            pytest.skip(f"this kernel refuses unprivileged network namespaces: {namespace_problem()}")
        assert oct(server.connector.socket_path.stat().st_mode & 0o777) == "0o600"
        conn = ConnectorHTTPConnection(server.connector, 8080, timeout=5)
        conn.request("GET", "/ping")
        assert conn.getresponse().status == 200
        conn.close()
        with pytest.raises(ConnectionRefusedError):
            server.connector.connect(8000, timeout=5)  # Triton's HTTP port: off


@pytest.mark.parametrize("over", ["tcp", "unix"])
def test_port_forward_exposes_a_namespace_port_on_this_hosts_loopback(
    triton_server: TritonServer, tmp_path: Path, over: str
) -> None:
    listen_path = tmp_path / "front-end.sock" if over == "unix" else None
    with PortForward(triton_server.connector, 8080, listen_path=listen_path) as forward:
        if listen_path is not None:
            assert forward.address == str(listen_path)
            conn: http.client.HTTPConnection = _UnixHTTPConnection(listen_path)
        else:
            assert forward.address.startswith("127.0.0.1:")
            conn = http.client.HTTPConnection("127.0.0.1", forward.listen_port, timeout=5)
        for _ in range(3):  # one connection, kept alive, relayed both ways
            conn.request("GET", "/ping")
            response = conn.getresponse()
            assert response.status == 200
            response.read()
        conn.close()
    if listen_path is not None:
        assert not listen_path.exists()


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=5)
        self._path = path

    def connect(self) -> None:
        import socket

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(self._path))


@pytest.fixture(scope="module")
def triton_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with TritonServer(workdir=tmp_path_factory.mktemp("forward")) as server:
        yield server


_REFUSED = textwrap.dedent(
    """
    import json, logging, sys
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append((record.levelname, record.getMessage()))
    logging.getLogger("mme_triton").addHandler(handler)
    logging.getLogger("mme_triton").setLevel(logging.INFO)
    from mme_triton.local.triton._http import ConnectorHTTPConnection
    from mme_triton.local.triton.server import TritonServer
    answers = []
    with TritonServer(workdir=__import__("pathlib").Path(sys.argv[1])) as first:
        with TritonServer(workdir=__import__("pathlib").Path(sys.argv[1])) as second:
            for server in (first, second):
                conn = ConnectorHTTPConnection(server.connector, server.port, timeout=5)
                conn.request("GET", "/ping")
                answers.append([server.port, server.connector.socket_path is None,
                                conn.getresponse().status])
    print(json.dumps({"answers": answers, "records": records}))
    """
)


def test_triton_server_without_namespaces_starts_and_says_once_which_port_the_network_reaches(
    tmp_path: Path,
) -> None:
    """A kernel that refuses unprivileged namespaces is played by a user namespace whose
    ``user.max_user_namespaces`` is 0: ``unshare`` fails there as it does on such kernels."""
    if namespace_problem() is not None:
        pytest.skip("needs a user namespace to play the refusing kernel in")
    script = tmp_path / "refused.py"
    script.write_text(_REFUSED)
    shell = f"echo 0 > /proc/sys/user/max_user_namespaces && exec {sys.executable} {script} {tmp_path}"
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", shell],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    (first_port, first_plain, first_status), (second_port, second_plain, second_status) = result["answers"]
    assert first_plain and second_plain and first_status == second_status == 200
    warnings = [message for level, message in result["records"] if level == "WARNING"]
    assert len(warnings) == 1
    assert f"SageMaker port {first_port} accepts connections from other hosts" in warnings[0]
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in warnings[0]
    assert "No space left on device" in warnings[0]  # unshare's own reason
    infos = [message for level, message in result["records"] if level == "INFO"]
    assert any(f"port {second_port} accepts connections from the network" in m for m in infos)
