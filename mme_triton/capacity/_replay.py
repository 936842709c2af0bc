"""Replaying requests on an endpoint for :func:`~mme_triton.capacity.validate.validate_plan`.

Each model directory is packaged once; every TargetModel the replay names is uploaded as that archive
under its own name (an :class:`~mme_triton.artifact.package.Artifact` renamed: SageMaker serves whatever
object is at ``<ModelDataUrl><TargetModel>``). The endpoint is deployed with the plan's instance count,
the requests are sent in their timing by up to ``concurrency`` threads, and the endpoint's metrics are read
back once they count every request sent (CloudWatch publishes them a period later).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import os

__all__ = ["ComponentSpec", "Replay", "component_name", "replay"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replay:
    """What was sent and what came back."""

    endpoint_name: str
    sent_s: list[float]
    """Per request, when it was sent, in seconds from the first."""
    targets: list[str]
    latency_s: list[float]
    """Per request, seconds until its answer (or its error), as the client saw it."""
    failed: int
    first_error: str | None
    metrics: dict[str, Any]
    """The endpoint's ``EndpointMetrics.summary()`` over the replay."""

    @property
    def in_flight_max(self) -> int:
        """The most requests that were in flight together (sent and not yet answered)."""
        events = sorted(
            [(sent, 1) for sent in self.sent_s]
            + [(sent + took, -1) for sent, took in zip(self.sent_s, self.latency_s, strict=True)]
        )
        most = now = 0
        for _, step in events:
            now += step
            most = max(most, now)
        return most

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile of the client's latencies, nearest-rank (:mod:`mme_triton._stats`)."""
        from mme_triton._stats import percentile

        return percentile(self.latency_s, q) if self.latency_s else None


def _session(
    stack: Any, boto3_session: Any, role: str | None, url: str | None, name: str
) -> tuple[Any, str, str]:
    if stack is not None:
        session = boto3_session or stack.boto3_session()
        return session, role or stack.role_arn, url or stack.model_data_url(f"{name}/")
    if boto3_session is None or role is None or url is None:
        raise ValueError("give stack=, or boto3_session=, role= and model_data_url= together")
    return boto3_session, role, url


def _bodies(sources: Mapping[str, str | os.PathLike[str]]) -> dict[str, Any]:
    from mme_triton.profile.inputs import input_arrays

    arrays = {}
    for directory in {str(path) for path in sources.values()}:
        arrays[directory] = input_arrays(Path(directory), None, count=1)[0]
    return arrays


def _upload(
    names: Sequence[str], sources: Mapping[str, str | os.PathLike[str]], profile_of: Mapping[str, str],
    url: str, session: Any, workdir: Path,
) -> None:  # fmt: skip
    from mme_triton.artifact.package import package_model
    from mme_triton.artifact.s3 import upload_models

    packaged = {}
    for name in names:
        profile = profile_of[name]
        if profile not in packaged:
            packaged[profile] = package_model(sources[name], workdir, name=profile)
    artifacts = [dataclasses.replace(packaged[profile_of[name]], name=name) for name in names]
    logger.info("uploading %d models (%d archives) to %s", len(artifacts), len(packaged), url)
    upload_models(artifacts, url, boto3_session=session)


def replay(
    rows: Sequence[tuple[float, str]],
    sources: Mapping[str, str | os.PathLike[str]],
    profile_of: Mapping[str, str],
    *,
    instance_type: str,
    instance_count: int = 1,
    stack: Any,
    boto3_session: Any,
    role: str | None,
    model_data_url: str | None,
    endpoint_name: str,
    time_scale: float,
    concurrency: int,
    warm: Sequence[str] = (),
    components: Mapping[str, ComponentSpec] | None = None,
    routing: str | None = None,
    metrics_period: int | None,
    metrics_timeout: float,
    keep: bool,
) -> Replay:
    """Deploy, load the ``warm`` models (one request each, not counted), send ``rows`` (``(time_s,
    TargetModel)``), read the metrics, tear down. With ``components`` (TargetModel -> what its inference
    component reserves and its copies), the endpoint hosts each model as an inference component named
    :func:`component_name` and the requests name those."""
    from mme_triton.client.client import MMEClient
    from mme_triton.endpoint.deploy import deploy_mme
    from mme_triton.endpoint.teardown import teardown
    from mme_triton.errors import MMETritonError

    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency!r}")
    session, role, url = _session(stack, boto3_session, role, model_data_url, endpoint_name)
    period = metrics_period or (getattr(stack, "metrics_period", None) if stack is not None else None) or 60
    names = sorted({name for _, name in rows})
    inputs = _bodies({name: sources[name] for name in names})
    with tempfile.TemporaryDirectory(prefix="mme-validate-") as scratch:
        _upload(names, sources, profile_of, url, session, Path(scratch))
    target = {name: name for name in names}
    if components is None:
        deploy_mme(
            endpoint_name,
            url,
            role=role,
            instance_type=instance_type,
            instance_count=instance_count,
            boto3_session=session,
        )
    else:
        target = {name: component_name(name, endpoint_name) for name in names}
        _deploy_components(endpoint_name, names, target, components, url, role, instance_type,
                           instance_count, routing, session)  # fmt: skip
        warm = ()  # a component's copies are loaded before it is in service
    try:
        # one kept-alive connection per sending thread, on the client's own path: the endpoint is measured
        client = MMEClient(
            endpoint_name, boto3_session=session, max_retries_not_ready=0, max_concurrency=concurrency,
            hosting="mme" if components is None else "inference-components",
        )  # fmt: skip
        if not client.fast_path:
            logger.warning(
                "%s: requests go through botocore, whose per-call work is in the latencies", client
            )
        count = len(rows)
        sent = [0.0] * count
        latency = [0.0] * count
        errors: list[str | None] = [None] * count
        origin = rows[0][0]
        if warm:
            _warm(client, warm, {name: inputs[str(sources[name])] for name in warm}, period)
        started_wall = datetime.now(timezone.utc)
        started = time.monotonic()
        slots = threading.Semaphore(concurrency)

        def send(index: int) -> None:
            try:
                name = rows[index][1]
                began = time.monotonic()
                sent[index] = began - started
                try:
                    client.infer(target[name], inputs[str(sources[name])])
                except MMETritonError as exc:
                    errors[index] = f"{type(exc).__name__}: {exc}"
                latency[index] = time.monotonic() - began
            finally:
                slots.release()

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for index, (moment, _) in enumerate(rows):
                slots.acquire()  # with one slot: after the request before has its answer
                delay = (moment - origin) * time_scale - (time.monotonic() - started)
                if delay > 0:
                    time.sleep(delay)
                pool.submit(send, index)
        failures = [error for error in errors if error is not None]
        summary = _metrics(endpoint_name, session, started_wall, period, count, metrics_timeout)
    finally:
        if not keep:
            teardown(endpoint_name, delete_artifacts=True, boto3_session=session)
    return Replay(
        endpoint_name, sent, [name for _, name in rows], latency, len(failures),
        failures[0] if failures else None, summary,
    )  # fmt: skip


