"""The SageMaker Triton container's ``serve`` script, as the embedded stack plays it.

Inside a SageMaker Triton container, ``serve`` turns the model's ``Environment`` into ``tritonserver``
arguments and environment variables, then starts the server with its SageMaker front-end. The embedded
stack starts each endpoint's Triton the same way: :func:`serve_args` derives the arguments the script
would pass, :func:`serve_environment` the variables the front-end reads from its own environment, and
:func:`local_serve_args` keeps what can run on a shared machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from mme_triton.endpoint.environment import (
    ADDITIONAL_ARGS,
    ALLOW_GRPC,
    ALLOW_METRICS,
    BUFFER_MANAGER_THREAD_COUNT,
    DISABLE_MODEL_NAMESPACING,
    GRPC_PORT,
    INFERENCE_TYPE,
    LOG_ERROR,
    LOG_INFO,
    LOG_VERBOSE,
    LOG_WARNING,
    METRICS_PORT,
    MODEL_LOAD_GPU_LIMIT,
    OVERRIDE_PING_MODE,
    PING_MODE,
    SHM_DEFAULT_BYTE_SIZE,
    SHM_GROWTH_BYTE_SIZE,
    TENSORFLOW_VERSION,
    THREAD_COUNT,
    validate_environment,
)
from mme_triton.errors import LocalStackError
from mme_triton.local.endpoint_runtime import TritonLike

__all__ = ["TritonFactory", "default_triton_factory", "local_serve_args", "serve_args", "serve_environment"]

TritonFactory = Callable[[str, Mapping[str, str], Path], TritonLike]
"""(endpoint name, the model's Environment, a scratch directory) -> an unstarted Triton server."""


def serve_args(environment: Mapping[str, str], *, gpu_count: int = 0) -> list[str]:
    """The ``tritonserver`` arguments the container's serve script derives from ``environment``.

    Multi-model mode, in the script's order, including its defaults (model namespacing on, gRPC and
    metrics off, verbose logging, 16 MiB / 1 MiB python-backend shared memory). Not included, because
    the caller chooses them: ``--model-repository``, the SageMaker port (``--sagemaker-port``, from
    ``SAGEMAKER_BIND_TO_PORT``), and the fixed ``--allow-sagemaker=true --allow-http=false
    --model-control-mode=explicit``. ``SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT`` gives one
    ``--model-load-gpu-limit`` per GPU, so it needs ``gpu_count``.

    Raises:
        ValueError: the environment is invalid (see :func:`validate_environment`).

    Example::

        >>> serve_args({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"})[-2]
        '--backend-config=python,shm-default-byte-size=33554432'
    """
    env = validate_environment(environment)
    args: list[str] = [f"--model-namespacing={env.get(DISABLE_MODEL_NAMESPACING, 'true')}"]
    args.append(f"--allow-grpc={env.get(ALLOW_GRPC, 'false')}")
    args.append(f"--allow-metrics={env.get(ALLOW_METRICS, 'false')}")
    if METRICS_PORT in env:
        args.append(f"--metrics-port={env[METRICS_PORT]}")
    if GRPC_PORT in env:
        args.append(f"--grpc-port={env[GRPC_PORT]}")
    if BUFFER_MANAGER_THREAD_COUNT in env:
        args.append(f"--buffer-manager-thread-count={env[BUFFER_MANAGER_THREAD_COUNT]}")
    if THREAD_COUNT in env:
        args.append(f"--sagemaker-thread-count={env[THREAD_COUNT]}")
    args.append(f"--log-verbose={env.get(LOG_VERBOSE, 'true')}")
    for name, option in (
        (LOG_INFO, "--log-info"),
        (LOG_WARNING, "--log-warning"),
        (LOG_ERROR, "--log-error"),
    ):
        if name in env:
            args.append(f"{option}={env[name]}")
    args.append(f"--backend-config=python,shm-default-byte-size={env.get(SHM_DEFAULT_BYTE_SIZE, '16777216')}")
    args.append(f"--backend-config=python,shm-growth-byte-size={env.get(SHM_GROWTH_BYTE_SIZE, '1048576')}")
    if TENSORFLOW_VERSION in env:
        args.append(f"--backend-config=tensorflow,version={env[TENSORFLOW_VERSION]}")
    if MODEL_LOAD_GPU_LIMIT in env:
        for gpu in range(gpu_count):
            args += ["--model-load-gpu-limit", f"{gpu}:{env[MODEL_LOAD_GPU_LIMIT]}"]
    if ADDITIONAL_ARGS in env:
        args += env[ADDITIONAL_ARGS].split()
    return args


def serve_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The variables Triton's SageMaker front-end reads from its own process environment (MME mode).

    ``SAGEMAKER_MULTI_MODEL=true``, the ping mode the script settles on (``live`` unless
    ``SAGEMAKER_TRITON_OVERRIDE_PING_MODE`` says otherwise) and ``SAGEMAKER_TRITON_INFERENCE_TYPE`` when
    set — to be added to the environment of a locally started ``tritonserver``.
    """
    env = validate_environment(environment)
    result = {
        "SAGEMAKER_MULTI_MODEL": "true",
        PING_MODE: env.get(OVERRIDE_PING_MODE, "live"),
    }
    if INFERENCE_TYPE in env:
        result[INFERENCE_TYPE] = env[INFERENCE_TYPE]
    return result


_PORT_ARGS = ("--allow-grpc", "--grpc-port", "--allow-metrics", "--metrics-port")


def local_serve_args(environment: Mapping[str, str]) -> list[str]:
    """The serve script's ``tritonserver`` arguments for ``environment``, as the embedded stack uses them.

    Everything :func:`serve_args` derives is kept (python-backend shared
    memory, thread counts, log levels ...) except the gRPC and metrics endpoints, which would bind fixed
    ports, and the serve script's default verbose logging: ``--log-verbose`` is kept only when the
    Environment sets ``SAGEMAKER_TRITON_LOG_VERBOSE`` (otherwise the stack's ``log_verbose`` applies).
    """
    args = serve_args(environment)
    kept = []
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in _PORT_ARGS or (option == "--log-verbose" and LOG_VERBOSE not in environment):
            continue
        kept.append(arg)
    return kept


def default_triton_factory(*, log_verbose: int = 0, startup_timeout: float = 60.0) -> TritonFactory:
    """Builds each endpoint's :class:`~mme_triton.local.triton.TritonServer` as the serve script would."""

    def factory(endpoint_name: str, environment: Mapping[str, str], workdir: Path) -> TritonLike:
        from mme_triton.local.triton import TritonServer

        try:
            extra_args = local_serve_args(environment)
            env = serve_environment(environment)
        except ValueError as exc:
            raise LocalStackError(f"the model's Environment is not valid: {exc}") from exc
        return TritonServer(
            workdir=workdir,
            extra_args=extra_args,
            env=env,
            log_verbose=log_verbose,
            startup_timeout=startup_timeout,
        )

    return factory
