"""The SageMaker Triton container's ``serve`` script, as the embedded stack plays it.

Inside a SageMaker Triton container, ``serve`` turns the model's ``Environment`` into ``tritonserver``
arguments and environment variables, then starts the server with its SageMaker front-end. The embedded
stack starts each endpoint's Triton the same way, with the script's rules rather than the library's
stricter ones (which :func:`~mme_triton.endpoint.environment.validate_environment` applies before a
deploy):

- the script reads the ``SAGEMAKER_TRITON_*`` variables it knows, each only when it is set and not empty,
  and ignores every other ``SAGEMAKER_TRITON_*`` name;
- ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` is read in single-model mode only;
- it refuses one value itself, a ``SAGEMAKER_TRITON_INFERENCE_TYPE`` other than ``infer``, ``generate``
  or ``generate_stream`` (the container exits); every other value goes to ``tritonserver`` as it is, and
  ``tritonserver`` refuses what it cannot parse;
- the other variables of the Environment are the container's process environment, which Triton and its
  python models see.

:func:`serve_plan` derives all of that; :func:`default_triton_factory` builds an endpoint's server from it,
within the stack's limits (:mod:`mme_triton.local.route.limits`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mme_triton.endpoint.environment import (
    ADDITIONAL_ARGS,
    ALLOW_GRPC,
    ALLOW_METRICS,
    BUFFER_MANAGER_THREAD_COUNT,
    DEFAULT_MODEL_NAME,
    DISABLE_MODEL_NAMESPACING,
    GRPC_PORT,
    INFERENCE_TYPE,
    KNOWN_VARIABLES,
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
)
from mme_triton.errors import LocalStackError, MMETritonWarning
from mme_triton.local.triton.options import DEFAULT_SHM_LIMIT, bound_triton_args
from mme_triton.local.triton.protocol import CopyFactory, TritonFactory, TritonLike

__all__ = [
    "ContainerExitError",
    "ServePlan",
    "TritonFactory",
    "default_triton_factory",
    "serve_args",
    "serve_environment",
    "serve_plan",
]

logger = logging.getLogger(__name__)

_INFERENCE_TYPES = ("infer", "generate", "generate_stream")
# Set by SageMaker's platform (or by the stack, which picks the port) and by the stack for Triton itself.
_STACK_VARIABLES = {
    "SAGEMAKER_MULTI_MODEL": "the stack serves multi-model endpoints",
    "SAGEMAKER_BIND_TO_PORT": "the stack picks the port",
    "SAGEMAKER_SAFE_PORT_RANGE": "the stack picks the port",
    "PATH": "the stack sets it for Triton's python stubs",
    "LD_LIBRARY_PATH": "the stack sets it for Triton's python stubs",
}


class ContainerExitError(LocalStackError):
    """The container's serve script refuses the Environment and exits: the endpoint goes ``Failed``."""


@dataclass(frozen=True)
class ServePlan:
    """What the serve script makes of an Environment in multi-model mode."""

    args: list[str]
    """The ``tritonserver`` arguments, in the script's order (without ``--model-repository`` and the
    SageMaker port, which the caller chooses)."""
    env: dict[str, str]
    """The variables the server process gets on top of its own environment."""
    ignored: list[str] = field(default_factory=list)
    """One line per variable the script does not act on, saying why."""


def _set(environment: Mapping[str, str], name: str) -> str | None:
    """The script's ``[ -n "$NAME" ]``: a variable set to the empty string counts as unset."""
    value = environment.get(name)
    return value if value else None


