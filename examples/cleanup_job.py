"""Tear down the SageMaker endpoints mme_triton created that are older than a given age: a scheduled job.

    python examples/cleanup_job.py --older-than 12h
    python examples/cleanup_job.py --older-than 2d --tag team=search --region eu-west-1 --dry-run

Selects the endpoints tagged ``mme-triton:managed=true`` (every endpoint ``deploy_mme`` creates) that
carry every ``--tag`` and were created more than ``--older-than`` ago, and tears each down with
``mme_triton.sweep``: autoscaling registration, endpoint, endpoint config, model, and with
``--delete-artifacts`` the ``.tar.gz`` files under the model's prefix. Unless ``--no-orphans``, it also
removes configs and models of this library that no endpoint uses (left by interrupted deployments) once
they are older than ``--orphan-min-age`` (default 1h) and ``--older-than``. Endpoints this library did
not create are never touched. One line per endpoint goes to stdout, then a summary; errors go to stderr.

Exit codes:

    0  done: everything selected was removed (with --dry-run: listed), or nothing was selected
    1  the sweep ran, but some resources could not be removed (stderr names the first endpoint's)
    2  bad arguments
    3  the sweep could not run: no credentials or region, AWS unreachable, access denied ...

AWS is reached as boto3 reaches it (environment, ``--profile``, instance role); ``--endpoint-url`` (or
``AWS_ENDPOINT_URL``) points every client elsewhere, e.g. at ``mme-triton local up``.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_FAILED = 3

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_age(text: str) -> timedelta:
    """``"90s"``, ``"30m"``, ``"12h"``, ``"2d"``, ``"1w"``, or sums of them such as ``"1d12h"``.

    Raises:
        ValueError: no unit, an unknown unit, or anything else that is not an age.
    """
    value = text.strip().lower()
    parts = _AGE.findall(value)
    if not value or "".join(number + unit for number, unit in parts) != value:
        raise ValueError(f"{text!r} is not an age: a number and a unit, e.g. 90s, 30m, 12h, 2d, 1w, 1d12h")
    return timedelta(seconds=sum(float(number) * _UNITS[unit] for number, unit in parts))


def format_age(age: timedelta) -> str:
    """The inverse of :func:`parse_age` for whole seconds: ``timedelta(hours=36)`` -> ``"1d12h"``."""
    seconds = round(age.total_seconds())
    parts = []
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def parse_tag(text: str) -> tuple[str, str]:
    """``"team=search"`` -> ``("team", "search")``.

    Raises:
        ValueError: no ``=`` or an empty key.
    """
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise ValueError(f"{text!r} is not a tag: give KEY=VALUE, e.g. team=search")
    return key, value


def _age_argument(text: str) -> timedelta:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _tag_argument(text: str) -> tuple[str, str]:
    try:
        return parse_tag(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cleanup_job.py",
        description="Tear down the endpoints mme_triton created that are older than a given age.",
        epilog="exit codes: 0 done, 1 some resources could not be removed, 2 bad arguments, "
        "3 the sweep could not run",
    )
    parser.add_argument(
        "--older-than",
        type=_age_argument,
        required=True,
        metavar="AGE",
        help="only endpoints created longer ago than this: 90s, 30m, 12h, 2d, 1w, 1d12h",
    )
    parser.add_argument(
        "--tag",
        type=_tag_argument,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only endpoints carrying this tag (repeat for several; all must match)",
    )
    parser.add_argument("--region", help="the AWS region (default: boto3's)")
    parser.add_argument("--profile", help="the AWS profile to use (default: boto3's)")
    parser.add_argument("--endpoint-url", metavar="URL", help="send every AWS call to this URL")
    parser.add_argument("--dry-run", action="store_true", help="delete nothing; list what would go")
    parser.add_argument(
        "--delete-artifacts",
        action="store_true",
        help="also delete the .tar.gz artifacts under each endpoint's prefix (shared prefixes lose them too)",
    )
    parser.add_argument(
        "--no-orphans",
        dest="orphans",
        action="store_false",
        help="leave configs and models no endpoint uses alone",
    )
    parser.add_argument(
        "--orphan-min-age",
        type=_age_argument,
        default=timedelta(hours=1),
        metavar="AGE",
        help="the least age of an orphaned config or model before it is removed (default: 1h)",
    )
    parser.add_argument(
        "--timeout",
        type=_age_argument,
        default=timedelta(minutes=15),
        metavar="DURATION",
        help="how long reads are retried while AWS throttles, fails or cannot be reached (default: 15m)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each AWS deletion to stderr")
    return parser


def _aws(args: argparse.Namespace) -> dict[str, Any]:
    """The ``boto3_session=`` (and, with --endpoint-url, the clients) sweep is given."""
    import boto3

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    if args.endpoint_url is None:
        return {"boto3_session": session}
    return {
        "boto3_session": session,
        "sagemaker_client": session.client("sagemaker", endpoint_url=args.endpoint_url),
        "autoscaling_client": session.client("application-autoscaling", endpoint_url=args.endpoint_url),
        "s3_client": session.client("s3", endpoint_url=args.endpoint_url),
    }


def _selection(args: argparse.Namespace, now: datetime) -> str:
    tags = ", ".join(["mme-triton:managed=true", *(f"{key}={value}" for key, value in args.tag)])
    cutoff = (now - args.older_than).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"endpoints tagged {tags}, created before {cutoff} (older than {format_age(args.older_than)})"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    from botocore.exceptions import BotoCoreError, ClientError

    from mme_triton import MMETritonError, TeardownError, sweep

    now = datetime.now(timezone.utc)
    mode = "dry run: " if args.dry_run else ""
    print(f"{mode}sweeping {_selection(args, now)}", flush=True)
    try:
        reports = sweep(
            tags=dict(args.tag),
            older_than=args.older_than,
            dry_run=args.dry_run,
            orphans=args.orphans,
            orphan_min_age=args.orphan_min_age,
            delete_artifacts=args.delete_artifacts,
            region=args.region,
            timeout=args.timeout.total_seconds(),
            **_aws(args),
        )
    except TeardownError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print("error: the rest was processed; run again with --dry-run to see what is left", file=sys.stderr)
        return EXIT_INCOMPLETE
    except (MMETritonError, BotoCoreError, ClientError) as exc:
        print(f"error: the sweep could not run: {exc}", file=sys.stderr)
        return EXIT_FAILED

    for report in reports:
        print(report)
    deleted = sum(len(report.deleted) for report in reports)
    missing = sum(len(report.missing) for report in reports)
    if not reports:
        print("nothing to sweep")
    elif args.dry_run:
        print(f"dry run: {deleted} resource(s) of {len(reports)} endpoint(s) would be deleted")
    else:
        print(f"swept {len(reports)} endpoint(s): {deleted} resource(s) deleted, {missing} already gone")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
