"""The ``SAGEMAKER_TRITON_*`` environment of a Triton model, typed and validated.

The SageMaker Triton container starts ``tritonserver`` from its ``serve`` script, which turns the model's
``Environment`` into command-line arguments. :class:`TritonEnvironment` covers every variable that script
(and Triton's SageMaker front-end) reads; :func:`validate_environment` enforces CreateModel's limits,
which moto does not. How the script turns the variables into ``tritonserver`` arguments is played by the
embedded stack, in :mod:`mme_triton.local.serve`.

:data:`DEFAULT_ENVIRONMENT` is what ``deploy_mme`` adds to every model's Environment unless told
otherwise: the python backend's shared memory, set explicitly (docs/deploy.md says why these values).

Example::

    env = TritonEnvironment(shm_default_byte_size=64 * 1024 * 1024, log_verbose=0)
    env.to_environment()
    # {'SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE': '67108864', 'SAGEMAKER_TRITON_LOG_VERBOSE': '0'}
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "ENVIRONMENT_MAX_BYTES",
    "ENVIRONMENT_MAX_ENTRIES",
    "ENVIRONMENT_MAX_ITEM_BYTES",
    "KNOWN_VARIABLES",
    "TritonEnvironment",
    "validate_environment",
]

#: CreateModel: each key and each value at most 1024 bytes.
ENVIRONMENT_MAX_ITEM_BYTES = 1024
#: CreateModel: all keys and values together at most 32 KB (sum of the UTF-8 lengths of every key and
#: every value, 32 × 1024 bytes).
ENVIRONMENT_MAX_BYTES = 32 * 1024
#: CreateModel: at most 100 variables.
ENVIRONMENT_MAX_ENTRIES = 100

_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# The python backend refuses a default shared-memory region under 1 MiB and a growth step of 0.
MIN_SHM_DEFAULT_BYTE_SIZE = 1024 * 1024
MIN_SHM_GROWTH_BYTE_SIZE = 1

SHM_DEFAULT_BYTE_SIZE = "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE"
SHM_GROWTH_BYTE_SIZE = "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE"
LOG_VERBOSE = "SAGEMAKER_TRITON_LOG_VERBOSE"
LOG_INFO = "SAGEMAKER_TRITON_LOG_INFO"
LOG_WARNING = "SAGEMAKER_TRITON_LOG_WARNING"
LOG_ERROR = "SAGEMAKER_TRITON_LOG_ERROR"
BUFFER_MANAGER_THREAD_COUNT = "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT"
THREAD_COUNT = "SAGEMAKER_TRITON_THREAD_COUNT"
OVERRIDE_PING_MODE = "SAGEMAKER_TRITON_OVERRIDE_PING_MODE"
PING_MODE = "SAGEMAKER_TRITON_PING_MODE"
ADDITIONAL_ARGS = "SAGEMAKER_TRITON_ADDITIONAL_ARGS"
DEFAULT_MODEL_NAME = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
TENSORFLOW_VERSION = "SAGEMAKER_TRITON_TENSORFLOW_VERSION"
MODEL_LOAD_GPU_LIMIT = "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT"
DISABLE_MODEL_NAMESPACING = "SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING"
ALLOW_GRPC = "SAGEMAKER_TRITON_ALLOW_GRPC"
ALLOW_METRICS = "SAGEMAKER_TRITON_ALLOW_METRICS"
METRICS_PORT = "SAGEMAKER_TRITON_METRICS_PORT"
GRPC_PORT = "SAGEMAKER_TRITON_GRPC_PORT"
INFERENCE_TYPE = "SAGEMAKER_TRITON_INFERENCE_TYPE"

#: The python backend's shared memory per model instance, as the container's serve script sets it for
#: 23.01 and later images (16 MiB, growing in 1 MiB steps); images up to 22.12 pass nothing, leaving the
#: python backend's own 1 MiB. ``deploy_mme`` sets both on every model unless the environment says
#: otherwise (a value of None removes one).
DEFAULT_ENVIRONMENT: dict[str, str] = {
    SHM_DEFAULT_BYTE_SIZE: str(16 * 1024 * 1024),
    SHM_GROWTH_BYTE_SIZE: str(1024 * 1024),
}

#: Every SAGEMAKER_TRITON_* variable the container's serve script or Triton's SageMaker front-end reads.
KNOWN_VARIABLES: frozenset[str] = frozenset(
    {
        SHM_DEFAULT_BYTE_SIZE,
        SHM_GROWTH_BYTE_SIZE,
        LOG_VERBOSE,
        LOG_INFO,
        LOG_WARNING,
        LOG_ERROR,
        BUFFER_MANAGER_THREAD_COUNT,
        THREAD_COUNT,
        OVERRIDE_PING_MODE,
        PING_MODE,
        ADDITIONAL_ARGS,
        DEFAULT_MODEL_NAME,
        TENSORFLOW_VERSION,
        MODEL_LOAD_GPU_LIMIT,
        DISABLE_MODEL_NAMESPACING,
        ALLOW_GRPC,
        ALLOW_METRICS,
        METRICS_PORT,
        GRPC_PORT,
        INFERENCE_TYPE,
    }
)
# Set by the SageMaker platform itself; a model must not set them.
_PLATFORM_VARIABLES = frozenset(
    {"SAGEMAKER_MULTI_MODEL", "SAGEMAKER_BIND_TO_PORT", "SAGEMAKER_SAFE_PORT_RANGE"}
)

_BOOL = {"true": True, "false": False, "1": True, "0": False}
_PING_MODES = ("ready", "live")
_INFERENCE_TYPES = ("infer", "generate", "generate_stream")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {number}")
    return number


def _check_value(name: str, value: str) -> None:
    """Check the values the container parses itself (so a typo fails here, not in the endpoint's log)."""
    if name == SHM_DEFAULT_BYTE_SIZE:
        _int(name, value, MIN_SHM_DEFAULT_BYTE_SIZE)
    elif name == SHM_GROWTH_BYTE_SIZE:
        _int(name, value, MIN_SHM_GROWTH_BYTE_SIZE)
    elif name == LOG_VERBOSE:
        if value.lower() not in ("true", "false"):
            _int(name, value, 0)
    elif name in (LOG_INFO, LOG_WARNING, LOG_ERROR, ALLOW_GRPC, ALLOW_METRICS, DISABLE_MODEL_NAMESPACING):
        if value.lower() not in _BOOL:
            raise ValueError(f"{name} must be true or false, got {value!r}")
    elif name == BUFFER_MANAGER_THREAD_COUNT:
        _int(name, value, 0)
    elif name == THREAD_COUNT:
        _int(name, value, 1)
    elif name in (METRICS_PORT, GRPC_PORT):
        if not 1 <= _int(name, value, 1) <= 65535:
            raise ValueError(f"{name} must be a port number (1-65535), got {value!r}")
    elif name in (OVERRIDE_PING_MODE, PING_MODE):
        if value not in _PING_MODES:
            raise ValueError(f"{name} must be one of {', '.join(_PING_MODES)}, got {value!r}")
    elif name == INFERENCE_TYPE:
        if value not in _INFERENCE_TYPES:
            raise ValueError(f"{name} must be one of {', '.join(_INFERENCE_TYPES)}, got {value!r}")
    elif name == MODEL_LOAD_GPU_LIMIT:
        try:
            fraction = float(value)
        except ValueError:
            raise ValueError(f"{name} must be a fraction in (0, 1], got {value!r}") from None
        if not (math.isfinite(fraction) and 0 < fraction <= 1):
            raise ValueError(f"{name} must be a fraction in (0, 1], got {value!r}")
    elif name == TENSORFLOW_VERSION and value not in ("1", "2"):
        raise ValueError(f"{name} must be 1 or 2, got {value!r}")


def validate_environment(environment: Mapping[str, str], *, multi_model: bool = True) -> dict[str, str]:
    """Check a model ``Environment`` against CreateModel's limits and the Triton container's variables.

    - at most 100 variables; keys match ``[a-zA-Z_][a-zA-Z0-9_]*``; every key and every value at most
      1024 bytes (UTF-8); all keys and values together at most 32 KB (32,768 bytes, the sum of the UTF-8
      lengths of every key and every value);
    - ``SAGEMAKER_TRITON_*`` names must be ones the container reads (a close match is suggested), with
      values it can parse (sizes at least the python backend's minimums, booleans, ports, ...);
    - ``SAGEMAKER_MULTI_MODEL``, ``SAGEMAKER_BIND_TO_PORT`` and ``SAGEMAKER_SAFE_PORT_RANGE`` are set by
      SageMaker and refused; ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` is refused for a multi-model
      endpoint (the container ignores it there).

    Returns:
        A plain ``dict[str, str]`` copy.

    Raises:
        TypeError: a key or value is not a string.
        ValueError: any rule above is broken (the message names the variable).

    Example::

        >>> validate_environment({"SAGEMAKER_TRITON_LOG_VERBOSE": "1"})
        {'SAGEMAKER_TRITON_LOG_VERBOSE': '1'}
    """
    result: dict[str, str] = {}
    total = 0
    for key, value in environment.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"environment keys and values must be str, got {key!r}: {value!r}")
        if not _KEY.match(key):
            raise ValueError(f"environment variable name {key!r} must match [a-zA-Z_][a-zA-Z0-9_]*")
        key_bytes, value_bytes = len(key.encode()), len(value.encode())
        if key_bytes > ENVIRONMENT_MAX_ITEM_BYTES:
            raise ValueError(f"environment variable name {key[:40]!r}... is {key_bytes} bytes (max 1024)")
        if value_bytes > ENVIRONMENT_MAX_ITEM_BYTES:
            raise ValueError(f"value of {key} is {value_bytes} bytes (max {ENVIRONMENT_MAX_ITEM_BYTES})")
        total += key_bytes + value_bytes
        if key in _PLATFORM_VARIABLES:
            raise ValueError(f"{key} is set by SageMaker itself; remove it from the environment")
        if key.startswith("SAGEMAKER_TRITON_"):
            if key not in KNOWN_VARIABLES:
                close = difflib.get_close_matches(key, sorted(KNOWN_VARIABLES), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise ValueError(
                    f"unknown Triton container variable {key}{hint}: the SageMaker Triton container's "
                    "serve script does not read it, so it would do nothing; remove it (the embedded stack, "
                    "like the container, ignores it for endpoints other tools create)"
                )
            if key == DEFAULT_MODEL_NAME and multi_model:
                raise ValueError(
                    f"{DEFAULT_MODEL_NAME} applies to single-model endpoints only; a multi-model endpoint "
                    "serves every model under its prefix by TargetModel"
                )
            _check_value(key, value)
        result[key] = value
    if len(result) > ENVIRONMENT_MAX_ENTRIES:
        raise ValueError(f"environment has {len(result)} variables (max {ENVIRONMENT_MAX_ENTRIES})")
    if total > ENVIRONMENT_MAX_BYTES:
        raise ValueError(
            f"environment keys and values add up to {total} bytes (max {ENVIRONMENT_MAX_BYTES}, i.e. 32 KB)"
        )
    return result


@dataclass(frozen=True)
class TritonEnvironment:
    """Typed ``SAGEMAKER_TRITON_*`` settings of the SageMaker Triton container (None = not set here).

    ``deploy_mme`` adds :data:`DEFAULT_ENVIRONMENT` for the shared-memory fields left at None; every other
    field left at None gets the container's default.

    Attributes:
        shm_default_byte_size: python-backend shared memory per model instance (deploy_mme's default
            16 MiB; at least 1 MiB). Committed for every loaded python-backend model instance.
        shm_growth_byte_size: step by which that region grows (deploy_mme's default 1 MiB; > 0).
        log_verbose: Triton's verbose log level (the container logs verbosely unless this is 0).
        log_info, log_warning, log_error: enable or disable those log levels.
        buffer_manager_thread_count: ``--buffer-manager-thread-count``.
        thread_count: ``--sagemaker-thread-count``, threads of the SageMaker HTTP front-end.
        ping_mode: ``"live"`` (the container's MME default) or ``"ready"`` for ``GET /ping``; written as
            ``SAGEMAKER_TRITON_OVERRIDE_PING_MODE``, which is what the serve script honours.
        additional_args: further ``tritonserver`` arguments, e.g. ``["--exit-timeout-secs=10"]``. The
            script splits them on whitespace without quoting, so an argument may not contain blanks.
        tensorflow_version: ``"1"`` or ``"2"``, the TensorFlow backend version.
        model_load_gpu_limit: fraction (0, 1] of each GPU's memory that model loading may use.
        model_namespacing: False turns Triton's model namespacing off (the container turns it on).
        allow_grpc, allow_metrics, grpc_port, metrics_port: Triton's gRPC and metrics endpoints inside
            the container (off by default; SageMaker only routes HTTP to the SageMaker front-end).
        inference_type: ``"infer"`` (default), ``"generate"`` or ``"generate_stream"``. Acts only on a
            single-model endpoint's ``/invocations`` route: a multi-model endpoint's requests go to
            ``/models/<name>/invoke``, which ignores it (``deploy_mme`` warns when it is set).
        extra: further variables, passed through (validated like the rest). ``SAGEMAKER_TRITON_*`` names
            here must be known; a name that a typed field covers must be set through the field.
    """

    shm_default_byte_size: int | None = None
    shm_growth_byte_size: int | None = None
    log_verbose: int | None = None
    log_info: bool | None = None
    log_warning: bool | None = None
    log_error: bool | None = None
    buffer_manager_thread_count: int | None = None
    thread_count: int | None = None
    ping_mode: Literal["ready", "live"] | None = None
    additional_args: Sequence[str] = ()
    tensorflow_version: Literal["1", "2"] | None = None
    model_load_gpu_limit: float | None = None
    model_namespacing: bool | None = None
    allow_grpc: bool | None = None
    allow_metrics: bool | None = None
    grpc_port: int | None = None
    metrics_port: int | None = None
    inference_type: Literal["infer", "generate", "generate_stream"] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def _typed(self) -> dict[str, str]:
        values: dict[str, str] = {}

        def put(name: str, value: object) -> None:
            if value is None:
                return
            if isinstance(value, bool):
                values[name] = _bool(value)
            elif isinstance(value, int | float | str):
                values[name] = str(value)
            else:
                raise TypeError(f"{name}: unsupported value {value!r}")

        for name, value in (
            (SHM_DEFAULT_BYTE_SIZE, self.shm_default_byte_size),
            (SHM_GROWTH_BYTE_SIZE, self.shm_growth_byte_size),
            (LOG_VERBOSE, self.log_verbose),
            (LOG_INFO, self.log_info),
            (LOG_WARNING, self.log_warning),
            (LOG_ERROR, self.log_error),
            (BUFFER_MANAGER_THREAD_COUNT, self.buffer_manager_thread_count),
            (THREAD_COUNT, self.thread_count),
            (OVERRIDE_PING_MODE, self.ping_mode),
            (TENSORFLOW_VERSION, self.tensorflow_version),
            (MODEL_LOAD_GPU_LIMIT, self.model_load_gpu_limit),
            (ALLOW_GRPC, self.allow_grpc),
            (ALLOW_METRICS, self.allow_metrics),
            (GRPC_PORT, self.grpc_port),
            (METRICS_PORT, self.metrics_port),
            (INFERENCE_TYPE, self.inference_type),
        ):
            if isinstance(value, float) and not isinstance(value, bool) and name != MODEL_LOAD_GPU_LIMIT:
                raise TypeError(f"{name} must be an integer, got {value!r}")
            put(name, value)
        if self.model_namespacing is not None:
            # The script passes this variable's value as --model-namespacing=<value>.
            values[DISABLE_MODEL_NAMESPACING] = _bool(self.model_namespacing)
        if isinstance(self.additional_args, str):
            raise TypeError("additional_args must be a sequence of arguments, not one string")
        if self.additional_args:
            for arg in self.additional_args:
                if not arg or any(c.isspace() for c in arg):
                    raise ValueError(
                        f"additional argument {arg!r} is empty or contains whitespace (the serve script "
                        "splits SAGEMAKER_TRITON_ADDITIONAL_ARGS on whitespace)"
                    )
            values[ADDITIONAL_ARGS] = " ".join(self.additional_args)
        return values

    def to_environment(self, *, multi_model: bool = True) -> dict[str, str]:
        """The ``Environment`` map for CreateModel, validated by :func:`validate_environment`.

        Raises:
            ValueError: a value is out of range, ``extra`` names an unknown ``SAGEMAKER_TRITON_*``
                variable or one a typed field covers, or a CreateModel limit is exceeded.
            TypeError: a value has the wrong type.
        """
        values = self._typed()
        for key, value in self.extra.items():
            if key in values or key in _FIELD_OF:
                field_name = _FIELD_OF.get(key, "?")
                raise ValueError(f"{key} is set through TritonEnvironment.{field_name}, not extra")
            values[key] = value
        return validate_environment(values, multi_model=multi_model)


_FIELD_OF = {
    SHM_DEFAULT_BYTE_SIZE: "shm_default_byte_size",
    SHM_GROWTH_BYTE_SIZE: "shm_growth_byte_size",
    LOG_VERBOSE: "log_verbose",
    LOG_INFO: "log_info",
    LOG_WARNING: "log_warning",
    LOG_ERROR: "log_error",
    BUFFER_MANAGER_THREAD_COUNT: "buffer_manager_thread_count",
    THREAD_COUNT: "thread_count",
    OVERRIDE_PING_MODE: "ping_mode",
    PING_MODE: "ping_mode",
    ADDITIONAL_ARGS: "additional_args",
    TENSORFLOW_VERSION: "tensorflow_version",
    MODEL_LOAD_GPU_LIMIT: "model_load_gpu_limit",
    DISABLE_MODEL_NAMESPACING: "model_namespacing",
    ALLOW_GRPC: "allow_grpc",
    ALLOW_METRICS: "allow_metrics",
    GRPC_PORT: "grpc_port",
    METRICS_PORT: "metrics_port",
    INFERENCE_TYPE: "inference_type",
}
