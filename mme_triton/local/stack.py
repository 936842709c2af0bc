"""The embedded stack: a control plane (moto's server), the InvokeEndpoint runtime and real Tritons.

:class:`LocalStack` puts the pieces of :mod:`mme_triton.local` together on 127.0.0.1:

- :class:`~mme_triton.local.aws.controlplane.ControlPlane` — moto's server for S3, SageMaker, IAM, STS and
  Application Auto Scaling, with endpoint status transitions and ``UpdateEndpoint`` added;
- :class:`~mme_triton.local.route.runtime.InvocationRuntime` — it answers
  ``POST /endpoints/<name>/invocations`` the way SageMaker's runtime does for a multi-model endpoint, on a
  port of its own (:class:`~mme_triton.local.route.runtime_server.RuntimeServer`, where the stack's
  sessions send ``sagemaker-runtime`` calls) and in front of moto's WSGI app (for clients that know one
  URL only);
- one :class:`~mme_triton.local.triton.server.TritonServer` per instance of an in-service endpoint's
  variant, started when the endpoint goes ``InService``, added or removed by
  ``UpdateEndpointWeightsAndCapacities``, replaced after ``UpdateEndpoint``, stopped by ``DeleteEndpoint``;
- a :class:`~mme_triton.local.aws.metrics.MetricsRecorder` that publishes what the route records of each
  endpoint to the control plane's CloudWatch every ``metrics_period`` seconds (:attr:`LocalStack.metrics`);
- for an endpoint that hosts inference components, a Triton in single-model mode per copy, started and
  stopped as the control plane places copies (:mod:`mme_triton.local.route.components`), and an
  :class:`~mme_triton.local.aws.autoscaling.AutoScaler` that evaluates their scaling policies every
  ``metrics_period`` seconds.

The stack never touches ``os.environ``: it hands out a boto3 session whose clients default to it, so every
other boto3 client in the process keeps reaching real AWS.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mme_triton.errors import LocalStackError
from mme_triton.local._introspection import StackIntrospection
from mme_triton.local.aws.metrics import DEFAULT_METRICS_PERIOD, MetricsRecorder, check_metrics_period
from mme_triton.local.route.budget import FROM_INSTANCE, BudgetSetting, endpoint_budget
from mme_triton.local.route.components import CopyBudget
from mme_triton.local.route.endpoint_runtime import DEFAULT_READY_TIMEOUT
from mme_triton.local.route.limits import (
    DEFAULT_MAX_COMPRESSION_RATIO,
    DEFAULT_MAX_COPIES,
    DEFAULT_MAX_INSTANCES,
    DEFAULT_MAX_MEMBERS,
    check_limits,
)
from mme_triton.local.route.names import is_shell_safe
from mme_triton.local.route.runtime import InvocationRuntime
from mme_triton.local.serve import default_triton_factory
from mme_triton.local.triton.options import DEFAULT_SHM_LIMIT

if TYPE_CHECKING:
    import boto3

    from mme_triton.local.aws.autoscaling import AutoScaler
    from mme_triton.local.aws.controlplane import ControlPlane
    from mme_triton.local.route.runtime_server import RuntimeServer

__all__ = ["DEFAULT_BUCKET_PREFIX", "LocalStack"]

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_PREFIX = "mme-triton-local-"
"""The stack's default bucket is this prefix and its account id (bucket names are global, as in AWS)."""


