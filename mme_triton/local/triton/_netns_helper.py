"""Run inside a fresh user + network namespace: bring loopback up, serve a connector, exec a command.

Started by :mod:`mme_triton.local.triton.netns` as
``unshare --user --map-root-user --net <python> -I -S _netns_helper.py <socket> -- <command...>``,
with the standard library only (the interpreter starts isolated, without site-packages).

- The namespace starts with its loopback interface down: it is brought up, so ``127.0.0.1`` works inside.
- A unix socket is bound at ``<socket>`` (on the filesystem, so it is reachable from outside the namespace)
  and served by a child process, the *connector* (``_netns_helper.py --connector <fd> <parent pid>``): a
  client writes a port number and a newline, and gets back a TCP socket already connected to
  ``127.0.0.1:<port>`` inside the namespace (passed with ``SCM_RIGHTS``), or ``E<errno>``. The client
  then speaks to the port directly: no byte is relayed. ``diag`` instead of a port gets a ``sock_diag``
  netlink socket of the namespace (to look its sockets up, as ``ss`` does).
- This process then becomes ``<command>`` (``exec``, same pid); the connector dies with it.

``--probe`` instead of a socket only brings loopback up and exits 0: the check that all of this works.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import sys

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_PR_SET_PDEATHSIG = 1
_NETLINK_SOCK_DIAG = 4


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def serve(listener: socket.socket, parent: int) -> None:
    """Answer connection requests one at a time until the parent (the command) exits."""
    if os.getppid() != parent:  # the command exited before the death signal was armed
        return
    while True:
        client, _ = listener.accept()
        with client:
            client.settimeout(5.0)
            try:
                asked = client.recv(16).strip()
                if asked == b"diag":
                    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
                        socket.send_fds(client, [b"K"], [diag.fileno()])
                    continue
                port = int(asked)
                with socket.create_connection(("127.0.0.1", port), timeout=5.0) as upstream:
                    socket.send_fds(client, [b"K"], [upstream.fileno()])
            except (OSError, ValueError) as exc:
                code = exc.errno if isinstance(exc, OSError) and exc.errno else 22
                with contextlib.suppress(OSError):
                    client.sendall(f"E{code}".encode())


def main(argv: list[str]) -> int:  # returns only for --probe and misuse
    if argv[1:2] == ["--connector"]:
        serve(socket.socket(fileno=int(argv[2])), int(argv[3]))
        return 0
    loopback_up()
    if argv[1:] == ["--probe"]:
        return 0
    path, separator, *command = argv[1:]
    if separator != "--" or not command:
        sys.stderr.write("usage: _netns_helper.py SOCKET -- COMMAND...\n")
        return 2
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    parent = os.getpid()
    if os.fork() == 0:
        try:  # the connector dies with its parent, which becomes the command (the signal survives exec)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.set_inheritable(listener.fileno(), True)
            helper = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
            os.execv(sys.executable, [*helper, "--connector", str(listener.fileno()), str(parent)])
        finally:
            os._exit(127)
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
