"""``validate``, ``package``, ``upload``, ``list``, ``remove`` and ``models``: model directories and the
artifacts under an S3 prefix (or under a live endpoint's prefix)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from mme_triton.cli._common import (
    SubParsers,
    add_command,
    aws_session,
    byte_bar,
    emit,
    staged_bars,
)

__all__ = ["register"]


def _validate(args: argparse.Namespace) -> int:
    from mme_triton.model.validate import validate_model

    failed = False
    report: dict[str, list[dict[str, Any]]] = {}
    lines: list[str] = []
    for path in args.paths:
        problems = validate_model(path, local_stack=args.local_stack, triton_version=args.triton_version)
        errors = [p for p in problems if p.is_error]
        warnings = [p for p in problems if not p.is_error]
        bad = bool(errors) or (args.strict and bool(warnings))
        failed = failed or bad
        report[str(path)] = [dataclasses.asdict(p) for p in problems]
        lines.extend(str(problem) for problem in problems)
        verdict = "FAILED" if bad else "ok"
        lines.append(f"{path}: {verdict} ({len(errors)} error(s), {len(warnings)} warning(s))")
    emit(args, "\n".join(lines), report)
    return 1 if failed else 0


def _package(args: argparse.Namespace) -> int:
    from mme_triton.artifact.package import DEFAULT_COMPRESSLEVEL, package_model

    if args.name and len(args.paths) > 1:
        raise ValueError("--name applies to one model; give one MODEL_DIR")
    artifacts = [
        package_model(
            path,
            args.output,
            name=args.name,
            compresslevel=DEFAULT_COMPRESSLEVEL if args.level is None else args.level,
            versioned=args.versioned,
            progress=byte_bar(args, f"package {Path(path).name}"),
        )
        for path in args.paths
    ]
    emit(
        args,
        "\n".join(f"{a.path}  {a.size} bytes  sha256:{a.sha256}  TargetModel={a.name}" for a in artifacts),
        artifacts,
    )
    return 0


def _upload_to(args: argparse.Namespace, model_data_url: str, session: Any) -> int:
    from mme_triton.artifact.s3 import upload_models

    uploaded = upload_models(
        args.paths,
        model_data_url,
        boto3_session=session,
        overwrite=args.overwrite,
        versioned=args.versioned,
        kms_key_id=args.kms_key_id,
        progress=staged_bars(args),
        update_ensembles=args.update_ensembles,
    )
    lines = []
    for a in uploaded:
        lines.append(f"{a.url}  {a.status}" + (f"  (new version of {a.supersedes})" if a.supersedes else ""))
        lines.extend(
            f"  {name} embeds an older copy of {a.model_name} (--update-ensembles repackages it)"
            for name in a.stale_ensembles
        )
    emit(args, "\n".join(lines), uploaded)
    return 0


def _upload(args: argparse.Namespace) -> int:
    return _upload_to(args, args.model_data_url, aws_session(args))


def _print_names(args: argparse.Namespace, names: list[str], model_data_url: str) -> None:
    emit(args, "\n".join(names), {"model_data_url": model_data_url, "models": names})


def _list(args: argparse.Namespace) -> int:
    from mme_triton.artifact.s3 import list_models

    _print_names(args, list_models(args.model_data_url, boto3_session=aws_session(args)), args.model_data_url)
    return 0


def _remove_from(args: argparse.Namespace, model_data_url: str, session: Any) -> int:
    from mme_triton.artifact.s3 import remove_model

    existed = remove_model(model_data_url, args.name, boto3_session=session)
    text = f"removed {args.name}" if existed else f"{args.name} was not there"
    emit(args, text, {"model_data_url": model_data_url, "name": args.name, "removed": existed})
    return 0


def _remove(args: argparse.Namespace) -> int:
    return _remove_from(args, args.model_data_url, aws_session(args))


def _endpoint_prefix(args: argparse.Namespace) -> tuple[str, Any]:
    from mme_triton.endpoint.models import endpoint_model_data_url

    session = aws_session(args)
    return endpoint_model_data_url(args.endpoint_name, boto3_session=session), session


def _models_list(args: argparse.Namespace) -> int:
    from mme_triton.artifact.s3 import list_models

    url, session = _endpoint_prefix(args)
    _print_names(args, list_models(url, boto3_session=session), url)
    return 0


def _models_add(args: argparse.Namespace) -> int:
    url, session = _endpoint_prefix(args)
    return _upload_to(args, url, session)


def _models_remove(args: argparse.Namespace) -> int:
    url, session = _endpoint_prefix(args)
    return _remove_from(args, url, session)


def _upload_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="MODEL_DIR")
    parser.add_argument("--overwrite", action="store_true", help="replace artifacts whose content differs")
    parser.add_argument("--versioned", action="store_true", help="content-hash suffixed names (safe updates)")
    parser.add_argument("--kms-key-id", help="SSE-KMS key for the uploaded objects")
    parser.add_argument(
        "--update-ensembles",
        action="store_true",
        help="repackage and upload, as new versions, the ensembles under the prefix that embed an older "
        "copy of an uploaded model",
    )


def register(sub: SubParsers) -> None:
    """Add the artifact subcommands."""
    p = add_command(
        sub,
        "validate",
        help="check model directories (config.pbtxt, layout, ONNX graph)",
        examples=[
            "mme-triton validate model_repository/linear",
            "mme-triton validate --strict --json repo/*",
        ],
        handler=_validate,
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="MODEL_DIR")
    p.add_argument("--strict", action="store_true", help="fail on warnings too")
    p.add_argument(
        "--local-stack",
        action="store_true",
        help="also warn about backends the embedded stack cannot run (TensorFlow, TensorRT, ...)",
    )
    p.add_argument(
        "--triton-version",
        metavar="YY.MM",
        help="the SageMaker Triton release to check python environments against (default 24.09)",
    )

    p = add_command(
        sub,
        "package",
        help="validate and package model directories into <name>.tar.gz",
        examples=[
            "mme-triton package model_repository/linear -o dist/",
            "mme-triton package --versioned repo/bert",
        ],
        handler=_package,
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="MODEL_DIR")
    p.add_argument("-o", "--output", type=Path, default=None, help="output directory (default: cwd)")
    p.add_argument("--name", help="TargetModel name of the artifact (default: <directory>.tar.gz)")
    p.add_argument("--versioned", action="store_true", help="add a content-hash suffix to the name")
    p.add_argument("--level", type=int, default=None, help="compression level 0-9 (default: 1, fastest)")

    p = add_command(
        sub,
        "upload",
        help="package and upload models under an S3 prefix",
        examples=[
            "mme-triton upload s3://my-bucket/mme/ model_repository/linear model_repository/scale",
            "mme-triton upload --versioned s3://my-bucket/mme/ model_repository/linear",
        ],
        handler=_upload,
        aws=True,
    )
    p.add_argument("model_data_url", metavar="S3_PREFIX", help="s3://bucket/prefix/ (the ModelDataUrl)")
    _upload_options(p)

    p = add_command(
        sub,
        "list",
        help="list the TargetModel names under an S3 prefix",
        examples=["mme-triton list s3://my-bucket/mme/"],
        handler=_list,
        aws=True,
    )
    p.add_argument("model_data_url", metavar="S3_PREFIX")

    p = add_command(
        sub,
        "remove",
        help="delete one artifact under an S3 prefix",
        examples=["mme-triton remove s3://my-bucket/mme/ linear.tar.gz"],
        handler=_remove,
        aws=True,
    )
    p.add_argument("model_data_url", metavar="S3_PREFIX")
    p.add_argument("name", metavar="TARGET_MODEL")

    models = add_command(
        sub,
        "models",
        help="list, add or remove the models of a live endpoint (under its ModelDataUrl)",
        examples=[
            "mme-triton models list my-endpoint",
            "mme-triton models add my-endpoint model_repository/scale",
            "mme-triton models remove my-endpoint scale.tar.gz",
        ],
    )
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    p = add_command(
        actions,
        "list",
        help="the TargetModels the endpoint serves",
        examples=["mme-triton models list my-endpoint --json"],
        handler=_models_list,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p = add_command(
        actions,
        "add",
        help="package and upload models under the endpoint's prefix (served at their first request)",
        examples=["mme-triton models add --versioned my-endpoint model_repository/linear"],
        handler=_models_add,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    _upload_options(p)
    p = add_command(
        actions,
        "remove",
        help="delete one artifact under the endpoint's prefix",
        examples=["mme-triton models remove my-endpoint linear.tar.gz"],
        handler=_models_remove,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p.add_argument("name", metavar="TARGET_MODEL")
