"""Traffic for the planner: when each request arrives and which TargetModel it names.

- :meth:`Traffic.uniform` and :meth:`Traffic.zipf`: a Poisson process of ``rate`` requests per second for
  ``duration`` seconds, each request naming a model drawn from a popularity law (every model alike, or
  Zipf's: the model of rank ``k`` is drawn with weight ``1 / k**s``, the first model given being rank 1);
  :meth:`Traffic.rates`: each model its own rate. Seeded, so the same arguments give the same requests.
- :meth:`Traffic.trace`: recorded requests, a CSV of ``timestamp,TargetModel`` (seconds, or ISO 8601
  times) or rows of ``(timestamp_s, target_model)``, with whatever bursts and daily shape they have.

``models`` are TargetModel names or :class:`~mme_triton.capacity.profile.ModelProfile` objects (a profile
with ``copies=200`` stands for its 200 names). At most :data:`MAX_REQUESTS` requests.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._units import parse_duration, parse_rate
from mme_triton.capacity.profile import ModelProfile, expand

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MAX_REQUESTS", "MAX_TRACE_FILE_BYTES", "Traffic"]

MAX_REQUESTS = 2_000_000
"""The most requests a traffic may hold: about 100 bytes each while simulated, so 200 MB at the limit
(an hour at 550 requests/s)."""
MAX_TRACE_FILE_BYTES = 256 * 1024 * 1024
"""The largest trace file :meth:`Traffic.trace` reads (2,000,000 lines of up to 130 characters)."""

_TIME_COLUMNS = ("timestamp", "timestamp_s", "time")
_MODEL_COLUMNS = ("targetmodel", "target_model")


def _names(models: Sequence[str | ModelProfile] | str | ModelProfile) -> list[str]:
    if isinstance(models, (str, ModelProfile)):
        models = [models]
    names: list[str] = []
    profiles = [model for model in models if isinstance(model, ModelProfile)]
    expanded = expand(profiles)
    for model in models:
        if isinstance(model, ModelProfile):
            names.extend(model.names())
        elif isinstance(model, str) and model:
            if model in expanded:
                raise ValueError(f"the model {model!r} is named twice")
            names.append(model)
        else:
            raise TypeError(f"a model is a TargetModel name or a ModelProfile, got {model!r}")
    if not names:
        raise ValueError("traffic needs at least one model")
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"models named twice: {twice[:5]}")
    return names


@dataclass(frozen=True, eq=False)
class Traffic:
    """Requests in time order: ``times[i]`` (seconds from the start) names ``names[targets[i]]``.

    Build one with :meth:`uniform`, :meth:`zipf` or :meth:`trace`.

    Attributes:
        names: the TargetModels the traffic may name (in rank order for Zipf).
        times: arrival times in seconds, sorted (a numpy float64 array).
        targets: for each request, the index of its model in ``names`` (a numpy int32 array).
        duration: seconds the traffic spans (rates and costs per request are over it).
        description: how it was made, e.g. ``"zipf s=1.1 over 200 models, 50/s for 600 s, seed 0"``.
    """

    names: tuple[str, ...]
    times: npt.NDArray[np.float64] = field(repr=False)
    targets: npt.NDArray[np.int32] = field(repr=False)
    duration: float
    description: str

    def __len__(self) -> int:
        return int(self.times.shape[0])

    @property
    def rate(self) -> float:
        """Mean requests per second over :attr:`duration`."""
        return len(self) / self.duration

    def counts(self) -> dict[str, int]:
        """Requests per TargetModel (models with none included)."""
        import numpy as np

        per_model = np.bincount(self.targets, minlength=len(self.names))
        return dict(zip(self.names, (int(c) for c in per_model), strict=True))

    def rows(self) -> list[tuple[float, str]]:
        """The requests as ``(timestamp_s, target_model)`` rows (what :meth:`trace` takes)."""
        return [
            (float(t), self.names[k]) for t, k in zip(self.times.tolist(), self.targets.tolist(), strict=True)
        ]

    def to_csv(self, path: str | Path) -> Path:
        """Write the requests as a ``timestamp,TargetModel`` CSV (what :meth:`trace` reads)."""
        path = Path(path)
        with path.open("w", encoding="utf-8", newline="") as out:
            out.write("timestamp,TargetModel\n")
            writer = csv.writer(out, lineterminator="\n")
            names = self.names
            writer.writerows(
                (repr(t), names[k]) for t, k in zip(self.times.tolist(), self.targets.tolist(), strict=True)
            )
        return path

    # -- constructors ------------------------------------------------------------------------------

    @classmethod
    def uniform(
        cls,
        models: Sequence[str | ModelProfile] | ModelProfile,
        *,
        rate: float | str,
        duration: float | str,
        seed: int = 0,
    ) -> Traffic:
        """Poisson arrivals at ``rate`` requests/s for ``duration`` s, each model equally likely.

        Raises:
            ValueError: no model, a rate or duration not above 0, more than :data:`MAX_REQUESTS` requests.

        Example:
            >>> traffic = Traffic.uniform(["a.tar.gz", "b.tar.gz"], rate=10, duration=60, seed=1)
            >>> traffic.names, 500 < len(traffic) < 700
            (('a.tar.gz', 'b.tar.gz'), True)
        """
        names = _names(models)
        weights = [1.0] * len(names)
        return cls._poisson(names, weights, rate, duration, seed, f"uniform over {len(names)} models")

    @classmethod
    def zipf(
        cls,
        models: Sequence[str | ModelProfile] | ModelProfile,
        *,
        s: float,
        rate: float | str,
        duration: float | str,
        seed: int = 0,
    ) -> Traffic:
        """Poisson arrivals at ``rate`` requests/s for ``duration`` s; the ``k``-th model (from 1) is
        drawn with weight ``1 / k**s`` (``s=0`` is uniform; around 1 is typical of real popularity).

        Raises:
            ValueError: no model, ``s`` below 0, a rate or duration not above 0, more than
                :data:`MAX_REQUESTS` requests.
        """
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
            raise ValueError(f"the Zipf exponent s must be a number >= 0, got {s!r}")
        names = _names(models)
        weights = [1.0 / (rank**s) for rank in range(1, len(names) + 1)]
        return cls._poisson(names, weights, rate, duration, seed, f"zipf s={s:g} over {len(names)} models")

    @classmethod
    def rates(cls, rates: Mapping[str, float | str], *, duration: float | str, seed: int = 0) -> Traffic:
        """Each model its own Poisson arrivals at its rate (requests/s, or ``"30/min"``) for ``duration``.

        Raises:
            ValueError: no model, a rate not above 0, a duration not above 0, more than
                :data:`MAX_REQUESTS` requests.

        Example:
            >>> traffic = Traffic.rates({"hot.tar.gz": 9, "cold.tar.gz": "1/s"}, duration=600, seed=0)
            >>> counts = traffic.counts()
            >>> 0.85 < counts["hot.tar.gz"] / len(traffic) < 0.95
            True
        """
        if not isinstance(rates, Mapping):
            raise TypeError(f"rates maps TargetModels to requests per second, got {type(rates).__name__}")
        names = _names(list(rates))
        weights = [parse_rate(rates[name], f"rate of {name}") for name in names]
        return cls._poisson(names, weights, sum(weights), duration, seed, f"rates over {len(names)} models")

    @classmethod
    def _poisson(
        cls, names: list[str], weights: list[float], rate: Any, duration: Any, seed: int, what: str
    ) -> Traffic:
        import numpy as np

        per_second = parse_rate(rate)
        seconds = parse_duration(duration, "duration")
        if seconds <= 0:
            raise ValueError(f"duration must be > 0 seconds, got {duration!r}")
        expected = per_second * seconds
        if expected > MAX_REQUESTS * 0.99:
            raise ValueError(
                f"rate x duration = {expected:,.0f} requests; the simulator takes at most {MAX_REQUESTS:,}: "
                "shorten the duration"
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        rng = np.random.default_rng(seed)
        count = min(int(rng.poisson(expected)), MAX_REQUESTS)
        # A Poisson process's arrival times, given their number, are sorted uniform draws.
        times = np.sort(rng.uniform(0.0, seconds, size=count))
        p = np.asarray(weights, dtype=np.float64)
        p /= p.sum()
        targets = rng.choice(len(names), size=count, p=p).astype(np.int32)
        description = f"{what}, {per_second:g}/s for {seconds:g} s, seed {seed}"
        return cls(tuple(names), times, targets, seconds, description)

    @classmethod
    def trace(
        cls, path_or_rows: str | Path | Iterable[tuple[Any, str]], *, duration: float | str | None = None
    ) -> Traffic:
        """Recorded requests: a CSV file with a ``timestamp`` and a ``TargetModel`` column (header first;
        timestamps in seconds or ISO 8601), or rows of ``(timestamp_s, target_model)``. Requests are put in
        time order and timed from the first; ``duration`` defaults to the span from the first to the last
        (1 s when they all share one instant).

        Raises:
            FileNotFoundError: no such file.
            ValueError: no request, a missing column, a timestamp that is not a time (with its line), more
                than :data:`MAX_REQUESTS` requests or a file over :data:`MAX_TRACE_FILE_BYTES`, a
                ``duration`` shorter than the span.
        """
        import numpy as np

        if isinstance(path_or_rows, (str, Path)):
            stamps, models = _read_csv(Path(path_or_rows))
            source = str(path_or_rows)
        else:
            stamps, models = _read_rows(path_or_rows)
            source = "rows"
        if not stamps:
            raise ValueError(f"{source}: the trace has no request")
        times = np.asarray(stamps, dtype=np.float64)
        order = np.argsort(times, kind="stable")
        times = times[order] - times[order[0]]
        index: dict[str, int] = {}
        codes = np.fromiter(
            (index.setdefault(m, len(index)) for m in models), dtype=np.int32, count=len(models)
        )
        span = float(times[-1])
        if duration is None:
            seconds = span if span > 0 else 1.0
        else:
            seconds = parse_duration(duration, "duration")
            if seconds <= 0 or seconds < span:
                raise ValueError(f"duration {seconds:g} s is shorter than the trace's span ({span:g} s)")
        description = f"trace {source}: {len(times):,} requests over {len(index)} models, {seconds:g} s"
        return cls(tuple(index), times, codes[order], seconds, description)


def _timestamp(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            return float(value)
        raise ValueError(f"{where}: not a time: {value!r}")
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ValueError(f"{where}: not a time: {text!r} (seconds, or ISO 8601)") from None
    if not math.isfinite(seconds):
        raise ValueError(f"{where}: not a time: {text!r}")
    return seconds


def _model(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: no TargetModel")
    return value.strip()


def _read_rows(rows: Iterable[tuple[Any, str]]) -> tuple[list[float], list[str]]:
    stamps: list[float] = []
    models: list[str] = []
    for number, row in enumerate(rows):
        if len(stamps) >= MAX_REQUESTS:
            raise ValueError(f"the trace has more than {MAX_REQUESTS:,} requests")
        try:
            stamp, model = row
        except (TypeError, ValueError):
            raise ValueError(f"row {number}: expected (timestamp_s, target_model), got {row!r}") from None
        stamps.append(_timestamp(stamp, f"row {number}"))
        models.append(_model(model, f"row {number}"))
    return stamps, models


def _read_csv(path: Path) -> tuple[list[float], list[str]]:
    size = path.stat().st_size
    if size > MAX_TRACE_FILE_BYTES:
        raise ValueError(f"{path}: {size:,} bytes; a trace file is at most {MAX_TRACE_FILE_BYTES:,}")
    with path.open(encoding="utf-8", newline="") as source:
        reader = csv.reader(source)
        try:
            return _read_requests(reader, path)
        except csv.Error as exc:  # a field over csv's size limit, a NUL byte ...
            raise ValueError(f"{path}: line {reader.line_num}: not CSV: {exc}") from None


def _read_requests(reader: Any, path: Path) -> tuple[list[float], list[str]]:
    stamps: list[float] = []
    models: list[str] = []
    header = [column.strip().lower() for column in next(reader, [])]
    time_column = next((header.index(c) for c in _TIME_COLUMNS if c in header), None)
    model_column = next((header.index(c) for c in _MODEL_COLUMNS if c in header), None)
    if time_column is None or model_column is None:
        raise ValueError(f"{path}: the first line must name the columns timestamp and TargetModel")
    needed = max(time_column, model_column)
    for row in reader:
        if not row:
            continue
        where = f"{path}: line {reader.line_num}"
        if len(stamps) >= MAX_REQUESTS:
            raise ValueError(f"{path}: more than {MAX_REQUESTS:,} requests")
        if len(row) <= needed:
            raise ValueError(f"{where}: expected {needed + 1} columns, got {len(row)}")
        stamps.append(_timestamp(row[time_column], where))
        models.append(_model(row[model_column], where))
    return stamps, models
