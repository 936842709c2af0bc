"""``profile_model``: measure candidates of a model where they will run and choose one."""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mme_triton._units import parse_duration, parse_fraction
from mme_triton.errors import MMETritonError, ProfileError
from mme_triton.profile.candidates import Candidate, PreparedCandidate, prepare
from mme_triton.profile.inputs import build_requests
from mme_triton.profile.load import Level, Measurement, measure
from mme_triton.profile.report import CandidateResult, Constraints, Objective, ProfileReport
from mme_triton.profile.targets import EndpointTarget, StackTarget, Target

__all__ = ["DEFAULT_CONCURRENCY", "profile_model"]

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 8)
"""The concurrency levels measured by default (only the rates when ``request_rate`` alone is given)."""

Progress = Callable[[str, str], None]
"""``progress(candidate name, step)``, called as each step starts (``deploy``, ``cold start``, ``c=4``)."""

_NO_TRITON_PORT = (
    "engine='perf_analyzer' needs Triton's own HTTP port (it cannot drive InvokeEndpoint): use the default "
    "stack (started with it), a LocalStack(triton_ports=True), or triton_url="
)


def profile_model(
    model_dirs_or_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    candidates: Sequence[Candidate] | None = None,
    concurrency: Sequence[int] | None = DEFAULT_CONCURRENCY,
    request_rate: Sequence[float] | None = None,
    inputs: Any = None,
    objective: Objective = "throughput",
    latency_budget: float | str | None = None,
    min_throughput: float | None = None,
    max_memory: int | str | None = None,
    max_cold_start: float | str | None = None,
    stack: Any = None,
    endpoint: str | None = None,
    triton_url: str | None = None,
    engine: str = "builtin",
    progress: bool | Progress = True,
    batch_size: int = 1,
    shapes: Mapping[str, Sequence[int]] | None = None,
    window: float | str = 1.0,
    window_requests: int = 20,
    stability: float | str = 0.1,
    max_trials: int = 10,
    warmup: float | str = 1.0,
    max_in_flight: int = 64,
    instance_type: str = "ml.m5.xlarge",
    environment: Mapping[str, str] | None = None,
    keep: bool = False,
    boto3_session: Any = None,
    perf_analyzer: str | os.PathLike[str] | None = None,
    workdir: str | os.PathLike[str] | None = None,
    seed: int = 0,
) -> ProfileReport:
    """Measure config candidates of a model where they will run and choose the best one.

    Each candidate is written to a scratch copy and validated (a refused one is reported with its
    problems), served on the target, and measured: its cold start (the first request on the unloaded
    model; on the stack with its download, extract and load parts), its memory once loaded, each load level
    (closed-loop ``concurrency``, open-loop Poisson ``request_rate``) until stable, and its unload. See
    docs/profile.md for what each number means and how far the stack's CPU numbers carry to a GPU endpoint.

    Parameters:
        model_dirs_or_dir: a model directory, or several (the ONNX and the TorchScript export side by side).
        candidates: :class:`Candidate` variants (``Candidate.grid(...)``); default: each directory as is.
        concurrency: closed-loop levels (clients sending back to back).
        request_rate: open-loop levels, requests per second (Poisson arrivals); with the default
            ``concurrency``, only these are measured.
        inputs: ``{input: array}``, a list of them, or a perf_analyzer ``--input-data`` file; default: random
            data that matches each candidate's config (``batch_size`` rows for a batching model, one for a
            model with ``max_batch_size: 0``; ``shapes`` for variable dims). Throughput counts the rows sent.
        objective: ``"throughput"`` (highest) or ``"latency"`` (lowest p99) among what meets the limits.
        latency_budget: p99 limit: seconds, or text with a unit (``"50ms"``); ``min_throughput``
            (inferences per second), ``max_memory`` (bytes, or ``"1GiB"``) and ``max_cold_start`` (seconds,
            or ``"5s"``) are the other limits. Every bare number is seconds (docs/profile.md, "Units").
        stack: a running :class:`~mme_triton.local.LocalStack` to use; default: one started for the run
            (with Triton's ports open) and stopped after. With ``endpoint``: the stack that endpoint is on.
        endpoint: a live endpoint's name: candidates are uploaded under its ModelDataUrl (names of their
            own, with a digest and a run id) and removed after, unless ``keep``.
        triton_url: a Triton server's HTTP URL (``--model-control-mode=explicit``): candidates are loaded
            through its repository API.
        engine: ``"builtin"`` (this package's load generator) or ``"perf_analyzer"`` (NVIDIA's binary on
            Triton's HTTP port, ``perf_analyzer=`` its path).
        progress: a progress bar (tqdm), ``False`` for none, or a callable ``(candidate, step)``.
        window, window_requests, stability, max_trials, warmup, max_in_flight: how each level is measured
            (:class:`~mme_triton.profile.load.Measurement`); ``window`` and ``warmup`` in seconds (or
            ``"500ms"``), ``stability`` a fraction (``0.1``, or ``"10%"``).
        instance_type, environment: the profile's endpoint on the stack (its Environment is the container's).
        boto3_session: for ``endpoint`` on AWS. ``workdir``: where scratch copies go. ``seed``: random data.

    Returns:
        A :class:`ProfileReport`.

    Raises:
        ProfileError: the target cannot be reached or set up, perf_analyzer is missing or fails, or no
            candidate can be profiled (every one refused: the message names each one's problems; nothing
            is started).
        ValueError, TypeError: bad arguments (no load levels, two targets, an unknown engine ...).

    Example::

        report = profile_model("repo/resnet", candidates=Candidate.grid(max_batch_size=[1, 8]),
                               concurrency=(1, 4), latency_budget="50ms")
        report.best.name, report.reason
    """
    directories = _directories(model_dirs_or_dir)
    if concurrency is DEFAULT_CONCURRENCY and request_rate:
        concurrency = ()
    levels: list[tuple[int | None, float | None]] = [(int(c), None) for c in concurrency or ()]
    levels += [(None, float(r)) for r in request_rate or ()]
    if not levels:
        raise ValueError("nothing to measure: give concurrency levels and/or request rates")
    if objective not in ("throughput", "latency"):
        raise ValueError(f"objective is 'throughput' or 'latency', got {objective!r}")
    if engine not in ("builtin", "perf_analyzer"):
        raise ValueError(f"engine is 'builtin' or 'perf_analyzer', got {engine!r}")
    settings = Measurement(
        window=parse_duration(window, "window"),
        window_requests=window_requests,
        stability=parse_fraction(stability, "stability"),
        max_trials=max_trials,
        warmup=parse_duration(warmup, "warmup"),
        max_in_flight=max_in_flight,
        seed=seed,
    )
    constraints = _constraints(latency_budget, min_throughput, max_memory, max_cold_start)
    binary = None
    if engine == "perf_analyzer":
        from mme_triton.profile.perf_analyzer import find_perf_analyzer

        binary = find_perf_analyzer(perf_analyzer)
    run_id = secrets.token_hex(3)
    clients = max(c or 0 for c, _ in levels) + max_in_flight
    target = _target(
        stack, endpoint, triton_url, run_id, instance_type, environment, keep, boto3_session, clients
    )
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mme-triton-profile-", dir=workdir) as scratch:
        prepared = prepare(directories, candidates, Path(scratch), local_stack=target.kind == "stack")
        valid = sum(1 for p in prepared if p.valid)
        if not valid:
            raise ProfileError(_nothing_to_profile(prepared))
        steps = _Steps(progress, valid * (len(levels) + 1))
        results: list[CandidateResult] = []
        try:
            if binary is not None and not target.reaches_triton():
                raise ProfileError(_NO_TRITON_PORT)  # before anything is created
            target.open()
            plan = _Plan(levels, settings, inputs, batch_size, shapes, seed, binary, steps)
            for index, candidate in enumerate(prepared):
                results.append(_profile_one(target, candidate, index, plan))
        finally:
            steps.close()
            target.close()
    return ProfileReport(results, objective, constraints, target.kind, engine)


