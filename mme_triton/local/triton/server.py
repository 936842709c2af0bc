"""A real Triton Inference Server process with its SageMaker front-end in multi-model mode.

The binary, the python backend and its stubs come from the ``nvidia-pytriton`` wheel (the ``local`` extra).
:class:`TritonServer` starts one ``tritonserver`` with ``SAGEMAKER_MULTI_MODEL=true`` and
``--allow-sagemaker=true``, in a network namespace of its own, with HTTP, gRPC and metrics off unless asked
for (:mod:`.ports`), so several servers can run side by side. Models are loaded, invoked and unloaded
through the routes SageMaker's platform uses in a multi-model container (``POST /models``,
``POST /models/<hash>/invoke``, ``DELETE /models/<hash>``), with :mod:`http.client`.
"""

from __future__ import annotations

import http.client
import json
import logging
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS, TARGET_MODEL_HEADER
from mme_triton.errors import LocalStackError
from mme_triton.local.triton import netns
from mme_triton.local.triton._http import ConnectionPool, control_request, ping
from mme_triton.local.triton._process import (
    LOG_TAIL_BYTES,
    TritonLoadError,
    TritonRequestError,
    TritonStartError,
    TritonTimeoutError,
    _PortInUseError,
    check_hash,
    error_message,
    finalize,
    free_port,
    read_tail,
    server_argv,
    socket_directory,
    spawn,
    terminate,
    wait_until_ready,
)
from mme_triton.local.triton.frontend import FrontEnd
from mme_triton.local.triton.netns import Connector, PortForward
from mme_triton.local.triton.ports import ISOLATED, TritonPorts, forward_ports, port_args
from mme_triton.local.triton.procfs import (
    ExitWatch,
    ServerProcesses,
    StubProcess,
    new_shm_prefix,
    remove_orphaned_shm_regions,
    remove_shm_regions,
)
from mme_triton.local.triton.wheel import (
    TritonInstallation,
    find_triton,
    prepare_backends,
    python_info,
    python_stub,
    server_environment,
)

__all__ = [
    "StubProcess",
    "TritonInstallation",
    "TritonLoadError",
    "TritonRequestError",
    "TritonServer",
    "TritonStartError",
    "TritonTimeoutError",
    "find_triton",
]

logger = logging.getLogger(__name__)


