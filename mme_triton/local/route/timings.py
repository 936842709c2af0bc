"""How long an endpoint's loads and unloads took, by part: what a cold start on the stack is made of.

On SageMaker a multi-model endpoint's cold start is the download of ``<ModelDataUrl><TargetModel>`` from
S3, its extraction under ``/opt/ml/models/<hash>/model`` and the container's load (CloudWatch's
ModelDownloadingTime and ModelLoadingTime). The stack streams the archive from S3 into the extractor, so
the two overlap: the time spent waiting for S3's bytes is the download, the rest of the extraction (unpacking,
checks, the CPU adaptation) is the extract part.

An unloaded model stays extracted on the endpoint's volume, as on SageMaker, so loading it again downloads
and extracts nothing: its timings say ``from_volume`` and have no download or extract part. A load may also
wait for room in the memory budget (the unloads made for it, or a loaded model to become unused) before
Triton's load starts: that is ``wait_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = ["LoadTimings", "TimedBody"]


@dataclass(frozen=True)
class LoadTimings:
    """The parts of one TargetModel's last load, in seconds, and its unload once it happened."""

    download_s: float
    """``GetObject`` and waiting for the archive's bytes (0 when loaded ``from_volume``)."""
    extract_s: float
    """Unpacking the archive, checking what the stack can serve and adapting it for the CPU (0 when loaded
    ``from_volume``)."""
    load_s: float
    """Triton's ``POST /models`` (the model's instances started, ``initialize`` run, warm-up done)."""
    unload_s: float | None = None
    """The unload, after the model's last request finished, until its stub processes had left and their
    memory was free (watched every 10 ms); Triton's own answer when it had no stub (``None``: loaded)."""
    unload_answer_s: float | None = None
    """Until Triton answered ``DELETE /models/<hash>`` (CloudWatch's ``ModelUnloadingTime``): Triton's
    SageMaker front-end checks the model's state once a second, so this is a whole number of seconds past
    the unload's end."""
    wait_s: float = 0.0
    """Waiting before Triton's load for room in the memory budget (the unloads made for it, or a loaded
    model to become unused), or for this model's own unload still under way."""
    from_volume: bool = False
    """The copy already extracted on the endpoint's volume was loaded again: nothing was downloaded."""

    @property
    def total_s(self) -> float:
        """Download, extract, wait and load together."""
        return self.download_s + self.extract_s + self.wait_s + self.load_s


class TimedBody:
    """A readable body (a botocore stream) that adds up the seconds spent in its ``read`` calls."""

    def __init__(self, body: Any, *, seconds: float = 0.0) -> None:
        self._body = body
        self.seconds = seconds

    def read(self, size: int = -1) -> bytes:
        started = time.monotonic()
        try:
            return bytes(self._body.read(size))
        finally:
            self.seconds += time.monotonic() - started

    def close(self) -> None:
        self._body.close()
