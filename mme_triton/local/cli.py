"""The embedded stack's commands of the ``mme-triton`` command line: ``local up``, ``local status`` and
``quickstart``.

:func:`add_local_commands` registers them on the main parser's sub-parsers; each handler returns the exit
code. Library errors propagate to the main command's error boundary (one ``error:`` line, exit 1).
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from mme_triton.local.route.limits import (
    DEFAULT_MAX_COMPRESSION_RATIO,
    DEFAULT_MAX_COPIES,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_MEMBERS,
)
from mme_triton.local.triton.options import DEFAULT_SHM_LIMIT

__all__ = ["add_local_commands", "local_status", "local_up", "parse_period", "parse_size", "quickstart"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def parse_size(text: str) -> int:
    """``"2GiB"`` -> 2147483648; ``"500MB"`` -> 500000000; a bare number is bytes.

    Raises:
        argparse.ArgumentTypeError: not a positive size.
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 2GiB, 500MB, 1048576)")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise argparse.ArgumentTypeError(f"the size must be > 0, got {text!r}")
    return size


def _budget(text: str) -> int | str:
    return "instance" if text.strip().lower() == "instance" else parse_size(text)


def parse_period(text: str) -> int:
    """``"1s"`` -> 1, ``"1m"`` -> 60, ``"60"`` -> 60: a metrics period in seconds (1, 5, 10, 20, 30 or a
    multiple of 60).

    Raises:
        argparse.ArgumentTypeError: not such a period.
    """
    from mme_triton.local.aws.metrics import check_metrics_period

    match = re.fullmatch(r"\s*([0-9]+)\s*(s|m|min)?\s*", text.lower())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a period: {text!r} (e.g. 1s, 10s, 1m)")
    seconds = int(match.group(1)) * (60 if match.group(2) in ("m", "min") else 1)
    try:
        return check_metrics_period(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"the metrics period must be 1s, 5s, 10s, 20s, 30s or a multiple of 1m, got {text!r}"
        ) from None


def local_up(args: argparse.Namespace, *, stop: threading.Event | None = None) -> int:
    """``mme-triton local up``: run a LocalStack in the foreground until Ctrl-C, SIGTERM or ``stop`` is set.

    Prints the endpoint URL, the variables another process exports to use the stack, the execution role
    and a ModelDataUrl with its bucket created. Every endpoint's Triton runs in a process group of its own
    (a Ctrl-C in the terminal does not reach it), so stopping goes through the stack: SIGTERM is handled
    like Ctrl-C, and further signals are ignored until the stack has stopped.
    """
    from mme_triton.local.stack import LocalStack

    budget: dict[str, Any] = {} if args.memory_budget is None else {"memory_budget": args.memory_budget}
    if args.reserved_memory is not None:
        budget["reserved_memory"] = args.reserved_memory
    stack = LocalStack(
        region=args.region,
        **budget,
        max_models=args.max_models,
        log_verbose=args.triton_log_verbose,
        shm_limit=args.shm_limit,
        max_unpacked_bytes=args.max_unpacked_bytes,
        max_archive_members=args.max_archive_members,
        max_compression_ratio=args.max_compression_ratio,
        max_instances=args.max_instances,
        max_copies=args.max_copies,
        metrics_period=args.metrics_period,
        triton_ports=args.triton_ports,
    )
    event = stop or threading.Event()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous: dict[signal.Signals, Any] = {}
    if in_main_thread:
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        # Ctrl-C and SIGTERM only set the event: a KeyboardInterrupt could land in a finalizer that the
        # main thread happens to run, where Python reports and drops it, and the stack would not stop.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: event.set())
    try:
        with stack:
            model_data_url = stack.model_data_url(bucket=args.bucket)
            _out(f"mme-triton embedded stack running at {stack.endpoint_url}")
            _out()
            _out("# in another shell (AWS CLI, boto3, mme-triton):")
            for name, value in stack.environment().items():
                _out(f"export {name}={shlex.quote(value)}")
            _out()
            _out(f"execution role: {stack.role_arn}")
            _out(f"model data url: {model_data_url}")
            _out(f"metrics:        to the stack's CloudWatch every {_period(stack.metrics_period)}")
            _out()
            if args.triton_ports:
                _out("Triton's own ports (perf_analyzer, model-analyzer) are printed as endpoints come up.")
            _out("Press Ctrl-C to stop.")
            shown: dict[str, Any] = {}
            try:
                while not event.wait(0.5):
                    if args.triton_ports:
                        _show_triton_endpoints(stack, shown)
            except KeyboardInterrupt:
                pass
            _out("stopping ...")
            if in_main_thread:  # an impatient second Ctrl-C must not leave Tritons behind
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    return 0


