"""What ``tritonserver`` arguments an endpoint's Environment may set on the embedded stack, and their bounds.

The container's serve script turns ``SAGEMAKER_TRITON_*`` variables into ``tritonserver`` arguments
(:mod:`mme_triton.local.serve`); on SageMaker an endpoint has an instance to itself, on the stack it shares
one machine with the user's other work, so :func:`bound_triton_args` keeps those arguments within bounds:

- shared memory: the python backend commits ``shm-default-byte-size`` in ``/dev/shm`` for every model
  instance as soon as it loads, and every model on the stack (ONNX and TorchScript ones included) runs on
  the python backend. ``shm-default-byte-size`` and ``shm-growth-byte-size`` (from ``SAGEMAKER_TRITON_SHM_*``
  or ``SAGEMAKER_TRITON_ADDITIONAL_ARGS``, per backend or global) and the response cache's size are lowered
  to ``shm_limit`` (default :data:`DEFAULT_SHM_LIMIT`), thread counts to :data:`MAX_THREADS`;
- the model repository, the log file, the backend directory and the ports belong to the stack.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_SHM_LIMIT",
    "MAX_THREADS",
    "MIN_SHM_LIMIT",
    "BoundedArgs",
    "bound_triton_args",
    "check_shm_limit",
]

MiB = 1024**2

DEFAULT_SHM_LIMIT = 64 * MiB
"""Default ceiling on the python backend's shared-memory settings (per model instance): 64 MiB."""
MIN_SHM_LIMIT = 1 * MiB
"""The python backend refuses a default region under 1 MiB, so a ceiling cannot be lower."""
MAX_THREADS = 64
"""Ceiling on Triton's thread-count settings (front-end, buffer manager, model loads)."""

# Every long option of tritonserver 2.51 (command_line_parser.cc): getopt_long takes any unambiguous
# prefix of one, so an abbreviation must be resolved against all of them.
_TRITON_OPTIONS = frozenset(
    [
        "allow-cpu-metrics",
        "allow-gpu-metrics",
        "allow-grpc",
        "allow-http",
        "allow-metrics",
        "allow-sagemaker",
        "allow-vertex-ai",
        "backend-config",
        "backend-directory",
        "buffer-manager-thread-count",
        "cache-config",
        "cache-directory",
        "cuda-memory-pool-byte-size",
        "cuda-virtual-address-size",
        "disable-auto-complete-config",
        "enable-peer-access",
        "exit-on-error",
        "exit-timeout-secs",
        "grpc-address",
        "grpc-header-forward-pattern",
        "grpc-http2-max-ping-strikes",
        "grpc-http2-max-pings-without-data",
        "grpc-http2-min-recv-ping-interval-without-data",
        "grpc-infer-allocation-pool-size",
        "grpc-infer-response-compression-level",
        "grpc-keepalive-permit-without-calls",
        "grpc-keepalive-time",
        "grpc-keepalive-timeout",
        "grpc-max-connection-age",
        "grpc-max-connection-age-grace",
        "grpc-port",
        "grpc-restricted-protocol",
        "grpc-root-cert",
        "grpc-server-cert",
        "grpc-server-key",
        "grpc-use-ssl",
        "grpc-use-ssl-mutual",
        "help",
        "host-policy",
        "http-address",
        "http-header-forward-pattern",
        "http-port",
        "http-restricted-api",
        "http-thread-count",
        "id",
        "load-model",
        "log-error",
        "log-file",
        "log-format",
        "log-info",
        "log-verbose",
        "log-warning",
        "metrics-address",
        "metrics-config",
        "metrics-interval-ms",
        "metrics-port",
        "min-supported-compute-capability",
        "model-config-name",
        "model-control-mode",
        "model-load-gpu-limit",
        "model-load-retry-count",
        "model-load-thread-count",
        "model-namespacing",
        "model-repository",
        "model-store",
        "pinned-memory-pool-byte-size",
        "rate-limit",
        "rate-limit-resource",
        "repoagent-directory",
        "repository-poll-secs",
        "response-cache-byte-size",
        "reuse-grpc-port",
        "reuse-http-port",
        "sagemaker-port",
        "sagemaker-safe-port-range",
        "sagemaker-thread-count",
        "strict-model-config",
        "strict-readiness",
        "trace-config",
        "trace-count",
        "trace-file",
        "trace-level",
        "trace-log-frequency",
        "trace-rate",
        "vertex-ai-default-model",
        "vertex-ai-port",
        "vertex-ai-thread-count",
    ]
)
_NO_ARGUMENT = frozenset({"help"})
# Options the stack sets itself: the user's are dropped.
_STACK_OWNED = {
    "model-repository": "the stack loads models through the SageMaker front-end only",
    "model-store": "the stack loads models through the SageMaker front-end only",
    "load-model": "the stack loads models through the SageMaker front-end only",
    "log-file": "the stack keeps Triton's log itself",
    "backend-directory": "the stack provides the backends",
    "repoagent-directory": "the stack provides the backends",
    "sagemaker-safe-port-range": "the stack picks the port",
}
# Options the stack overrides after the user's (kept, so that Triton still refuses what it cannot parse).
_ENDPOINTS = ("allow-grpc", "allow-metrics", "allow-http", "allow-vertex-ai")
_THREAD_OPTIONS = ("sagemaker-thread-count", "buffer-manager-thread-count", "model-load-thread-count")
_SHM_SETTINGS = ("shm-default-byte-size", "shm-growth-byte-size")
_SHM_DEFAULTS = {"shm-default-byte-size": 16 * MiB, "shm-growth-byte-size": 1 * MiB}
_TRUE = frozenset({"true", "1", "on", "yes"})
# std::stol, as the python backend reads its sizes: leading blanks, a sign, digits; the rest is ignored.
_STOL = re.compile(r"\s*([+-]?\d+)")


