"""The answers SageMaker's runtime gives for InvokeEndpoint, as the embedded stack sends them.

Each function builds one :class:`RuntimeResponse` with the status, the ``x-amzn-ErrorType`` header and
the JSON body of the error shapes in botocore's ``sagemaker-runtime`` service model, worded as SageMaker
words them, so that boto3 raises the same ``ClientError`` codes against the stack as against AWS. The
tests build their SageMaker-shaped fronts from these functions too.
"""

from __future__ import annotations

import http
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mme_triton._sagemaker import MAX_PAYLOAD_BYTES, TARGET_MODEL_MAX_CHARS, TARGET_MODEL_PATTERN

__all__ = [
    "COMPONENT_NOT_ALLOWED",
    "COMPONENT_REQUIRED",
    "NO_CAPACITY",
    "RuntimeResponse",
    "component_not_found",
    "endpoint_not_found",
    "error_response",
    "internal_failure",
    "invalid_target_model",
    "invocation_timed_out",
    "missing_target_model",
    "model_data_not_found",
    "model_error",
    "model_not_ready",
    "not_multi_model",
    "payload_too_large",
    "request_id",
    "service_unavailable",
    "success",
    "validation_error",
]


@dataclass(frozen=True)
class RuntimeResponse:
    """One HTTP answer of the runtime: status, headers and body, as the WSGI layer sends them."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def status_line(self) -> str:
        """``"424 Failed Dependency"``: the WSGI status string."""
        try:
            phrase = http.HTTPStatus(self.status).phrase
        except ValueError:
            phrase = "Unknown"
        return f"{self.status} {phrase}"


def request_id() -> str:
    """A fresh ``x-amzn-RequestId``."""
    return str(uuid.uuid4())


def error_response(status: int, error_type: str, document: Mapping[str, Any]) -> RuntimeResponse:
    """An error answer: ``status``, the ``x-amzn-ErrorType`` header botocore reads the code from, and the
    JSON ``document`` as body."""
    body = json.dumps(document).encode()
    return RuntimeResponse(
        status,
        [
            ("Content-Type", "application/json"),
            ("x-amzn-ErrorType", error_type),
            ("x-amzn-RequestId", request_id()),
            ("Content-Length", str(len(body))),
        ],
        body,
    )


def validation_error(message: str) -> RuntimeResponse:
    """A ``ValidationError`` (HTTP 400), the error SageMaker gives for a request it refuses itself.

    Example:
        >>> validation_error("Endpoint e of account 123456789012 not found.").status
        400
    """
    return error_response(400, "ValidationError", {"Message": message})


def endpoint_not_found(endpoint_name: str, account_id: str) -> RuntimeResponse:
    """SageMaker's answer for an endpoint that does not exist or is not in service."""
    return validation_error(f"Endpoint {endpoint_name} of account {account_id} not found.")


def model_data_not_found(bucket: str, key: str) -> RuntimeResponse:
    """SageMaker's answer when ``<ModelDataUrl>/<TargetModel>`` cannot be downloaded."""
    return validation_error(
        f"Failed to download model data(bucket: {bucket}, key: {key}). Please ensure that there is an "
        "object located at the URL and that the role passed to CreateModel has permissions to download "
        "the model."
    )


def payload_too_large(limit: int = MAX_PAYLOAD_BYTES) -> RuntimeResponse:
    """SageMaker's answer for a body over the limit: HTTP 413 with a plain-text message.

    It carries no error type, so botocore raises a ``ClientError`` whose code is ``"413"``.
    """
    body = f"HTTP content length exceeded {limit} bytes.".encode()
    return RuntimeResponse(
        413,
        [
            ("Content-Type", "text/plain"),
            ("x-amzn-RequestId", request_id()),
            ("Content-Length", str(len(body))),
        ],
        body,
    )


def model_not_ready(target_model: str, waited: float) -> RuntimeResponse:
    """A ``ModelNotReadyException`` (HTTP 429): the model is still downloading or loading; retry.

    Example:
        >>> model_not_ready("big.tar.gz", 60.0).status
        429
    """
    return error_response(
        429,
        "ModelNotReadyException",
        {
            "Message": (
                f"Model {target_model} is not ready after {waited:g} seconds: it is still being downloaded "
                "or loaded. Retry the request."
            )
        },
    )


def internal_failure(message: str) -> RuntimeResponse:
    """An ``InternalFailure`` (HTTP 500): the stack itself failed (e.g. its Triton died)."""
    return error_response(500, "InternalFailure", {"Message": message})


def service_unavailable(message: str) -> RuntimeResponse:
    """A ``ServiceUnavailable`` (HTTP 503): the endpoint's container is being replaced; retry.

    botocore retries it (in its default ``legacy`` and its ``standard`` retry modes) before raising.
    """
    return error_response(503, "ServiceUnavailable", {"Message": message})


