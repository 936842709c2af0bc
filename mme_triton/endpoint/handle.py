"""The :class:`Endpoint` handle ``deploy_mme`` returns, and waiting for an endpoint's status.

A wait polls DescribeEndpoint soon and then less often (about 0.25 s first, doubling up to
``poll_interval``). A poll that is throttled, answered with a 5xx or loses its connection is retried
(:func:`~mme_triton.endpoint._retry.read`) for as long as the timeout allows: only the endpoint's own
status (``InService``, ``Failed``, ``OutOfService``, an update SageMaker rolled back) or the timeout ends a
wait.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import Hosting, hosts_components
from mme_triton._sagemaker import error_code, error_message, is_not_found, is_transient, make_client
from mme_triton.endpoint._resources import paginate
from mme_triton.endpoint._retry import Deadline, control_plane_config, poll_delays, read
from mme_triton.errors import (
    DeploymentError,
    DeploymentTimeoutError,
    EndpointFailedError,
    EndpointNotFoundError,
)

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from mme_triton.client.client import MMEClient
    from mme_triton.endpoint._plan import EndpointPlan
    from mme_triton.endpoint.metrics import EndpointMetrics

__all__ = [
    "IN_PROGRESS",
    "DeployProgress",
    "Endpoint",
    "check_seconds",
    "check_wait",
    "control_plane_errors",
    "wait_for_endpoint",
]

logger = logging.getLogger(__name__)

#: ``progress(stage, detail)``; stages: ``"upload"``, ``"create-model"``, ``"create-endpoint-config"``,
#: ``"create-endpoint"``, ``"update-endpoint"``, ``"wait"`` (detail = status and seconds waited),
#: ``"autoscaling"``, ``"cleanup"``, ``"rollback"``, ``"done"``.
DeployProgress = Callable[[str, str], None]

#: Endpoint statuses on the way to ``InService`` (or back to it after an update).
IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})

#: Seconds :meth:`Endpoint.refresh` keeps retrying a DescribeEndpoint that is throttled or fails.
REFRESH_SECONDS = 60.0


def check_seconds(name: str, value: float) -> None:
    """Refuse a duration argument ``name`` that is not a positive number of seconds.

    Raises:
        ValueError: ``value`` is not > 0 (NaN included).
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be > 0 seconds, got {value!r}")


def check_wait(timeout: float, poll_interval: float) -> None:
    """Refuse a ``timeout`` or ``poll_interval`` that is not a positive number of seconds.

    A ``poll_interval`` of 0 would poll DescribeEndpoint in a tight loop for the whole timeout (and be
    throttled for it); a negative one makes ``time.sleep`` raise halfway through a wait.

    Raises:
        ValueError: either is not > 0 (NaN included).
    """
    check_seconds("timeout", timeout)
    check_seconds("poll_interval", poll_interval)


