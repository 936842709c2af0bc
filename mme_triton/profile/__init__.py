"""Profile: measure config candidates of a model where they will run (the embedded stack, a live endpoint,
a Triton server), cold starts included, and choose one.

``profile_model`` is the entry point; :class:`Candidate` describes a variant, :class:`ProfileReport` holds
the result. Modules: ``candidates`` (variants, scratch copies), ``inputs`` (request bodies), ``load`` (the
load generator and the stability rule), ``transports`` (HTTP, boto3, Triton's statistics), ``targets`` and
``triton_target`` (where candidates run), ``perf_analyzer`` (NVIDIA's binary as the engine), ``report``,
``_format`` and ``plot`` (reading the result), ``run`` (``profile_model``).
"""

from __future__ import annotations

from mme_triton.profile.candidates import Candidate
from mme_triton.profile.report import CandidateResult, ProfileReport
from mme_triton.profile.run import profile_model

__all__ = ["Candidate", "CandidateResult", "ProfileReport", "profile_model"]
