"""Artifacts on S3: upload packaged models under a multi-model endpoint's ModelDataUrl prefix, list, remove.

A multi-model endpoint serves every ``<prefix>/<TargetModel>`` object under its ``ModelDataUrl``. An
instance that has loaded a model keeps serving it from its cache, so an object replaced under the same
name may go on being served in its old version. Uploads therefore refuse to replace an object whose
content differs (:class:`~mme_triton.errors.ArtifactConflictError`) unless ``overwrite=True``; the safe
way to update a model is a new name, ``versioned=True`` (``resnet-<content hash>.tar.gz``).

"Same content" is decided on the content digest (:mod:`mme_triton.artifact.digest`), stored with every
object as the user metadata ``mme-triton-content-digest``; the archive's SHA-256 is stored as
``mme-triton-sha256`` and S3 keeps a SHA-256 checksum of the upload (``ChecksumAlgorithm=SHA256``).
An object becomes visible only when its PUT or multipart upload completes, so a reader never sees half an
artifact; a failed multipart upload is aborted by boto3's transfer manager.

The existence check and the upload are separate calls and the upload is unconditional: boto3's managed
transfer does not pass S3's ``IfNoneMatch`` (s3transfer's ``ALLOWED_UPLOAD_ARGS`` lacks it), so two
processes uploading different content under one name at the same moment both succeed and the last to
complete wins. Versioned names keep racing uploaders on different keys.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mme_triton._sagemaker import check_target_model, error_code, make_client, parse_s3_url
from mme_triton._sdk import boto3_session_of
from mme_triton.artifact._ensembles import ensemble_metadata, ensemble_objects, follow_ensembles
from mme_triton.artifact._gzip import isal_level
from mme_triton.artifact._transfer import BuildDir, ByteCounter, UploadProgress
from mme_triton.artifact.package import DEFAULT_COMPRESSLEVEL, SUFFIX, Artifact, _package, check_artifact_name
from mme_triton.errors import ArtifactConflictError, ArtifactError, ModelValidationError

if TYPE_CHECKING:
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config
    from mypy_boto3_s3 import S3Client

    from mme_triton.model.repository import TritonModel

__all__ = [
    "CONTENT_DIGEST_METADATA",
    "SHA256_METADATA",
    "UploadedArtifact",
    "list_models",
    "parse_s3_url",
    "remove_model",
    "upload_models",
]

logger = logging.getLogger(__name__)

CONTENT_DIGEST_METADATA = "mme-triton-content-digest"
SHA256_METADATA = "mme-triton-sha256"
_MiB = 1 << 20
_SSE_VALUES = ("AES256", "aws:kms", "aws:kms:dsse")

UploadStatus = Literal["uploaded", "unchanged", "replaced"]


@dataclass(frozen=True)
class UploadedArtifact(Artifact):
    """An :class:`Artifact` after :func:`upload_models`: where it is and what the upload did.

    Attributes:
        url: ``s3://bucket/prefix/<name>``.
        status: ``"uploaded"`` (new object), ``"unchanged"`` (an object with the same content digest was
            already there, nothing was sent) or ``"replaced"`` (``overwrite=True`` replaced other content).
        stale_ensembles: ensembles under the prefix that still embed an older copy of this model.
        supersedes: for an ensemble ``update_ensembles=True`` repackaged, the TargetModel it updates.
    """

    url: str
    status: UploadStatus
    stale_ensembles: tuple[str, ...] = field(default=(), kw_only=True)
    """Ensembles under the prefix that embed an older copy of this model and were not updated (the newest
    artifact of each): their TargetModels keep serving the old copy."""
    supersedes: str | None = field(default=None, kw_only=True)
    """For an ensemble repackaged by ``update_ensembles=True``: the artifact it takes over from."""


def upload_models(
    models: str | os.PathLike[str] | Artifact | Iterable[str | os.PathLike[str] | Artifact],
    model_data_url: str,
    *,
    boto3_session: boto3.session.Session | None = None,
    sagemaker_session: Any = None,
    s3_client: S3Client | None = None,
    boto_config: Config | None = None,
    overwrite: bool = False,
    versioned: bool = False,
    kms_key_id: str | None = None,
    sse: str | None = None,
    progress: UploadProgress | None = None,
    max_concurrency: int = 10,
    multipart_threshold: int = 64 * _MiB,
    multipart_chunksize: int = 16 * _MiB,
    workdir: str | os.PathLike[str] | None = None,
    update_ensembles: bool = False,
    check_ensembles: bool = True,
) -> list[UploadedArtifact]:
    """Upload models to ``<model_data_url>/<name>.tar.gz``, packaging model directories on the way.

    Parameters:
        models: model directories and/or :class:`Artifact` objects (one, or an iterable). Directories are
            all validated before anything is uploaded, then packaged and uploaded one at a time.
        model_data_url: the prefix, ``s3://bucket/prefix/`` (the endpoint's ModelDataUrl).
        boto3_session, boto_config, s3_client: how to reach S3; a given ``s3_client`` wins over both.
        sagemaker_session: a ``sagemaker.Session`` instead of ``boto3_session`` (its ``boto_session``).
        overwrite: replace an object whose content differs. A live endpoint may go on serving the old
            model from its cache under that name: prefer ``versioned=True``.
        versioned: package directories as ``<directory>-<12 hex of the content digest>.tar.gz``.
            ``Artifact`` objects keep their own names.
        kms_key_id: encrypt with SSE-KMS under this key (ARN, key id or alias).
        sse: ``"AES256"``, ``"aws:kms"`` or ``"aws:kms:dsse"``; ``"aws:kms"`` when only ``kms_key_id``
            is given; the bucket's default encryption when neither is.
        progress: ``progress(stage, name, bytes_done, bytes_total)``, stage ``"package"`` (name: the
            model directory) or ``"upload"`` (name: the TargetModel). An exception it raises stops the
            call (a started multipart upload is aborted) and propagates.
        max_concurrency, multipart_threshold, multipart_chunksize: boto3 managed transfer settings.
        workdir: where directories are packaged; the archives are kept there. By default a temporary
            directory is used and removed, and the returned ``path`` no longer exists.
        update_ensembles: repackage the ensembles under the prefix that embed an older copy of an
            uploaded model, from the ensemble's directory beside the model in its repository, and upload
            them under versioned names (appended to the result, each with ``supersedes``). Without it
            they are named in an ``MMETritonWarning`` and in ``stale_ensembles``: an ensemble's archive
            holds its own copy of each step, so its TargetModel keeps serving the old one.
        check_ensembles: look for those ensembles at all. False skips the scan, for archives that no
            endpoint finds by TargetModel under the prefix (an inference component names its own archive);
            ``update_ensembles`` then cannot be asked for.

    Returns one :class:`UploadedArtifact` per model, in order; ``status`` tells uploaded, unchanged (same
    content digest already there, skipped) or replaced. Then the ensembles ``update_ensembles``
    repackaged. Finding ensembles reads the metadata of every archive under the prefix (one HeadObject
    each).

    Raises:
        ModelValidationError: a model directory has errors (raised before anything is uploaded).
        ArtifactConflictError: an object under the name has different content (or none recorded) and
            ``overwrite`` is false; the models before it are uploaded, the ones after it are not.
        ArtifactError: S3 refused a call (missing bucket, access denied, ...).
        ValueError, TypeError: a bad URL, option or duplicate name.

    Example::

        uploaded = upload_models(["repo/resnet", "repo/pipeline"], "s3://bucket/mme/")
        [(a.name, a.status) for a in uploaded]
        # [('resnet.tar.gz', 'uploaded'), ('pipeline.tar.gz', 'unchanged')]
    """
    bucket, prefix = parse_s3_url(model_data_url)
    if update_ensembles and not check_ensembles:
        raise ValueError("update_ensembles=True needs check_ensembles=True")
    items = _as_list(models)
    extra_args = _encryption_args(kms_key_id, sse)
    for value, label in ((max_concurrency, "max_concurrency"), (multipart_threshold, "multipart_threshold")):
        if value < 1:
            raise ValueError(f"{label} must be at least 1, not {value}")
    if multipart_chunksize < 5 * _MiB:
        raise ValueError("multipart_chunksize must be at least 5 MiB (S3's smallest part)")
    loaded = _load_inputs(items, versioned=versioned)

    from boto3.s3.transfer import TransferConfig

    client = _client(boto3_session_of(boto3_session, sagemaker_session), s3_client, boto_config)
    transfer_config = TransferConfig(
        multipart_threshold=multipart_threshold,
        multipart_chunksize=multipart_chunksize,
        max_concurrency=max_concurrency,
        preferred_transfer_client="classic",
    )
    results: list[UploadedArtifact] = []
    names: set[str] = set()
    repositories: dict[str, Path | None] = {}
    upload = partial(
        _upload_one,
        client,
        bucket=bucket,
        prefix=prefix,
        extra_args=extra_args,
        transfer_config=transfer_config,
        progress=progress,
    )
    with BuildDir(workdir) as build_dir:
        for item in loaded:
            if isinstance(item, Artifact):
                artifact = item
            else:
                artifact = _package_for_upload(item, build_dir, versioned=versioned, progress=progress)
            repositories[artifact.name] = None if isinstance(item, Artifact) else item.repository
            try:
                if artifact.name in names:
                    raise ValueError(f"two of the models would be uploaded as {artifact.name!r}")
                names.add(artifact.name)
                results.append(upload(artifact, overwrite=overwrite))
            finally:
                if workdir is None and not isinstance(item, Artifact):
                    artifact.path.unlink(missing_ok=True)

        def republish(directory: Path) -> UploadedArtifact:
            model = _load_inputs([directory], versioned=True)[0]
            assert not isinstance(model, Artifact)
            fresh = _package_for_upload(model, build_dir, versioned=True, progress=progress)
            try:
                return upload(fresh, overwrite=False)
            finally:
                if workdir is None:
                    fresh.path.unlink(missing_ok=True)

        def objects() -> list[Any]:
            try:
                return ensemble_objects(client, bucket, prefix, suffix=SUFFIX, workers=max_concurrency)
            except _aws_errors() as exc:
                if update_ensembles:
                    raise ArtifactError(f"cannot read the artifacts under {model_data_url}: {exc}") from exc
                # the uploads are done; a role that may write but not list the prefix still uploads
                logger.warning(
                    "could not look for ensembles under %s that embed the models: %s", model_data_url, exc
                )
                return []

        if not check_ensembles:
            return results
        return follow_ensembles(
            results,
            repositories,
            objects,
            update=update_ensembles,
            republish=republish,
            where=model_data_url,
        )


def list_models(
    model_data_url: str,
    *,
    boto3_session: boto3.session.Session | None = None,
    sagemaker_session: Any = None,
    s3_client: S3Client | None = None,
    boto_config: Config | None = None,
) -> list[str]:
    """The TargetModel names under a ModelDataUrl prefix: ``.tar.gz`` objects directly under it, sorted.

    Objects in "subdirectories" of the prefix are not listed (an endpoint cannot serve them).

    Raises:
        ArtifactError: S3 refused the listing (missing bucket, access denied, ...).
        ValueError: a bad URL.

    Example::

        list_models("s3://bucket/mme/")  # ['pipeline.tar.gz', 'resnet.tar.gz']
    """
    bucket, prefix = parse_s3_url(model_data_url)
    client = _client(boto3_session_of(boto3_session, sagemaker_session), s3_client, boto_config)
    names: list[str] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, Delimiter="/"
        ):
            for item in page.get("Contents", []):
                name = item["Key"][len(prefix) :]
                if name.endswith(SUFFIX) and len(name) > len(SUFFIX):
                    names.append(name)
    except _aws_errors() as exc:
        raise ArtifactError(f"cannot list {model_data_url}: {exc}", url=model_data_url) from exc
    return sorted(names)


def remove_model(
    model_data_url: str,
    name: str,
    *,
    boto3_session: boto3.session.Session | None = None,
    sagemaker_session: Any = None,
    s3_client: S3Client | None = None,
    boto_config: Config | None = None,
) -> bool:
    """Delete ``<model_data_url>/<name>``; return whether it existed.

    An endpoint that has the model loaded may keep serving it until it unloads it.

    Raises:
        ArtifactError: S3 refused the call.
        ValueError: a bad URL or name.

    Example::

        remove_model("s3://bucket/mme/", "resnet.tar.gz")  # True
    """
    bucket, prefix = parse_s3_url(model_data_url)
    check_target_model(name)  # any name another tool may have uploaded under, spaces included
    if not name.endswith(SUFFIX) or len(name) == len(SUFFIX) or "/" in name:
        raise ValueError(
            f"model name {name!r} must be '<name>{SUFFIX}', one object directly under the prefix (no '/')"
        )
    client = _client(boto3_session_of(boto3_session, sagemaker_session), s3_client, boto_config)
    key = prefix + name
    url = f"s3://{bucket}/{key}"
    if _head(client, bucket, key) is None:
        logger.info("%s does not exist; nothing to remove", url)
        return False
    try:
        client.delete_object(Bucket=bucket, Key=key)
    except _aws_errors() as exc:
        raise ArtifactError(f"cannot delete {url}: {exc}", url=url) from exc
    logger.info("removed %s", url)
    return True


# --------------------------------------------------------------------------------------------------


def _as_list(
    models: str | os.PathLike[str] | Artifact | Iterable[str | os.PathLike[str] | Artifact],
) -> list[str | os.PathLike[str] | Artifact]:
    if isinstance(models, (str, os.PathLike, Artifact)):
        return [models]
    items = list(models)
    for item in items:
        if not isinstance(item, (str, os.PathLike, Artifact)):
            raise TypeError(f"a model is a directory path or an Artifact, not {type(item).__name__}")
    return items


def _load_inputs(
    items: list[str | os.PathLike[str] | Artifact], *, versioned: bool
) -> list[TritonModel | Artifact]:
    """Validate every directory and check every Artifact before the first byte goes to S3."""
    from mme_triton.model.repository import load_model

    loaded: list[TritonModel | Artifact] = []
    known_names: dict[str, str] = {}
    for item in items:
        if isinstance(item, Artifact):
            check_artifact_name(item.name)
            if not item.path.is_file():
                raise ArtifactError(
                    f"{item.path}: the archive of {item.name!r} does not exist any more", path=str(item.path)
                )
            if item.path.stat().st_size != item.size:
                raise ArtifactError(
                    f"{item.path}: the archive of {item.name!r} changed since it was packaged",
                    path=str(item.path),
                )
            loaded.append(item)
            name = item.name
        else:
            model = load_model(item)
            if model.errors:
                raise ModelValidationError(str(item), model.problems)
            loaded.append(model)
            if versioned:
                continue  # the name depends on the content; checked once packaged
            name = check_artifact_name(model.path.name + SUFFIX)
        if name in known_names:
            raise ValueError(f"{known_names[name]} and {item} would both be uploaded as {name!r}")
        known_names[name] = str(item)
    return loaded


def _package_for_upload(
    model: TritonModel, build_dir: Path, *, versioned: bool, progress: UploadProgress | None
) -> Artifact:
    directory = model.path.name

    def report(done: int, total: int) -> None:
        if progress is not None:
            progress("package", directory, done, total)

    level = isal_level(DEFAULT_COMPRESSLEVEL)
    return _package(model, build_dir, name=None, level=level, progress=report, versioned=versioned)


def _encryption_args(kms_key_id: str | None, sse: str | None) -> dict[str, str]:
    if sse is not None and sse not in _SSE_VALUES:
        raise ValueError(f"sse must be one of {', '.join(_SSE_VALUES)}, not {sse!r}")
    if kms_key_id is None:
        return {} if sse is None else {"ServerSideEncryption": sse}
    if not kms_key_id:
        raise ValueError("kms_key_id must not be empty")
    if sse == "AES256":
        raise ValueError("kms_key_id goes with sse='aws:kms' or 'aws:kms:dsse', not 'AES256'")
    return {"ServerSideEncryption": sse or "aws:kms", "SSEKMSKeyId": kms_key_id}


def _client(
    boto3_session: boto3.session.Session | None, s3_client: S3Client | None, boto_config: Config | None
) -> S3Client:
    client: S3Client = make_client(
        "s3", client=s3_client, boto3_session=boto3_session, boto_config=boto_config
    )
    return client


def _aws_errors() -> tuple[type[Exception], ...]:
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    return (ClientError, BotoCoreError, S3UploadFailedError)


def _head(client: S3Client, bucket: str, key: str) -> dict[str, Any] | None:
    """The object's HeadObject response, or None when there is no such object."""
    from botocore.exceptions import ClientError

    try:
        return dict(client.head_object(Bucket=bucket, Key=key))
    except ClientError as exc:
        if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise ArtifactError(f"cannot check s3://{bucket}/{key}: {exc}", url=f"s3://{bucket}/{key}") from exc
    except _aws_errors() as exc:
        raise ArtifactError(f"cannot check s3://{bucket}/{key}: {exc}", url=f"s3://{bucket}/{key}") from exc