class TritonServer(ServerProcesses):
    """One tritonserver process with the SageMaker front-end in multi-model mode, off the network.

    The server has an empty model repository and ``--model-control-mode=explicit``: models come and go
    through :meth:`load` and :meth:`unload`, exactly as SageMaker's platform drives the front-end. It runs
    in a network namespace of its own (:mod:`mme_triton.local.triton.netns`), where the front-end listens
    on port 8080 as in SageMaker's container, reachable from this host only through :attr:`connector`
    (a unix socket). Where the kernel refuses unprivileged namespaces it listens on a free port of this
    host instead, on every interface, and a warning says so once.

    Parameters:
        workdir: where the server's scratch directory (backends, empty repository, log) is created;
            a fresh temporary directory under it either way, removed by :meth:`stop`. Default: the
            system's temporary directory.
        extra_args: more ``tritonserver`` arguments
            (e.g. ``--backend-config=python,shm-default-byte-size=…``).
        env: variables added to (or overriding) this process's environment for the server.
        log_verbose: Triton's ``--log-verbose`` level.
        startup_timeout: seconds to wait for ``GET /ping`` to answer 200.
        python_executable: the interpreter whose packages python-backend models see (default: the running
            one); its bin directory goes first on ``PATH`` and the matching stub is used.
        triton_ports: also open Triton's HTTP, gRPC and metrics endpoints on 127.0.0.1 of this host
            (:attr:`triton_ports`; from its own namespace, through a :class:`~.netns.PortForward` each).

    Example::

        with TritonServer() as server:
            server.load("a1b2", Path("/tmp/extracted"), "linear.tar.gz")
            status, headers, body = server.invoke("a1b2", "linear.tar.gz", request, "application/json")
    """

    def __init__(
        self,
        *,
        workdir: Path | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_verbose: int = 0,
        startup_timeout: float = 60.0,
        python_executable: str | None = None,
        triton_ports: bool = False,
    ) -> None:
        if isinstance(extra_args, str):
            raise TypeError("extra_args must be a sequence of arguments, not a string")
        if log_verbose < 0:
            raise ValueError("log_verbose must be >= 0")
        if startup_timeout <= 0:
            raise ValueError("startup_timeout must be > 0")
        self._workdir = workdir
        self._extra_args = list(extra_args)
        self._env = dict(env or {})
        self._log_verbose = log_verbose
        self._startup_timeout = startup_timeout
        self._python_executable = python_executable
        self._open_ports = triton_ports
        self._ports: TritonPorts | None = None
        self._forwards: list[PortForward] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._tmp: str | None = None
        self._finalizer: weakref.finalize[..., TritonServer] | None = None
        self._port: int | None = None
        self._connector: Connector | None = None
        self._front_end: FrontEnd | None = None
        self._sockets: str | None = None
        self._returncode: int | None = None
        self._shm_prefix = ""
        self._log_path: Path | None = None
        self._targets: dict[str, tuple[str, str]] = {}  # hash -> (TargetModel, the directory loaded)
        self._pool = ConnectionPool()
        self._lock = threading.Lock()
        self.startup_seconds: float | None = None
        """Seconds from spawning the process to ``/ping`` answering 200 (set by :meth:`start`)."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the server and wait until ``GET /ping`` answers 200.

        Raises:
            LocalStackError: nvidia-pytriton is missing, or the server exited or did not become ready in
                time (the message carries the tail of Triton's log).
            RuntimeError: the server is already running.
        """
        with self._lock:
            if self._process is not None:
                raise RuntimeError("this TritonServer is already running")
            installation = find_triton()
            python = python_info(self._python_executable)
            stub = python_stub(installation, python)
            if self._workdir is not None:
                self._workdir.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix="mme-triton-", dir=self._workdir)
            self._tmp = tmp
            try:
                backends = prepare_backends(Path(tmp), installation, stub)
                repository = Path(tmp) / "repository"
                repository.mkdir()
                self._log_path = Path(tmp) / "tritonserver.log"
                env = {**server_environment(installation, python), **self._env}
                last_error: LocalStackError | None = None
                for _attempt in range(3):
                    try:
                        self._spawn(installation, backends, repository, env)
                        return
                    except _PortInUseError as exc:
                        last_error = exc
                        logger.debug("port %s was taken before Triton bound it; retrying", self._port)
                raise last_error or LocalStackError("tritonserver did not start")
            except BaseException:
                self._cleanup()
                raise

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` seconds) and remove its scratch files.

        Calling it again, or on a server that never started, does nothing.
        """
        with self._lock:
            process = self._process
            if process is not None:
                started = time.monotonic()
                terminate(process, timeout)
                self._returncode = process.returncode
                logger.debug(
                    "tritonserver (pid %d) stopped in %.2fs", process.pid, time.monotonic() - started
                )
            self._cleanup()

    def __enter__(self) -> TritonServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- state -------------------------------------------------------------------------------------

    @property
    def port(self) -> int | None:
        """The SageMaker front-end's port where the server listens (8080 inside its own network namespace),
        ``None`` before :meth:`start`."""
        return self._port

    @property
    def connector(self) -> Connector:
        """Opens connections to the server's ports (``connector.connect(server.port)``)."""
        if self._connector is None:
            raise RuntimeError("the server has not been started")
        return self._connector

    @property
    def front_end(self) -> FrontEnd:
        """The SageMaker front-end: connections to it, each on a known worker thread."""
        if self._front_end is None:
            raise RuntimeError("the server is not running")
        return self._front_end

    @property
    def address(self) -> str:
        """Where the SageMaker front-end listens, in words (for messages)."""
        if self._connector is None or self._port is None:
            return "(not started)"
        return self._connector.where(self._port)

    @property
    def pid(self) -> int | None:
        """The ``tritonserver`` process id while it runs, else ``None``."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def returncode(self) -> int | None:
        """The exit status once the server has exited (negative: killed by that signal)."""
        process = self._process
        if process is not None:
            return process.poll()
        return self._returncode

    @property
    def triton_ports(self) -> TritonPorts | None:
        """Triton's own endpoints while it runs, when started with ``triton_ports=True``."""
        return self._ports if self._process is not None else None

    @property
    def log_path(self) -> Path:
        """Triton's log (stdout and stderr); it is removed with the scratch directory by :meth:`stop`."""
        if self._log_path is None:
            raise RuntimeError("the server has not been started")
        return self._log_path

    def log_tail(self, limit: int = LOG_TAIL_BYTES) -> str:
        """The last ``limit`` bytes of Triton's log ('' when there is none)."""
        return read_tail(self._log_path, limit) if self._log_path is not None else ""

    # -- SageMaker multi-model routes --------------------------------------------------------------

    def load(self, model_hash: str, model_dir: Path, target_model: str, *, timeout: float = 120.0) -> None:
        """Load a model through ``POST /models``, to be served as ``target_model``.

        ``model_dir`` is the directory an artifact was extracted into: it holds the model directory
        (``<model_dir>/linear/config.pbtxt``), or for an ensemble the ensemble and its steps side by side.
        Triton 2.51 accepts any absolute path here; later releases only accept
        ``/opt/ml/models/<hash>/model``, the path SageMaker uses.

        Parameters:
            model_hash: the name SageMaker gives the loaded model (it appears in the invoke route).
            model_dir: the extracted archive.
            target_model: the TargetModel (``linear.tar.gz``); the model is served under this name.
            timeout: seconds to wait for the load to finish.

        Raises:
            TritonLoadError: Triton refused the model (``status`` 400, 507 when out of memory; ``message``
                is Triton's own, e.g. the backend's reason). Already loaded (409) is not an error.
            LocalStackError: the server is not reachable.
        """
        check_hash(model_hash)
        loaded = (target_model, str(Path(model_dir).absolute()))
        body = json.dumps({"model_name": model_hash, "url": loaded[1]}).encode()
        headers = {TARGET_MODEL_HEADER: target_model, "Content-Type": "application/json"}
        started = time.monotonic()
        status, _, answer = self._request("POST", "/models", body, headers, timeout, control=True)
        if status == 409:
            logger.debug("model %s (%s) is already loaded", model_hash, target_model)
            self._targets[model_hash] = loaded
            return
        if status != 200:
            message = error_message(answer) or f"no message from Triton; log tail:\n{self.log_tail()}"
            raise TritonLoadError(message, status=status, model_hash=model_hash)
        self._targets[model_hash] = loaded
        logger.debug("loaded %s as %s in %.2fs", target_model, model_hash, time.monotonic() - started)

    def unload(
        self, model_hash: str, *, target_model: str | None = None, timeout: float = 30.0
    ) -> float | None:
        """Unload a model through ``DELETE /models/<hash>``; an unknown hash (404) is not an error. Return the
        seconds until the model's stub processes had left (``None`` when it had none, or they outlived the
        answer by 5 s): the unload's end, to :data:`~.procfs.EXIT_POLL_S`. Triton's own answer comes later,
        at its next 1 s poll of the model's state.

        Triton answers only once the model is fully unloaded, which can take a while: call this off the
        request path.

        Parameters:
            model_hash: the name given to :meth:`load`.
            target_model: the TargetModel it was loaded as; default: the one :meth:`load` recorded.
            timeout: seconds to wait for Triton's answer.

        Raises:
            TritonRequestError: Triton refused to unload it.
            LocalStackError: the server is not reachable.
        """
        check_hash(model_hash)
        known, root = self._targets.get(model_hash, (None, None))
        target = target_model or known
        headers = {TARGET_MODEL_HEADER: target} if target else {}
        watch = ExitWatch.of_model(self.pid, root)
        status, _, answer = self._request(
            "DELETE", f"/models/{model_hash}", b"", headers, timeout, control=True
        )
        self._targets.pop(model_hash, None)
        if status == 404:
            logger.debug("model %s was not loaded", model_hash)
            return None
        if status != 200:
            watch.cancel()
            raise TritonRequestError(error_message(answer), status=status, model_hash=model_hash)
        return watch.wait(5.0)

    def invoke(
        self, model_hash: str, target_model: str, body: bytes, content_type: str, *, timeout: float = 60.0
    ) -> tuple[int, dict[str, str], bytes]:
        """Forward an inference request to ``POST /models/<hash>/invoke``.

        Returns:
            Triton's status, its response headers (names lower-cased) and its body, unchanged.

        Raises:
            TritonTimeoutError: no answer within ``timeout`` (the request may still run in Triton).
            LocalStackError: the server is not reachable (the message carries the log tail if it died).
        """
        check_hash(model_hash)
        headers = {TARGET_MODEL_HEADER: target_model, "Content-Type": content_type}
        return self._request("POST", f"/models/{model_hash}/invoke", body, headers, timeout)

    def invocations(
        self, body: bytes, content_type: str, *, timeout: float = 60.0
    ) -> tuple[int, dict[str, str], bytes]:
        """Forward a request to ``POST /invocations``: the single-model route, which serves the model named
        by ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` in the server's environment (a copy of an inference
        component). Returns and raises as :meth:`invoke` does."""
        return self._request("POST", "/invocations", body, {"Content-Type": content_type}, timeout)

    def ping(self, *, timeout: float = 5.0) -> bool:
        """``True`` when ``GET /ping`` answers 200."""
        connector, port = self._connector, self._port
        return connector is not None and port is not None and ping(connector, port, timeout=timeout)

    # -- internals ---------------------------------------------------------------------------------

    def _spawn(
        self, installation: TritonInstallation, backends: Path, repository: Path, env: dict[str, str]
    ) -> None:
        assert self._log_path is not None and self._tmp is not None
        self._shm_prefix = new_shm_prefix()
        remove_orphaned_shm_regions()  # what killed processes left (docs/local-triton.md)
        if self._sockets is None:
            self._sockets = socket_directory()
        self._connector, problem = netns.placement(self._sockets)
        if problem is None:  # Triton's own ports too are inside its namespace, forwarded once it is ready
            self._port, own_ports = netns.ISOLATED_PORT, ISOLATED if self._open_ports else None
        else:
            self._port, own_ports = free_port(), TritonPorts.free() if self._open_ports else None
            netns.warn_reachable(self._port, problem)
        argv = server_argv(
            installation.server,
            log_verbose=self._log_verbose,
            extra_args=self._extra_args,
            port=self._port,
            repository=repository,
            backends=backends,
            shm_prefix=self._shm_prefix,
            own_ports=port_args(own_ports),
        )
        if self._connector.socket_path is not None:
            argv = netns.isolated_command(argv, self._connector.socket_path)
        started = time.monotonic()
        process, log_file = spawn(argv, log_path=self._log_path, env=env, cwd=self._tmp)
        self._process = process
        self._log_file = log_file
        self._finalizer = weakref.finalize(
            self, finalize, process, log_file, (self._tmp, self._sockets), self._shm_prefix
        )
        logger.debug("started tritonserver pid %d on %s", process.pid, self.address)
        try:
            wait_until_ready(
                process, self._log_path, self.ping, started=started, timeout=self._startup_timeout
            )
        except LocalStackError:  # it exited, or it was stopped for not answering in time
            self._returncode = process.returncode
            self._finalizer.detach()
            self._process = None
            log_file.close()
            self._log_file = None
            raise
        self._front_end = FrontEnd(self._connector, self._port, process.pid)
        self._ports, self._forwards = forward_ports(self._connector, own_ports)
        self.startup_seconds = time.monotonic() - started
        logger.info("tritonserver ready on %s in %.2fs", self.address, self.startup_seconds)

    def _cleanup(self) -> None:
        if self._process is not None and self._process.poll() is None:  # start() failed after spawning it
            terminate(self._process, 5.0)
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        for directory in (self._tmp, self._sockets):
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
        self._tmp = self._sockets = None
        if self._shm_prefix:
            # Regions a killed server or stub left behind would hold their memory until removed.
            remove_shm_regions(self._shm_prefix)
        if self._front_end is not None:
            self._front_end.close()
        for forward in self._forwards:
            forward.stop()
        self._forwards = []
        self._process = self._front_end = self._ports = None
        self._targets.clear()
        self._pool.close()

    def _request(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout: float,
        *,
        control: bool = False,
    ) -> tuple[int, dict[str, str], bytes]:
        """A request (``control``: a load or unload, on a worker it reserves; see :mod:`.frontend`)."""
        front = self._front_end
        if front is None:
            raise LocalStackError("the Triton server is not running")
        try:
            if control:  # the invocations already running on its worker finish first
                drain = min(timeout, INVOCATION_TIMEOUT_SECONDS)
                return control_request(front, method, path, body, headers, timeout, drain_timeout=drain)
            return self._pool.request(front, method, path, body, headers, timeout)
        except TimeoutError as exc:
            raise TritonTimeoutError(f"{method} {path}: Triton did not answer within {timeout:g}s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(method, path, exc) from exc

    def _unreachable(self, method: str, path: str, exc: BaseException) -> LocalStackError:
        process = self._process
        if process is not None and process.poll() is not None:
            return LocalStackError(
                f"tritonserver exited with status {process.returncode}; {method} {path} failed:\n"
                f"{self.log_tail()}"
            )
        return LocalStackError(f"{method} {path} to Triton on {self.address} failed: {exc}")
