"""The command line's one error boundary: any error becomes one ``error:`` line and a documented exit code.

The cause of a library error is looked for along its chain (``raise ... from``): a missing region, missing
or expired credentials, an unknown profile or a denied permission say what to set, whatever stage met
them. Messages name the command's own flags (``--versioned``, ``--overwrite``), not the Python arguments
the library's messages name. docs/cli.md lists the codes.
"""

from __future__ import annotations

import argparse
import dis
import re
from collections.abc import Iterator

__all__ = [
    "EXIT_AWS",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "describe",
]

EXIT_OK = 0
EXIT_FAILURE = 1
"""The command failed: a library error (validation, upload, deploy, inference ...)."""
EXIT_USAGE = 2
"""The command line or a value on it is wrong: argparse's own code, and a ``ValueError``/``TypeError`` the
command or the library raised on purpose about what it was given (see :func:`describe`)."""
EXIT_AWS = 3
"""AWS is not set up for the call: no region, no or expired credentials, an unknown profile, access denied,
an endpoint URL that cannot be reached."""
EXIT_NOT_FOUND = 4
"""What the command names does not exist: an endpoint, a model, a file or directory."""
EXIT_INTERRUPTED = 130
"""Ctrl-C."""

_EXPIRED = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired", "InvalidToken"}
)
_REJECTED = frozenset(
    {
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AuthFailure",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "MissingAuthenticationTokenException",
    }
)
_DENIED = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError", "Forbidden"}
)
_SET_CREDENTIALS = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, run `aws configure` (or `aws sso login`), or pass "
    "--profile; for the embedded stack, export what `mme-triton local up` prints"
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)


def _aws_cause(exc: BaseException) -> str | None:
    """What to set, when an AWS set-up problem is behind ``exc``; ``None`` otherwise."""
    try:
        from botocore import exceptions as bce
    except ImportError:  # pragma: no cover - boto3 is a dependency
        return None
    from mme_triton._sagemaker import error_code, error_message

    for cause in _chain(exc):
        if isinstance(cause, bce.NoRegionError):
            return "no AWS region: pass --region, or set AWS_DEFAULT_REGION (or `region` in ~/.aws/config)"
        if isinstance(cause, bce.ProfileNotFound):
            profile = cause.kwargs.get("profile", "")
            return (
                f"AWS profile {profile!r} is not in ~/.aws/config or ~/.aws/credentials: pass an existing "
                "--profile, or unset AWS_PROFILE"
            )
        if isinstance(cause, bce.PartialCredentialsError):
            return f"incomplete AWS credentials ({cause}): {_SET_CREDENTIALS}"
        if isinstance(cause, bce.NoCredentialsError):
            return f"no AWS credentials found: {_SET_CREDENTIALS}"
        if isinstance(cause, (bce.TokenRetrievalError, bce.SSOTokenLoadError, bce.UnauthorizedSSOTokenError)):
            return (
                f"the AWS SSO session has expired or is missing ({cause}): run `aws sso login` and try again"
            )
        if isinstance(cause, bce.CredentialRetrievalError):
            return f"the AWS credentials could not be loaded ({cause}): {_SET_CREDENTIALS}"
        if isinstance(cause, bce.EndpointConnectionError):
            return f"{cause}: check --endpoint-url or AWS_ENDPOINT_URL, --region, and the network"
        if isinstance(cause, bce.ClientError):
            code = error_code(cause)
            message = error_message(cause)
            if code in _EXPIRED:
                return (
                    f"the AWS credentials have expired ({code}: {message}): refresh them "
                    "(`aws sso login`, or new temporary credentials) and try again"
                )
            if code in _REJECTED:
                return f"AWS does not accept the credentials ({code}: {message}): {_SET_CREDENTIALS}"
            if code in _DENIED or code.startswith("AccessDenied"):
                return (
                    f"access denied ({code}: {message}): the credentials in use lack this permission; "
                    "use a --profile whose role has it"
                )
    return None


_RAISE = dis.opmap["RAISE_VARARGS"]


def _refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``ValueError``/``TypeError`` that the command or the library raised on purpose,
    refusing a value it was given: raised by a ``raise`` statement in this package's own code.

    Everything else of those types is not the command line's fault: one raised by an operation (a bug,
    such as ``'NoneType' object is not subscriptable``) or inside another package (``json`` or numpy
    reading a file) is an error like any other, with the ``--debug`` hint.
    """
    if type(exc) not in (ValueError, TypeError):
        return False  # subclasses are others' (JSONDecodeError, UnicodeDecodeError ...)
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    if not str(frame.f_globals.get("__name__", "")).startswith("mme_triton."):
        return False
    code = frame.f_code.co_code
    return 0 <= tb.tb_lasti < len(code) and code[tb.tb_lasti] == _RAISE


def _not_found(exc: BaseException) -> bool:
    from mme_triton.errors import EndpointNotFoundError, ModelNotFoundError

    return isinstance(exc, (EndpointNotFoundError, ModelNotFoundError, FileNotFoundError, NotADirectoryError))


def _flag_terms(parser: argparse.ArgumentParser | None) -> list[tuple[re.Pattern[str], str]]:
    """Python argument spellings (``versioned=True``, ``role=``) and the command's flags for them."""
    if parser is None:
        return []
    terms: list[tuple[re.Pattern[str], str]] = []
    for action in parser._actions:
        if action.dest in (argparse.SUPPRESS, "help"):
            continue
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs:
            flag = longs[0]
            terms.append((re.compile(rf"(?<![\w.]){action.dest}=True\b"), flag))
            terms.append((re.compile(rf"(?<![\w.]){action.dest}=(?=\S)"), f"{flag} "))
        elif not action.option_strings and isinstance(action.metavar, str):
            terms.append((re.compile(rf"(?<![\w.]){action.dest}=(?=\S)"), f"{action.metavar} "))
            if "_" in action.dest:  # model_data_url, endpoint_name: never an ordinary word
                terms.append((re.compile(rf"(?<![\w.]){action.dest}\b"), action.metavar))
    return terms


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines) if lines else text.strip()


def describe(exc: BaseException, parser: argparse.ArgumentParser | None = None) -> tuple[str, int]:
    """``(message, exit code)`` for an error a command raised; the message is one line, in the command's
    terms (``parser`` is the subcommand's, whose flags replace the Python argument names).

    A usage error (exit 2) is a refusal of what the command was given: a ``ValueError``/``TypeError`` the
    command or the library raised on purpose. A ``ValueError``/``TypeError`` from anywhere else is
    unexpected (a bug, or bad data read by another package) and says its type and ``--debug``.
    """
    from mme_triton.errors import MMETritonError

    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED
    aws = _aws_cause(exc)
    if aws is not None:
        return _one_line(aws), EXIT_AWS
    message = str(exc) or type(exc).__name__
    for pattern, replacement in _flag_terms(parser):
        message = pattern.sub(replacement, message)
    message = _one_line(message)
    if _not_found(exc):
        return message, EXIT_NOT_FOUND
    if isinstance(exc, MMETritonError):
        return message, EXIT_FAILURE
    if _refusal(exc):
        return message, EXIT_USAGE
    if isinstance(exc, OSError):
        return message, EXIT_FAILURE
    return f"{type(exc).__name__}: {message} (run with --debug for the traceback)", EXIT_FAILURE
