"""One line for a notebook: an embedded stack standing in for AWS, stopped when the kernel exits.

A notebook written against AWS needs three things: a boto3 session, an execution role and a bucket.
:func:`notebook_stack` gives those three from a :class:`~mme_triton.local.stack.LocalStack` it starts for
the process, so the notebook's first cell is the only one that differs between the stack and AWS::

    from mme_triton.local import notebook_stack; session, role, bucket = notebook_stack()
    # on AWS, the same line becomes (here wrapped):
    # import boto3, sagemaker; session, role, bucket = (
    #     boto3.Session(), sagemaker.get_execution_role(), sagemaker.Session().default_bucket())

The stack is stopped by an :mod:`atexit` hook, when the kernel shuts down or restarts: the notebook has no
``stack.stop()`` cell (its last cell tears down the endpoint, as on AWS). A kernel killed with SIGKILL
runs no exit hooks; its endpoints' Triton servers then have to be stopped by hand.
"""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING, Any, NamedTuple

from mme_triton.local.stack import LocalStack

if TYPE_CHECKING:
    import boto3

__all__ = ["NotebookAWS", "notebook_stack", "running_notebook_stack"]

_lock = threading.Lock()
_stack: LocalStack | None = None
_bucket: str | None = None


class NotebookAWS(NamedTuple):
    """What a notebook needs from AWS; unpacks as ``session, role, bucket``."""

    session: boto3.Session
    """A boto3 session whose clients reach the stack: pass it as ``boto3_session=``."""
    role: str
    """An execution role ARN in the stack's IAM, for ``deploy_mme(role=...)``."""
    bucket: str
    """A bucket that exists in the stack's S3, for ``s3://<bucket>/<prefix>/`` model data URLs."""


def notebook_stack(*, bucket: str | None = None, **options: Any) -> NotebookAWS:
    """Start an embedded stack for this process, once; return ``(boto3 session, role ARN, bucket)``.

    The first call starts a :class:`~mme_triton.local.stack.LocalStack` and registers its ``stop()`` to
    run when the process exits. Later calls (a first cell run again) return the same stack's values and
    ignore their arguments.

    Parameters:
        bucket: the bucket to create; default: the stack's own (``mme-triton-local-<account>``).
        options: passed to :class:`~mme_triton.local.stack.LocalStack` (``memory_budget=``,
            ``max_models=``, ``region=`` ...).

    Raises:
        UnsupportedPlatformError: not Linux x86_64 with glibc >= 2.35.
        LocalStackError: the stack cannot start (the ``local`` extra is not installed ...).

    Example::

        session, role, bucket = notebook_stack()
        deploy_mme("demo", f"s3://{bucket}/demo/", role=role, instance_type="ml.c5.xlarge",
                   boto3_session=session)
    """
    global _stack, _bucket
    with _lock:
        if _stack is None or not _stack.running:
            stack = LocalStack(**options).start()
            try:
                name = stack.create_bucket(bucket)
            except BaseException:
                stack.stop()
                raise
            atexit.register(stack.stop)
            _stack, _bucket = stack, name
        assert _bucket is not None
        return NotebookAWS(_stack.boto3_session(), _stack.role_arn, _bucket)


def running_notebook_stack() -> LocalStack | None:
    """The stack :func:`notebook_stack` started in this process, while it runs; else ``None``.

    For what only the stack can show (``loaded_models(endpoint)``, ``triton(endpoint)``); a notebook meant
    for AWS as well does not need it.
    """
    stack = _stack
    return stack if stack is not None and stack.running else None