def _upload_one(
    client: S3Client,
    artifact: Artifact,
    *,
    bucket: str,
    prefix: str,
    overwrite: bool,
    extra_args: dict[str, str],
    transfer_config: TransferConfig,
    progress: UploadProgress | None,
) -> UploadedArtifact:
    key = prefix + artifact.name
    url = f"s3://{bucket}/{key}"
    status: UploadStatus = "uploaded"
    existing = _head(client, bucket, key)
    if existing is not None:
        existing_digest = existing.get("Metadata", {}).get(CONTENT_DIGEST_METADATA)
        if existing_digest == artifact.content_digest:
            logger.info("%s already holds this content (%s); not uploading it again", url, existing_digest)
            return _uploaded(artifact, url, "unchanged")
        if not overwrite:
            raise ArtifactConflictError(
                _conflict_message(url, existing_digest, artifact),
                url=url,
                existing_digest=existing_digest,
                new_digest=artifact.content_digest,
                path=str(artifact.path),
            )
        logger.warning(
            "replacing %s (content %s -> %s); an endpoint that has it loaded may keep serving the old model",
            url,
            existing_digest or "unknown",
            artifact.content_digest,
        )
        status = "replaced"

    args: dict[str, Any] = {
        "ChecksumAlgorithm": "SHA256",
        "ContentType": "application/gzip",
        "Metadata": {
            CONTENT_DIGEST_METADATA: artifact.content_digest,
            SHA256_METADATA: artifact.sha256,
            **ensemble_metadata(artifact),
        },
        **extra_args,
    }
    callback = ByteCounter(artifact.name, artifact.size, progress)
    logger.info("uploading %s (%d bytes) to %s", artifact.path, artifact.size, url)
    try:
        client.upload_file(
            str(artifact.path), bucket, key, ExtraArgs=args, Callback=callback, Config=transfer_config
        )
    except _aws_errors() as exc:
        raise ArtifactError(
            f"uploading {artifact.name!r} to {url} failed: {exc}", url=url, path=str(artifact.path)
        ) from exc
    logger.info("uploaded %s", url)
    return _uploaded(artifact, url, status)


def _conflict_message(url: str, existing_digest: str | None, artifact: Artifact) -> str:
    existing = f"content {existing_digest}" if existing_digest else "no mme-triton content digest"
    return (
        f"{url} already exists with {existing}, not {artifact.content_digest}. A live multi-model endpoint "
        f"can keep serving the old model from its cache under the same name: upload the new version under "
        f"a new name with versioned=True (content-hash names), or pass overwrite=True to replace it anyway"
    )


def _uploaded(artifact: Artifact, url: str, status: UploadStatus) -> UploadedArtifact:
    inherited = {field.name: getattr(artifact, field.name) for field in fields(Artifact)}
    return UploadedArtifact(**inherited, url=url, status=status)
