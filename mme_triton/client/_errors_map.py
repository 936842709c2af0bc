"""Translate InvokeEndpoint failures (botocore exceptions) into the library's exception tree.

Everything the client sends to AWS passes through :func:`map_invoke_error`, the one place where botocore's
``ClientError`` becomes an :class:`~mme_triton.errors.InferenceError` subclass. The mapping follows the
error shapes of the ``sagemaker-runtime`` service model and the messages SageMaker puts in them:

================================  ======================================================================
AWS error code (HTTP status)      raised
================================  ======================================================================
``ValidationError`` (400)         ``EndpointNotFoundError`` for "Endpoint X of account Y not found.",
                                  ``ModelNotFoundError`` when the model data could not be found or
                                  downloaded from the prefix, ``InferenceComponentNotFoundError`` when
                                  the endpoint has no inference component of the name given,
                                  ``NoCapacityError`` when the component has no copy to serve it,
                                  ``InferenceError`` otherwise (with what to do when the request named
                                  a component on an MME, or none on an endpoint of components)
``ModelError`` (424)              ``ModelLoadError`` when Triton says the model failed to load ("load
                                  failed for model '...': <reason>"), else by ``OriginalStatusCode``:
                                  400 ``InvalidInputError`` (but ``ModelNotFoundError`` for Triton's
                                  "Request for unknown model", which the client retries first when it
                                  names the TargetModel), 404 ``ModelNotFoundError``, 507
                                  ``ModelOutOfMemoryError``, anything else ``InferenceError``
``ModelNotReadyException`` (429)  ``ModelNotReadyError`` (the client retries it first)
``ThrottlingException``           ``ThrottlingError`` (botocore retries it first)
``InternalFailure`` (500),        ``InferenceError``
``ServiceUnavailable`` (503),
``InternalDependencyException``
================================  ======================================================================

Triton answers errors with a JSON body ``{"error": "..."}``; SageMaker forwards that body as the
``OriginalMessage`` of a ``ModelError`` (and quotes it inside ``Message``). The exception's ``message`` is
Triton's own text, taken out of that JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from mme_triton._sagemaker import error_code, error_message, http_status, is_throttling
from mme_triton.errors import (
    EndpointNotFoundError,
    InferenceComponentNotFoundError,
    InferenceError,
    InvalidInputError,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    ModelOutOfMemoryError,
    NoCapacityError,
    ThrottlingError,
)

__all__ = ["ErrorContext", "is_not_ready", "is_unknown_target", "map_invoke_error", "triton_message"]

# "Endpoint my-endpoint of account 123456789012 not found."
_ENDPOINT_NOT_FOUND = re.compile(r"\bendpoint\b.*\bnot found\b", re.IGNORECASE | re.DOTALL)
# "Failed to download model data(bucket: b, key: prefix/resnet.tar.gz). Please ensure that there is an
# object located at the URL and that the role passed to CreateModel has permissions to download the model."
# and the older/other wordings "Could not find model data at s3://..." / "model data ... not found".
_MODEL_DATA_MISSING = re.compile(
    r"failed to download model data|could not find model data|model data\b.*\bnot (?:be )?found"
    r"|target ?model\b.*\bnot (?:be )?found",
    re.IGNORECASE | re.DOTALL,
)
# 'Received client error (400) from model with message "{...}". See https://... for more information.'
# Triton's SageMaker front-end answers 400 when the TargetModel it is asked for is not loaded:
# "Request for unknown model: 'linear.tar.gz' is not found"
_TRITON_UNKNOWN_MODEL = re.compile(r"\bunknown model\b", re.IGNORECASE)
# Triton's words for a model that failed to load (model_lifecycle.cc, the SageMaker front-end's load):
# "load failed for model 'resnet.tar.gz': version 1 is at UNAVAILABLE state: ...", "failed to load 'x', ..."
_TRITON_LOAD_FAILED = re.compile(
    r"^(?:load failed for model|failed to load) '(?P<model>[^']*)'[:,]\s*(?P<reason>.*)", re.DOTALL
)
_QUOTED_MODEL_MESSAGE = re.compile(r'from (?:model|primary) with message "(.*)"\.(?: See |\s*$)', re.DOTALL)

# An endpoint of inference components asked for a name it does not have ("Inference component X ... not
# found", "Could not find inference component X", "... does not exist").
_COMPONENT_NOT_FOUND = re.compile(
    r"inference component\b.*\b(?:not (?:be )?found|does not exist|could not find)"
    r"|could not find (?:the )?inference component",
    re.IGNORECASE | re.DOTALL,
)
# SageMaker's words when the request and the endpoint disagree on inference components:
# "Inference Component Name header is required for endpoints to which you plan to deploy inference
# components. Please include Inference Component Name header or consider using SageMaker models." and
# "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy inference
# components. Please remove the Inference Component Name header and try again."
_COMPONENT_HEADER_REQUIRED = re.compile(r"inference component name header is required", re.IGNORECASE)
_COMPONENT_HEADER_NOT_ALLOWED = re.compile(r"inference component name header is not allowed", re.IGNORECASE)
# A component with no copy to take the request (scaled to zero, or its copies not placed yet); SageMaker
# counts it in NoCapacityInvocationFailures.
_NO_CAPACITY = re.compile(
    r"\b(?:no|insufficient|not enough)\b[^.]{0,60}\bcapacity\b"
    r"|\bno (?:active |available |running )?(?:copies|copy|instances?)\b",
    re.IGNORECASE,
)

_SERVICE_FAULT_CODES = frozenset({"InternalFailure", "ServiceUnavailable", "InternalDependencyException"})


class ErrorContext:
    """Where a failed call was going: used to fill the exception's attributes."""

    __slots__ = ("endpoint_name", "inference_component", "target_model")

    def __init__(
        self, endpoint_name: str, target_model: str | None, inference_component: str | None = None
    ) -> None:
        self.endpoint_name = endpoint_name
        self.target_model = target_model
        self.inference_component = inference_component

    def where(self) -> dict[str, Any]:
        """The exception attributes naming the endpoint and the target."""
        found: dict[str, Any] = {"endpoint_name": self.endpoint_name, "target_model": self.target_model}
        if self.inference_component is not None:
            found["inference_component"] = self.inference_component
        return found