def _constraints(
    latency_budget: float | str | None,
    min_throughput: float | None,
    max_memory: int | str | None,
    max_cold_start: float | str | None,
) -> Constraints:
    from mme_triton._units import parse_size

    if min_throughput is not None and (
        isinstance(min_throughput, bool) or not isinstance(min_throughput, (int, float)) or min_throughput < 0
    ):
        raise ValueError(f"min_throughput is inferences per second >= 0, got {min_throughput!r}")
    budget = parse_duration(latency_budget, "latency_budget") if latency_budget is not None else None
    return Constraints(
        latency_budget_ms=budget * 1000.0 if budget is not None else None,
        min_throughput=min_throughput,
        max_memory=parse_size(max_memory, "max_memory") if max_memory is not None else None,
        max_cold_start_s=parse_duration(max_cold_start, "max_cold_start")
        if max_cold_start is not None
        else None,
    )


def _nothing_to_profile(prepared: Sequence[PreparedCandidate]) -> str:
    """Every candidate refused: each one's problems, once."""
    lines = []
    for candidate in prepared:
        problems = list(dict.fromkeys(candidate.problems)) or ["refused"]
        lines.append(f"  {candidate.name}: " + "; ".join(problems[:5]))
        if len(problems) > 5:
            lines[-1] += f" (and {len(problems) - 5} more)"
    return "no candidate can be profiled, every one is refused:\n" + "\n".join(lines)


