"""An instance's storage volume: models downloaded once, kept extracted after an unload, deleted when full.

Mixed into :class:`~mme_triton.local.route.instance.InstanceRuntime`: :meth:`ModelCache._on_volume`
gives the extracted copy a load needs, downloading and extracting it only when the volume has none
(:class:`~mme_triton.local.route.volume.ModelVolume` keeps the bookkeeping). A copy is served as it is
until it leaves the volume, even if the artifact in S3 was overwritten meanwhile, as SageMaker does; the
stack checks the object's ETag (a ``HEAD``, no download) and logs when they differ. The download and the
extraction are timed (:class:`~mme_triton.local.route.timings.LoadTimings`).
"""

from __future__ import annotations

import datetime
import logging
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import ARCHIVE_SUFFIX, error_code, parse_s3_url
from mme_triton.errors import LocalStackError
from mme_triton.local.route._prepare import Messages, prepare_model
from mme_triton.local.route.extract import ExtractLimits, ModelArchiveError
from mme_triton.local.route.limits import human_size
from mme_triton.local.route.lru import ModelLRU
from mme_triton.local.route.metrics import MetricsSink
from mme_triton.local.route.timings import LoadTimings, TimedBody
from mme_triton.local.route.volume import ModelCopy, ModelVolume

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["ModelCache", "ModelDataNotFoundError", "model_hash_of"]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")


def model_hash_of(target_model: str) -> str:
    """The MD5 hex digest of ``target_model``: the name SageMaker loads it under."""
    import hashlib

    return hashlib.md5(target_model.encode("utf-8"), usedforsecurity=False).hexdigest()


class ModelDataNotFoundError(LocalStackError):
    """``<ModelDataUrl>/<TargetModel>`` is not in S3."""

    def __init__(self, bucket: str, key: str) -> None:
        self.bucket = bucket
        self.key = key
        super().__init__(f"s3://{bucket}/{key} does not exist")


