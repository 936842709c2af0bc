"""Between S3 and Triton: an archive made ready to load, and Triton's messages made to name the user's files.

:func:`prepare_model` extracts a downloaded archive within the endpoint's limits, refuses what the stack
cannot serve and adapts GPU configs on the extracted copy. :class:`Messages` rewrites what Triton says
about a model: the stack's scratch paths become paths inside the TargetModel's archive, and a model loaded
under an alias is named by its TargetModel again.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mme_triton.local.route.extract import ExtractedModel, ExtractLimits, safe_extract
from mme_triton.local.route.names import user_message
from mme_triton.local.route.support import check_servable

__all__ = ["LoadFailedError", "Messages", "load_failure", "prepare_model"]

logger = logging.getLogger("mme_triton.local.route.endpoint_runtime")

# How Triton words a failed load (model_lifecycle.cc and the SageMaker front-end).
_TRITON_LOAD_PREFIXES = ("load failed for model '", "failed to load '")


class LoadFailedError(Exception):
    """Triton refused to load a model (or the stack cannot run it); answered as a ModelError."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        self.body = json.dumps({"error": message}).encode()
        super().__init__(message)


def load_failure(target_model: str, reason: str) -> str:
    """A load refusal worded as Triton words its own: ``load failed for model '<TargetModel>': <reason>``."""
    if reason.startswith(_TRITON_LOAD_PREFIXES):
        return reason
    return f"load failed for model '{target_model}': {reason}"


def prepare_model(
    body: Any,
    root: Path,
    *,
    target_model: str,
    endpoint_name: str,
    limits: ExtractLimits,
    adapt: Callable[[Path], list[str]] | None,
    rewrite: Callable[[str], str] = str,
) -> ExtractedModel:
    """Extract ``body`` (an archive stream) into ``root/model``, check it and adapt it for the CPU.

    ``rewrite`` turns a refusal's message into the user's terms (see :class:`Messages`).

    Raises:
        ModelArchiveError: the archive is refused (unsafe, over a limit, not a model layout).
        LoadFailedError: the stack cannot serve a model in it (backend, names, a TensorRT plan).
    """
    from mme_triton.local.route.adapt import GPUModelError
    from mme_triton.local.route.support import UnsupportedModelError

    extracted = safe_extract(body, root / "model", limits=limits)
    if extracted.unserved:
        logger.warning(
            "endpoint %s: %s holds %d model directories and no single ensemble: the SageMaker front-end "
            "loads only %r (the last it lists; on SageMaker the order depends on the file system) and not "
            "%s, so calls to those models (BLS) fail",
            endpoint_name,
            target_model,
            len(extracted.model_dirs),
            extracted.model_dirs[0],
            ", ".join(repr(name) for name in extracted.unserved),
        )
    try:
        extracted = check_servable(extracted)
        changes = adapt(extracted.path) if adapt is not None else []
    except (UnsupportedModelError, GPUModelError) as exc:
        raise LoadFailedError(400, load_failure(target_model, rewrite(str(exc)))) from exc
    if changes:
        logger.warning(
            "endpoint %s: serving an adapted copy of %s (a GPU config on the CPU, another Python's stub): %s",
            endpoint_name,
            target_model,
            "; ".join(changes),
        )
    return extracted


@dataclass(frozen=True)
class Messages:
    """Rewrites Triton's messages about one model for the user who sent its TargetModel."""

    target_model: str
    alias: str
    root: Path
    """``<endpoint workdir>/models/<hash>``: the archive is extracted into ``root/model``."""
    scratch: Path
    """The endpoint's scratch directory (Triton's own files are under it)."""

    def rewrite(self, message: str) -> str:
        """``message`` with the stack's paths and the alias replaced by what the user knows."""
        extracted = str(self.root / "model")
        replacements = [
            (extracted + "::", ""),  # Triton's model namespace: the repository it was loaded from
            (extracted + "/", f"{self.target_model}:"),
            (extracted, self.target_model),
            (str(self.root), self.target_model),
            (str(self.scratch), "<stack scratch>"),
        ]
        if self.alias != self.target_model:
            replacements.append((self.alias, self.target_model))
        # Tracebacks from the stack's own backends: name the file as the package does.
        backends = re.compile(re.escape(str(self.scratch)) + r"/[^\s'\"]*?/backends/")
        message = backends.sub("mme_triton/local/triton/backends/", message)
        return user_message(message, replacements)

    def body(self, body: bytes) -> bytes:
        """An error body of Triton's (``{"error": "..."}``) with :meth:`rewrite` applied."""
        text = body.decode("utf-8", "replace")
        rewritten = self.rewrite(text)
        if rewritten == text:
            return body
        try:
            document = json.loads(text)
        except ValueError:
            return rewritten.encode()
        if isinstance(document, dict) and isinstance(document.get("error"), str):
            document["error"] = self.rewrite(document["error"])
            return json.dumps(document).encode()
        return rewritten.encode()
