"""The ``mme-triton`` command line: a thin layer over the library.

Every subcommand calls one library function. Library errors become one ``error:`` line and exit code 1;
``main(argv)`` returns the exit code so it can be tested by calling it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton.errors import MMETritonError

if TYPE_CHECKING:
    import boto3

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def _session(args: argparse.Namespace) -> boto3.Session | None:
    """A boto3 session from --profile/--region; None lets each call build its default one."""
    if not (getattr(args, "profile", None) or getattr(args, "region", None)):
        return None
    import boto3

    return boto3.Session(profile_name=args.profile, region_name=args.region)


def _byte_bar(desc: str) -> Callable[[int, int], None]:
    """A progress(done, total) hook drawing a tqdm bar in bytes on stderr."""
    from tqdm.auto import tqdm

    bar: Any = None

    def hook(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return hook


def _staged_bars() -> Callable[[str, str, int, int], None]:
    """A progress(stage, name, done, total) hook: one byte bar per (stage, name)."""
    bars: dict[tuple[str, str], Callable[[int, int], None]] = {}

    def hook(stage: str, name: str, done: int, total: int) -> None:
        key = (stage, name)
        if key not in bars:
            bars[key] = _byte_bar(f"{stage} {name}")
        bars[key](done, total)

    return hook


# ---------------------------------------------------------------------------------------------- validate
def _cmd_validate(args: argparse.Namespace) -> int:
    from mme_triton.model.validate import validate_model

    failed = False
    report: dict[str, list[dict[str, Any]]] = {}
    for path in args.paths:
        problems = validate_model(path)
        errors = [p for p in problems if p.is_error]
        warnings = [p for p in problems if not p.is_error]
        failed = failed or bool(errors) or (args.strict and bool(warnings))
        if args.json:
            report[str(path)] = [dataclasses.asdict(p) for p in problems]
            continue
        for problem in problems:
            _out(str(problem))
        verdict = "FAILED" if errors or (args.strict and warnings) else "ok"
        _out(f"{path}: {verdict} ({len(errors)} error(s), {len(warnings)} warning(s))")
    if args.json:
        _out(json.dumps(report, indent=2))
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------- package
def _cmd_package(args: argparse.Namespace) -> int:
    from mme_triton.artifact.package import DEFAULT_COMPRESSLEVEL, package_model

    if args.name and len(args.paths) > 1:
        raise ValueError("--name applies to one model; give one path")
    for path in args.paths:
        artifact = package_model(
            path,
            args.output,
            name=args.name,
            compresslevel=DEFAULT_COMPRESSLEVEL if args.level is None else args.level,
            versioned=args.versioned,
            progress=None if args.quiet else _byte_bar(f"package {Path(path).name}"),
        )
        _out(f"{artifact.path}  {artifact.size} bytes  sha256:{artifact.sha256}  TargetModel={artifact.name}")
    return 0


# ------------------------------------------------------------------------------------------------ upload
def _cmd_upload(args: argparse.Namespace) -> int:
    from mme_triton.artifact.s3 import upload_models

    artifacts = upload_models(
        args.paths,
        args.model_data_url,
        boto3_session=_session(args),
        overwrite=args.overwrite,
        versioned=args.versioned,
        kms_key_id=args.kms_key_id,
        progress=None if args.quiet else _staged_bars(),
    )
    url = args.model_data_url.rstrip("/")
    for artifact in artifacts:
        _out(f"{url}/{artifact.name}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from mme_triton.artifact.s3 import list_models

    for name in list_models(args.model_data_url, boto3_session=_session(args)):
        _out(name)
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    from mme_triton.artifact.s3 import remove_model

    existed = remove_model(args.model_data_url, args.name, boto3_session=_session(args))
    _out(f"removed {args.name}" if existed else f"{args.name} was not there")
    return 0


# ------------------------------------------------------------------------------------------------ deploy
def _key_values(pairs: Sequence[str], what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} must look like KEY=VALUE, got {pair!r}")
        result[key] = value
    return result


def _cmd_deploy(args: argparse.Namespace) -> int:
    from mme_triton.endpoint.deploy import deploy_mme

    def progress(stage: str, detail: str) -> None:
        _err(f"  {stage}: {detail}")

    endpoint = deploy_mme(
        args.endpoint_name,
        args.model_data_url,
        models=args.model,
        role=args.role,
        instance_type=args.instance_type,
        instance_count=args.instance_count,
        image_uri=args.image_uri,
        environment=_key_values(args.env, "--env"),
        tags=_key_values(args.tag, "--tag"),
        wait=not args.no_wait,
        timeout=args.timeout,
        progress=progress,
        boto3_session=_session(args),
    )
    _out(f"{endpoint.name}  {endpoint.status}  {endpoint.arn}")
    return 0


def _cmd_teardown(args: argparse.Namespace) -> int:
    from mme_triton.endpoint.teardown import teardown

    report = teardown(
        args.endpoint_name, delete_artifacts=args.delete_artifacts, boto3_session=_session(args)
    )
    _out(str(report))
    return 0


_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _duration(text: str) -> timedelta:
    unit = _UNITS.get(text[-1:])
    try:
        amount = float(text[:-1]) if unit else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30m, 12h, 7d)") from None
    return timedelta(**{unit or "hours": amount})


def _cmd_sweep(args: argparse.Namespace) -> int:
    from mme_triton.endpoint.teardown import sweep

    reports = sweep(
        tags=_key_values(args.tag, "--tag") or None,
        older_than=args.older_than,
        dry_run=args.dry_run,
        boto3_session=_session(args),
    )
    for report in reports:
        _out(str(report))
    if not reports:
        _out("nothing to sweep")
    return 0


# -------------------------------------------------------------------------------------------------- main
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mme-triton",
        description="Triton model repositories to SageMaker multi-model endpoints, and back.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    aws = argparse.ArgumentParser(add_help=False)
    aws.add_argument("--profile", help="AWS profile (default: the usual boto3 resolution)")
    aws.add_argument("--region", help="AWS region")

    p = sub.add_parser("validate", help="check model directories (config.pbtxt, layout, ONNX graph)")
    p.add_argument("paths", nargs="+", type=Path, metavar="MODEL_DIR")
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    p.add_argument("--json", action="store_true", help="print the problems as JSON")
    p.set_defaults(handler=_cmd_validate)

    p = sub.add_parser("package", help="validate and package model directories into <name>.tar.gz")
    p.add_argument("paths", nargs="+", type=Path, metavar="MODEL_DIR")
    p.add_argument("-o", "--output", type=Path, default=None, help="output directory (default: cwd)")
    p.add_argument("--name", help="TargetModel name of the artifact (default: <directory>.tar.gz)")
    p.add_argument("--versioned", action="store_true", help="add a content-hash suffix to the name")
    p.add_argument("--level", type=int, default=None, help="compression level 0-9 (default: 1, fastest)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_package)

    p = sub.add_parser("upload", parents=[aws], help="package and upload models under an S3 prefix")
    p.add_argument("model_data_url", metavar="S3_PREFIX", help="s3://bucket/prefix/ (the ModelDataUrl)")
    p.add_argument("paths", nargs="+", type=Path, metavar="MODEL_DIR")
    p.add_argument("--overwrite", action="store_true", help="replace artifacts whose content differs")
    p.add_argument("--versioned", action="store_true", help="content-hash suffixed names (safe updates)")
    p.add_argument("--kms-key-id", help="SSE-KMS key for the uploaded objects")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_upload)

    p = sub.add_parser("list", parents=[aws], help="list the TargetModel names under an S3 prefix")
    p.add_argument("model_data_url", metavar="S3_PREFIX")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser("remove", parents=[aws], help="delete one artifact under an S3 prefix")
    p.add_argument("model_data_url", metavar="S3_PREFIX")
    p.add_argument("name", metavar="TARGET_MODEL")
    p.set_defaults(handler=_cmd_remove)

    p = sub.add_parser("deploy", parents=[aws], help="create or update a multi-model endpoint")
    p.add_argument("endpoint_name")
    p.add_argument("model_data_url", metavar="S3_PREFIX")
    p.add_argument("--model", action="append", default=[], type=Path, help="model dir to upload first")
    p.add_argument("--role", required=True, help="execution role ARN")
    p.add_argument("--instance-type", required=True)
    p.add_argument("--instance-count", type=int, default=1)
    p.add_argument("--image-uri", help="Triton image (default: the region's sagemaker-tritonserver)")
    p.add_argument("--env", action="append", default=[], help="container environment KEY=VALUE")
    p.add_argument("--tag", action="append", default=[], help="tag KEY=VALUE")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for InService")
    p.add_argument("--no-wait", action="store_true", help="return without waiting for InService")
    p.set_defaults(handler=_cmd_deploy)

    p = sub.add_parser("teardown", parents=[aws], help="delete an endpoint, its configs and models")
    p.add_argument("endpoint_name")
    p.add_argument("--delete-artifacts", action="store_true", help="also delete the S3 artifacts")
    p.set_defaults(handler=_cmd_teardown)

    p = sub.add_parser("sweep", parents=[aws], help="tear down endpoints this tool created")
    p.add_argument("--older-than", type=_duration, default=None, help="e.g. 12h, 7d")
    p.add_argument("--tag", action="append", default=[], help="only resources with tag KEY=VALUE")
    p.add_argument("--dry-run", action="store_true", help="report what would be deleted")
    p.set_defaults(handler=_cmd_sweep)

    # the embedded stack's commands; their module imports only the standard library until they run
    from mme_triton.local.cli import add_local_commands

    add_local_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mme-triton`` command line; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    handler: Handler = args.handler
    try:
        return handler(args)
    except (MMETritonError, ValueError, FileNotFoundError, NotADirectoryError, PermissionError) as exc:
        _err(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