def model_error(
    original_status: int,
    original_body: bytes,
    *,
    endpoint_name: str,
    region: str,
    account_id: str,
    container: str = "primary",
    log_group: str | None = None,
) -> RuntimeResponse:
    """A ``ModelError`` (HTTP 424): the container answered ``original_status`` with ``original_body``.

    ``container``: how the message names it (``primary``, or ``model`` for a copy of an inference
    component); ``log_group``: its CloudWatch log group (by default the endpoint's).

    The JSON body has SageMaker's fields: ``ErrorCode`` (``CLIENT_ERROR_FROM_MODEL`` for a 4xx,
    ``SERVER_ERROR_FROM_MODEL`` otherwise), ``LogStreamArn``, ``Message`` (quoting the container's body
    and pointing at the endpoint's log group), ``OriginalMessage`` and ``OriginalStatusCode``.

    Example:
        >>> r = model_error(400, b'{"error":"bad"}', endpoint_name="e", region="us-east-1",
        ...                 account_id="123456789012")
        >>> r.status, json.loads(r.body)["OriginalStatusCode"]
        (424, 400)
    """
    original = original_body.decode("utf-8", "replace")
    kind = "client" if 400 <= original_status < 500 else "server"
    log_group = log_group or f"/aws/sagemaker/Endpoints/{endpoint_name}"
    console = (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
        f"#logEventViewer:group={log_group}"
    )
    return error_response(
        424,
        "ModelError",
        {
            "ErrorCode": f"{kind.upper()}_ERROR_FROM_MODEL",
            "LogStreamArn": f"arn:aws:logs:{region}:{account_id}:log-group:{log_group}",
            "Message": (
                f'Received {kind} error ({original_status}) from {container} with message "{original}". '
                f"See {console} in account {account_id} for more information."
            ),
            "OriginalMessage": original,
            "OriginalStatusCode": original_status,
        },
    )


INVOCATION_TIMED_OUT = (
    "Your invocation timed out while waiting for a response from container primary. Review the latency "
    "metrics for each container in Amazon CloudWatch, resolve the issue, and try again."
)
"""What SageMaker answers when the container does not answer within 60 s, as the ``OriginalMessage`` of a
``ModelError`` with ``OriginalStatusCode`` 0 (quoted from errors users reported, e.g.
aws/amazon-sagemaker-examples#799 and RamVegiraju/SageMaker-Deployment#3)."""


def invocation_timed_out(
    *,
    endpoint_name: str,
    region: str,
    account_id: str,
    container: str = "primary",
    log_group: str | None = None,
) -> RuntimeResponse:
    """SageMaker's answer when the container did not answer in time: a ``ModelError`` (HTTP 424, which
    clients do not retry) whose ``Message`` reads ``Received server error (0) from primary with message
    "Your invocation timed out while waiting for a response from container primary. ..."``.

    Example:
        >>> r = invocation_timed_out(endpoint_name="e", region="us-east-1", account_id="123456789012")
        >>> r.status, json.loads(r.body)["OriginalStatusCode"]
        (424, 0)
    """
    return model_error(
        0,
        INVOCATION_TIMED_OUT.replace("container primary", f"container {container}").encode(),
        endpoint_name=endpoint_name,
        region=region,
        account_id=account_id,
        container=container,
        log_group=log_group,
    )


def invalid_target_model(target_model: str) -> RuntimeResponse:
    """SageMaker's answer for a TargetModel its pattern refuses (a ``ValidationError``)."""
    return validation_error(
        f"1 validation error detected: Value '{target_model}' at 'targetModel' failed to satisfy constraint: "
        f"Member must have length less than or equal to {TARGET_MODEL_MAX_CHARS} and Member must satisfy "
        f"regular expression pattern: {TARGET_MODEL_PATTERN}"
    )


def missing_target_model(endpoint_name: str) -> RuntimeResponse:
    """SageMaker's answer for a multi-model endpoint invoked without a TargetModel."""
    return validation_error(
        f"Request {request_id()} is missing a target model header, which is required for multi-model "
        f"endpoint {endpoint_name}."
    )


def not_multi_model(endpoint_name: str) -> RuntimeResponse:
    """SageMaker's answer for a TargetModel sent to a single-model endpoint."""
    return validation_error(
        f"Endpoint {endpoint_name} is not a multi-model endpoint and does not support target model header."
    )


COMPONENT_REQUIRED = (
    "Inference Component Name header is required for endpoints to which you plan to deploy inference "
    "components. Please include Inference Component Name header or consider using SageMaker models."
)
COMPONENT_NOT_ALLOWED = (
    "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy inference "
    "components. Please remove the Inference Component Name header and try again."
)
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


def component_not_found(component_name: str, account_id: str) -> RuntimeResponse:
    """The stack's answer for an ``InferenceComponentName`` the endpoint does not host (a
    ``ValidationError``, as for an unknown endpoint)."""
    return validation_error(f"Inference Component {component_name} of account {account_id} not found.")


def success(body: bytes, content_type: str, variant_name: str) -> RuntimeResponse:
    """A 200 answer carrying the container's body, as InvokeEndpoint returns it."""
    return RuntimeResponse(
        200,
        [
            ("Content-Type", content_type),
            ("x-Amzn-Invoked-Production-Variant", variant_name),
            ("x-amzn-RequestId", request_id()),
            ("Content-Length", str(len(body))),
        ],
        body,
    )