def serve_plan(
    environment: Mapping[str, str], *, gpu_count: int = 0, model_repository: Path | None = None
) -> ServePlan:
    """The serve script's ``tritonserver`` arguments and process environment for ``environment``.

    Multi-model mode (what SageMaker's platform runs on a multi-model endpoint,
    ``SAGEMAKER_MULTI_MODEL=true``), in the script's order, with its defaults (model namespacing on, gRPC and
    metrics off, verbose logging, 16 MiB / 1 MiB python-backend shared memory, ping mode ``live``); with
    ``model_repository`` (the extracted ``ModelDataUrl``, ``/opt/ml/model`` in the container, which the
    caller passes to ``tritonserver``) single-model mode, what a copy of an inference component runs:
    ``--load-model`` of ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` (or of the repository's only model directory,
    exported under that name for the front-end's ``/invocations`` route), ping mode ``ready``.
    ``SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT`` gives one ``--model-load-gpu-limit`` per GPU, so it needs
    ``gpu_count``.

    Raises:
        ContainerExitError: the script refuses the Environment (an invalid
            ``SAGEMAKER_TRITON_INFERENCE_TYPE``; in single-model mode a default model whose directory the
            repository lacks, or a repository of no or several model directories without one named), with
            the script's own message.

    Example:
        >>> plan = serve_plan({"SAGEMAKER_TRITON_MAX_BATCH_DELAY": "1000"})
        >>> plan.ignored
        ['SAGEMAKER_TRITON_MAX_BATCH_DELAY: the serve script does not read it']
    """
    env = environment
    args: list[str] = [f"--model-namespacing={_set(env, DISABLE_MODEL_NAMESPACING) or 'true'}"]
    args.append(f"--allow-grpc={_set(env, ALLOW_GRPC) or 'false'}")
    args.append(f"--allow-metrics={_set(env, ALLOW_METRICS) or 'false'}")
    for name, option in (
        (METRICS_PORT, "--metrics-port"),
        (GRPC_PORT, "--grpc-port"),
        (BUFFER_MANAGER_THREAD_COUNT, "--buffer-manager-thread-count"),
        (THREAD_COUNT, "--sagemaker-thread-count"),
    ):
        if _set(env, name):
            args.append(f"{option}={env[name]}")
    args.append(f"--log-verbose={_set(env, LOG_VERBOSE) or 'true'}")
    for name, option in (
        (LOG_INFO, "--log-info"),
        (LOG_WARNING, "--log-warning"),
        (LOG_ERROR, "--log-error"),
    ):
        if _set(env, name):
            args.append(f"{option}={env[name]}")
    args.append(
        f"--backend-config=python,shm-default-byte-size={_set(env, SHM_DEFAULT_BYTE_SIZE) or '16777216'}"
    )
    args.append(
        f"--backend-config=python,shm-growth-byte-size={_set(env, SHM_GROWTH_BYTE_SIZE) or '1048576'}"
    )
    if _set(env, TENSORFLOW_VERSION):
        args.append(f"--backend-config=tensorflow,version={env[TENSORFLOW_VERSION]}")
    if _set(env, MODEL_LOAD_GPU_LIMIT):
        for gpu in range(gpu_count):
            args += ["--model-load-gpu-limit", f"{gpu}:{env[MODEL_LOAD_GPU_LIMIT]}"]
    if _set(env, ADDITIONAL_ARGS):
        args += env[ADDITIONAL_ARGS].split()

    inference_type = _set(env, INFERENCE_TYPE)
    if inference_type is not None and inference_type not in _INFERENCE_TYPES:
        raise ContainerExitError(
            f"ERROR: Invalid {INFERENCE_TYPE} '{inference_type}'\n"
            f"       Must be one of: {', '.join(_INFERENCE_TYPES)}"
        )

    # The container's process environment is the Environment: Triton and its python models see it.
    process_env = {name: value for name, value in env.items() if name not in _STACK_VARIABLES}
    if model_repository is None:
        process_env["SAGEMAKER_MULTI_MODEL"] = "true"
        process_env[PING_MODE] = _set(env, OVERRIDE_PING_MODE) or "live"
    else:
        model = _default_model(env, model_repository)
        args.append(f"--load-model={model}")
        process_env[DEFAULT_MODEL_NAME] = model
        process_env[PING_MODE] = _set(env, OVERRIDE_PING_MODE) or "ready"
    ignored: list[str] = []
    for name in env:
        if name == DEFAULT_MODEL_NAME and model_repository is None:
            ignored.append(f"{name}: the serve script reads it in single-model mode only")
        elif name.startswith("SAGEMAKER_TRITON_") and name not in KNOWN_VARIABLES:
            ignored.append(f"{name}: the serve script does not read it")
        elif name in _STACK_VARIABLES:
            ignored.append(f"{name}: {_STACK_VARIABLES[name]}")
    return ServePlan(args=args, env=process_env, ignored=ignored)


