"""What :func:`~mme_triton.capacity.validate.validate_plan` predicts: the budget the endpoint applies, the
requests as one client sends them, and the profiles calibrated with the endpoint's own timings."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mme_triton._stats import percentile
from mme_triton.capacity.profile import ModelProfile
from mme_triton.capacity.simulate import SimulationResult, simulate
from mme_triton.capacity.traffic import Traffic
from mme_triton.endpoint.instance_specs import InstanceType

__all__ = ["budget", "calibrated", "serve", "summary", "timing_notes"]

_TIMING_DRIFT = 1.25  # measured / profiled beyond this factor (either way): the notes say so
_TIMING_FLOOR_S = 0.01  # ... and apart by at least this: a few milliseconds of difference changes no figure


# -- the budget the endpoint applies ---------------------------------------------------------------------


def budget(
    kind: InstanceType,
    profiles: list[ModelProfile],
    *,
    stack: Any = None,
    max_models: int | None = None,
    memory_budget: int | None = None,
) -> tuple[InstanceType, list[ModelProfile], str, list[str]]:
    """The instance type and profiles to simulate the replay with, the budget in words, and notes.

    The budget is ``max_models`` or ``memory_budget`` when given, else the stack's settings (its
    ``max_models``, else its ``memory_budget``), else the instance type's memory for models."""
    notes: list[str] = []
    setting: Any = "instance"
    count = max_models
    if count is None and memory_budget is not None:
        setting = memory_budget
    elif count is None and stack is not None:
        count = getattr(stack, "max_models", None)
        setting = getattr(stack, "memory_budget", "instance")
    planned = f"{kind.name}'s {kind.memory_budget_bytes / 2**20:,.0f} MiB for models"
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"max_models must be an integer >= 1, got {count!r}")
        # A count limit: every model weighs 1, the budget is the count (the processors stay the type's).
        unit = _with_budget(kind, f"{kind.name} (max_models={count})", count)
        weights = [dataclasses.replace(profile, memory_bytes=1) for profile in profiles]
        held = _models_held(kind, profiles)
        if held != count:
            notes.append(
                f"the endpoint keeps {count} models loaded (max_models), the plan's {kind.name} about "
                f"{held}: the prediction is for the endpoint's budget"
            )
        return unit, weights, f"max_models={count}", notes
    if setting == "instance":
        budget = kind.memory_budget_bytes
        half = _half_machine_memory() if stack is not None else None
        if half is not None and budget > half:
            notes.append(f"the stack caps the budget at half this machine's memory ({half / 2**20:,.0f} MiB)")
            budget = half
    elif setting is None:
        budget = 2**62
    else:
        budget = int(setting)
    if budget != kind.memory_budget_bytes:
        if setting is not None and setting != "instance":
            notes.append(
                f"the endpoint's memory budget is not the plan's ({planned}): the prediction is for it"
            )
        kind = _with_budget(kind, f"{kind.name} (budget {budget / 2**20:,.0f} MiB)", budget)
    return kind, profiles, f"{budget / 2**20:,.0f} MiB for models", notes


def _with_budget(kind: InstanceType, name: str, budget: int) -> InstanceType:
    """``kind`` with ``budget`` for models and nothing reserved; its vCPUs and GPUs (its processors) kept."""
    if kind.is_gpu:
        return dataclasses.replace(kind, name=name, gpu_memory_bytes=budget, reserved_bytes=0)
    return dataclasses.replace(kind, name=name, memory_bytes=budget, reserved_bytes=0)


def _models_held(kind: InstanceType, profiles: Sequence[ModelProfile]) -> int:
    largest = max(profile.memory_bytes for profile in profiles)
    return kind.memory_budget_bytes // largest


def _half_machine_memory() -> int | None:
    import os

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError):
        return None


# -- predictions -----------------------------------------------------------------------------------------


def summary(result: SimulationResult) -> dict[str, Any]:

    summary = result.summary()
    served = result.error == 0
    model = (result.latency_s - result.load_wait_s)[served]
    summary["model_latency_p99_s"] = percentile(model, 99) if model.size else None
    return summary


def serve(
    profiles: list[ModelProfile],
    scheduled: list[float],
    targets: list[str],
    kind: InstanceType,
    *,
    closed: bool,
    warm: Sequence[str] = (),
    instances: int = 1,
    hosting: Mapping[str, Any] | None = None,
) -> SimulationResult:
    """Simulate requests at ``scheduled`` times on ``instances`` instances; ``closed``: from one client that
    sends each request once the one before is answered (a request goes at its time, or when the one before
    comes back if later); ``warm``: models loaded one after the other before the first request (one request
    each, left out of the result, its loads and unloads too); ``hosting``: :func:`simulate`'s hosting
    options (``hosting``, ``routing``, ``copies``) when not a multi-model endpoint.

    The simulation is open (arrivals do not wait for answers), so the closed client is found by
    iteration: simulate, move each request to after the predicted answer of the one before, again until
    no time moves (each round settles at least one more request; a few rounds in practice)."""
    by_name = {name: profile for profile in profiles for name in profile.names()}
    gap = 1.0 + max((by_name[name].cold_start_s + by_name[name].unload_s for name in warm), default=0.0)
    lead = [(index * gap, name) for index, name in enumerate(warm)]
    offset = len(lead) * gap + (gap if lead else 0.0)
    before = _warm_counts(profiles, lead, kind, instances) if lead else (0, 0, 0)
    times = list(scheduled)
    result: SimulationResult | None = None
    for _ in range(len(times)):
        rows = lead + [(offset + t, name) for t, name in zip(times, targets, strict=True)]
        result = _after(
            simulate(profiles, Traffic.trace(rows), kind, instances, **(hosting or {})), len(lead), before
        )
        if not closed:
            return result
        latency = result.latency_s.tolist()
        moved = list(scheduled)
        for index in range(1, len(moved)):
            moved[index] = max(scheduled[index], moved[index - 1] + latency[index - 1])
        if all(abs(a - b) < 1e-9 for a, b in zip(moved, times, strict=True)):
            return result
        times = moved
    assert result is not None
    return result