def local_status(args: argparse.Namespace) -> int:
    """``mme-triton local status``: what each endpoint of a running ``local up`` holds, read from its
    InvokeEndpoint route (``--url``, else ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` as ``local up`` prints it).

    Raises:
        LocalStackError: no URL, or no stack answers there.
    """
    import json
    import os
    import urllib.error
    import urllib.request

    from mme_triton.errors import LocalStackError
    from mme_triton.local.route.limits import human_size
    from mme_triton.local.route.status import STATUS_PATH, status_from_json

    url = args.url or os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME")
    if not url:
        raise LocalStackError(
            "no stack to ask: export the variables `mme-triton local up` prints "
            "(AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME), or pass --url"
        )
    try:
        with urllib.request.urlopen(url.rstrip("/") + STATUS_PATH, timeout=30) as answer:
            document = json.loads(answer.read(64 * 1024 * 1024))
        statuses = status_from_json(document)
    except (OSError, ValueError) as exc:
        raise LocalStackError(
            f"no embedded stack answers at {url} ({exc}); is `mme-triton local up` running?"
        ) from exc
    if args.json:
        _out(json.dumps(document, indent=2))
        return 0
    if not statuses:
        _out(f"no endpoint in service on the stack at {url}")
    for status in statuses:
        if not status.model_data_url:  # an endpoint of inference components
            _components(status)
            continue
        budget = "no byte limit" if status.memory_budget is None else human_size(status.memory_budget)
        several = len(status.instances) > 1
        count = f"{len(status.instances)} instances, " if several else ""
        _out(
            f"endpoint {status.endpoint_name} ({status.variant_name}, {status.instance_type}): {count}"
            f"{len(status.loaded)} loaded, memory budget {budget}{' per instance' if several else ''}; "
            f"{status.loads} loads, {status.evictions} evictions, {status.downloads} downloads, "
            f"{status.restarts} restarts"
        )
        for instance in status.instances if several else []:
            _out(
                f"  instance {instance.instance_id}: {len(instance.loaded)} loaded; {instance.loads} loads, "
                f"{instance.evictions} evictions, {instance.downloads} downloads, "
                f"{instance.restarts} restarts"
            )
            _loaded(instance.loaded, "    ")
        if not several:
            _loaded(status.loaded, "  ")
        if status.s3_error:
            _out(f"  models in S3: cannot list them ({status.s3_error})")
        else:
            _out(f"  in {status.model_data_url}, not loaded: {', '.join(status.not_loaded) or 'none'}")
    return 0


def _components(status: Any) -> None:
    """An endpoint that hosts inference components: each component's copies."""
    _out(
        f"endpoint {status.endpoint_name} ({status.variant_name}, {status.instance_type}): "
        f"{_count(len(status.components), 'inference component')}"
    )
    for component in status.components:
        _out(
            f"  component {component.component_name}: {_count(len(component.copies), 'copy', 'copies')} "
            f"in the routing (copy count {component.copy_count})"
        )
        for copy in component.copies:
            _out(
                f"    copy {copy.copy_id} on {copy.instance_id}: {copy.served} served, "
                f"{copy.in_flight} in flight"
            )


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def _loaded(models: list[Any], indent: str) -> None:
    from mme_triton.local.route.limits import human_size

    if not models:
        return
    _out(f"{indent}loaded (least recently used first):")
    width = max(len(model.target_model) for model in models)
    for model in models:
        _out(
            f"{indent}  {model.target_model:<{width}}  {human_size(model.memory_bytes):>10}  "
            f"loaded {model.loads}x"
        )