def _default_model(env: Mapping[str, str], repository: Path) -> str:
    """The model a single-model container loads and serves on ``/invocations``, as the script decides it."""
    named = _set(env, DEFAULT_MODEL_NAME)
    if named is not None:
        if not (repository / named).is_dir():
            raise ContainerExitError(
                f"ERROR: Directory with provided {DEFAULT_MODEL_NAME} {named} does not exist"
            )
        return named
    found = sorted(entry.name for entry in repository.iterdir() if entry.is_dir())
    if not found:
        raise ContainerExitError("ERROR: No model found in model repository")
    if len(found) > 1:
        raise ContainerExitError(
            "ERROR: More than 1 model directory found in model repository.\n"
            f"       Either provide a single directory or set {DEFAULT_MODEL_NAME} to run the ensemble "
            "backend.\n"
            f"       Directories found in model repository: {' '.join(found)}"
        )
    logger.info("no %s provided: starting with the only model directory %s", DEFAULT_MODEL_NAME, found[0])
    return found[0]


def serve_args(environment: Mapping[str, str], *, gpu_count: int = 0) -> list[str]:
    """The ``tritonserver`` arguments of :func:`serve_plan`.

    Example:
        >>> serve_args({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"})[-2]
        '--backend-config=python,shm-default-byte-size=33554432'
    """
    return serve_plan(environment, gpu_count=gpu_count).args


def serve_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The variables the server process gets: ``SAGEMAKER_MULTI_MODEL=true``, the ping mode the script
    settles on (``live`` unless ``SAGEMAKER_TRITON_OVERRIDE_PING_MODE`` says otherwise),
    ``SAGEMAKER_TRITON_INFERENCE_TYPE`` when set, and the Environment's other variables."""
    return serve_plan(environment).env


def default_triton_factory(
    *,
    log_verbose: int = 0,
    startup_timeout: float = 60.0,
    shm_limit: int = DEFAULT_SHM_LIMIT,
    triton_ports: bool = False,
) -> CopyFactory:
    """Builds each endpoint's :class:`~mme_triton.local.triton.server.TritonServer` as the serve script would,
    within the stack's limits (``shm_limit``: see :func:`~mme_triton.local.route.limits.bound_triton_args`):
    in multi-model mode, or, given a ``model_repository``, in single-model mode (a copy of an inference
    component; ``startup_s``: its ``ContainerStartupHealthCheckTimeoutInSeconds``).

    ``--log-verbose`` follows ``SAGEMAKER_TRITON_LOG_VERBOSE`` when the Environment sets it, else
    ``log_verbose`` (not the script's default verbose logging). ``triton_ports`` opens each server's own
    HTTP, gRPC and metrics endpoints on 127.0.0.1 (:mod:`~mme_triton.local.triton.ports`).
    """

    def factory(
        endpoint_name: str,
        environment: Mapping[str, str],
        workdir: Path,
        model_repository: Path | None = None,
        startup_s: float | None = None,
    ) -> TritonLike:
        from mme_triton.local.triton.server import TritonServer

        plan = serve_plan(environment, model_repository=model_repository)
        for line in plan.ignored:
            logger.info("endpoint %s: ignoring %s", endpoint_name, line)
        args = [
            a
            for a in plan.args
            if not (a.startswith("--log-verbose=") and not _set(environment, LOG_VERBOSE))
        ]
        bounded = bound_triton_args(args, shm_limit=shm_limit, single_model=model_repository is not None)
        for line in bounded.notes:
            logger.info("endpoint %s: %s", endpoint_name, line)
        for line in bounded.lowered:
            message = f"endpoint {endpoint_name}: {line}"
            logger.warning("%s", message)
            warnings.warn(message, MMETritonWarning, stacklevel=2)
        repository = [] if model_repository is None else [f"--model-repository={model_repository}"]
        return TritonServer(
            workdir=workdir,
            extra_args=[*bounded.args, *repository],
            env=plan.env,
            log_verbose=log_verbose,
            startup_timeout=startup_s or startup_timeout,
            triton_ports=triton_ports,
        )

    return factory
