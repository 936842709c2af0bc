"""The ``mme-triton`` command line: a thin layer over the library.

Every subcommand calls the library and prints its result (``--json`` for scripts). ``main(argv)`` returns
the exit code, so it can be tested by calling it; errors become one ``error:`` line on stderr with a
documented exit code (see :mod:`mme_triton.cli._errors` and docs/cli.md), and a traceback only with
``--debug``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
import warnings
from collections.abc import Sequence

from mme_triton.cli import _artifacts, _capacity, _components, _endpoint, _invoke, _metrics, _prep, _profile
from mme_triton.cli._common import Handler, add_common_options, err
from mme_triton.cli._errors import EXIT_INTERRUPTED, describe
from mme_triton.errors import MMETritonWarning

__all__ = ["main", "parser"]

_EPILOG = """\
Every command takes --json (results as JSON), -q/--quiet, --debug and -v; the AWS ones --profile,
--region and --endpoint-url. `mme-triton COMMAND --help` shows each command's options and examples.

exit codes: 0 ok, 1 failed, 2 usage (a wrong flag or value), 3 AWS not set up (region, credentials,
profile, permissions, endpoint URL), 4 not found (endpoint, model, file), 130 interrupted.

To try everything without an AWS account: `mme-triton quickstart`, or `mme-triton local up` and the
exports it prints."""


def parser() -> argparse.ArgumentParser:
    """The ``mme-triton`` argument parser, every subcommand registered."""
    main_parser = argparse.ArgumentParser(
        prog="mme-triton",
        description="Triton model repositories to SageMaker multi-model endpoints, and back.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_options(main_parser, suppress=False)
    sub = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _artifacts.register(sub)
    _endpoint.register(sub)
    _components.register(sub)
    _metrics.register(sub)
    _invoke.register(sub)
    _prep.register(sub)
    _profile.register(sub)
    _capacity.register(sub)
    # the embedded stack's commands; their module imports only the standard library until they run
    from mme_triton.local.cli import add_local_commands

    add_local_commands(sub)
    return main_parser


def _configure_logging(args: argparse.Namespace) -> None:
    verbose = getattr(args, "verbose", 0)
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "quiet", False):
        # What the SageMaker SDK chose for an omitted --role or S3_PREFIX is always said.
        logging.getLogger("mme_triton._sdk").setLevel(min(level, logging.INFO))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mme-triton`` command line; returns the process exit code."""
    args = parser().parse_args(argv)
    _configure_logging(args)
    handler: Handler = args.handler
    try:
        with warnings.catch_warnings():
            # The library logs each of its warnings too: the log line is the one the command shows.
            warnings.simplefilter("ignore", MMETritonWarning)
            return handler(args)
    except (Exception, KeyboardInterrupt) as exc:
        if getattr(args, "debug", False) and not isinstance(exc, KeyboardInterrupt):
            traceback.print_exception(exc, file=sys.stderr)
        message, code = describe(exc, getattr(args, "command_parser", None))
        err("interrupted" if code == EXIT_INTERRUPTED else f"error: {message}")
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