def _show_triton_endpoints(stack: Any, shown: dict[str, Any]) -> None:
    """Print each in-service endpoint's Triton ports once (again after a restart), and each model it loads
    with the name Triton serves it under."""
    for endpoint in stack.runtime.endpoints():
        found = stack.triton_endpoints(endpoint)
        if found is None:
            continue
        before = shown.get(endpoint)
        if before is None or before.http_url != found.http_url:
            _out(
                f"endpoint {endpoint}: Triton HTTP {found.http_url}, gRPC {found.grpc_url}, "
                f"metrics {found.metrics_url}"
            )
            before = None
        for target, name in sorted(found.models.items()):
            if before is None or target not in before.models:
                _out(
                    f"endpoint {endpoint}: {target} is loaded as Triton model {name!r} "
                    f"(perf_analyzer -m {shlex.quote(name)} -u {found.http_url.removeprefix('http://')})"
                )
        shown[endpoint] = found


def quickstart(args: argparse.Namespace) -> int:
    """``mme-triton quickstart``: two models on one endpoint of the embedded stack, invoked and removed."""
    from mme_triton.local.quickstart import run_quickstart

    result = run_quickstart(endpoint_name=args.endpoint_name, progress=_out)
    _out()
    if result.calls:
        for name, value in result.calls[0].inputs.items():
            _out(f"input  {_tensor(name, value)}")
    _out(f"{'TargetModel':<16} {'encoding':<8} {'latency':>11}  check")
    seen: set[str] = set()
    for call in result.calls:
        encoding = "binary" if call.binary else "JSON"
        verdict = "ok (= numpy)" if call.matches else "MISMATCH with numpy"
        first = "  (first call: download from S3 + load into Triton)" if call.target_model not in seen else ""
        seen.add(call.target_model)
        _out(f"{call.target_model:<16} {encoding:<8} {call.seconds * 1000:8.1f} ms  {verdict}{first}")
        for name, value in call.outputs.items():
            _out(f"    {_tensor(name, value)}")
    _out()
    _out("timings: " + ", ".join(f"{step} {seconds:.2f}s" for step, seconds in result.timings.items()))
    if not result.ok:
        _out("error: some outputs differ from the numpy reference")
        return 1
    _out("done: the endpoint, its models and the stack are gone. Next: `mme-triton local up` runs the stack")
    _out("for your own models (docs/local.md).")
    return 0


def _period(seconds: int) -> str:
    return f"{seconds // 60}m" if seconds >= 60 else f"{seconds}s"


def _tensor(name: str, value: Any) -> str:
    """``OUTPUT0 [2, 3] = [0.225 0.95 1.05; 1.475 1.2 2.3]``: a small tensor on one line, rows by ``;``."""
    rows = "; ".join(" ".join(f"{v:.4g}" for v in row) for row in value.reshape(value.shape[0], -1))
    return f"{name} {list(value.shape)} = [{rows}]"


