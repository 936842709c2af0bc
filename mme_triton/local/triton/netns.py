"""Keeping a server off the network: its own network namespace, reached through a unix socket.

Triton 2.51's SageMaker front-end binds ``0.0.0.0`` (it has no address option) and has no authentication;
anyone who reaches its port can load a model from any local directory and so run a python model's code.
On SageMaker that port sits inside the service's network; on a laptop it would be on every interface. So
the stack runs ``tritonserver`` in a network namespace of its own, which has nothing but its own loopback
interface, created without privileges together with a user namespace
(``unshare --user --map-root-user --net``). PIDs, the filesystem and ``/dev/shm`` stay shared: the stack
still sees the server's stub processes, their memory and their shared-memory regions, and can signal them.

- :func:`namespace_problem` says, once per process, whether this kernel lets an unprivileged user do that.
- :func:`isolated_command` wraps a command so that it runs in a fresh namespace, beside a *connector*
  listening on a filesystem unix socket (which processes outside the namespace can reach).
- :class:`Connector` opens TCP connections to ports inside the namespace through that socket: the
  connector connects inside and hands the connected socket back (``SCM_RIGHTS``), so requests then go
  straight to the server, with no process relaying them.
- :class:`PortForward` makes one port inside the namespace reachable on ``127.0.0.1`` of this host (a TCP
  port, or a unix socket), for tools that can only be given an address (``perf_analyzer``).

Where the kernel refuses unprivileged namespaces, the server runs in this host's namespace and a
:class:`Connector` without a socket connects to ``127.0.0.1:<port>`` directly.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "ALLOW_NAMESPACES_HINT",
    "ISOLATED_PORT",
    "Connector",
    "PortForward",
    "isolated_command",
    "namespace_problem",
    "placement",
    "warn_reachable",
]

logger = logging.getLogger("mme_triton.local.triton.server")

ISOLATED_PORT = 8080
"""The port a server listens on inside its own network namespace: SageMaker's container port."""

_HELPER = Path(__file__).with_name("_netns_helper.py")
_NETLINK_SOCK_DIAG = 4
_reachable_warned = threading.Event()

ALLOW_NAMESPACES_HINT = (
    "to allow unprivileged user namespaces: `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "
    "(Ubuntu 23.10 and later), `sysctl -w kernel.unprivileged_userns_clone=1` (older Debian kernels), "
    "`sysctl -w user.max_user_namespaces=15000` (where it is 0); and install `unshare` (util-linux)"
)
"""How to let an unprivileged user create user and network namespaces, for messages."""


def _unshare_prefix() -> list[str] | None:
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    return [unshare, "--user", "--map-root-user", "--net"]


@functools.lru_cache(maxsize=1)
def namespace_problem() -> str | None:
    """Why this process cannot run a server in an unprivileged user + network namespace, ``None`` if it can.

    Checked once per process by doing it: ``unshare --user --map-root-user --net`` runs the helper, which
    brings the namespace's loopback interface up and exits.
    """
    prefix = _unshare_prefix()
    if prefix is None:
        return "`unshare` (util-linux) is not installed"
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-I", "-S", str(_HELPER), "--probe"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare` could not run: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return reason[-1] if reason else f"`unshare` exited with status {done.returncode}"
    return None


def placement(socket_directory: str) -> tuple[Connector, str | None]:
    """How a new server is reached: through ``<socket_directory>/triton.sock`` into a namespace of its own,
    or, where :func:`namespace_problem` says the kernel refuses, on this host (with that reason)."""
    problem = namespace_problem()
    if problem is not None:
        return Connector(None), problem
    socket_path = Path(socket_directory) / "triton.sock"
    socket_path.unlink(missing_ok=True)
    return Connector(socket_path), None


def isolated_command(command: Sequence[str], socket_path: Path) -> list[str]:
    """``command`` run in a fresh user + network namespace, with a connector at ``socket_path``.

    The process keeps its pid through ``unshare`` and the helper (both ``exec``), so the caller's
    :class:`subprocess.Popen` is the command's own process. Only call it when :func:`namespace_problem`
    returns ``None``.
    """
    prefix = _unshare_prefix()
    if prefix is None:
        raise RuntimeError("unshare is not installed")
    return [*prefix, sys.executable, "-I", "-S", str(_HELPER), str(socket_path), "--", *command]