@dataclass(frozen=True)
class ComponentSpec:
    """What one model's inference component reserves per copy, and its copies."""

    memory_bytes: int
    cpus: float
    copies: int


_UNNAMED = re.compile(r"[^A-Za-z0-9-]+")


def component_name(target_model: str, endpoint_name: str) -> str:
    """The inference component a replay hosts ``target_model`` as: its name without ``.tar.gz`` and with
    what a component's name cannot hold replaced, and 6 hex of the endpoint's name (component names are
    unique in an account and region).

    Example:
        >>> component_name("resnet-007.tar.gz", "validate-ml-c5-xlarge")
        'resnet-007-fd00e8'
    """
    import hashlib

    stem = _UNNAMED.sub("-", target_model.removesuffix(".tar.gz")).strip("-")[:50] or "model"
    return f"{stem}-{hashlib.sha1(endpoint_name.encode()).hexdigest()[:6]}"


def _deploy_components(
    endpoint_name: str, names: Sequence[str], target: Mapping[str, str],
    components: Mapping[str, ComponentSpec], url: str, role: str, instance_type: str, instance_count: int,
    routing: str | None, session: Any,
) -> None:  # fmt: skip
    from mme_triton.endpoint.components import InferenceComponent
    from mme_triton.endpoint.deploy_components import deploy_inference_components

    planned = [
        InferenceComponent(
            target[name], f"{url}{name}", memory=components[name].memory_bytes, cpus=components[name].cpus,
            copies=components[name].copies,
        )
        for name in names
    ]  # fmt: skip
    deploy_inference_components(
        endpoint_name, planned, role=role, instance_type=instance_type, instance_count=instance_count,
        model_data_url=url, routing=routing, boto3_session=session,
    )  # fmt: skip


def _warm(client: Any, names: Sequence[str], inputs: Mapping[str, Any], period: int) -> None:
    """Load each model with one request, one after the other; then let two metric periods pass, so the
    replay's metrics (read from a period before it starts) count none of these."""
    from mme_triton.errors import ModelNotReadyError

    for name in names:
        for _ in range(10):  # a load past the 60 s an invocation waits goes on: ask again
            try:
                client.infer(name, inputs[name])
                break
            except ModelNotReadyError:
                continue
    logger.info(
        "warmed %d models; waiting %d s for the metrics to count only the replay", len(names), 2 * period
    )
    time.sleep(2 * period + 0.1)


def _metrics(
    endpoint_name: str, session: Any, started: datetime, period: int, count: int, timeout: float
) -> dict[str, Any]:
    """The endpoint's metrics summary once it counts ``count`` invocations (or ``timeout`` passed)."""
    from mme_triton.endpoint.metrics import endpoint_metrics

    start = started - timedelta(seconds=period)
    deadline = time.monotonic() + timeout
    while True:
        end = datetime.now(timezone.utc) + timedelta(seconds=period)
        summary = endpoint_metrics(
            endpoint_name, start=start, end=end, period=period, boto3_session=session
        ).summary()
        if summary.get("invocations", 0) >= count or time.monotonic() > deadline:
            if summary.get("invocations", 0) < count:
                logger.warning(
                    "%s: the metrics count %s of %d requests after %.0f s",
                    endpoint_name, summary.get("invocations"), count, timeout,
                )  # fmt: skip
            return dict(summary)
        time.sleep(min(5.0, max(0.5, period / 2)))