@dataclass
class BoundedArgs:
    """``tritonserver`` arguments after :func:`bound_triton_args`."""

    args: list[str]
    """The arguments to pass, ending with the python backend's (bounded) shared-memory settings."""
    lowered: list[str] = field(default_factory=list)
    """One line per requested value that was lowered (warn about these)."""
    notes: list[str] = field(default_factory=list)
    """One line per argument dropped or overridden (log these)."""


def check_shm_limit(shm_limit: int) -> int:
    """Return ``shm_limit`` if it is a valid ceiling (an int of at least 1 MiB).

    Raises:
        ValueError: it is below 1 MiB, which the python backend refuses as a region size.
    """
    if isinstance(shm_limit, bool) or not isinstance(shm_limit, int):
        raise TypeError(f"shm_limit must be an int (bytes), got {shm_limit!r}")
    if shm_limit < MIN_SHM_LIMIT:
        raise ValueError(f"shm_limit must be at least 1 MiB ({MIN_SHM_LIMIT} bytes), got {shm_limit}")
    return shm_limit


def _resolve(name: str) -> str | None:
    """The long option getopt_long takes ``--name`` for: exact, or the one option it abbreviates."""
    if name in _TRITON_OPTIONS:
        return name
    candidates = [option for option in _TRITON_OPTIONS if option.startswith(name)]
    return candidates[0] if len(candidates) == 1 else None


def _split(args: Sequence[str]) -> list[tuple[str | None, str, str | None]]:
    """``(option, original text, value)`` per option; other tokens as ``(None, token, None)``."""
    out: list[tuple[str | None, str, str | None]] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if not token.startswith("--") or token == "--":
            out.append((None, token, None))
            continue
        name, has_value, value = token[2:].partition("=")
        option = _resolve(name)
        if option is None:
            out.append((None, token, None))
            continue
        if not has_value and option not in _NO_ARGUMENT and index < len(args):
            value = args[index]
            token = f"{token} {value}"
            index += 1
        out.append((option, token, value if (has_value or option not in _NO_ARGUMENT) else None))
    return out


def _bounded_size(text: str, limit: int) -> tuple[str, int | None]:
    """``(value to pass, requested bytes)``: the requested size if stol reads one over ``limit``, else
    the text unchanged (the python backend then refuses what it cannot read)."""
    match = _STOL.match(text)
    if match is None:
        return text, None
    requested = int(match.group(1))
    return (str(limit), requested) if requested > limit else (text, requested)