class Connector:
    """Opens TCP connections to the ports of a server, inside its network namespace or on this host.

    Parameters:
        socket_path: the connector's unix socket (see :func:`isolated_command`); ``None`` for a server in
            this host's namespace, reached at ``127.0.0.1``.

    Example::

        sock = Connector(Path("/tmp/x/triton.sock")).connect(8080, timeout=5.0)
    """

    def __init__(self, socket_path: Path | None = None) -> None:
        self.socket_path = socket_path

    @property
    def isolated(self) -> bool:
        """Whether the ports are inside a network namespace of their own."""
        return self.socket_path is not None

    def connect(self, port: int, *, timeout: float | None = None) -> socket.socket:
        """A TCP socket connected to ``127.0.0.1:<port>`` where the server runs (blocking, ``timeout`` set,
        ``TCP_NODELAY`` on: small requests and answers are not held back waiting for acknowledgements).

        Raises:
            OSError: the connector or the port refused, or the connection timed out.
        """
        sock = self._connect(port, timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def where(self, port: int) -> str:
        """Where ``port`` is, in words (for messages)."""
        if self.socket_path is not None:
            return f"port {port} of its own network namespace (via {self.socket_path})"
        return f"port {port} of every interface"

    def diag_socket(self, *, timeout: float | None = None) -> socket.socket:
        """A ``sock_diag`` netlink socket of the server's network namespace: it looks up the sockets there
        (:mod:`mme_triton.local.triton.frontend` finds the server side of a connection with it).

        Raises:
            OSError: the connector refused.
        """
        if self.socket_path is None:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
        return self._receive(b"diag\n", "a sock_diag socket", timeout)

    def _connect(self, port: int, timeout: float | None) -> socket.socket:
        if self.socket_path is None:
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)
        sock = self._receive(f"{port}\n".encode(), f"a connection to port {port}", timeout)
        sock.settimeout(timeout)
        return sock

    def _receive(self, request: bytes, what: str, timeout: float | None) -> socket.socket:
        """Ask the connector for a socket of the namespace; it comes back as a file descriptor."""
        assert self.socket_path is not None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
            control.settimeout(timeout)
            control.connect(str(self.socket_path))
            control.sendall(request)
            message, fds, _, _ = socket.recv_fds(control, 64, 1)
        if not fds:
            text = message.decode("ascii", "replace")
            code = int(text[1:]) if text[:1] == "E" and text[1:].isdigit() else 0
            raise OSError(code, f"cannot get {what} in the namespace: {os.strerror(code)}")
        for extra in fds[1:]:
            os.close(extra)
        return socket.socket(fileno=fds[0])

    def __repr__(self) -> str:
        where = f"through {self.socket_path}" if self.socket_path else "on 127.0.0.1"
        return f"Connector({where})"


class PortForward:
    """Makes ``port`` of a server reachable on this host's loopback: ``127.0.0.1:<listen_port>`` (a free
    port by default), or a unix socket at ``listen_path``.

    Each client connection gets a connection of its own to the server's port (through ``connector``) and
    bytes are relayed both ways by two threads, until either side closes.

    Example::

        with PortForward(server.connector, 8000) as forward:
            print(forward.address)   # '127.0.0.1:41234'
    """

    def __init__(
        self,
        connector: Connector,
        port: int,
        *,
        listen_port: int = 0,
        listen_path: Path | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        self._connector = connector
        self._port = port
        self._listen_port = listen_port
        self._listen_path = listen_path
        self._connect_timeout = connect_timeout
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``, or the unix socket's path."""
        listener = self._listener
        if listener is None:
            raise RuntimeError("the forward is not running")
        if self._listen_path is not None:
            return str(self._listen_path)
        host, port = listener.getsockname()[:2]
        return f"{host}:{port}"

    @property
    def listen_port(self) -> int | None:
        """The loopback TCP port clients connect to (``None`` for a unix socket, or before :meth:`start`)."""
        listener = self._listener
        if listener is None or self._listen_path is not None:
            return None
        return int(listener.getsockname()[1])

    def start(self) -> PortForward:
        """Listen and relay on a thread of its own; returns the forward itself."""
        if self._listen_path is not None:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(self._listen_path))
            os.chmod(self._listen_path, 0o600)
        else:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", self._listen_port))
        listener.listen(128)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name=f"forward-{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and close every relayed connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listen_path is not None:
            with contextlib.suppress(OSError):
                self._listen_path.unlink()

    def __enter__(self) -> PortForward:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = self._connector.connect(self._port, timeout=self._connect_timeout)
            except OSError as exc:
                logger.warning("forward to port %d: %s", self._port, exc)
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            remaining = [2]  # directions still relaying; the last one closes both sockets
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._relay, args=(source, sink, (client, upstream), remaining), daemon=True
                ).start()

    def _relay(
        self,
        source: socket.socket,
        sink: socket.socket,
        pair: tuple[socket.socket, socket.socket],
        remaining: list[int],
    ) -> None:
        buffer = bytearray(256 * 1024)
        view = memoryview(buffer)
        try:
            while True:
                count = source.recv_into(buffer)
                if count == 0:
                    break
                sink.sendall(view[:count])
        except OSError:  # a reset: end both directions
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        with self._lock:
            remaining[0] -= 1
            last = remaining[0] == 0
            if last:
                self._open.difference_update(pair)
        if last:
            for sock in pair:
                sock.close()


def warn_reachable(port: int, problem: str) -> None:
    """Say once per process, plainly, that Triton's port is open to the network, and how to close it."""
    if _reachable_warned.is_set():
        logger.info("tritonserver's SageMaker port %d accepts connections from the network", port)
        return
    _reachable_warned.set()
    logger.warning(
        "tritonserver's SageMaker port %d accepts connections from other hosts: this machine does not let "
        "an unprivileged user run it in a network namespace of its own (%s), so it listens on every "
        "interface, without authentication, and anyone who reaches the port can load and run models. "
        "Block the port with a firewall or run the stack where only you can reach the machine; %s.",
        port,
        problem,
        ALLOW_NAMESPACES_HINT,
    )
