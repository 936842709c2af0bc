"""The model stage: read a Triton model directory, validate it, and list what its archive holds.

``validate_model(path)`` returns every problem found; ``load_model(path)`` returns a
:class:`TritonModel` (parsed config, versions, ensemble members, problems, archive entries) for the
packaging stage. Problem codes are listed in :mod:`mme_triton.model.codes` and docs/validation.md.
"""

from __future__ import annotations

from mme_triton.model.codes import CODES, CodeInfo
from mme_triton.model.problems import Problem, Severity
from mme_triton.model.repository import JUNK_NAMES, ModelEntry, TritonModel, load_model
from mme_triton.model.validate import validate_model, validate_repository

__all__ = [
    "CODES",
    "JUNK_NAMES",
    "CodeInfo",
    "ModelEntry",
    "Problem",
    "Severity",
    "TritonModel",
    "load_model",
    "validate_model",
    "validate_repository",
]