def triton_message(text: str | None) -> str:
    """Return Triton's own error text from a body such as ``{"error": "..."}``; other text unchanged."""
    if not text:
        return ""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            document = json.loads(stripped)
        except ValueError:
            return stripped
        if isinstance(document, dict):
            error = document.get("error", document.get("message"))
            if isinstance(error, str):
                return error
    return stripped


def is_not_ready(exc: ClientError) -> bool:
    """True when SageMaker said the target model is still being downloaded or loaded."""
    return error_code(exc) == "ModelNotReadyException"


def is_unknown_target(exc: ClientError, target_model: str) -> bool:
    """True when Triton answered that it does not know ``target_model`` itself (a ``ModelError`` with
    ``OriginalStatusCode`` 400 and "Request for unknown model: '<target_model>' is not found").

    SageMaker forwards an invocation to Triton only once the model is loaded there (a missing archive is a
    ``ValidationError``, a failed load "load failed for model ..."), so this answer is transient: the lookup
    raced a load or unload on the same instance. Triton's model repository manager reads its map of model
    names without its lock (``FindModelIdentifier``, used with model namespacing, which the container turns
    on) while a load or unload of any model replaces that map; or the model was unloaded between
    SageMaker's check and Triton's lookup. Sent again, the request finds the model (or loads it).
    """
    if error_code(exc) != "ModelError":
        return False
    status, original = _model_error_fields(exc.response)
    return status == 400 and f"unknown model: '{target_model}'" in original


def map_invoke_error(exc: Exception, context: ErrorContext) -> Exception:
    """Return the library exception for a failed ``invoke_endpoint`` call (the caller raises it ``from``).

    ``ParamValidationError`` (a request botocore refuses to send) becomes ``ValueError``; every other
    botocore failure becomes an ``InferenceError`` subclass.
    """
    if isinstance(exc, ParamValidationError):
        return ValueError(str(exc))
    if isinstance(exc, ClientError):
        return _map_client_error(exc, context)
    if isinstance(exc, BotoCoreError):
        return InferenceError(str(exc), error_code=type(exc).__name__, **context.where())
    return exc


