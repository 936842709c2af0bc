"""Where a profile runs each candidate: the embedded stack, a live endpoint (both through InvokeEndpoint with
TargetModel, as on SageMaker), or a Triton server the user runs (:mod:`~mme_triton.profile.triton_target`).

Every target does the same steps for a candidate: ``deploy`` (package and upload under a TargetModel of its
own), ``cold_start`` (the first request on the unloaded model, with its parts where the target knows
them), ``connect`` (the clients of the load generator), ``memory``, ``stats`` (Triton's statistics, when
reachable), ``unload`` and ``remove``. The embedded stack is the only stage-external piece a profile
starts by itself: :class:`StackTarget` imports :mod:`mme_triton.local` when no stack is given.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mme_triton.profile.candidates import PreparedCandidate
from mme_triton.profile.inputs import Request
from mme_triton.profile.load import Connection, Stats
from mme_triton.profile.transports import (
    HTTPConnection,
    InvokeEndpointConnection,
    first_answer,
    triton_statistics,
)

__all__ = ["ColdStart", "Deployed", "EndpointTarget", "StackTarget", "Target", "target_model_name"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


@dataclass
class Deployed:
    """A candidate placed on a target, under the name its requests use."""

    name: str
    """The TargetModel (stack, endpoint) or the Triton model name (a Triton server)."""
    model_dir: Path
    payload: Any = None
    """What a target keeps for itself (the Triton target: the repository-API load request)."""
    loaded: bool = False


@dataclass(frozen=True)
class ColdStart:
    """The first request on an unloaded model as a client saw it, and its parts where known (seconds)."""

    seconds: float | None
    download_s: float | None = None
    extract_s: float | None = None
    load_s: float | None = None
    error: str | None = None


class Target(Protocol):
    """What :func:`~mme_triton.profile_model` needs of a place to run candidates."""

    kind: str

    def open(self) -> None: ...
    def reaches_triton(self) -> bool: ...
    def deploy(self, prepared: PreparedCandidate, index: int) -> Deployed: ...
    def cold_start(self, deployed: Deployed, request: Request) -> ColdStart: ...
    def connect(self, deployed: Deployed) -> Callable[[], Connection]: ...
    def memory(self, deployed: Deployed) -> int | None: ...
    def stats(self, deployed: Deployed) -> Stats | None: ...
    def triton_http(self, deployed: Deployed) -> tuple[str, str] | None: ...
    def unload(self, deployed: Deployed) -> float | None: ...
    def remove(self, deployed: Deployed) -> None: ...
    def close(self) -> None: ...


def target_model_name(prepared: PreparedCandidate, run_id: str, *, suffix: str = ".tar.gz") -> str:
    """A TargetModel of the candidate's own for this run: ``<candidate>-<12 hex of its content>-<run>``.

    Unique per run, so the first request is a cold start even on an endpoint that served an earlier run,
    and made of characters Triton's python backend can take.

    Example: ``max_batch-8_dyn-100us-3f2a9c1b7e44-a1b2c3.tar.gz``.
    """
    from mme_triton.artifact.digest import content_digest

    assert prepared.model_dir is not None
    digest = content_digest(prepared.model_dir).split(":", 1)[-1][:12]
    slug = _UNSAFE.sub("_", prepared.name.replace("=", "-")).strip("_.-")[:80] or "candidate"
    return f"{slug}-{digest}-{run_id}{suffix}"


class _Uploading:
    """Packaging and uploading a candidate under its TargetModel, and removing it; and what the embedded
    stack the endpoint is on (``stack``, ``None`` for one on AWS) says of it (stack and endpoint)."""

    session: Any
    model_data_url: str
    run_id: str
    keep: bool
    stack: Any
    endpoint_name: str

    def deploy(self, prepared: PreparedCandidate, index: int) -> Deployed:
        del index
        from mme_triton.artifact.package import package_model
        from mme_triton.artifact.s3 import upload_models

        assert prepared.model_dir is not None
        name = target_model_name(prepared, self.run_id)
        with tempfile.TemporaryDirectory(prefix="mme-triton-profile-artifact-") as out:
            artifact = package_model(prepared.model_dir, out, name=name)
            upload_models([artifact], self.model_data_url, boto3_session=self.session)
        return Deployed(name, prepared.model_dir)

    def remove(self, deployed: Deployed) -> None:
        if self.keep:
            logger.info("keeping %s%s", self.model_data_url, deployed.name)
            return
        from mme_triton.artifact.s3 import remove_model

        remove_model(self.model_data_url, deployed.name, boto3_session=self.session)

    def _cold_start(self, deployed: Deployed, seconds: float, error: str | None) -> ColdStart:
        """The first answer's cold start, with its download, extract and load parts where the stack has
        them."""
        deployed.loaded = error is None
        timings = self.stack.load_timings(self.endpoint_name).get(deployed.name) if self.stack else None
        if timings is None:
            return ColdStart(seconds, error=error)
        return ColdStart(seconds, timings.download_s, timings.extract_s, timings.load_s, error)

    def memory(self, deployed: Deployed) -> int | None:
        if self.stack is None:
            return None
        found = self.stack.model_memory(self.endpoint_name).get(deployed.name)
        return int(found) if found is not None else None

    def triton_http(self, deployed: Deployed) -> tuple[str, str] | None:
        found = self.stack.triton_endpoints(self.endpoint_name) if self.stack is not None else None
        if found is None or deployed.name not in found.models:
            return None
        return str(found.http_url), str(found.models[deployed.name])

    def stats(self, deployed: Deployed) -> Stats | None:
        where = self.triton_http(deployed)
        return triton_statistics(*where) if where is not None else None

    def unload(self, deployed: Deployed) -> float | None:
        if self.stack is None or not self.stack.unload_model(self.endpoint_name, deployed.name):
            return None  # SageMaker unloads when it needs the memory; no API asks for it
        deployed.loaded = False
        timings = self.stack.load_timings(self.endpoint_name).get(deployed.name)
        return timings.unload_s if timings is not None else None


class StackTarget(_Uploading):
    """The embedded stack: an endpoint of the profile's own, each candidate measured through the MME route.

    ``stack=None`` starts a stack with Triton's ports open (for its statistics and perf_analyzer) and stops
    it in :meth:`close`; a given stack is left running, the profile's endpoint and artifacts removed.
    """

    kind = "stack"

    def __init__(
        self,
        stack: Any,
        *,
        run_id: str,
        instance_type: str = "ml.m5.xlarge",
        environment: Mapping[str, str] | None = None,
        keep: bool = False,
    ) -> None:
        self.stack = stack
        self._own = stack is None
        self.run_id = run_id
        self.keep = keep
        self.endpoint_name = f"mme-triton-profile-{run_id}"
        self._instance_type = instance_type
        self._environment = dict(environment or {})
        self._deployed = False

    def open(self) -> None:
        from mme_triton.endpoint.deploy import deploy_mme

        if self.stack is None:
            from mme_triton.local.stack import LocalStack  # the one place a stage starts the stack

            self.stack = LocalStack(triton_ports=True).start()
        self.session = self.stack.boto3_session()
        self.model_data_url = self.stack.model_data_url(f"profile-{self.run_id}/")
        deploy_mme(
            self.endpoint_name,
            self.model_data_url,
            role=self.stack.role_arn,
            instance_type=self._instance_type,
            environment=self._environment or None,
            poll_interval=0.1,
            boto3_session=self.session,
        )
        self._deployed = True

    def reaches_triton(self) -> bool:
        """Whether Triton's own HTTP port is open (perf_analyzer, Triton's statistics): always on a stack
        started for the run."""
        return self.stack is None or bool(getattr(self.stack, "triton_ports", False))

    def connect(self, deployed: Deployed) -> Callable[[], Connection]:
        url, path = self.stack.runtime_url, f"/endpoints/{self.endpoint_name}/invocations"
        return lambda: HTTPConnection(url, path, target_model=deployed.name)

    def cold_start(self, deployed: Deployed, request: Request) -> ColdStart:
        connection = self.connect(deployed)()
        try:
            seconds, error = first_answer(connection, request)
        finally:
            connection.close()
        return self._cold_start(deployed, seconds, error)

    def close(self) -> None:
        try:
            if self._deployed and self.stack is not None:
                from mme_triton.endpoint.teardown import teardown

                teardown(self.endpoint_name, delete_artifacts=not self.keep, boto3_session=self.session)
        finally:
            if self._own and self.stack is not None:
                self.stack.stop()


class EndpointTarget(_Uploading):
    """A live endpoint (real AWS or ``local up``): candidates uploaded under its ModelDataUrl, measured
    through InvokeEndpoint with TargetModel (``MMEClient.infer_raw``), removed afterwards unless ``keep``.

    With ``stack=`` (the endpoint is on that embedded stack), the cold start's parts, the memory and the
    unload come from the stack; SageMaker itself offers none of them per model (CloudWatch's metrics are
    per variant, per minute).
    """

    kind = "endpoint"

    def __init__(
        self,
        endpoint_name: str,
        *,
        run_id: str,
        boto3_session: Any = None,
        stack: Any = None,
        keep: bool = False,
        max_concurrency: int = 64,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.run_id = run_id
        self.keep = keep
        self.stack = stack
        self._given_session = boto3_session
        self._max_concurrency = max_concurrency

    def open(self) -> None:
        import boto3
        from botocore.config import Config

        from mme_triton.client.client import MMEClient
        from mme_triton.endpoint.models import endpoint_model_data_url

        session = self._given_session
        if session is None:
            session = self.stack.boto3_session() if self.stack is not None else boto3.Session()
        self.session = session
        self.model_data_url = endpoint_model_data_url(self.endpoint_name, boto3_session=session)
        config = Config(
            connect_timeout=10,
            read_timeout=70,
            retries={"total_max_attempts": 1},
            max_pool_connections=self._max_concurrency + 4,
        )
        self._client = MMEClient(
            self.endpoint_name,
            boto3_session=session,
            boto_config=config,
            max_retries_not_ready=0,
            max_retries_unknown_model=0,
        )

    def reaches_triton(self) -> bool:
        """Only through a stack the endpoint is on, with Triton's ports open: SageMaker exposes none."""
        return self.stack is not None and bool(getattr(self.stack, "triton_ports", False))

    def connect(self, deployed: Deployed) -> Callable[[], Connection]:
        return lambda: InvokeEndpointConnection(self._client, deployed.name)

    def cold_start(self, deployed: Deployed, request: Request) -> ColdStart:
        seconds, error = first_answer(self.connect(deployed)(), request)
        return self._cold_start(deployed, seconds, error)

    def close(self) -> None:
        pass  # the endpoint is the user's; the candidates were removed one by one