def _warm_counts(
    profiles: list[ModelProfile], lead: list[tuple[float, str]], kind: InstanceType, instances: int
) -> tuple[int, int, int]:
    """Loads, downloads and unloads of the warm-up alone."""
    alone = simulate(profiles, Traffic.trace(lead), kind, instances)
    return alone.loads, alone.downloads, alone.unloads


def _after(result: SimulationResult, skip: int, before: tuple[int, int, int]) -> SimulationResult:
    """``result`` without its first ``skip`` requests and the loads, downloads and unloads they made."""
    if not skip:
        return result
    loads, downloads, unloads = before
    return dataclasses.replace(
        result,
        latency_s=result.latency_s[skip:],
        load_wait_s=result.load_wait_s[skip:],
        hit=result.hit[skip:],
        error=result.error[skip:],
        instance=result.instance[skip:],
        loads=result.loads - loads,
        downloads=result.downloads - downloads,
        unloads=result.unloads - unloads,
    )


def _service_s(measured: Mapping[str, Any]) -> float | None:
    """The endpoint's typical execution: ModelLatency's median (its mean carries the first, slow
    executions after each load), else its mean."""
    milliseconds = measured.get("model_latency_p50_ms") or measured.get("model_latency_mean_ms")
    return None if milliseconds is None else float(milliseconds) / 1000.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def calibrated(
    profiles: list[ModelProfile], measured: Mapping[str, Any], *, service: bool = True
) -> list[ModelProfile] | None:
    """The profiles with their times scaled so their means match the endpoint's: ModelLoadingTime's
    mean for a load from the volume (with ModelDownloadingTime's for a first one), ModelUnloadingTime's
    for an unload, and — with ``service``, for requests sent one at a time — ModelLatency's median for an
    execution (with requests in flight together it holds their queueing and their share of the
    processors, which the prediction adds itself)."""
    load = measured.get("load_mean_s")
    service_s = _service_s(measured) if service else None
    unload = measured.get("unload_mean_s")
    if load is None and service_s is None and unload is None:
        return None
    download = measured.get("download_mean_s") or 0.0
    reload_mean = _mean([p.reload_time_s for p in profiles])
    cold_mean = _mean([p.cold_start_s for p in profiles])
    service_mean = _mean([p.service_time_s for p in profiles])
    calibrated = []
    for profile in profiles:
        changes: dict[str, Any] = {}
        if load is not None and reload_mean > 0:
            changes["reload_s"] = profile.reload_time_s * load / reload_mean
            if cold_mean > 0:
                changes["cold_start_s"] = profile.cold_start_s * (load + download) / cold_mean
        if unload is not None:
            changes["unload_s"] = float(unload)
        if service_s is not None and service_mean > 0:
            changes["service_time_s"] = profile.service_time_s * service_s / service_mean
        calibrated.append(dataclasses.replace(profile, **changes))
    return calibrated


def timing_notes(
    profiles: list[ModelProfile], measured: Mapping[str, Any], *, service: bool = True
) -> list[str]:
    notes = []
    pairs = [
        ("load", measured.get("load_mean_s"), _mean([p.reload_time_s for p in profiles])),
        ("unload", measured.get("unload_mean_s"), _mean([p.unload_s for p in profiles])),
    ]
    if service:
        pairs.append(("service", _service_s(measured), _mean([p.service_time_s for p in profiles])))
    for what, seen, assumed in pairs:
        if seen is None or seen < _TIMING_FLOOR_S:
            continue
        if assumed <= 0:
            notes.append(
                f"the endpoint's {what} time is {seen:.3f} s on average; the profile has none: predictions "
                "that depend on it are off for that reason (see the calibrated column)"
            )
        elif (
            abs(seen - assumed) >= _TIMING_FLOOR_S
            and not 1 / _TIMING_DRIFT <= seen / assumed <= _TIMING_DRIFT
        ):
            notes.append(
                f"the endpoint's {what} time ({seen:.3f} s on average) is {seen / assumed:.2f}x the "
                f"profile's ({assumed:.3f} s): predictions that depend on it are off for that reason "
                "(see the calibrated column)"
            )
    return notes