def _model_error_fields(response: Any) -> tuple[int | None, str]:
    """``OriginalStatusCode`` and ``OriginalMessage`` of a ModelError, from wherever botocore put them."""
    error = response.get("Error", {})
    status = response.get("OriginalStatusCode", error.get("OriginalStatusCode"))
    original = response.get("OriginalMessage", error.get("OriginalMessage"))
    if original is None:
        match = _QUOTED_MODEL_MESSAGE.search(str(error.get("Message", "")))
        original = match.group(1) if match else error.get("Message", "")
    try:
        status_code = int(status) if status is not None else None
    except (TypeError, ValueError):
        status_code = None
    return status_code, triton_message(str(original))


def _map_client_error(exc: ClientError, context: ErrorContext) -> InferenceError:
    code = error_code(exc)
    message = error_message(exc)
    where: dict[str, Any] = {**context.where(), "error_code": code or None}
    if code == "ModelError":
        status, original = _model_error_fields(exc.response)
        model_error_class: type[InferenceError] = {
            400: InvalidInputError,
            404: ModelNotFoundError,
            507: ModelOutOfMemoryError,
        }.get(status or 0, InferenceError)
        if status == 400 and _TRITON_UNKNOWN_MODEL.search(original):
            model_error_class = ModelNotFoundError
        log_stream = exc.response.get("LogStreamArn", exc.response.get("Error", {}).get("LogStreamArn"))
        log_stream_arn = str(log_stream) if log_stream else None
        load_failed = _TRITON_LOAD_FAILED.match(original)
        if load_failed is not None and status != 507:
            return ModelLoadError(
                original,
                reason=load_failed.group("reason").strip(),
                status=status,
                log_stream_arn=log_stream_arn,
                **where,
            )
        return model_error_class(original or message, status=status, log_stream_arn=log_stream_arn, **where)
    status = http_status(exc)
    component = _component_error(message, status, where, context)
    if component is not None:
        return component
    if code == "ValidationError":
        if _MODEL_DATA_MISSING.search(message):
            return ModelNotFoundError(message, status=status, **where)
        if _ENDPOINT_NOT_FOUND.search(message):
            return EndpointNotFoundError(message, status=status, **where)
        return InferenceError(message, status=status, **where)
    if code == "ModelNotReadyException":
        return ModelNotReadyError(message, status=status, **where)
    if is_throttling(exc):
        return ThrottlingError(message, status=status, **where)
    if code in _SERVICE_FAULT_CODES:
        return InferenceError(message, status=status, **where)
    return InferenceError(message, status=status, **where)


def _component_error(
    message: str, status: int | None, where: dict[str, Any], context: ErrorContext
) -> InferenceError | None:
    """The error for SageMaker's answers about inference components (any code but Triton's ModelError);
    ``None`` for every other answer."""
    if _COMPONENT_HEADER_REQUIRED.search(message):
        return InferenceError(
            f"{message} (endpoint {context.endpoint_name!r} hosts inference components: name one, with "
            "MMEClient(..., hosting='inference-components') or the handle deploy_inference_components "
            "returned: endpoint.client().infer(component_name, ...))",
            status=status,
            **where,
        )
    if _COMPONENT_HEADER_NOT_ALLOWED.search(message):
        return InferenceError(
            f"{message} (endpoint {context.endpoint_name!r} hosts no inference components: it is a "
            "multi-model endpoint, invoked by TargetModel with MMEClient(..., hosting='mme'))",
            status=status,
            **where,
        )
    if context.inference_component is None:
        return None
    if _COMPONENT_NOT_FOUND.search(message):
        return InferenceComponentNotFoundError(message, status=status, **where)
    if _NO_CAPACITY.search(message):
        return NoCapacityError(message, status=status, **where)
    return None