class ModelCache:
    """The volume half of an endpoint's runtime; mixed into
    :class:`~mme_triton.local.route.instance.InstanceRuntime`."""

    # set by InstanceRuntime.__init__
    _lock: threading.Lock
    _s3: S3Client
    _volume: ModelVolume
    _lru: ModelLRU
    _loading: dict[str, Future[None]]
    _unloading: dict[str, Future[None]]
    _in_flight: Counter[str]
    _workdir: Path
    _limits: ExtractLimits
    _adapt: Callable[[Path], list[str]] | None
    model_data_url: str
    downloads: int
    metrics: MetricsSink

    @property
    def endpoint_name(self) -> str:  # pragma: no cover - defined by InstanceRuntime
        raise NotImplementedError

    def _messages(self, target_model: str) -> Messages:  # pragma: no cover - defined by InstanceRuntime
        raise NotImplementedError

    def _model_root(self, model_hash: str) -> Path:
        return self._workdir / "models" / model_hash

    def _location(self, target_model: str) -> tuple[str, str]:
        bucket, prefix = parse_s3_url(self.model_data_url)
        return bucket, prefix + target_model

    def _on_volume(self, target_model: str) -> tuple[ModelCopy, LoadTimings]:
        """The extracted copy of ``target_model`` on the volume, downloaded and extracted if there is none,
        and how long that took (``from_volume`` when it was there already; ``load_s`` is left 0).

        Raises:
            ModelDataNotFoundError, ModelArchiveError, LoadFailedError: as the download and extraction do.
        """
        with self._lock:
            copy = self._volume.get(target_model)
        if copy is not None and copy.path.is_dir():
            self._check_artifact(target_model, copy)
            return copy, LoadTimings(0.0, 0.0, 0.0, from_volume=True)
        root = self._model_root(model_hash_of(target_model))
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        try:
            started = time.monotonic()
            stream, etag = self._download(target_model)
            body = TimedBody(stream)
            requested = time.monotonic()  # GetObject answered; the bytes are read while extracting
            try:
                extracted = prepare_model(
                    body,
                    root,
                    target_model=target_model,
                    endpoint_name=self.endpoint_name,
                    limits=self._limits,
                    adapt=self._adapt,
                    rewrite=self._messages(target_model).rewrite,
                )
            finally:
                body.close()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        parts = LoadTimings(
            download_s=requested - started + body.seconds,
            extract_s=max(0.0, time.monotonic() - requested - body.seconds),
            load_s=0.0,
        )
        self.metrics.model_downloaded(parts.download_s + parts.extract_s)
        copy = ModelCopy(extracted.size, etag, time.time(), extracted.path)
        with self._lock:
            self.downloads += 1
            self._volume.add(target_model, copy)
            victims = self._volume.over_capacity(keep=lambda name: name == target_model or self._held(name))
            for victim in victims:
                self._delete_copy(victim)
            over = self._volume.total_bytes - self._volume.capacity
        if victims:
            logger.info(
                "endpoint %s: the volume is full; deleted the unused %s from it", self.endpoint_name, victims
            )
        if over > 0:
            logger.warning(
                "endpoint %s: models loaded or loading take %s more than the volume (%s)",
                self.endpoint_name,
                human_size(over),
                human_size(self._volume.capacity),
            )
        return copy, parts

    def models_in_s3(self, limit: int = 1000) -> list[str]:
        """The TargetModels (``.tar.gz`` objects directly under the ModelDataUrl) in S3, sorted, at most
        ``limit`` of them.

        Raises:
            LocalStackError: S3 refused the listing.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, prefix = self._location("")
        names: list[str] = []
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter="/", PaginationConfig={"MaxItems": limit}
            )
            for page in pages:
                names += [item["Key"][len(prefix) :] for item in page.get("Contents", [])]
        except (BotoCoreError, ClientError) as exc:
            raise LocalStackError(f"cannot list s3://{bucket}/{prefix}: {exc}") from exc
        return sorted(name for name in names if name.endswith(ARCHIVE_SUFFIX) and name != ARCHIVE_SUFFIX)

    def _held(self, name: str) -> bool:
        """Whether ``name`` is loaded, loading, unloading or in use (caller holds the lock)."""
        busy = name in self._loading or name in self._unloading or self._in_flight[name] > 0
        return busy or name in self._lru

    def _delete_copy(self, target_model: str) -> None:
        """Take ``target_model``'s copy off the volume (caller holds the lock); its files are moved aside at
        once, so a new download can use the place, and deleted on a thread."""
        if self._volume.remove(target_model) is None:
            return
        root = self._model_root(model_hash_of(target_model))
        doomed = root.with_name(f"{root.name}.deleted-{uuid.uuid4().hex[:8]}")
        try:
            root.rename(doomed)
        except OSError:
            return
        threading.Thread(target=shutil.rmtree, args=(doomed, True), daemon=True).start()

    def _check_artifact(self, target_model: str, copy: ModelCopy) -> None:
        """Log when the S3 object changed since ``copy`` was downloaded (the copy is served all the same)."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = self._location(target_model)
        try:
            now: str | None = str(self._s3.head_object(Bucket=bucket, Key=key).get("ETag", ""))
        except ClientError as exc:
            if error_code(exc) not in ("404", "NoSuchKey", "NotFound", "403", "AccessDenied"):
                logger.debug("endpoint %s: HEAD s3://%s/%s failed: %s", self.endpoint_name, bucket, key, exc)
                return
            now = None
        except BotoCoreError as exc:
            logger.debug("endpoint %s: HEAD s3://%s/%s failed: %s", self.endpoint_name, bucket, key, exc)
            return
        if now == copy.etag:
            return
        fetched = datetime.datetime.fromtimestamp(copy.fetched_at).strftime("%H:%M:%S")
        changed = "no longer exists" if now is None else f"was overwritten (ETag {copy.etag} -> {now})"
        logger.warning(
            "endpoint %s: s3://%s/%s %s since the endpoint downloaded it at %s; the endpoint serves the "
            "copy on its volume until that copy is deleted from there, as SageMaker does. Upload a new "
            "version under a new name.",
            self.endpoint_name,
            bucket,
            key,
            changed,
            fetched,
        )

    def _download(self, target_model: str) -> tuple[Any, str]:
        """The S3 object's body (a stream: extracted as it arrives, never stored) and its ETag."""
        from botocore.exceptions import ClientError

        bucket, key = self._location(target_model)
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = error_code(exc)
            if code in ("NoSuchKey", "NoSuchBucket", "404", "403", "AccessDenied"):
                raise ModelDataNotFoundError(bucket, key) from exc
            raise LocalStackError(f"cannot download s3://{bucket}/{key}: {exc}") from exc
        body = response["Body"]
        size = int(response.get("ContentLength") or 0)
        if size > self._limits.max_bytes:
            body.close()
            raise ModelArchiveError(
                f"the archive is {human_size(size)} compressed, more than the "
                f"{human_size(self._limits.max_bytes)} it may unpack to, {self._limits.max_bytes_source}"
            )
        return body, str(response.get("ETag", ""))
