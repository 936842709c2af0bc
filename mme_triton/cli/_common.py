"""What every subcommand shares: output (text or ``--json``), the AWS options, progress bars, small parsers.

Only the standard library is imported at module level: ``mme-triton --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

__all__ = [
    "Handler",
    "SubParsers",
    "add_aws_options",
    "add_command",
    "add_common_options",
    "aws_session",
    "byte_bar",
    "deploy_progress",
    "duration",
    "emit",
    "err",
    "key_values",
    "out",
    "staged_bars",
    "to_jsonable",
]

Handler = Callable[[argparse.Namespace], int]


def out(text: str = "") -> None:
    """A line on stdout."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text: str) -> None:
    """A line on stderr."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def to_jsonable(value: Any) -> Any:
    """Dataclasses, paths, times and tuples as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_jsonable(to_dict() if callable(to_dict) else dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def emit(args: argparse.Namespace, text: str | Callable[[], str], data: Any) -> None:
    """Print ``data`` as JSON with ``--json``, else ``text`` (or what ``text()`` returns)."""
    if getattr(args, "json", False):
        out(json.dumps(to_jsonable(data), indent=2))
        return
    rendered = text() if callable(text) else text
    if rendered:
        out(rendered)


# -- options ---------------------------------------------------------------------------------------


def add_common_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--json``, ``-q/--quiet``, ``--debug`` and ``-v/--verbose``.

    On the main parser (``suppress=False``) they have defaults; on each subcommand they are added again
    with ``argparse.SUPPRESS`` defaults, so they work before and after the subcommand name.
    """
    default: Any = argparse.SUPPRESS

    def value(real: Any) -> Any:
        return default if suppress else real

    group = parser.add_argument_group("output")
    group.add_argument("--json", action="store_true", default=value(False), help="print the result as JSON")
    group.add_argument(
        "-q", "--quiet", action="store_true", default=value(False), help="no progress bars or step lines"
    )
    group.add_argument(
        "--debug", action="store_true", default=value(False), help="print the traceback of an error"
    )
    group.add_argument(
        "-v", "--verbose", action="count", default=value(0), help="show the library's log (-vv: debug)"
    )


def add_aws_options(parser: argparse.ArgumentParser) -> None:
    """``--profile``, ``--region`` and ``--endpoint-url``: how the command reaches AWS."""
    group = parser.add_argument_group("AWS")
    group.add_argument("--profile", help="AWS profile (default: AWS_PROFILE, else boto3's default chain)")
    group.add_argument("--region", help="AWS region (default: AWS_DEFAULT_REGION or the profile's)")
    group.add_argument(
        "--endpoint-url",
        help="one URL for every AWS service, e.g. the embedded stack's (default: AWS_ENDPOINT_URL)",
    )


def aws_session(args: argparse.Namespace) -> boto3.Session | None:
    """The boto3 session ``--profile``/``--region``/``--endpoint-url`` ask for; ``None`` leaves boto3's
    default resolution (``AWS_PROFILE``, ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL`` ...) to each call.

    Raises:
        botocore.exceptions.ProfileNotFound: an unknown ``--profile``.
    """
    profile = getattr(args, "profile", None)
    region = getattr(args, "region", None)
    endpoint_url = getattr(args, "endpoint_url", None)
    if not (profile or region or endpoint_url):
        return None
    if endpoint_url:
        from mme_triton._sagemaker import endpoint_session

        return endpoint_session(endpoint_url, profile_name=profile, region_name=region)
    from mme_triton._sagemaker import new_boto3_session

    return new_boto3_session(profile_name=profile, region_name=region)


# -- values ----------------------------------------------------------------------------------------

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def duration(text: str) -> timedelta:
    """``"30m"``, ``"12h"``, ``"7d"`` as a timedelta; a number needs its unit (s, m, h, d or w).

    Raises:
        argparse.ArgumentTypeError: no unit, or not a duration.
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        if re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", text):
            raise argparse.ArgumentTypeError(
                f"{text.strip()!r} has no unit: write {text.strip()}h for hours (or s, m, d, w)"
            )
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30m, 12h, 7d)")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def key_values(pairs: Sequence[str], flag: str) -> dict[str, str]:
    """``["A=1", "B=2"]`` → ``{"A": "1", "B": "2"}``.

    Raises:
        ValueError: a pair without ``=`` or with an empty key.
    """
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE, got {pair!r}")
        result[key] = value
    return result


# -- progress --------------------------------------------------------------------------------------


def _quiet(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "quiet", False)) or bool(getattr(args, "json", False))


def byte_bar(args: argparse.Namespace, desc: str) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` hook drawing a byte bar on stderr; ``None`` with ``--quiet``/``--json``.

    tqdm draws nothing when stderr is not a terminal (``disable=None``).
    """
    if _quiet(args):
        return None
    from tqdm.auto import tqdm

    bar: Any = None

    def hook(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(
                total=total,
                desc=desc,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                leave=False,
                disable=None,
                file=sys.stderr,
            )
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return hook


def staged_bars(args: argparse.Namespace) -> Callable[[str, str, int, int], None] | None:
    """A ``progress(stage, name, done, total)`` hook (``upload_models``): one byte bar per stage and name."""
    if _quiet(args):
        return None
    bars: dict[tuple[str, str], Callable[[int, int], None] | None] = {}

    def hook(stage: str, name: str, done: int, total: int) -> None:
        key = (stage, name)
        if key not in bars:
            bars[key] = byte_bar(args, f"{stage} {name}")
        bar = bars[key]
        if bar is not None:
            bar(done, total)

    return hook


def deploy_progress(args: argparse.Namespace) -> Callable[[str, str], None] | None:
    """A ``progress(stage, detail)`` hook for deploys: one line per step on stderr; the wait for
    InService as a bar on a terminal, else one line per status change. ``None`` with ``--quiet``."""
    if _quiet(args):
        return None
    state: dict[str, Any] = {"bar": None, "status": None}

    def hook(stage: str, detail: str) -> None:
        if stage != "wait":
            if state["bar"] is not None:
                state["bar"].close()
                state["bar"] = None
            err(f"  {stage}: {detail}")
            return
        status = detail.split(" ", 1)[0]
        if sys.stderr.isatty():
            from tqdm.auto import tqdm

            if state["bar"] is None:
                state["bar"] = tqdm(
                    desc="  wait",
                    total=None,
                    bar_format="{desc}: {postfix} {elapsed}",
                    leave=False,
                    file=sys.stderr,
                )
            state["bar"].set_postfix_str(status)
            state["bar"].update()
        elif status != state["status"]:
            err(f"  wait: {detail}")
        state["status"] = status

    return hook


# -- subcommands -----------------------------------------------------------------------------------

SubParsers = Any  # argparse._SubParsersAction[argparse.ArgumentParser]


def add_command(
    sub: SubParsers,
    name: str,
    *,
    help: str,
    examples: Sequence[str],
    handler: Handler | None = None,
    aws: bool = False,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand with the common options (and the AWS ones), its ``--help`` ending in examples."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples) if examples else None
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description or help[:1].upper() + help[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(parser, suppress=True)
    if aws:
        add_aws_options(parser)
    if handler is not None:
        parser.set_defaults(handler=handler, command_parser=parser)
    return parser
