"""One copy of an inference component: a Triton in single-model mode, and the artifact its copies share.

SageMaker runs each copy of a component as its own container: the model's ``ModelDataUrl`` (one
``.tar.gz``) downloaded and extracted to ``/opt/ml/model``, the container's serve script started in
single-model mode (``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``), requests sent to its ``POST /invocations``.
The stack does the same with a :class:`~mme_triton.local.triton.server.TritonServer` per copy, started by
:func:`~mme_triton.local.serve.default_triton_factory` with the extracted repository; the copies of one
version of a component on this machine share one extracted repository (:func:`prepare_repository`, within
the stack's extraction limits, adapted for the CPU as for a multi-model endpoint).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import error_code, parse_s3_url
from mme_triton.errors import LocalStackError
from mme_triton.local.route._prepare import LoadFailedError, prepare_model
from mme_triton.local.route.extract import ExtractLimits, ModelArchiveError
from mme_triton.local.route.limits import DEFAULT_MAX_COPIES
from mme_triton.local.triton.protocol import TritonLike

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["CopyBudget", "CopyRuntime", "CopyStartError", "object_location", "prepare_repository"]

logger = logging.getLogger("mme_triton.local.route.components")

_REASON_LIMIT = 1024  # DescribeInferenceComponent's FailureReason is at most 1024 characters


class CopyStartError(LocalStackError):
    """A copy could not start; the message is the component's ``FailureReason``."""

    def __init__(self, message: str) -> None:
        super().__init__(message if len(message) <= _REASON_LIMIT else message[: _REASON_LIMIT - 3] + "...")


def object_location(url: str) -> tuple[str, str]:
    """``(bucket, key)`` of a ``ModelDataUrl`` naming one object (``s3://bucket/prefix/model.tar.gz``).

    Raises:
        CopyStartError: not an ``s3://`` URL of an object.

    Example:
        >>> object_location("s3://models/ic/linear.tar.gz")
        ('models', 'ic/linear.tar.gz')
    """
    head, _, name = url.rstrip().rpartition("/")
    try:
        bucket, prefix = parse_s3_url(head)
    except (TypeError, ValueError) as exc:
        raise CopyStartError(f"ModelDataUrl {url!r} is not the S3 URL of a model archive: {exc}") from exc
    if not name:
        raise CopyStartError(
            f"ModelDataUrl {url!r} names a prefix: the embedded stack serves an inference component from "
            "one model archive (s3://bucket/prefix/model.tar.gz)"
        )
    return bucket, prefix + name


def prepare_repository(
    s3: S3Client,
    url: str,
    root: Path,
    *,
    component_name: str,
    endpoint_name: str,
    limits: ExtractLimits,
    adapt: Any,
) -> Path:
    """Download ``url`` and extract it into ``root/model``: the model repository a copy serves.

    Raises:
        CopyStartError: the archive is not in S3, is refused, or holds a model the stack cannot run (the
            message is the component's ``FailureReason``).
    """
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = object_location(url)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    try:
        try:
            response = s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "NoSuchBucket", "404", "403", "AccessDenied"):
                raise CopyStartError(
                    f"Failed to download model data(bucket: {bucket}, key: {key}). Please ensure that there "
                    "is an object located at the URL and that the role passed to CreateModel has permissions "
                    "to download the model."
                ) from exc
            raise CopyStartError(f"cannot download s3://{bucket}/{key}: {exc}") from exc
        except BotoCoreError as exc:
            raise CopyStartError(f"cannot download s3://{bucket}/{key}: {exc}") from exc
        body = response["Body"]
        try:
            extracted = prepare_model(
                body,
                root,
                target_model=key.rsplit("/", 1)[-1],
                endpoint_name=endpoint_name,
                limits=limits,
                adapt=adapt,
            )
        except ModelArchiveError as exc:
            raise CopyStartError(
                f"Failed to extract model data(bucket: {bucket}, key: {key}): {exc}"
            ) from exc
        except LoadFailedError as exc:
            raise CopyStartError(exc.message) from exc
        finally:
            body.close()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    logger.info("inference component %s: %s extracted (%d bytes)", component_name, url, extracted.size)
    return extracted.path


class CopyRuntime:
    """One copy: its Triton, the requests it serves now, and its place in the routing.

    Parameters:
        copy_id: the copy's name (``<component>-<n>``, never reused within the component).
        instance_id: the instance of the endpoint it was placed on.
        triton: its started server.
        version: the component's specification it serves.
    """

    def __init__(self, copy_id: str, instance_id: str, triton: TritonLike, version: int) -> None:
        self.copy_id = copy_id
        self.instance_id = instance_id
        self.triton = triton
        self.version = version
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.in_flight = 0
        self.retired = False
        self.served = 0
        """Requests this copy answered (what routing tests read)."""

    def enter(self) -> bool:
        """Count one request on the copy; ``False`` when it left the routing."""
        with self._lock:
            if self.retired:
                return False
            self.in_flight += 1
            return True

    def release(self) -> None:
        """The request counted by :meth:`enter` is done."""
        with self._lock:
            self.in_flight -= 1
            self.served += 1
            if self.in_flight <= 0:
                self._idle.notify_all()

    def retire(self) -> None:
        """Take no new request; those counted finish."""
        with self._lock:
            self.retired = True

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop the copy's Triton, after ``drain_timeout`` seconds at most for its requests."""
        started = time.monotonic()
        with self._idle:
            self._idle.wait_for(lambda: self.in_flight <= 0, timeout=max(0.0, drain_timeout))
        if self.in_flight > 0:
            logger.warning(
                "copy %s stopped with %d requests still running after %.0fs",
                self.copy_id,
                self.in_flight,
                time.monotonic() - started,
            )
        self.triton.stop()


class CopyBudget:
    """How many copies may run on this machine (thread-safe)."""

    def __init__(self, limit: int = DEFAULT_MAX_COPIES) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"max_copies must be an integer >= 1, got {limit!r}")
        self.limit = limit
        self.running = 0
        self._lock = threading.Lock()

    def take(self, wanted: int) -> int:
        """Reserve up to ``wanted`` copies; returns how many may start."""
        with self._lock:
            granted = max(0, min(wanted, self.limit - self.running))
            self.running += granted
            return granted

    def give(self, count: int) -> None:
        with self._lock:
            self.running = max(0, self.running - count)