class LocalStack(StackIntrospection):
    """A multi-model endpoint stack on 127.0.0.1 with no AWS account: moto plus real Triton servers.

    Use it as a context manager (or call :meth:`start` and :meth:`stop`) and pass
    :meth:`boto3_session` as ``boto3_session=`` to every library call; the library code is the same that
    talks to AWS. Several stacks can run at once: each has its own ports, scratch directory and moto
    account.

    Parameters:
        region: the region the stack's sessions use.
        memory_budget: what the models loaded on one instance of an endpoint may hold (their model
            instances' resident and shared memory, at least their files) before the least recently used
            unused ones are unloaded: ``"instance"`` (the default) for the production variant's instance
            type's memory for models (:data:`~mme_triton.endpoint.instance_specs.INSTANCE_TYPES`), at most
            half of this machine's memory; bytes; or ``None`` for no byte limit. See ``docs/local.md``.
        reserved_memory: what an instance keeps for itself, not for models, in place of the instance type's
            documented default (:attr:`~mme_triton.endpoint.instance_specs.InstanceType.reserved`).
        max_models: how many models an endpoint keeps loaded at most (``None``: no count limit).
        workdir: where the scratch directory (Triton's files, extracted models) is created; default: the
            system's temporary directory. It is removed by :meth:`stop`.
        transition_delay: seconds an endpoint stays ``Creating``/``Updating`` before it goes in service.
        log_verbose: Triton's ``--log-verbose`` level for the endpoints' servers.
        model_ready_timeout: seconds an InvokeEndpoint request waits for its model's download and load
            (SageMaker's 60 s by default, which is also every request's whole budget); after that it is
            answered ``ModelNotReadyException`` while the load goes on, and a retry finds the model loaded.
        check_platform: refuse to start on a platform the Triton wheel cannot run on.
        shm_limit: ceiling on the python backend's shared memory per model instance (default 64 MiB):
            a larger ``SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE`` (AWS's samples set 16 GB) or
            ``_GROWTH_BYTE_SIZE`` is lowered to it, with a warning.
        max_unpacked_bytes: what one archive may unpack to; default: the production variant's
            ``VolumeSizeInGB`` when set, else 16 GiB (a number is a ceiling on both).
        max_archive_members: entries one archive may hold (default 10,000).
        max_compression_ratio: how many times an archive may expand (default 200).
        max_instances: the most instances (a Triton each) one endpoint's variant runs (default 16); a
            larger instance count is served by that many, with a warning.
        metrics_period: seconds between two publications of the endpoints' CloudWatch metrics: 60 as on
            SageMaker (every minute), or 1, 5, 10, 20, 30 for tests and notebooks (high-resolution
            metrics, read back with a period as short). Metrics left are published by :meth:`stop`.
        triton_ports: also open each endpoint's Triton HTTP, gRPC and metrics endpoints on 127.0.0.1, for
            perf_analyzer and model-analyzer (:meth:`triton_endpoints`); off by default, as on SageMaker.
        max_copies: the most copies of inference components the stack runs at once, over its endpoints
            (default 16); each is a Triton on this machine, so a component asked for more is served by fewer,
            with a warning. The endpoints' scaling policies are evaluated every ``metrics_period`` seconds
            (``docs/local.md``, "Inference components").

    Raises:
        UnsupportedPlatformError: from :meth:`start`, when this is not Linux x86_64 with glibc >= 2.35.
        LocalStackError: from :meth:`start`, when moto's server or a piece of the stack cannot start.

    Example::

        from mme_triton import deploy_mme, MMEClient, upload_models, teardown
        with LocalStack() as stack:
            session = stack.boto3_session()
            url = stack.model_data_url()
            upload_models(["model_repository/linear"], url, boto3_session=session)
            deploy_mme("demo", url, role=stack.role_arn, instance_type="ml.m5.xlarge",
                       boto3_session=session)
            MMEClient("demo", boto3_session=session).infer("linear.tar.gz", {"INPUT0": x})
    """

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        memory_budget: BudgetSetting = FROM_INSTANCE,
        reserved_memory: int | None = None,
        max_models: int | None = None,
        workdir: str | Path | None = None,
        transition_delay: float = 0.0,
        log_verbose: int = 0,
        model_ready_timeout: float = DEFAULT_READY_TIMEOUT,
        check_platform: bool = True,
        shm_limit: int = DEFAULT_SHM_LIMIT,
        max_unpacked_bytes: int | None = None,
        max_archive_members: int = DEFAULT_MAX_MEMBERS,
        max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO,
        max_instances: int = DEFAULT_MAX_INSTANCES,
        metrics_period: float = DEFAULT_METRICS_PERIOD,
        triton_ports: bool = False,
        max_copies: int = DEFAULT_MAX_COPIES,
    ) -> None:
        endpoint_budget(memory_budget, None)  # refuses what it cannot use
        if reserved_memory is not None and reserved_memory < 0:
            raise ValueError("reserved_memory must be >= 0 bytes")
        if max_models is not None and max_models <= 0:
            raise ValueError("max_models must be > 0 (or None for no count limit)")
        if transition_delay < 0:
            raise ValueError("transition_delay must be >= 0")
        if model_ready_timeout <= 0:
            raise ValueError("model_ready_timeout must be > 0 seconds")
        self.region = region
        self.memory_budget = memory_budget
        self.reserved_memory = reserved_memory
        self.max_models = max_models
        self._workdir_parent = Path(workdir) if workdir is not None else None
        self._transition_delay = transition_delay
        self._log_verbose = log_verbose
        self._model_ready_timeout = model_ready_timeout
        self._check_platform = check_platform
        check_limits(
            shm_limit=shm_limit,
            max_unpacked_bytes=max_unpacked_bytes,
            max_archive_members=max_archive_members,
            max_compression_ratio=max_compression_ratio,
            max_instances=max_instances,
        )
        CopyBudget(max_copies)  # refuses what it cannot use
        self.max_instances = max_instances
        self.shm_limit = shm_limit
        self.max_unpacked_bytes = max_unpacked_bytes
        self.max_archive_members = max_archive_members
        self.max_compression_ratio = max_compression_ratio
        self.metrics_period = check_metrics_period(metrics_period)
        self._metrics: MetricsRecorder | None = None
        self._autoscaler: AutoScaler | None = None
        self.max_copies = max_copies
        self.triton_ports = triton_ports
        self._plane: ControlPlane | None = None
        self._server: RuntimeServer | None = None
        self._runtime: InvocationRuntime | None = None
        self._workdir: Path | None = None
        self._role_arn: str | None = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> LocalStack:
        """Start the control plane and the runtime; endpoints get their Triton when they go in service.

        Returns the stack itself. Starting a running stack does nothing.

        Raises:
            UnsupportedPlatformError: not Linux x86_64 with glibc >= 2.35.
            LocalStackError: a piece of the stack cannot start (nvidia-pytriton or moto missing, no free
                port ...).
        """
        with self._lock:
            if self._plane is not None:
                return self
            if self._check_platform:
                from mme_triton.local.triton.platform import check_platform

                check_platform()
            from mme_triton.local.aws.controlplane import ControlPlane
            from mme_triton.local.triton.server import find_triton

            # fail now, not when the first endpoint goes in service, if the Triton wheel is missing
            find_triton()

            if self._workdir_parent is not None:
                self._workdir_parent.mkdir(parents=True, exist_ok=True)
            workdir = Path(tempfile.mkdtemp(prefix="mme-triton-stack-", dir=self._workdir_parent))
            if not all(is_shell_safe(part) for part in workdir.parts[1:]):
                shutil.rmtree(workdir, ignore_errors=True)
                raise LocalStackError(
                    f"the stack's scratch directory {workdir} holds characters Triton's python backend "
                    "cannot pass through the shell it starts models with; pass workdir= a path of letters, "
                    "digits, '.', '_', '-' and '/'"
                )
            tritons = default_triton_factory(
                log_verbose=self._log_verbose, shm_limit=self.shm_limit, triton_ports=self.triton_ports
            )
            runtime = InvocationRuntime(
                workdir=workdir / "endpoints",
                region=self.region,
                memory_budget=self.memory_budget,
                reserved_memory=self.reserved_memory,
                max_models=self.max_models,
                triton_factory=tritons,
                copy_factory=tritons,
                max_copies=self.max_copies,
                ready_timeout=self._model_ready_timeout,
                max_unpacked_bytes=self.max_unpacked_bytes,
                max_archive_members=self.max_archive_members,
                max_compression_ratio=self.max_compression_ratio,
                max_instances=self.max_instances,
            )
            plane = ControlPlane(
                region=self.region,
                transition_delay=self._transition_delay,
                wsgi_middleware=runtime.middleware,
            )
            plane.on_in_service.append(runtime.on_in_service)
            plane.on_instance_count.append(runtime.on_instance_count)
            plane.on_deleted.append(runtime.on_deleted)
            plane.on_component.append(runtime.on_component)
            from mme_triton.local.aws.autoscaling import AutoScaler
            from mme_triton.local.aws.component_metrics import component_sinks
            from mme_triton.local.route.runtime_server import RuntimeServer

            server = RuntimeServer(runtime)
            metrics: MetricsRecorder | None = None
            try:
                server.start()
                plane.service_urls["sagemaker-runtime"] = server.url
                plane.start()
                runtime.account_id = plane.account_id
                runtime.bind(plane.boto3_session())
                self._role_arn = plane.execution_role()
                metrics = MetricsRecorder(self._cloudwatch(plane), period=self.metrics_period).start()
                runtime.metrics = metrics.endpoint  # each endpoint's route records into its sink
                runtime.component_metrics = component_sinks(metrics)
                scaler = AutoScaler(plane.account_id, self.region, period=self.metrics_period)
                self._autoscaler = scaler.start()
            except BaseException:
                server.stop()
                runtime.stop()
                if metrics is not None:
                    metrics.stop()
                plane.stop()
                shutil.rmtree(workdir, ignore_errors=True)
                raise
            self._plane, self._runtime, self._workdir, self._server = plane, runtime, workdir, server
            self._metrics = metrics
            logger.info("embedded stack up at %s (account %s)", plane.url, plane.account_id)
            return self

    def stop(self) -> None:
        """Stop every endpoint's Triton, the control plane, and remove the scratch directory.

        Calling it again, or on a stack that never started, does nothing.
        """
        with self._lock:
            plane, runtime, workdir, server = self._plane, self._runtime, self._workdir, self._server
            metrics, self._metrics = self._metrics, None
            self._plane = self._runtime = self._workdir = self._server = None
        autoscaler, self._autoscaler = self._autoscaler, None
        if autoscaler is not None:
            autoscaler.stop()
        if server is not None:
            server.stop()
        if runtime is not None:
            runtime.stop()
        if metrics is not None:
            metrics.stop()  # what the endpoints recorded last reaches CloudWatch before it goes
        if plane is not None:
            plane.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        if plane is not None:
            logger.info("embedded stack at %s stopped", plane.url)

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """``True`` between :meth:`start` and :meth:`stop`."""
        return self._plane is not None

    # -- what callers use ----------------------------------------------------------------------------

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>``: every AWS service of the stack, InvokeEndpoint included."""
        return self._running_plane().url

    @property
    def runtime_url(self) -> str:
        """``http://127.0.0.1:<port>``: InvokeEndpoint's own, faster route (``sagemaker-runtime``)."""
        self._running_plane()
        assert self._server is not None
        return self._server.url

    @property
    def account_id(self) -> str:
        """The (made-up) account the stack's credentials belong to."""
        return self._running_plane().account_id

    @property
    def role_arn(self) -> str:
        """An execution role that exists in the stack's IAM, for ``deploy_mme(role=...)``."""
        self._running_plane()
        assert self._role_arn is not None
        return self._role_arn

    @property
    def runtime(self) -> InvocationRuntime:
        """The InvokeEndpoint runtime (per-endpoint Tritons and loaded models)."""
        self._running_plane()
        assert self._runtime is not None
        return self._runtime

    @property
    def metrics(self) -> MetricsRecorder:
        """The recorder that publishes the endpoints' metrics to the stack's CloudWatch (the route records
        into ``stack.metrics.endpoint(endpoint_name, variant_name)``, the
        :class:`~mme_triton.local.aws.metrics.EndpointMetricsSink` of a variant; see ``docs/metrics.md``)."""
        self._running_plane()
        assert self._metrics is not None
        return self._metrics

    def boto3_session(self) -> boto3.Session:
        """A boto3 session whose clients default to the stack (endpoint URL, credentials, region).

        Pass it as ``boto3_session=`` to the library's functions. ``sagemaker-runtime`` clients go to
        :attr:`runtime_url`, the others to :attr:`endpoint_url`. ``os.environ`` is not changed.
        """
        return self._running_plane().boto3_session()

    def client(self, service_name: str) -> Any:
        """A boto3 client for ``service_name`` on the stack (``"s3"``, ``"sagemaker-runtime"`` ...)."""
        session: Any = self.boto3_session()
        return session.client(service_name)

    @property
    def default_bucket(self) -> str:
        """``mme-triton-local-<account id>``: the bucket :meth:`model_data_url` uses unless told otherwise.

        S3 bucket names are one namespace across accounts (in moto as in AWS), so each stack has its own.
        """
        return f"{DEFAULT_BUCKET_PREFIX}{self.account_id}"

    def create_bucket(self, name: str | None = None) -> str:
        """Create an S3 bucket in the stack (nothing happens when it exists already); return its name
        (``name`` defaults to :attr:`default_bucket`)."""
        name = name or self.default_bucket
        s3 = self.client("s3")
        try:
            if self.region == "us-east-1":
                s3.create_bucket(Bucket=name)
            else:
                s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": self.region})
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        except s3.exceptions.BucketAlreadyExists as exc:
            raise LocalStackError(f"bucket {name} belongs to another stack in this process") from exc
        return name

    bucket = create_bucket

    def model_data_url(self, prefix: str = "models/", *, bucket: str | None = None) -> str:
        """``s3://<bucket>/<prefix>`` with the bucket created: a ModelDataUrl for ``deploy_mme``.

        Example::

            stack.model_data_url("demo/")  # 's3://mme-triton-local-123456789012/demo/'
        """
        bucket = self.create_bucket(bucket)
        prefix = prefix.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return f"s3://{bucket}/{prefix}"

    def environment(self) -> dict[str, str]:
        """The variables another process exports to reach this stack with any AWS SDK or the CLI."""
        plane = self._running_plane()
        credentials = plane.boto3_session().get_credentials()
        if credentials is None:  # pragma: no cover - the plane's session always has credentials
            raise LocalStackError("the control plane has no credentials")
        frozen = credentials.get_frozen_credentials()
        env = {
            "AWS_ENDPOINT_URL": plane.url,
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": self.runtime_url,
            "AWS_ACCESS_KEY_ID": str(frozen.access_key),
            "AWS_SECRET_ACCESS_KEY": str(frozen.secret_key),
            "AWS_DEFAULT_REGION": self.region,
        }
        if frozen.token:
            env["AWS_SESSION_TOKEN"] = str(frozen.token)
        return env

    # -- internals -----------------------------------------------------------------------------------

    def _running_plane(self) -> ControlPlane:
        plane = self._plane
        if plane is None:
            raise RuntimeError("the LocalStack is not running: use it as a context manager or call start()")
        return plane

    @staticmethod
    def _cloudwatch(plane: ControlPlane) -> Any:
        from botocore.config import Config

        retries: Any = {"mode": "standard", "total_max_attempts": 3}
        return plane.client("cloudwatch", config=Config(retries=retries, connect_timeout=5, read_timeout=30))
