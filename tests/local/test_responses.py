"""The runtime's error answers, read back by botocore's own sagemaker-runtime parser."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.awsrequest import HeadersDict
from botocore.parsers import create_parser

from mme_triton.local.route.responses import (
    RuntimeResponse,
    endpoint_not_found,
    internal_failure,
    model_data_not_found,
    model_error,
    model_not_ready,
    payload_too_large,
)


def _parse(response: RuntimeResponse) -> dict[str, Any]:
    """What botocore makes of the answer, as InvokeEndpoint's client would see it."""
    client = boto3.Session(region_name="us-east-1").client(
        "sagemaker-runtime", aws_access_key_id="x", aws_secret_access_key="x"
    )
    operation = client.meta.service_model.operation_model("InvokeEndpoint")
    parsed: dict[str, Any] = create_parser("rest-json").parse(
        {"status_code": response.status, "headers": HeadersDict(response.headers), "body": response.body},
        operation.output_shape,
    )
    code = parsed["Error"]["Code"]
    # botocore adds the modelled error fields the same way for a real call
    shape = client.meta.service_model.shape_for_error_code(code)
    if shape is not None:
        parsed.update(json.loads(response.body))
    parsed["exception"] = client.exceptions.from_code(code).__name__
    return parsed


@pytest.mark.parametrize(
    ("original_status", "error_code", "kind"),
    [
        (400, "CLIENT_ERROR_FROM_MODEL", "client"),
        (404, "CLIENT_ERROR_FROM_MODEL", "client"),
        (500, "SERVER_ERROR_FROM_MODEL", "server"),
        (507, "SERVER_ERROR_FROM_MODEL", "server"),
    ],
    ids=["400", "404", "500", "507"],
)
def test_model_error_has_sagemakers_shape(original_status: int, error_code: str, kind: str) -> None:
    triton = b"{\"error\":\"unexpected inference input 'BAD' for model 'linear.tar.gz'\"}"

    parsed = _parse(
        model_error(
            original_status, triton, endpoint_name="ep", region="eu-west-1", account_id="111122223333"
        )
    )

    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert parsed["Error"]["Code"] == "ModelError" and parsed["exception"] == "ModelError"
    assert parsed["ErrorCode"] == error_code
    assert parsed["OriginalStatusCode"] == original_status
    assert parsed["OriginalMessage"] == triton.decode()
    assert (
        parsed["LogStreamArn"] == "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/sagemaker/Endpoints/ep"
    )
    assert parsed["Error"]["Message"].startswith(
        f'Received {kind} error ({original_status}) from primary with message "{triton.decode()}". See https://'
    )
    assert parsed["Error"]["Message"].endswith("in account 111122223333 for more information.")


@pytest.mark.parametrize(
    ("response", "code", "message"),
    [
        (
            endpoint_not_found("ep", "123456789012"),
            "ValidationError",
            "Endpoint ep of account 123456789012 not found.",
        ),
        (
            model_data_not_found("bkt", "models/nope.tar.gz"),
            "ValidationError",
            "Failed to download model data(bucket: bkt, key: models/nope.tar.gz). Please ensure",
        ),
        (payload_too_large(), "413", "HTTP content length exceeded 6291456 bytes."),
        (model_not_ready("big.tar.gz", 60.0), "ModelNotReadyException", "Model big.tar.gz is not ready"),
        (internal_failure("Triton died"), "InternalFailure", "Triton died"),
    ],
    ids=[
        "endpoint-not-found",
        "model-data-missing",
        "payload-too-large",
        "model-not-ready",
        "internal-failure",
    ],
)
def test_runtime_errors_parse_to_the_aws_error_codes(
    response: RuntimeResponse, code: str, message: str
) -> None:
    parsed = _parse(response)

    assert parsed["Error"]["Code"] == code
    assert parsed["Error"]["Message"].startswith(message)
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == response.status
    assert response.status_line.split()[0] == str(response.status)
