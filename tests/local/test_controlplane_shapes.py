"""The control plane answers in the API's shapes: botocore's output shapes say what an answer may hold.

The flows of ``api_shapes.exercise_resources`` (the library's deploy, update, status and teardown, and
what a boto3 or SageMaker SDK user does by hand, through every endpoint state) run once on a control
plane; every SageMaker and Application Auto Scaling answer they receive is checked against botocore's
output shape of its operation (tests/test_sdk.py parses the same answers with the SDK's classes).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from api_shapes import OPERATIONS, ResponseRecorder, exercise_resources, output_shape, shape_problems

from mme_triton.local.aws._shapes import conform

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
ALL_OPERATIONS = [
    (service, operation) for service, operations in OPERATIONS.items() for operation in operations
]


@pytest.fixture(scope="module")
def answers() -> Iterator[ResponseRecorder]:
    """Every answer the flows received from one control plane."""
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane(transition_delay=0.2) as plane:
        session = plane.boto3_session()
        recorder = ResponseRecorder(session)
        exercise_resources(plane, session, [EXAMPLES / "linear"])
        yield recorder


# -- the answers the stack gives -------------------------------------------------------------------------


@pytest.mark.moto
@pytest.mark.parametrize(("service", "operation"), ALL_OPERATIONS, ids=[op for _, op in ALL_OPERATIONS])
def test_controlplane_answers_take_the_shape_of_the_api(
    answers: ResponseRecorder, service: str, operation: str
) -> None:
    received = answers.of(operation)
    assert received, f"the flows never called {operation}"
    problems = [problem for answer in received for problem in answer.problems()]
    assert problems == []


@pytest.mark.moto
def test_controlplane_answers_cover_every_operation_the_flows_call(answers: ResponseRecorder) -> None:
    assert answers.operations() == set(ALL_OPERATIONS)


@pytest.mark.moto
def test_controlplane_answers_describe_endpoints_in_every_state(answers: ResponseRecorder) -> None:
    described = [answer.body for answer in answers.of("DescribeEndpoint")]
    assert {body["EndpointStatus"] for body in described} == {"Creating", "Updating", "InService", "Failed"}
    failed_update = [
        body for body in described if body["EndpointStatus"] == "InService" and "FailureReason" in body
    ]
    assert failed_update and failed_update[-1]["FailureReason"] == "the model failed to load"
    assert all(body["ProductionVariants"][0]["VariantName"] == "AllTraffic" for body in described)
    by_name = {body["EndpointName"]: body for body in described}
    assert "DataCaptureConfig" not in by_name["shapes"]
    assert by_name["by-hand"]["DataCaptureConfig"] == {
        "EnableCapture": True,
        "CaptureStatus": "Started",
        "CurrentSamplingPercentage": 50,
        "DestinationS3Uri": by_name["by-hand"]["DataCaptureConfig"]["DestinationS3Uri"],
        "KmsKeyId": "",
    }
    assert by_name["by-hand"]["DataCaptureConfig"]["DestinationS3Uri"].endswith("/capture/")


@pytest.mark.moto
def test_controlplane_answers_leave_unset_structures_out_and_keep_set_ones(answers: ResponseRecorder) -> None:
    models = {answer.body["ModelName"]: answer.body for answer in answers.of("DescribeModel")}
    by_hand = models.pop("by-hand")
    assert by_hand["VpcConfig"]["Subnets"] == ["subnet-0123456789abcdef0"]
    assert by_hand["Containers"][0]["Mode"] == "MultiModel"
    assert "PrimaryContainer" not in by_hand
    (deployed,) = models.values()
    assert deployed["PrimaryContainer"]["Mode"] == "MultiModel"
    assert "VpcConfig" not in deployed and "Containers" not in deployed


@pytest.mark.moto
def test_controlplane_answers_keep_empty_result_collections(answers: ResponseRecorder) -> None:
    assert {"Tags": []} in [answer.body for answer in answers.of("ListTags")]
    assert {"Models": []} in [answer.body for answer in answers.of("ListModels")]
    assert {"ScalableTargets": []} in [answer.body for answer in answers.of("DescribeScalableTargets")]


@pytest.mark.moto
def test_controlplane_scalable_target_has_the_service_linked_role(answers: ResponseRecorder) -> None:
    targets = [t for answer in answers.of("DescribeScalableTargets") for t in answer.body["ScalableTargets"]]
    assert targets
    for target in targets:
        assert target["RoleARN"].endswith(
            ":role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
            "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
        )
        assert target["SuspendedState"] == {
            "DynamicScalingInSuspended": False,
            "DynamicScalingOutSuspended": False,
            "ScheduledScalingSuspended": False,
        }


@pytest.mark.moto
def test_controlplane_errors_pass_through_unchanged(plane: Any) -> None:
    from botocore.exceptions import ClientError

    sm = plane.client("sagemaker")
    with pytest.raises(ClientError) as raised:
        sm.describe_endpoint(EndpointName="nowhere")
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert "nowhere" in raised.value.response["Error"]["Message"]


# -- the filter and the validator themselves ---------------------------------------------------------------


def test_shapes_conform_leaves_unset_members_out() -> None:
    answer = {
        "ModelName": "m",
        "PrimaryContainer": {"Image": "img", "Environment": {}, "ImageConfig": {}},
        "Containers": [],
        "VpcConfig": {},
        "InferenceExecutionConfig": {"Mode": None},
        "ExecutionRoleArn": None,
        "NotAMember": 1,
        "EnableNetworkIsolation": False,
    }
    assert conform("sagemaker", "DescribeModel", answer) == {
        "ModelName": "m",
        "PrimaryContainer": {"Image": "img"},
        "EnableNetworkIsolation": False,
    }


def test_shapes_conform_keeps_result_collections_and_required_members_even_empty() -> None:
    assert conform("sagemaker", "ListTags", {"Tags": [], "NextToken": None}) == {"Tags": []}
    assert conform("application-autoscaling", "DescribeScalingPolicies", {"ScalingPolicies": []}) == {
        "ScalingPolicies": []
    }
    # ProductionVariants is required: an empty one is a fault to see, not an unset member to hide
    answer = {"EndpointConfigName": "c", "ProductionVariants": [], "DataCaptureConfig": {}}
    assert conform("sagemaker", "DescribeEndpointConfig", answer) == {
        "EndpointConfigName": "c",
        "ProductionVariants": [],
    }


def test_shapes_conform_keeps_list_items_and_map_values_in_place() -> None:
    answer = {"ProductionVariants": [{"VariantName": "a", "VariantStatus": []}, {"VariantName": "b"}]}
    assert conform("sagemaker", "DescribeEndpoint", answer) == {
        "ProductionVariants": [{"VariantName": "a"}, {"VariantName": "b"}]
    }


def test_shapes_conform_passes_an_unknown_operation_through() -> None:
    assert conform("sagemaker", "NoSuchOperation", {"Anything": {}}) == {"Anything": {}}


def test_shapes_every_operation_moto_answers_has_an_output_shape_to_conform_to() -> None:
    """The filter is keyed by the operation in ``X-Amz-Target``: each operation moto's SageMaker and
    Application Auto Scaling answer (and ``UpdateEndpoint``, which the stack adds) is one botocore knows."""
    import botocore.session
    from botocore import xform_name
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
    from moto.sagemaker.responses import SageMakerResponse

    from mme_triton.local.aws._moto_patches import install_patches

    install_patches()
    session = botocore.session.get_session()
    for responses, service in (
        (SageMakerResponse, "sagemaker"),
        (ApplicationAutoScalingResponse, "application-autoscaling"),
    ):
        known = {xform_name(name): name for name in session.get_service_model(service).operation_names}
        answered = [
            name for name, value in vars(responses).items() if callable(value) and not name.startswith("_")
        ]
        assert "update_endpoint" in answered or service != "sagemaker"
        assert [name for name in answered if name not in known] == []
        assert len(answered) > (100 if service == "sagemaker" else 5)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            {"ModelName": "m", "CreationTime": 1.7e9},
            "$.ModelArn: required member of DescribeModelOutput missing",
        ),
        ({"VpcConfig": {}}, "$.VpcConfig: empty structure VpcConfig"),
        ({"Containers": []}, "$.Containers: empty list"),
        ({"ExecutionRoleArn": None}, "$.ExecutionRoleArn: null"),
        ({"ModelArn": "arn:aws:sagemaker:us-east-1:1:model/m"}, "does not match ModelArn's pattern"),
        (
            {"CreationTime": "2026-01-01T00:00:00Z"},
            "$.CreationTime: '2026-01-01T00:00:00Z' is not a timestamp",
        ),
        ({"EnableNetworkIsolation": "false"}, "$.EnableNetworkIsolation: 'false' is not a boolean"),
        (
            {"PrimaryContainer": {"Mode": "Multi"}},
            "$.PrimaryContainer.Mode: 'Multi' is not one of ContainerMode's",
        ),
        ({"Surprise": 1}, "$.Surprise: not a member of DescribeModelOutput"),
    ],
    ids=[
        "required",
        "empty-structure",
        "empty-list",
        "null",
        "arn",
        "timestamp",
        "boolean",
        "enum",
        "unknown",
    ],
)
def test_shapes_validator_finds_what_sagemaker_would_not_write(answer: dict[str, Any], problem: str) -> None:
    problems = shape_problems(output_shape("sagemaker", "DescribeModel"), answer)
    assert any(problem in found for found in problems), problems


def test_shapes_validator_accepts_what_sagemaker_writes() -> None:
    answer = {
        "ModelName": "m",
        "PrimaryContainer": {
            "Image": "img",
            "Mode": "MultiModel",
            "ModelDataUrl": "s3://b/p/",
            "Environment": {"A": "1"},
        },
        "ExecutionRoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "CreationTime": 1796180776.727,
        "ModelArn": "arn:aws:sagemaker:us-east-1:123456789012:model/m",
        "EnableNetworkIsolation": False,
    }
    assert shape_problems(output_shape("sagemaker", "DescribeModel"), answer) == []
