"""SageMaker's Triton releases, the facts the model stage needs as well as the endpoint stage: the default
release (:data:`DEFAULT_TRITON_VERSION`) and the Python each release's python backend runs
(:data:`TRITON_PYTHON`), which an ``EXECUTION_ENV_PATH`` environment must match. Defined once here, where
every stage may import them (only the standard library is imported); the image table, accounts and GPU
needs of each release are :mod:`mme_triton.endpoint.images`, which exports both.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["DEFAULT_TRITON_VERSION", "TRITON_PYTHON"]

DEFAULT_TRITON_VERSION = "24.09"
"""The default SageMaker Triton release: the one closest to the Triton the embedded stack runs (2.51 =
24.10), so that what is tried locally behaves like what is deployed (the image table is
:mod:`mme_triton.endpoint.images`)."""

_PY38 = ("21.08", "22.05", "22.07", "22.08", "22.09", "22.10", "22.12", "23.01", "23.02", "23.03")
_PY310 = ("23.05", "23.06", "23.07", "23.08", "23.09", "23.10", "23.12", "24.01", "24.03", "24.05", "24.09")
_PY312 = ("25.04", "25.09", "26.03", "26.04", "26.05")

TRITON_PYTHON: Mapping[str, str] = MappingProxyType(
    {
        **dict.fromkeys(_PY38, "3.8"),
        **dict.fromkeys(_PY310, "3.10"),
        **dict.fromkeys(_PY312, "3.12"),
    }
)
"""The Python that the python backend's stub runs in each SageMaker Triton release (``YY.MM``): the
Ubuntu release the image is built on (triton-inference-server/server ``build.py``: ``ubuntu:20.04`` up to
2.33 = 23.04, ``ubuntu:22.04`` from 2.34 = 23.05, ``ubuntu:24.04`` from 2.52 = 24.11) and its system
Python, which the stub links (python_backend's README, "Building Custom Python Backend Stub": Python 3.8
up to r23.03, 3.10 from r23.05; NVIDIA's release notes for 24.12: "Ubuntu 24.04 including Python 3.12").
An ``EXECUTION_ENV_PATH`` environment must be of this Python, or ship its own stub."""
