"""``deploy``, ``status``, ``teardown`` and ``sweep``: a multi-model endpoint's life on SageMaker."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mme_triton.cli._common import (
    SubParsers,
    add_command,
    aws_session,
    deploy_progress,
    duration,
    emit,
    key_values,
)

__all__ = ["DEPLOY_TIMEOUT", "add_endpoint_flags", "endpoint_arguments", "plan_deployment", "register"]

#: How long ``deploy`` waits for InService without --timeout (deploy_mme's default).
DEPLOY_TIMEOUT = duration("30m")


def _autoscaling(text: str) -> Any:
    """``MIN:MAX:TARGET`` (instances, instances, invocations per instance per minute) → ``AutoScaling``."""
    from mme_triton.endpoint.autoscaling import AutoScaling

    parts = text.split(":")
    try:
        low, high, target = int(parts[0]), int(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        raise ValueError(f"--autoscaling takes MIN:MAX:TARGET, e.g. 1:4:200, got {text!r}") from None
    if len(parts) != 3:
        raise ValueError(f"--autoscaling takes MIN:MAX:TARGET, e.g. 1:4:200, got {text!r}")
    return AutoScaling(min_capacity=low, max_capacity=high, target_invocations_per_instance=target)


def endpoint_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """A deployer's keyword arguments about the endpoint and its containers (``deploy`` and
    ``deploy-components`` alike; see :func:`add_endpoint_flags`)."""
    kwargs: dict[str, Any] = {
        "role": args.role,
        "instance_type": args.instance_type,
        "instance_count": args.instance_count,
        "model_data_url": args.model_data_url,
        "image_uri": args.image_uri,
        "environment": {**key_values(args.env, "--env"), **dict.fromkeys(args.unset_env)} or None,
        "tags": key_values(args.tag, "--tag"),
        "kms_key_id": args.kms_key_id,
        "inference_ami_version": args.inference_ami_version,
        "variant_name": args.variant_name,
        "boto3_session": aws_session(args),
    }
    if args.triton_version:
        kwargs["triton_version"] = args.triton_version
    return kwargs


def _deploy_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """``deploy_mme``'s keyword arguments from the command line, without the wait's and the prefix."""
    kwargs = endpoint_arguments(args)
    del kwargs["model_data_url"]
    return {
        **kwargs,
        "models": args.model,
        "model_cache": args.model_cache,
        "autoscaling": _autoscaling(args.autoscaling) if args.autoscaling else None,
        "overwrite": args.overwrite,
    }


def add_endpoint_flags(p: argparse.ArgumentParser, *, prefix_help: str, instance_help: str) -> None:
    """ENDPOINT, S3_PREFIX and the flags of the endpoint and its containers every deploy command takes."""
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p.add_argument("model_data_url", metavar="S3_PREFIX", nargs="?", default=None, help=prefix_help)
    p.add_argument("--role", help="execution role ARN (default, with the SageMaker SDK: its execution role)")
    p.add_argument("--instance-type", required=True, help=instance_help)
    p.add_argument("--instance-count", type=int, default=1)
    p.add_argument("--image-uri", help="Triton image (default: the region's sagemaker-tritonserver)")
    p.add_argument("--triton-version", help="YY.MM of the default image, e.g. 24.09")
    p.add_argument("--env", action="append", default=[], help="container environment KEY=VALUE")
    p.add_argument(
        "--unset-env",
        action="append",
        default=[],
        metavar="KEY",
        help="leave a variable out, a default included (e.g. SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE)",
    )
    p.add_argument("--tag", action="append", default=[], help="tag KEY=VALUE on every resource")
    p.add_argument("--kms-key-id", help="KMS key for the instances' storage volume")
    p.add_argument(
        "--inference-ami-version",
        metavar="AMI",
        help="the variant's InferenceAmiVersion (GPU driver), e.g. al2-ami-sagemaker-inference-gpu-3-1",
    )
    p.add_argument("--variant-name", default="AllTraffic", help="production variant name")
    p.add_argument(
        "--poll-interval", type=duration, default=None, help="longest wait between polls, e.g. 15s"
    )


def plan_deployment(endpoint_name: str, model_data_url: str | None, kwargs: Mapping[str, Any]) -> Any:
    """The deployment plan ``mme_triton.endpoint.plan_deployment`` makes (``deploy --dry-run``)."""
    from mme_triton.endpoint import plan_deployment as plan

    return plan(endpoint_name, model_data_url, **kwargs)


def _endpoint_dict(endpoint: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(endpoint).items() if not k.startswith("_")}


def _deploy(args: argparse.Namespace) -> int:
    kwargs = _deploy_arguments(args)
    if args.dry_run:
        # --timeout bounds the plan's reads; without it the plan's own default applies
        if args.timeout is not None:
            kwargs["timeout"] = args.timeout.total_seconds()
        plan = plan_deployment(args.endpoint_name, args.model_data_url, kwargs)
        emit(args, str(plan), plan.to_dict())
        return 1 if plan.blockers else 0
    from mme_triton.endpoint.deploy import deploy_mme

    timeout = args.timeout if args.timeout is not None else DEPLOY_TIMEOUT
    wait: dict[str, Any] = {"wait": not args.no_wait, "timeout": timeout.total_seconds()}
    if args.poll_interval is not None:
        wait["poll_interval"] = args.poll_interval.total_seconds()
    endpoint = deploy_mme(
        args.endpoint_name, args.model_data_url, progress=deploy_progress(args), **wait, **kwargs
    )
    emit(
        args,
        f"{endpoint.name}  {endpoint.status}  {endpoint.arn}\nmodel data url: {endpoint.model_data_url}",
        _endpoint_dict(endpoint),
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    from mme_triton.cli._metrics import health_line, recent_metrics
    from mme_triton.endpoint.status import endpoint_status

    session = aws_session(args)
    status = endpoint_status(
        args.endpoint_name,
        list_artifacts=not args.no_models,
        timeout=args.timeout.total_seconds(),
        boto3_session=session,
    )
    summary = None if args.no_metrics else recent_metrics(args.endpoint_name, session)
    text = str(status) if summary is None else f"{status}\n{health_line(summary)}"
    emit(args, text, {**status.to_dict(), "metrics": summary})
    return 0


def _teardown(args: argparse.Namespace) -> int:
    from mme_triton.endpoint.teardown import teardown

    report = teardown(
        args.endpoint_name,
        delete_artifacts=args.delete_artifacts,
        dry_run=args.dry_run,
        timeout=args.timeout.total_seconds(),
        boto3_session=aws_session(args),
    )
    emit(args, str(report), report)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from mme_triton.endpoint.teardown import sweep

    options: dict[str, Any] = {}
    if args.orphan_min_age is not None:
        options["orphan_min_age"] = args.orphan_min_age
    reports = sweep(
        tags=key_values(args.tag, "--tag") or None,
        older_than=args.older_than,
        dry_run=args.dry_run,
        orphans=not args.no_orphans,
        delete_artifacts=args.delete_artifacts,
        timeout=args.timeout.total_seconds(),
        boto3_session=aws_session(args),
        **options,
    )
    emit(args, "\n".join(str(r) for r in reports) or "nothing to sweep", reports)
    return 0


_READ_TIMEOUT_HELP = "how long reads are retried while AWS throttles or cannot be reached (15m)"


def register(sub: SubParsers) -> None:
    """Add the endpoint subcommands."""
    p = add_command(
        sub,
        "deploy",
        help="create or update a multi-model endpoint (uploading --model directories first)",
        examples=[
            "mme-triton deploy my-endpoint s3://my-bucket/mme/ --instance-type ml.g5.xlarge \\",
            "    --role arn:aws:iam::123456789012:role/SageMakerRole --model repo/linear --model repo/scale",
            "mme-triton deploy my-endpoint s3://my-bucket/mme/ --instance-type ml.m5.xlarge --dry-run",
            "mme-triton deploy my-endpoint --instance-type ml.m5.xlarge  # role, prefix: the SageMaker SDK's",
        ],
        handler=_deploy,
        aws=True,
    )
    add_endpoint_flags(
        p,
        prefix_help="s3://bucket/prefix/ (default, with the SageMaker SDK: its default bucket)",
        instance_help="e.g. ml.g5.xlarge, ml.m5.xlarge",
    )
    p.add_argument("--model", action="append", default=[], type=Path, help="model dir to upload first")
    p.add_argument(
        "--model-cache", choices=["Enabled", "Disabled"], help="MultiModelConfig.ModelCacheSetting"
    )
    p.add_argument("--autoscaling", metavar="MIN:MAX:TARGET", help="target tracking, e.g. 1:4:200")
    p.add_argument("--overwrite", action="store_true", help="replace --model artifacts whose content differs")
    p.add_argument(
        "--timeout",
        type=duration,
        default=None,
        help="wait for InService (30m); with --dry-run, how long the plan's reads are retried (2m)",
    )
    p.add_argument("--no-wait", action="store_true", help="return without waiting for InService")
    p.add_argument("--dry-run", action="store_true", help="print what would be created or updated")

    p = add_command(
        sub,
        "status",
        help="an endpoint's state, variants, instance counts, autoscaling, models and last hour's health",
        examples=["mme-triton status my-endpoint", "mme-triton status my-endpoint --json"],
        handler=_status,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p.add_argument("--no-models", action="store_true", help="do not list the models under the prefix")
    p.add_argument("--no-metrics", action="store_true", help="do not read the last hour's CloudWatch metrics")
    p.add_argument(
        "--timeout",
        type=duration,
        default=duration("1m"),
        help="how long reads are retried while AWS throttles or cannot be reached (1m)",
    )

    p = add_command(
        sub,
        "teardown",
        help="delete an endpoint, its configs and models (idempotent)",
        examples=[
            "mme-triton teardown my-endpoint",
            "mme-triton teardown my-endpoint --delete-artifacts --dry-run",
        ],
        handler=_teardown,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p.add_argument("--delete-artifacts", action="store_true", help="also delete the S3 artifacts")
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted")
    p.add_argument("--timeout", type=duration, default=duration("15m"), help=_READ_TIMEOUT_HELP)

    p = add_command(
        sub,
        "sweep",
        help="tear down the endpoints this tool created (for scheduled cleanup jobs)",
        examples=[
            "mme-triton sweep --older-than 12h --dry-run",
            "mme-triton sweep --tag team=search --older-than 7d",
        ],
        handler=_sweep,
        aws=True,
    )
    p.add_argument("--older-than", type=duration, default=None, help="only older resources, e.g. 12h, 7d")
    p.add_argument("--tag", action="append", default=[], help="only resources with tag KEY=VALUE")
    p.add_argument("--no-orphans", action="store_true", help="leave orphaned configs and models alone")
    p.add_argument("--orphan-min-age", type=duration, default=None, help="least age of an orphan (1h)")
    p.add_argument("--delete-artifacts", action="store_true", help="also delete the endpoints' artifacts")
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted")
    p.add_argument("--timeout", type=duration, default=duration("15m"), help=_READ_TIMEOUT_HELP)
