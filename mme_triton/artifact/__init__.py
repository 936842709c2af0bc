"""The artifact stage: a validated model directory → a deterministic ``<name>.tar.gz`` → S3.

- :func:`package_model` (``package.py``) writes the archive: the model directory at the root (an ensemble
  with exactly its components), byte-identical for identical files, ISA-L deflate, one read per file.
- :func:`content_digest` (``digest.py``) identifies what an archive holds independently of tar and gzip;
  S3 uploads store it as object metadata and decide "already there" and "differs" on it.
- :func:`upload_models`, :func:`list_models`, :func:`remove_model`, :func:`parse_s3_url` (``s3.py``) put
  artifacts under a multi-model endpoint's ModelDataUrl prefix.

boto3 is imported only when an S3 function runs.
"""

from __future__ import annotations

from mme_triton.artifact.digest import content_digest
from mme_triton.artifact.package import Artifact, check_artifact_name, package_model
from mme_triton.artifact.s3 import UploadedArtifact, list_models, parse_s3_url, remove_model, upload_models

__all__ = [
    "Artifact",
    "UploadedArtifact",
    "check_artifact_name",
    "content_digest",
    "list_models",
    "package_model",
    "parse_s3_url",
    "remove_model",
    "upload_models",
]