def add_local_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``local up`` and ``quickstart`` on the ``mme-triton`` sub-parsers (``handler`` default)."""
    local = subparsers.add_parser("local", help="the embedded stack (no AWS account)")
    local_sub = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND")
    up = local_sub.add_parser(
        "up",
        help="run the embedded stack in the foreground and print the environment to export",
        description="Run moto, the InvokeEndpoint runtime and one Triton per endpoint on 127.0.0.1.",
    )
    up.add_argument("--region", default="us-east-1", help="region of the stack (default: us-east-1)")
    up.add_argument(
        "--memory-budget",
        type=_budget,
        default=None,
        help="memory an endpoint's loaded models may hold before the least recently used are unloaded: a "
        "size, or 'instance' (the default): the instance type's memory for models (docs/capacity.md), at "
        "most half of this machine's",
    )
    up.add_argument(
        "--reserved-memory",
        type=parse_size,
        default=None,
        help="what an instance keeps for itself, not for models (default: the instance type's, "
        "docs/capacity.md: 1GiB and 1/64 of the memory on a CPU type)",
    )
    up.add_argument("--max-models", type=int, default=None, help="most models an endpoint keeps loaded")
    up.add_argument(
        "--bucket", default=None, help="bucket to create (default: mme-triton-local-<account id>)"
    )
    up.add_argument("--triton-log-verbose", type=int, default=0, help="Triton's --log-verbose level")
    up.add_argument(
        "--metrics-period",
        type=parse_period,
        default=60,
        metavar="PERIOD",
        help="how often the endpoints' CloudWatch metrics are published: 1m as on SageMaker (default), "
        "or 1s, 5s, 10s, 20s, 30s to watch them closely (docs/metrics.md)",
    )
    up.add_argument(
        "--triton-ports",
        action="store_true",
        help="also open each endpoint's Triton HTTP, gRPC and metrics ports on 127.0.0.1 (for perf_analyzer "
        "and model-analyzer) and print them, with the Triton name of each model loaded",
    )
    limits = up.add_argument_group("limits that protect this machine (docs/local.md)")
    limits.add_argument(
        "--shm-limit",
        type=parse_size,
        default=DEFAULT_SHM_LIMIT,
        help="ceiling on the python backend's shared memory per model instance (default: 64MiB)",
    )
    limits.add_argument(
        "--max-unpacked-bytes",
        type=parse_size,
        default=None,
        help="what one archive may unpack to (default: the variant's VolumeSizeInGB, else 16GiB)",
    )
    limits.add_argument(
        "--max-archive-members",
        type=int,
        default=DEFAULT_MAX_MEMBERS,
        help=f"entries one archive may hold (default: {DEFAULT_MAX_MEMBERS})",
    )
    limits.add_argument(
        "--max-compression-ratio",
        type=float,
        default=DEFAULT_MAX_COMPRESSION_RATIO,
        help=f"how many times an archive may expand (default: {DEFAULT_MAX_COMPRESSION_RATIO})",
    )
    limits.add_argument(
        "--max-instances",
        type=int,
        default=DEFAULT_MAX_INSTANCES,
        help=f"the most instances, a Triton each, an endpoint runs (default: {DEFAULT_MAX_INSTANCES})",
    )
    limits.add_argument(
        "--max-copies",
        type=int,
        default=DEFAULT_MAX_COPIES,
        help="the most copies of inference components, a Triton each, the stack runs "
        f"(default: {DEFAULT_MAX_COPIES})",
    )
    handler: Callable[[argparse.Namespace], int] = local_up
    up.set_defaults(handler=handler)
    status = local_sub.add_parser(
        "status",
        help="what each endpoint of a running `local up` holds: loaded models, their memory and loads",
        description="Per endpoint of a running `mme-triton local up`: the models loaded (least recently used "
        "first) with their memory and load counts, and the models in S3 not loaded.",
    )
    status.add_argument(
        "--url",
        default=None,
        help="the stack's InvokeEndpoint URL (default: $AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME, as `local up` "
        "prints it)",
    )
    status.add_argument("--json", action="store_true", help="print the stack's answer as JSON")
    status.set_defaults(handler=local_status)

    qs = subparsers.add_parser(
        "quickstart",
        help="deploy two small models to one endpoint on the embedded stack, invoke them, tear down",
    )
    qs.add_argument("--endpoint-name", default="mme-triton-quickstart", help="name of the endpoint")
    qs.set_defaults(handler=quickstart)
