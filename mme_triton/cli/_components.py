"""``deploy-components``: model directories to an endpoint of inference components, one per model."""

from __future__ import annotations

import argparse
from typing import Any

from mme_triton.cli._common import SubParsers, add_command, deploy_progress, duration, emit
from mme_triton.cli._endpoint import DEPLOY_TIMEOUT, add_endpoint_flags, endpoint_arguments

__all__ = ["component", "register"]

_OPTIONS = ("memory", "cpus", "accelerators", "copies")
_AUTOSCALING = "--autoscaling takes NAME=MIN:MAX:TARGET, e.g. linear=0:4:100, got {text!r}"


def component(text: str, scaling: dict[str, Any]) -> Any:
    """``NAME=MODEL[,memory=2GiB][,cpus=1][,accelerators=1][,copies=2]`` → ``InferenceComponent``.

    Raises:
        ValueError: not of that form, or a value InferenceComponent refuses.
    """
    from mme_triton.endpoint.components import InferenceComponent

    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ValueError(
            f"--component takes NAME=MODEL[,memory=...,cpus=...,accelerators=...,copies=...], got {text!r}"
        )
    model, *pairs = rest.split(",")
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in _OPTIONS:
            known = ", ".join(k + "=..." for k in _OPTIONS)
            raise ValueError(f"--component {name}: {pair!r} is not one of {known}")
        try:
            options[key] = value if key == "memory" else (float(value) if key == "cpus" else int(value))
        except ValueError:
            raise ValueError(f"--component {name}: {key} takes a number, got {value!r}") from None
    return InferenceComponent(name, model, autoscaling=scaling.get(name), **options)


def _scaling(values: list[str]) -> dict[str, Any]:
    """``NAME=MIN:MAX:TARGET`` → ``{name: ComponentAutoScaling}``."""
    from mme_triton.endpoint.component_scaling import ComponentAutoScaling

    found: dict[str, Any] = {}
    for text in values:
        name, _, bounds = text.partition("=")
        parts = bounds.split(":")
        try:
            low, high, target = int(parts[0]), int(parts[1]), float(parts[2])
        except (IndexError, ValueError):
            raise ValueError(_AUTOSCALING.format(text=text)) from None
        if not name or len(parts) != 3:
            raise ValueError(_AUTOSCALING.format(text=text))
        found[name] = ComponentAutoScaling(
            min_copies=low, max_copies=high, target_invocations_per_copy=target
        )
    return found


def _managed(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(low), int(high)
    except ValueError:
        raise ValueError(f"--managed-scaling takes MIN:MAX instances, e.g. 0:2, got {text!r}") from None


def _deploy(args: argparse.Namespace) -> int:
    scaling = _scaling(args.autoscaling)
    components = [component(text, scaling) for text in args.component]
    unknown = sorted(set(scaling) - {c.name for c in components})
    if unknown:
        raise ValueError(f"--autoscaling names no --component: {', '.join(unknown)}")
    kwargs: dict[str, Any] = {
        **endpoint_arguments(args),
        "managed_instance_scaling": _managed(args.managed_scaling),
        "routing": args.routing,
    }
    if args.dry_run:
        from mme_triton.endpoint.planning_components import plan_inference_components

        # --timeout bounds the plan's reads; without it the plan's own default applies
        if args.timeout is not None:
            kwargs["timeout"] = args.timeout.total_seconds()
        plan = plan_inference_components(args.endpoint_name, components, **kwargs)
        emit(args, str(plan), plan.to_dict())
        return 1 if plan.blockers else 0
    from mme_triton.endpoint.deploy_components import deploy_inference_components

    timeout = args.timeout if args.timeout is not None else DEPLOY_TIMEOUT
    kwargs.update(wait=not args.no_wait, timeout=timeout.total_seconds())
    if args.poll_interval is not None:
        kwargs["poll_interval"] = args.poll_interval.total_seconds()
    endpoint = deploy_inference_components(
        args.endpoint_name, components, progress=deploy_progress(args), **kwargs
    )
    text = f"{endpoint.name}  {endpoint.status}  {endpoint.arn}\ncomponents: {', '.join(endpoint.components)}"
    emit(args, text, {k: v for k, v in vars(endpoint).items() if not k.startswith("_")})
    return 0


def register(sub: SubParsers) -> None:
    """Add ``deploy-components``."""
    p = add_command(
        sub,
        "deploy-components",
        help="create or update an endpoint of inference components, one per model directory",
        examples=[
            "mme-triton deploy-components my-components s3://my-bucket/ic/ \\",
            "    --instance-type ml.g5.12xlarge \\",
            "    --role arn:aws:iam::123456789012:role/SageMakerRole \\",
            "    --component resnet=repo/resnet,memory=4GiB,cpus=2,accelerators=1 \\",
            "    --component bert=repo/bert,memory=8GiB,cpus=4,accelerators=1,copies=2",
            "mme-triton deploy-components my-components --instance-type ml.m5.xlarge \\",
            "    --component linear=repo/linear --autoscaling linear=0:4:100 --managed-scaling 0:2",
            "mme-triton deploy-components my-components s3://my-bucket/ic/ --instance-type ml.m5.xlarge \\",
            "    --component linear=repo/linear --dry-run",
        ],
        handler=_deploy,
        aws=True,
    )
    add_endpoint_flags(
        p,
        prefix_help="where the model directories are uploaded (default, with the SageMaker SDK: its bucket)",
        instance_help="e.g. ml.g5.12xlarge, ml.m5.xlarge",
    )
    p.add_argument(
        "--component",
        action="append",
        default=[],
        required=True,
        metavar="NAME=MODEL[,OPTION=VALUE]",
        help="a component: a model directory or s3:// archive, with memory=, cpus=, accelerators=, copies=",
    )
    p.add_argument("--managed-scaling", metavar="MIN:MAX", help="ManagedInstanceScaling, e.g. 0:2")
    p.add_argument("--routing", help="RoutingConfig: LEAST_OUTSTANDING_REQUESTS or RANDOM")
    p.add_argument(
        "--autoscaling",
        action="append",
        default=[],
        metavar="NAME=MIN:MAX:TARGET",
        help="a component's autoscaling: copies MIN to MAX, TARGET invocations per copy per minute",
    )
    p.add_argument(
        "--timeout",
        type=duration,
        default=None,
        help="wait for InService (30m); with --dry-run, how long the plan's reads are retried (2m)",
    )
    p.add_argument("--no-wait", action="store_true", help="return once the component calls are sent")
    p.add_argument("--dry-run", action="store_true", help="print what would be created, updated or deleted")
