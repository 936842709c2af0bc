"""Exceptions raised by mme_triton, every one of them (the module defining each is named where it is not
this one).

    MMETritonError
    ├── ModelValidationError        a model directory has errors (carries the problems)
    ├── ExportError                 an exported model does not compute what the framework model does
    ├── ArtifactError               packaging or S3 artifact handling failed (url and path where known)
    │   └── ArtifactConflictError   an artifact with different content already sits under that name
    ├── CodecError                  a request or response body cannot be encoded/decoded (names the tensor)
    ├── InferenceError              InvokeEndpoint failed (endpoint, target model, status, Triton's message)
    │   ├── EndpointNotFoundError   no such endpoint
    │   ├── ModelNotFoundError      the TargetModel is not under the endpoint's prefix
    │   │   └── InferenceComponentNotFoundError  the endpoint has no inference component of that name
    │   ├── NoCapacityError         the inference component has no copy to serve the request
    │   ├── InvalidInputError       Triton refused the request (400: input name, shape, datatype)
    │   ├── ModelLoadError          the model failed to load (a corrupt artifact ...; carries the reason)
    │   ├── ModelOutOfMemoryError   the instance cannot load the model (507)
    │   ├── ModelNotReadyError      the model was still loading after the retries
    │   ├── ThrottlingError         too many requests
    │   └── PayloadTooLargeError    the request body is over InvokeEndpoint's 6 MiB limit
    ├── EndpointError               a SageMaker control-plane step for an endpoint failed (endpoint_name)
    │   ├── DeploymentError         deploy_mme failed; says what was rolled back and what kept (and why)
    │   │   ├── EndpointFailedError     the endpoint went to Failed (carries FailureReason)
    │   │   └── DeploymentTimeoutError  the endpoint did not reach InService in time
    │   └── TeardownError           some resources could not be removed (carries the report)
    ├── ProfileError                a profile could not run (its target, perf_analyzer); not a bad candidate
    └── LocalStackError             the embedded stack cannot run or failed
        ├── UnsupportedPlatformError  not Linux x86_64 with glibc >= 2.35
        ├── ModelArchiveError       an archive the stack refuses to extract  (mme_triton.local.route.extract)
        ├── ModelDataNotFoundError  the artifact is not in S3  (mme_triton.local.route.endpoint_runtime)
        ├── GPUModelError           a model that cannot run on the CPU  (mme_triton.local.route.adapt)
        ├── UnsupportedModelError   a backend or name the stack cannot serve  (mme_triton.local.route.support)
        ├── ContainerExitError      the serve script refuses the Environment  (mme_triton.local.serve)
        ├── CopyStartError          a copy of an inference component did not start  (...route._copies)
        ├── TritonStartError        tritonserver exited while starting  (mme_triton.local.triton.server)
        ├── TritonTimeoutError      Triton did not answer in time  (mme_triton.local.triton.server)
        └── TritonRequestError      Triton refused a control request  (mme_triton.local.triton.server)
            └── TritonLoadError     Triton refused to load a model  (mme_triton.local.triton.server)

Misuse by the caller (a wrong type, an out-of-range option) raises plain ``ValueError``/``TypeError``.
Warnings the library issues (a setting that does nothing, a limit it applies) are ``MMETritonWarning``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mme_triton.endpoint.teardown import TeardownReport
    from mme_triton.model.problems import Problem

__all__ = [
    "ArtifactConflictError",
    "ArtifactError",
    "CodecError",
    "DeploymentError",
    "DeploymentTimeoutError",
    "EndpointError",
    "EndpointFailedError",
    "EndpointNotFoundError",
    "ExportError",
    "InferenceComponentNotFoundError",
    "InferenceError",
    "InvalidInputError",
    "LocalStackError",
    "MMETritonError",
    "MMETritonWarning",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelNotReadyError",
    "ModelOutOfMemoryError",
    "ModelValidationError",
    "NoCapacityError",
    "PayloadTooLargeError",
    "ProfileError",
    "TeardownError",
    "ThrottlingError",
    "UnsupportedPlatformError",
]


class MMETritonError(Exception):
    """Root of every error this library raises on purpose."""


class ModelValidationError(MMETritonError):
    """A model directory has validation errors; ``problems`` lists all of them."""

    def __init__(self, path: str, problems: Sequence[Problem]) -> None:
        self.path = path
        self.problems = list(problems)
        errors = [p for p in self.problems if p.is_error]
        lines = "\n".join(f"  {p}" for p in errors)
        super().__init__(f"{path}: {len(errors)} validation error(s)\n{lines}")


class ExportError(MMETritonError):
    """The exported model does not compute what the framework model computes.

    ``max_abs_diff`` is the largest absolute difference found (``None`` when the exported model could
    not be run at all); ``model_dir`` is the directory that was not written.
    """

    def __init__(self, message: str, *, model_dir: str, max_abs_diff: float | None = None) -> None:
        self.model_dir = model_dir
        self.max_abs_diff = max_abs_diff
        super().__init__(message)


class ArtifactError(MMETritonError):
    """Packaging a model or handling its artifact on S3 failed; ``url`` and ``path`` say where, when known."""

    def __init__(self, message: str, *, url: str | None = None, path: str | None = None) -> None:
        self.url = url
        self.path = path
        super().__init__(message)


class ArtifactConflictError(ArtifactError):
    """An artifact with different content already exists under the same name."""

    def __init__(
        self,
        message: str,
        *,
        url: str,
        existing_digest: str | None,
        new_digest: str,
        path: str | None = None,
    ) -> None:
        self.existing_digest = existing_digest
        self.new_digest = new_digest
        super().__init__(message, url=url, path=path)


class CodecError(MMETritonError):
    """A request or response body cannot be encoded or decoded; ``tensor`` names the tensor."""

    def __init__(self, message: str, *, tensor: str | None = None) -> None:
        self.tensor = tensor
        super().__init__(f"tensor {tensor!r}: {message}" if tensor else message)


class InferenceError(MMETritonError):
    """InvokeEndpoint failed; keeps the endpoint, the target model (or inference component), the status
    and Triton's message."""

    def __init__(
        self,
        message: str,
        *,
        endpoint_name: str | None = None,
        target_model: str | None = None,
        status: int | None = None,
        error_code: str | None = None,
        log_stream_arn: str | None = None,
        inference_component: str | None = None,
    ) -> None:
        self.message = message
        self.endpoint_name = endpoint_name
        self.target_model = target_model
        #: the inference component the request named (``InferenceComponentName``), on such an endpoint
        self.inference_component = inference_component
        self.status = status
        self.error_code = error_code
        #: the CloudWatch log stream SageMaker names in a ModelError (where the container's log is)
        self.log_stream_arn = log_stream_arn
        where = " ".join(
            part
            for part in (
                f"endpoint {endpoint_name!r}" if endpoint_name else "",
                f"model {target_model!r}" if target_model else "",
                f"inference component {inference_component!r}" if inference_component else "",
                f"(HTTP {status})" if status else "",
            )
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class EndpointNotFoundError(InferenceError):
    """The endpoint does not exist (or is not InService)."""


class ModelNotFoundError(InferenceError):
    """The TargetModel is not present under the endpoint's ModelDataUrl prefix."""

    #: TargetModels under the prefix that start with the one asked for (``resnet.tar.gz`` for ``resnet``),
    #: when the client could list them; the message says them too.
    suggestions: tuple[str, ...] = ()


class InferenceComponentNotFoundError(ModelNotFoundError):
    """The endpoint has no inference component of the name the request gave (``InferenceComponentName``)."""


class NoCapacityError(InferenceError):
    """The inference component has no copy to serve the request: scaled to zero copies (the first request
    wakes it when autoscaling has its ``NoCapacityInvocationFailures`` alarm; the copies take minutes to
    start on AWS), or its copies are not placed yet."""


class InvalidInputError(InferenceError):
    """Triton refused the request: unknown input, wrong shape or datatype (HTTP 400)."""


class ModelLoadError(InferenceError):
    """The model failed to load (a corrupt artifact, files its config does not match); ``reason`` is why,
    in Triton's words."""

    def __init__(self, message: str, *, reason: str = "", **context: Any) -> None:
        self.reason = reason or message
        super().__init__(message, **context)


class ModelOutOfMemoryError(InferenceError):
    """The instance has no memory left to load the model (HTTP 507)."""


class ModelNotReadyError(InferenceError):
    """The model was still loading after the configured retries."""


class ThrottlingError(InferenceError):
    """SageMaker throttled the request."""


class PayloadTooLargeError(InferenceError):
    """The request body exceeds InvokeEndpoint's 6 MiB limit."""


class EndpointError(MMETritonError):
    """A SageMaker control-plane step for an endpoint failed; ``endpoint_name`` names the endpoint."""

    def __init__(self, message: str, *, endpoint_name: str | None = None) -> None:
        self.endpoint_name = endpoint_name
        super().__init__(message)


class DeploymentError(EndpointError):
    """Deploying failed; ``rolled_back`` and ``kept`` say what was deleted again and what was left (why:
    in the message), as ``(kind, name)`` pairs with kinds ``"endpoint"``, ``"endpoint-config"``,
    ``"model"``, ``"autoscaling"`` (the registration a variant rename removed: in ``rolled_back`` when
    it was put back, in ``kept`` when its removal stands)."""

    def __init__(
        self,
        message: str,
        *,
        endpoint_name: str | None = None,
        rolled_back: Sequence[tuple[str, str]] = (),
        kept: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.rolled_back = list(rolled_back)
        self.kept = list(kept)
        super().__init__(message, endpoint_name=endpoint_name)


class EndpointFailedError(DeploymentError):
    """The endpoint reached ``Failed``; ``failure_reason`` is SageMaker's FailureReason."""

    def __init__(
        self,
        message: str,
        *,
        endpoint_name: str | None = None,
        failure_reason: str = "",
        rolled_back: Sequence[tuple[str, str]] = (),
        kept: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.failure_reason = failure_reason
        super().__init__(message, endpoint_name=endpoint_name, rolled_back=rolled_back, kept=kept)


class DeploymentTimeoutError(DeploymentError):
    """The endpoint did not reach ``InService`` within the timeout."""


class TeardownError(EndpointError):
    """Some pieces could not be removed; ``report`` says which (everything else was removed)."""

    def __init__(self, message: str, *, endpoint_name: str | None = None, report: TeardownReport) -> None:
        self.report = report
        super().__init__(message, endpoint_name=endpoint_name)


class ProfileError(MMETritonError):
    """A profile could not run: its target is unreachable, or perf_analyzer is missing or failed.

    A candidate that fails (refused by validation, failing to load, answering errors) is not raised: the
    report carries it with its reason.
    """


class LocalStackError(MMETritonError):
    """The embedded stack could not start or a component of it failed."""


class UnsupportedPlatformError(LocalStackError):
    """The embedded stack needs Linux x86_64 with glibc >= 2.35 (what the Triton wheel is built for)."""


class MMETritonWarning(UserWarning):
    """A setting that will not do what it seems to, or a limit the library applied (never an error)."""