def bound_triton_args(
    args: Sequence[str], *, shm_limit: int = DEFAULT_SHM_LIMIT, single_model: bool = False
) -> BoundedArgs:
    """Keep ``tritonserver`` arguments (the serve script's) within what the stack allows.

    - the python backend's ``shm-default-byte-size`` and ``shm-growth-byte-size`` (``--backend-config``
      for ``python`` or for every backend) are replaced by one setting each, the last value requested,
      lowered to ``shm_limit``; values the python backend cannot read are passed on for it to refuse;
    - ``--cache-config=local,size=`` and ``--response-cache-byte-size`` are lowered to ``shm_limit``;
      thread counts to :data:`MAX_THREADS`;
    - the user's ``shm-region-prefix-name`` and the options the stack owns (model repository, log
      file, backend directory ...) are dropped (``--load-model`` is kept in ``single_model`` mode, a copy of
      an inference component, where the serve script passes it); gRPC, metrics, HTTP and Vertex AI stay off
      (the stack sets them after these arguments).

    Example:
        >>> bounded = bound_triton_args(["--backend-config=python,shm-default-byte-size=16777216000"])
        >>> bounded.args[0]
        '--backend-config=python,shm-default-byte-size=67108864'
        >>> bounded.lowered[0].split(" per ")[0]
        'python backend shm-default-byte-size lowered from 16777216000 to 67108864 bytes'
    """
    check_shm_limit(shm_limit)
    result = BoundedArgs(args=[])
    shm: dict[str, str] = {}
    for option, text, value in _split(args):
        if option is None or value is None:
            result.args.append(text)
        elif option in _STACK_OWNED and not (single_model and option == "load-model"):
            result.notes.append(f"dropping {text}: {_STACK_OWNED[option]}")
        elif option == "backend-config":
            # Triton's reading: the backend is what comes before the first comma, if there is one.
            backend, _, setting = value.partition(",") if "," in value else ("", "", value)
            key, _, setting_value = setting.partition("=")
            if backend in ("", "python") and key in _SHM_SETTINGS:
                shm[key] = setting_value
            elif backend in ("", "python") and key == "shm-region-prefix-name":
                result.notes.append(f"dropping {text}: the stack names the shared-memory regions")
            else:
                result.args.append(text)
        elif option in ("cache-config", "response-cache-byte-size"):
            result.args.append(_bounded_cache(option, value, shm_limit, result))
        elif option in _THREAD_OPTIONS:
            passed, requested = _bounded_size(value, MAX_THREADS)
            if requested is not None and requested > MAX_THREADS:
                result.lowered.append(f"--{option} lowered from {requested} to {MAX_THREADS}")
            result.args.append(f"--{option}={passed}")
        else:
            if option in _ENDPOINTS and value.lower() in _TRUE:
                result.notes.append(f"{text}: stays off on the stack (it would bind a fixed port)")
            result.args.append(text)
    for key in _SHM_SETTINGS:
        requested_text = shm.get(key, str(_SHM_DEFAULTS[key]))
        passed, requested = _bounded_size(requested_text, shm_limit)
        if requested is not None and requested > shm_limit:
            result.lowered.append(
                f"python backend {key} lowered from {requested} to {shm_limit} bytes per model instance "
                "(the stack's shm_limit)"
            )
        result.args.append(f"--backend-config=python,{key}={passed}")
    return result


def _bounded_cache(option: str, value: str, limit: int, result: BoundedArgs) -> str:
    if option == "response-cache-byte-size":
        passed, requested = _bounded_size(value, limit)
        text = f"--{option}={passed}"
    else:
        cache, _, setting = value.partition(",")
        key, _, size = setting.partition("=")
        if cache != "local" or key != "size":
            return f"--{option}={value}"
        passed, requested = _bounded_size(size, limit)
        text = f"--{option}=local,size={passed}"
    if requested is not None and requested > limit:
        result.lowered.append(
            f"--{option} size lowered from {requested} to {limit} bytes (the stack's shm_limit)"
        )
    return text
