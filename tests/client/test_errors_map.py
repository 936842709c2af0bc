"""The translation of botocore errors into the library's exceptions, from parsed responses.

The parsed responses below have the layout botocore gives a ``sagemaker-runtime`` error (the tests in
``test_client_errors.py`` produce the same layout from real HTTP answers through botocore's parser).
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError

from mme_triton.client._errors_map import ErrorContext, is_unknown_target, map_invoke_error, triton_message
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

CONTEXT = ErrorContext("my-endpoint", "linear.tar.gz")


def _client_error(code: str, message: str, status: int, **fields: Any) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **fields,
    }
    return ClientError(response, "InvokeEndpoint")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "{\"error\":\"unexpected inference input 'BAD' for model 'm'\"}",
            "unexpected inference input 'BAD' for model 'm'",
        ),
        ("plain text from a proxy", "plain text from a proxy"),
        ('{"message": "from another server"}', "from another server"),
        ("{not json", "{not json"),
        ("", ""),
        (None, ""),
    ],
    ids=["triton-json", "plain", "message-key", "broken-json", "empty", "none"],
)
def test_triton_message_extracts_the_error_text(text: str | None, expected: str) -> None:
    assert triton_message(text) == expected


@pytest.mark.parametrize(
    ("error", "expected_class", "expected_status"),
    [
        (
            _client_error("ValidationError", "Endpoint my-endpoint of account 123456789012 not found.", 400),
            EndpointNotFoundError,
            400,
        ),
        (
            _client_error(
                "ValidationError",
                "Failed to download model data(bucket: b, key: mme/linear.tar.gz). Please ensure that there "
                "is an object located at the URL and that the role passed to CreateModel has permissions to "
                "download the model.",
                400,
            ),
            ModelNotFoundError,
            400,
        ),
        (
            _client_error("ValidationError", "Could not find model data at s3://b/mme/linear.tar.gz.", 400),
            ModelNotFoundError,
            400,
        ),
        (
            _client_error(
                "ValidationError",
                "Endpoint my-endpoint is not a multi-model endpoint and does not support target model "
                "header.",
                400,
            ),
            InferenceError,
            400,
        ),
        (_client_error("ModelNotReadyException", "still loading", 429), ModelNotReadyError, 429),
        (_client_error("ThrottlingException", "Rate exceeded", 400), ThrottlingError, 400),
        (_client_error("InternalFailure", "internal", 500), InferenceError, 500),
        (_client_error("ServiceUnavailable", "unavailable", 503), InferenceError, 503),
        (_client_error("InternalDependencyException", "dependency", 530), InferenceError, 530),
        (_client_error("SomethingNew", "new", 418), InferenceError, 418),
    ],
    ids=[
        "endpoint-not-found",
        "model-data-download-failed",
        "model-data-not-found",
        "not-multi-model",
        "not-ready",
        "throttling",
        "internal-failure",
        "service-unavailable",
        "internal-dependency",
        "unknown-code",
    ],
)
def test_map_invoke_error_by_code_and_message(
    error: ClientError, expected_class: type[InferenceError], expected_status: int
) -> None:
    mapped = map_invoke_error(error, CONTEXT)
    assert type(mapped) is expected_class
    assert isinstance(mapped, InferenceError)
    assert mapped.status == expected_status
    assert mapped.error_code == error.response["Error"]["Code"]
    assert mapped.endpoint_name == "my-endpoint"
    assert mapped.target_model == "linear.tar.gz"
    assert mapped.message == error.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("original_status", "expected_class"),
    [
        (400, InvalidInputError),
        (404, ModelNotFoundError),
        (507, ModelOutOfMemoryError),
        (500, InferenceError),
        (503, InferenceError),
    ],
    ids=["400-invalid-input", "404-not-found", "507-out-of-memory", "500-other", "503-other"],
)
def test_map_invoke_error_model_error_by_original_status(
    original_status: int, expected_class: type[InferenceError]
) -> None:
    original = '{"error":"what Triton said"}'
    error = _client_error(
        "ModelError",
        f'Received client error ({original_status}) from primary with message "{original}". '
        "See https://x for more information.",
        424,
        OriginalStatusCode=original_status,
        OriginalMessage=original,
        LogStreamArn="arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/my-endpoint",
    )
    mapped = map_invoke_error(error, CONTEXT)
    assert type(mapped) is expected_class
    assert isinstance(mapped, InferenceError)
    assert mapped.message == "what Triton said"
    assert mapped.status == original_status
    assert mapped.error_code == "ModelError"
    assert mapped.log_stream_arn == (
        "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/my-endpoint"
    )


def test_map_invoke_error_model_error_without_original_message_reads_the_quoted_one() -> None:
    error = _client_error(
        "ModelError",
        'Received client error (400) from model with message "{"error":"bad shape"}". See https://x for more '
        "information.",
        424,
        OriginalStatusCode=400,
    )
    mapped = map_invoke_error(error, CONTEXT)
    assert type(mapped) is InvalidInputError
    assert isinstance(mapped, InferenceError)
    assert mapped.message == "bad shape"


def test_map_invoke_error_triton_unknown_model_is_model_not_found() -> None:
    original = '{"error":"Request for unknown model: \'linear.tar.gz\' is not found"}'
    error = _client_error(
        "ModelError", "Received client error (400)", 424, OriginalStatusCode=400, OriginalMessage=original
    )
    assert type(map_invoke_error(error, CONTEXT)) is ModelNotFoundError


_UNKNOWN_LINEAR = '{"error":"Request for unknown model: \'linear.tar.gz\' is not found"}'


@pytest.mark.parametrize(
    ("code", "status", "original", "target", "expected"),
    [
        ("ModelError", 400, _UNKNOWN_LINEAR, "linear.tar.gz", True),
        # another model unknown (an ensemble's step, a BLS call's target): not this request's race
        ("ModelError", 400, _UNKNOWN_LINEAR, "pipeline.tar.gz", False),
        ("ModelError", 404, _UNKNOWN_LINEAR, "linear.tar.gz", False),
        ("ModelError", 400, '{"error":"unexpected shape for input \'INPUT0\'"}', "linear.tar.gz", False),
        ("ValidationError", 400, _UNKNOWN_LINEAR, "linear.tar.gz", False),
    ],
    ids=["this-target", "another-model", "status-404", "bad-input", "validation-error"],
)
def test_is_unknown_target_only_for_tritons_answer_about_the_target_itself(
    code: str, status: int, original: str, target: str, expected: bool
) -> None:
    error = _client_error(
        code, "Received client error", 424, OriginalStatusCode=status, OriginalMessage=original
    )
    assert is_unknown_target(error, target) is expected


def test_map_invoke_error_connection_failure_is_inference_error() -> None:
    mapped = map_invoke_error(EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), CONTEXT)
    assert type(mapped) is InferenceError
    assert isinstance(mapped, InferenceError)
    assert mapped.error_code == "EndpointConnectionError"


def test_map_invoke_error_param_validation_is_value_error() -> None:
    mapped = map_invoke_error(ParamValidationError(report="TargetModel too long"), CONTEXT)
    assert type(mapped) is ValueError


@pytest.mark.parametrize(
    ("original", "status", "reason"),
    [
        (
            "load failed for model 'linear.tar.gz': version 1 is at UNAVAILABLE state: Internal: "
            "InvalidProtobuf: Load model from linear.tar.gz:linear/1/model.onnx failed",
            400,
            "version 1 is at UNAVAILABLE state: Internal: InvalidProtobuf: Load model from "
            "linear.tar.gz:linear/1/model.onnx failed",
        ),
        (
            "failed to load 'linear.tar.gz', failed to poll from model repository",
            400,
            "failed to poll from model repository",
        ),
        ("load failed for model 'linear.tar.gz': stub crashed", 500, "stub crashed"),
    ],
    ids=["corrupt-onnx", "poll-failed", "server-status"],
)
def test_map_invoke_error_raises_a_failed_load_as_model_load_error(
    original: str, status: int, reason: str
) -> None:
    import json

    error = _client_error(
        "ModelError",
        f'Received client error ({status}) from primary with message "{json.dumps({"error": original})}".',
        424,
        OriginalStatusCode=status,
        OriginalMessage=json.dumps({"error": original}),
    )

    mapped = map_invoke_error(error, CONTEXT)

    assert type(mapped) is ModelLoadError
    assert mapped.reason == reason and mapped.message == original and mapped.status == status
    assert not isinstance(mapped, InvalidInputError)


def test_map_invoke_error_keeps_out_of_memory_at_load_as_model_out_of_memory() -> None:
    original = '{"error": "load failed for model \'big.tar.gz\': out of memory"}'
    error = _client_error("ModelError", "x", 424, OriginalStatusCode=507, OriginalMessage=original)

    assert type(map_invoke_error(error, CONTEXT)) is ModelOutOfMemoryError


# -- inference components -------------------------------------------------------------------------------

COMPONENT = ErrorContext("my-endpoint", None, "linear")


@pytest.mark.parametrize(
    ("message", "context", "expected_class", "said"),
    [
        (
            "Inference Component linear of account 123456789012 not found.",
            COMPONENT,
            InferenceComponentNotFoundError,
            "",
        ),
        ('Could not find inference component "linear".', COMPONENT, InferenceComponentNotFoundError, ""),
        (
            "Inference Component has no capacity to process this request. ApplicationAutoScaling may be "
            "in-progress (if configured) or try to increase the capacity by invoking "
            "UpdateInferenceComponentRuntimeConfig API.",
            COMPONENT,
            NoCapacityError,
            "",
        ),
        (
            "Inference Component Name header is required for endpoints to which you plan to deploy "
            "inference components. Please include Inference Component Name header or consider using "
            "SageMaker models.",
            CONTEXT,
            InferenceError,
            "hosting='inference-components'",
        ),
        (
            "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy "
            "inference components. Please remove the Inference Component Name header and try again.",
            COMPONENT,
            InferenceError,
            "it is a multi-model endpoint",
        ),
        ("Endpoint my-endpoint of account 123456789012 not found.", COMPONENT, EndpointNotFoundError, ""),
        # a TargetModel's request is never read as a component's
        ("Inference Component linear of account 1 not found.", CONTEXT, InferenceError, ""),
    ],
    ids=[
        "component-not-found",
        "could-not-find-component",
        "no-capacity",
        "header-required",
        "header-not-allowed",
        "endpoint-not-found",
        "target-model-context",
    ],
)
def test_map_invoke_error_inference_component_answers(
    message: str, context: ErrorContext, expected_class: type[InferenceError], said: str
) -> None:
    mapped = map_invoke_error(_client_error("ValidationError", message, 400), context)
    assert type(mapped) is expected_class
    assert isinstance(mapped, InferenceError)
    assert (mapped.inference_component, mapped.target_model) == (
        context.inference_component,
        context.target_model,
    )
    assert message in mapped.message and said in mapped.message
    if context.inference_component is not None:
        assert f"inference component {context.inference_component!r}" in str(mapped)


def test_inference_component_not_found_is_a_model_not_found() -> None:
    """Code that catches ModelNotFoundError (the CLI's exit code 4 among it) catches a missing component."""
    assert issubclass(InferenceComponentNotFoundError, ModelNotFoundError)
