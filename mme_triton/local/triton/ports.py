"""Triton's own endpoints, opened beside the SageMaker front-end on request (``triton_ports=True``).

A SageMaker container serves only the SageMaker front-end; the stack does the same by default. NVIDIA's
tools need Triton's own KServe v2 HTTP and gRPC endpoints (perf_analyzer asks for a model's metadata and
statistics; model-analyzer reads the metrics too), so a server can open them as well, on loopback only
(``--http-address``/``--grpc-address``/``--metrics-address``), never on another interface:

- in the server's own network namespace (:mod:`.netns`) Triton listens on its default ports
  (:data:`ISOLATED`) and :func:`forward_ports` bridges each onto a free port of this host's 127.0.0.1 with a
  :class:`~.netns.PortForward`, as the stack's tools expect an address;
- where the kernel refuses namespaces, Triton binds free ports of this host's 127.0.0.1 itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from mme_triton.local.triton._process import free_port
from mme_triton.local.triton.netns import Connector, PortForward

__all__ = ["CLOSED", "ISOLATED", "TritonPorts", "forward_ports", "port_args"]

CLOSED = ("--allow-http=false", "--allow-grpc=false", "--allow-metrics=false")
"""The arguments of a server without its own endpoints: the SageMaker front-end only."""


@dataclass(frozen=True)
class TritonPorts:
    """Triton's own endpoints of one server, on 127.0.0.1 (of its namespace, or of this host)."""

    http_port: int
    grpc_port: int
    metrics_port: int

    @classmethod
    def free(cls) -> TritonPorts:
        """Three free ports of 127.0.0.1."""
        return cls(free_port(), free_port(), free_port())

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:<port>``: KServe v2 HTTP (inference, metadata, statistics, repository)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``127.0.0.1:<port>``: KServe v2 gRPC, as tritonclient and perf_analyzer's ``-u`` take it."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """``http://127.0.0.1:<port>/metrics``: Triton's Prometheus metrics."""
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


ISOLATED = TritonPorts(8000, 8001, 8002)
"""Where Triton listens inside its own network namespace: its default HTTP, gRPC and metrics ports."""


def forward_ports(
    connector: Connector, ports: TritonPorts | None
) -> tuple[TritonPorts | None, list[PortForward]]:
    """Triton's endpoints as this host reaches them, and the forwards that bridge them.

    ``ports`` are where Triton listens; for a server in its own namespace (``connector.isolated``) each is
    forwarded onto a free port of this host's 127.0.0.1, otherwise they are this host's already.
    """
    if ports is None or not connector.isolated:
        return ports, []
    forwards: list[PortForward] = []
    try:
        for port in (ports.http_port, ports.grpc_port, ports.metrics_port):
            forwards.append(PortForward(connector, port).start())
    except BaseException:
        for forward in forwards:
            forward.stop()
        raise
    http, grpc, metrics = (forward.listen_port or 0 for forward in forwards)
    return TritonPorts(http, grpc, metrics), forwards


def port_args(ports: TritonPorts | None) -> tuple[str, ...]:
    """The ``tritonserver`` arguments that open ``ports`` on 127.0.0.1 only, or :data:`CLOSED`.

    Example:
        >>> port_args(TritonPorts(8000, 8001, 8002))[:3]
        ('--allow-http=true', '--http-address=127.0.0.1', '--http-port=8000')
        >>> port_args(None) == CLOSED
        True
    """
    if ports is None:
        return CLOSED
    return (
        "--allow-http=true",
        "--http-address=127.0.0.1",
        f"--http-port={ports.http_port}",
        "--allow-grpc=true",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={ports.grpc_port}",
        "--allow-metrics=true",
        "--metrics-address=127.0.0.1",
        f"--metrics-port={ports.metrics_port}",
    )


@dataclass(frozen=True)
class TritonEndpoints:
    """Where NVIDIA's tools reach one endpoint's Triton, and the Triton name of each loaded TargetModel.

    ``models`` maps a TargetModel (``linear.tar.gz``) to the name Triton serves it under: perf_analyzer's
    ``-m``, the ``<name>`` of ``/v2/models/<name>/infer``. It is the TargetModel itself unless the name
    holds characters the python backend cannot take (then an alias, see
    :func:`~mme_triton.local.route.names.triton_model_name`).
    """

    http_url: str
    grpc_url: str
    metrics_url: str
    models: dict[str, str]