@contextlib.contextmanager
def control_plane_errors(
    endpoint_name: str, action: str, *, missing_is_endpoint: bool = True
) -> Iterator[None]:
    """Turn botocore's errors inside the block into the library's: ``EndpointNotFoundError`` for an
    endpoint that does not exist (when the block describes the endpoint), ``DeploymentError`` for any other
    failure (the cause chained)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if missing_is_endpoint and is_not_found(exc):
            raise EndpointNotFoundError(
                error_message(exc), endpoint_name=endpoint_name, error_code=error_code(exc) or None
            ) from exc
        raise DeploymentError(
            f"cannot {action} endpoint {endpoint_name!r}: {error_message(exc)}", endpoint_name=endpoint_name
        ) from exc
    except BotoCoreError as exc:
        raise DeploymentError(
            f"cannot {action} endpoint {endpoint_name!r}: {exc}", endpoint_name=endpoint_name
        ) from exc


@dataclass
class Endpoint:
    """A handle on a deployed endpoint: a multi-model endpoint (``deploy_mme``) or an endpoint of inference
    components (``deploy_inference_components``).

    Attributes:
        name, arn, status: the endpoint's name, ARN and last seen ``EndpointStatus``.
        model_data_url: the ``s3://bucket/prefix/`` its models are served from (a multi-model endpoint), or
            its components' archives were uploaded under.
        endpoint_config_name, model_name: the SageMaker resources behind it (``model_name`` is empty for
            an endpoint of inference components: each component has its own model).
        region: the endpoint's region.
        failure_reason: SageMaker's ``FailureReason``, if any.
        hosting: ``"mme"`` or ``"inference-components"``; :meth:`client` invokes accordingly.
        components: the names of its inference components (none for a multi-model endpoint).
    """

    name: str
    arn: str
    status: str
    model_data_url: str
    endpoint_config_name: str
    model_name: str
    region: str
    failure_reason: str | None = None
    hosting: Hosting = "mme"
    components: tuple[str, ...] = ()
    _sagemaker: SageMakerClient | None = field(default=None, repr=False, compare=False)
    _session: Any = field(default=None, repr=False, compare=False)
    _boto_config: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def described(
        cls,
        description: Mapping[str, Any],
        plan: EndpointPlan,
        *,
        model_name: str,
        region: str,
        sagemaker: SageMakerClient,
        session: Any,
        boto_config: Any,
        hosting: Hosting = "mme",
        components: tuple[str, ...] = (),
    ) -> Endpoint:
        """The handle a deployer returns: the endpoint as DescribeEndpoint answered, what ``plan`` made,
        and the clients it was made with."""
        return cls(
            name=plan.endpoint_name,
            arn=str(description["EndpointArn"]),
            status=str(description["EndpointStatus"]),
            model_data_url=plan.model_data_url,
            endpoint_config_name=str(description.get("EndpointConfigName", plan.config_name)),
            model_name=model_name,
            region=region,
            failure_reason=description.get("FailureReason"),
            hosting=hosting,
            components=components,
            _sagemaker=sagemaker,
            _session=session,
            _boto_config=boto_config,
        )

    def client(self, **kwargs: Any) -> MMEClient:
        """A ready :class:`~mme_triton.client.client.MMEClient` for this endpoint (same session and config):
        ``infer(target_model, ...)`` on a multi-model endpoint, ``infer(component_name, ...)`` on an endpoint
        of inference components.

        Keyword arguments go to ``MMEClient`` (``runtime_client=``, ``binary=``, ...).
        """
        from mme_triton.client.client import MMEClient

        if "runtime_client" not in kwargs:
            kwargs.setdefault("boto3_session", self._session)
            kwargs.setdefault("boto_config", self._boto_config)
            if self._session is None:
                kwargs["runtime_client"] = make_client(
                    "sagemaker-runtime", boto_config=self._boto_config, region=self.region
                )
        kwargs.setdefault("hosting", self.hosting)
        if self.hosting == "mme":
            kwargs.setdefault("model_data_url", self.model_data_url)
        return MMEClient(self.name, **kwargs)

    def refresh(self, *, timeout: float = REFRESH_SECONDS) -> Endpoint:
        """Describe the endpoint again and update ``status``, ``failure_reason`` and config/model names.

        Throttling, 5xx answers and dropped connections are retried for up to ``timeout`` seconds.

        Raises:
            EndpointNotFoundError: the endpoint does not exist any more.
            DeploymentError: the describe calls failed (the botocore error is chained).
        """
        sagemaker = self._sagemaker_client()
        deadline = Deadline(timeout)
        with control_plane_errors(self.name, "describe"):
            description = read(
                sagemaker.describe_endpoint,
                deadline=deadline,
                what="DescribeEndpoint",
                EndpointName=self.name,
            )
            self._update(description, deadline)
        return self

    def models(self) -> list[str]:
        """The TargetModels under the endpoint's prefix: the ``*.tar.gz`` objects directly in it, sorted
        (for an endpoint of inference components: the names of its components, sorted).

        Raises:
            ArtifactError: the S3 listing failed.
            DeploymentError: the components could not be listed.

        Example::

            endpoint.models()  # ['linear.tar.gz', 'pipeline.tar.gz']
        """
        from mme_triton.artifact.s3 import list_models

        if self.hosting == "inference-components":
            from mme_triton.endpoint.models import endpoint_components

            return endpoint_components(
                self.name,
                boto3_session=self._session,
                boto_config=self._boto_config,
                sagemaker_client=self._sagemaker_client(),
            )

        return list_models(self.model_data_url, boto3_session=self._session, boto_config=self._boto_config)

    def metrics(
        self,
        *,
        start: datetime | timedelta | None = None,
        end: datetime | None = None,
        period: int | timedelta = 60,
        variant: str | None = None,
        timeout: float = 120.0,
    ) -> EndpointMetrics:
        """The endpoint's CloudWatch metrics over a window: what
        :func:`~mme_triton.endpoint.metrics.endpoint_metrics` reads, with this handle's session, config and
        region.

        Raises:
            EndpointNotFoundError: ``variant`` not given and the endpoint does not exist any more.
            EndpointError: CloudWatch refused a read.

        Example::

            endpoint.metrics(start=timedelta(minutes=30)).summary()["cache_hit_ratio"]
        """
        from mme_triton.endpoint.metrics import endpoint_metrics

        return endpoint_metrics(
            self.name,
            start=start,
            end=end,
            period=period,
            variant=variant,
            region=self.region,
            boto3_session=self._session,
            boto_config=self._boto_config,
            sagemaker_client=self._sagemaker_client() if variant is None else None,
            timeout=timeout,
        )

    def wait(
        self, *, timeout: float = 1800, poll_interval: float = 15, progress: DeployProgress | None = None
    ) -> Endpoint:
        """Wait until the endpoint is ``InService`` (polling as :func:`wait_for_endpoint` does).

        Raises:
            ValueError: ``timeout`` or ``poll_interval`` is not > 0.
            EndpointFailedError: it went to ``Failed`` (or an update was rolled back).
            DeploymentTimeoutError: not in service after ``timeout`` seconds.
            EndpointNotFoundError: the endpoint does not exist any more.
            DeploymentError: a describe call failed (the botocore error is chained).
        """
        check_wait(timeout, poll_interval)
        description = wait_for_endpoint(
            self._sagemaker_client(),
            self.name,
            timeout=timeout,
            poll_interval=poll_interval,
            progress=progress,
        )
        with control_plane_errors(self.name, "describe"):
            self._update(description, Deadline(REFRESH_SECONDS))
        return self

    def _sagemaker_client(self) -> SageMakerClient:
        if self._sagemaker is None:
            self._sagemaker = make_client(
                "sagemaker",
                boto3_session=self._session,
                boto_config=self._boto_config,
                default_config=control_plane_config(),
                region=self.region,
            )
        return self._sagemaker

    def _update(self, description: Mapping[str, Any], deadline: Deadline) -> None:
        self.status = str(description.get("EndpointStatus", self.status))
        self.failure_reason = description.get("FailureReason")
        self.arn = str(description.get("EndpointArn", self.arn))
        config_name = description.get("EndpointConfigName")
        if config_name and config_name != self.endpoint_config_name:
            self.endpoint_config_name = str(config_name)
            config = read(
                self._sagemaker_client().describe_endpoint_config,
                deadline=deadline,
                what="DescribeEndpointConfig",
                EndpointConfigName=config_name,
            )
            self.model_name = str(config["ProductionVariants"][0].get("ModelName") or "")
            self.hosting = "inference-components" if hosts_components(config) else "mme"
        if self.hosting == "inference-components":
            listed = paginate(
                self._sagemaker_client().list_inference_components,
                "InferenceComponents",
                deadline=deadline,
                EndpointNameEquals=self.name,
            )
            self.components = tuple(sorted(str(c["InferenceComponentName"]) for c in listed))


def wait_for_endpoint(
    sagemaker: SageMakerClient,
    endpoint_name: str,
    *,
    timeout: float,
    poll_interval: float,
    progress: DeployProgress | None = None,
    expect_config: str | None = None,
) -> dict[str, Any]:
    """Poll DescribeEndpoint until ``InService``; return the last description.

    Polls come about 0.25-0.5 s apart at first and grow (jittered) to ``poll_interval``. A poll that is
    throttled, answered with a 5xx or loses its connection is tried again with capped backoff while
    ``timeout`` allows. With ``expect_config``, an endpoint back ``InService`` on another config (an
    update SageMaker rolled back) counts as failed.

    Raises:
        ValueError: ``timeout`` or ``poll_interval`` is not > 0.
        EndpointFailedError: ``Failed``, ``UpdateRollbackFailed``, ``OutOfService`` or a rolled-back update.
        DeploymentTimeoutError: still in progress after ``timeout`` seconds, or no status could be read
            before then (the last error is chained).
        EndpointNotFoundError: the endpoint does not exist (any more).
        DeploymentError: DescribeEndpoint failed in a way a retry does not cure (access denied, ...).
    """
    check_wait(timeout, poll_interval)
    deadline = Deadline(timeout)
    delays = poll_delays(poll_interval)
    start = time.monotonic()
    while True:
        try:
            description: dict[str, Any] = dict(
                read(
                    sagemaker.describe_endpoint,
                    deadline=deadline,
                    what=f"DescribeEndpoint({endpoint_name})",
                    EndpointName=endpoint_name,
                )
            )
        except Exception as exc:
            if is_transient(exc):
                raise DeploymentTimeoutError(
                    f"endpoint {endpoint_name!r}: no status could be read in {timeout:g}s, the control "
                    f"plane kept failing ({error_code(exc) or type(exc).__name__}: {error_message(exc)})",
                    endpoint_name=endpoint_name,
                ) from exc
            with control_plane_errors(endpoint_name, "describe"):
                raise
        status = description["EndpointStatus"]
        waited = time.monotonic() - start
        if progress is not None:
            progress("wait", f"{status} after {waited:.0f}s")
        if status == "InService":
            if expect_config is not None and description.get("EndpointConfigName") != expect_config:
                reason = description.get("FailureReason") or "the update was rolled back"
                raise EndpointFailedError(
                    f"endpoint {endpoint_name!r}: update to {expect_config} failed: {reason}",
                    endpoint_name=endpoint_name,
                    failure_reason=reason,
                )
            return description
        if status not in IN_PROGRESS:
            reason = description.get("FailureReason") or ""
            raise EndpointFailedError(
                f"endpoint {endpoint_name!r} is {status}: {reason or 'no FailureReason given'}",
                endpoint_name=endpoint_name,
                failure_reason=reason,
            )
        if deadline.passed():
            raise DeploymentTimeoutError(
                f"endpoint {endpoint_name!r} still {status} after {timeout:g}s", endpoint_name=endpoint_name
            )
        time.sleep(min(next(delays), deadline.remaining()))