def _directories(value: Any) -> list[Path]:
    items = [value] if isinstance(value, (str, os.PathLike)) else list(value)
    if not items:
        raise ValueError("give at least one model directory")
    directories = [Path(item) for item in items]
    for directory in directories:
        if not directory.is_dir():
            raise ValueError(f"{directory} is not a model directory")
    return directories


def _target(
    stack: Any,
    endpoint: str | None,
    triton_url: str | None,
    run_id: str,
    instance_type: str,
    environment: Mapping[str, str] | None,
    keep: bool,
    boto3_session: Any,
    clients: int,
) -> Target:
    if endpoint is not None and triton_url is not None:
        raise ValueError("give endpoint= or triton_url=, not both")
    if triton_url is not None:
        if stack is not None:
            raise ValueError("stack= goes with the stack or endpoint targets, not with triton_url=")
        from mme_triton.profile.triton_target import TritonTarget

        return TritonTarget(triton_url, run_id=run_id)
    if endpoint is not None:
        return EndpointTarget(
            endpoint,
            run_id=run_id,
            boto3_session=boto3_session,
            stack=stack,
            keep=keep,
            max_concurrency=clients,
        )
    return StackTarget(stack, run_id=run_id, instance_type=instance_type, environment=environment, keep=keep)


class _Steps:
    """The progress bar (tqdm's auto: a widget in notebooks, a bar in terminals) or the caller's hook."""

    def __init__(self, progress: bool | Progress, total: int) -> None:
        self._hook: Progress | None = progress if callable(progress) else None
        self._bar: Any = None
        if progress is True:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc="profile", unit="step", leave=True)

    def start(self, candidate: str, step: str) -> None:
        if self._hook is not None:
            self._hook(candidate, step)
        if self._bar is not None:
            self._bar.set_description(f"{candidate}: {step}", refresh=True)

    def done(self, count: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@dataclass(frozen=True)
class _Plan:
    """What every candidate goes through."""

    levels: list[tuple[int | None, float | None]]
    settings: Measurement
    inputs: Any
    batch_size: int
    shapes: Mapping[str, Sequence[int]] | None
    seed: int
    binary: str | None
    steps: _Steps


def _profile_one(target: Target, prepared: PreparedCandidate, index: int, plan: _Plan) -> CandidateResult:
    result = CandidateResult(
        prepared.name, prepared.candidate, str(prepared.source), problems=list(prepared.problems)
    )
    if not prepared.valid:
        result.status = "invalid"
        logger.warning("candidate %s is refused: %s", prepared.name, "; ".join(prepared.problems))
        return result
    assert prepared.model_dir is not None
    result.max_batch_size, result.instances, result.dynamic_batching = _shape(prepared.model_dir)
    steps = plan.steps
    remaining = len(plan.levels) + 1
    deployed = None
    try:
        requests = build_requests(
            prepared.model_dir, plan.inputs, batch_size=plan.batch_size, shapes=plan.shapes, seed=plan.seed
        )
        if plan.batch_size > 1 and not result.max_batch_size and plan.inputs is None:
            logger.info(
                "candidate %s does not batch (max_batch_size 0): its requests carry one row, not %d",
                prepared.name,
                plan.batch_size,
            )
        steps.start(prepared.name, "deploy")
        deployed = target.deploy(prepared, index)
        result.target_model = deployed.name
        steps.start(prepared.name, "cold start")
        cold = target.cold_start(deployed, requests[0])
        result.cold_start_s, result.download_s = cold.seconds, cold.download_s
        result.extract_s, result.load_s = cold.extract_s, cold.load_s
        steps.done()
        remaining -= 1
        if cold.error is not None:
            return _failed(result, f"the first request failed: {cold.error}")
        result.memory_bytes = target.memory(deployed)
        for concurrency, rate in plan.levels:
            label = f"c={concurrency}" if concurrency is not None else f"{rate:g}/s"
            steps.start(prepared.name, label)
            level = _measure_level(target, deployed, requests, prepared.model_dir, concurrency, rate, plan)
            result.levels.append(level)
            steps.done()
            remaining -= 1
        steps.start(prepared.name, "unload")
        result.unload_s = target.unload(deployed)
    except ProfileError:
        raise
    except OSError as exc:
        return _failed(result, f"{type(exc).__name__}: {exc}")
    except (MMETritonError, ValueError, TypeError) as exc:
        return _failed(result, str(exc))
    finally:
        steps.done(remaining)
        if deployed is not None:
            try:
                target.remove(deployed)
            except (MMETritonError, OSError) as exc:
                logger.warning("removing %s failed: %s", deployed.name, exc)
    return result


def _measure_level(
    target: Target,
    deployed: Any,
    requests: list[Any],
    model_dir: Path,
    concurrency: int | None,
    rate: float | None,
    plan: _Plan,
) -> Level:
    if plan.binary is None:
        return measure(
            target.connect(deployed),
            requests,
            concurrency=concurrency,
            request_rate=rate,
            settings=plan.settings,
            stats=target.stats(deployed),
        )
    where = target.triton_http(deployed)
    if where is None:
        raise ProfileError(_NO_TRITON_PORT)
    from mme_triton.profile.perf_analyzer import run_level

    return run_level(
        plan.binary,
        where[0],
        where[1],
        requests,
        model_dir,
        concurrency=concurrency,
        request_rate=rate,
        settings=plan.settings,
        batch_size=requests[0].rows,
    )


def _shape(model_dir: Path) -> tuple[int, int, bool]:
    """The model's ``max_batch_size``, how many instances it runs (1 when it names none) and whether its
    config turns on Triton's dynamic batcher."""
    from mme_triton.model.authoring import read_config

    config = read_config(model_dir)
    instances = sum(int(group.count) for group in config.instance_group) or 1
    return int(config.max_batch_size), instances, config.HasField("dynamic_batching")


def _failed(result: CandidateResult, message: str) -> CandidateResult:
    result.status = "failed"
    result.problems = [message, *result.problems]
    logger.warning("candidate %s failed: %s", result.name, message)
    return result
