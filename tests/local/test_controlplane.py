"""ControlPlane: moto's server plus UpdateEndpoint, status transitions, newer instance types, isolation."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

pytestmark = pytest.mark.moto

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


def _model(sm: Any, name: str = "m1", env: dict[str, str] | None = None) -> None:
    container = {
        "Image": "img",
        "Mode": "MultiModel",
        "ModelDataUrl": "s3://b/p/",
        "Environment": env or {"A": "1"},
    }
    sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer=container)


def _config(
    sm: Any, name: str, model: str = "m1", instance_type: str = "ml.g5.xlarge", count: int = 1
) -> None:
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": model,
        "InstanceType": instance_type,
        "InitialInstanceCount": count,
    }
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])


def _status(sm: Any, name: str, until: set[str], timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        description: dict[str, Any] = sm.describe_endpoint(EndpointName=name)
        if description["EndpointStatus"] in until or time.monotonic() > deadline:
            return description
        time.sleep(0.02)


def test_controlplane_endpoint_goes_creating_then_in_service_after_hooks(plane: Any, sm: Any) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    plane.on_in_service.append(lambda name, info: seen.append((name, info)))
    _model(sm, env={"SAGEMAKER_TRITON_LOG_VERBOSE": "0"})
    _config(sm, "c1")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    assert sm.describe_endpoint(EndpointName="e1")["EndpointStatus"] == "Creating"
    assert _status(sm, "e1", {"InService", "Failed"})["EndpointStatus"] == "InService"
    [(name, info)] = seen
    assert name == "e1"
    assert info["EndpointConfigName"] == "c1"
    assert info["ProductionVariants"][0]["InstanceType"] == "ml.g5.xlarge"
    assert info["Model"]["PrimaryContainer"]["Environment"] == {"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}
    assert info["Models"]["m1"]["PrimaryContainer"]["ModelDataUrl"] == "s3://b/p/"


def test_controlplane_failing_hook_fails_the_endpoint_with_its_message(plane: Any, sm: Any) -> None:
    def hook(name: str, info: dict[str, Any]) -> None:
        raise RuntimeError("no GPU for you")

    plane.on_in_service.append(hook)
    _model(sm)
    _config(sm, "c1")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    description = _status(sm, "e1", {"InService", "Failed"})
    assert (description["EndpointStatus"], description["FailureReason"]) == ("Failed", "no GPU for you")


def test_controlplane_fail_next_fails_one_transition(plane: Any, sm: Any) -> None:
    _model(sm)
    _config(sm, "c1")
    plane.fail_next("e1", "CapacityError: no capacity")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    assert _status(sm, "e1", {"InService", "Failed"})["FailureReason"] == "CapacityError: no capacity"
    sm.delete_endpoint(EndpointName="e1")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    assert _status(sm, "e1", {"InService", "Failed"})["EndpointStatus"] == "InService"


def test_controlplane_update_endpoint_switches_config(plane: Any, sm: Any) -> None:
    seen: list[tuple[str, int]] = []
    plane.on_in_service.append(
        lambda name, info: seen.append(
            (info["EndpointConfigName"], info["ProductionVariants"][0]["CurrentInstanceCount"])
        )
    )
    _model(sm)
    _config(sm, "c1")
    _config(sm, "c2", count=3)
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    _status(sm, "e1", {"InService"})
    sm.update_endpoint(EndpointName="e1", EndpointConfigName="c2")
    assert sm.describe_endpoint(EndpointName="e1")["EndpointStatus"] == "Updating"
    description = _status(sm, "e1", {"InService", "Failed"})
    assert description["EndpointConfigName"] == "c2"
    assert description["ProductionVariants"][0]["CurrentInstanceCount"] == 3
    assert [name for name, _ in seen] == ["c1", "c2"]
    assert [count for _, count in seen] == [1, 3]


def test_controlplane_failed_update_rolls_back_with_reason(plane: Any, sm: Any) -> None:
    _model(sm)
    _config(sm, "c1")
    _config(sm, "c2")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    _status(sm, "e1", {"InService"})
    plane.fail_next("e1", "model failed to load")
    sm.update_endpoint(EndpointName="e1", EndpointConfigName="c2")
    time.sleep(0.01)
    description = _status(sm, "e1", {"InService", "Failed"})
    assert description["EndpointStatus"] == "InService"
    assert description["EndpointConfigName"] == "c1"
    assert description["FailureReason"] == "model failed to load"


def test_controlplane_update_endpoint_refuses_in_progress_endpoint(plane: Any, sm: Any) -> None:
    plane.transition_delay = 5
    _model(sm)
    _config(sm, "c1")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    with pytest.raises(ClientError, match="Cannot update in-progress endpoint"):
        sm.update_endpoint(EndpointName="e1", EndpointConfigName="c1")


def test_controlplane_update_endpoint_unknown_names(plane: Any, sm: Any) -> None:
    with pytest.raises(ClientError, match="Could not find endpoint"):
        sm.update_endpoint(EndpointName="nope", EndpointConfigName="c1")


@pytest.mark.parametrize(
    "instance_type", ["ml.g5.xlarge", "ml.g6e.2xlarge", "ml.inf2.xlarge", "ml.c7i.large"]
)
def test_controlplane_accepts_instance_types_moto_does_not_list(sm: Any, instance_type: str) -> None:
    _model(sm)
    _config(sm, "c1", instance_type=instance_type)
    assert (
        sm.describe_endpoint_config(EndpointConfigName="c1")["ProductionVariants"][0]["InstanceType"]
        == instance_type
    )


def test_controlplane_delete_endpoint_runs_on_deleted(plane: Any, sm: Any) -> None:
    deleted: list[str] = []
    plane.on_deleted.append(deleted.append)
    _model(sm)
    _config(sm, "c1")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    sm.delete_endpoint(EndpointName="e1")
    assert deleted == ["e1"]


def test_controlplane_endpoint_deleted_while_hook_runs_gets_on_deleted_again(plane: Any, sm: Any) -> None:
    entered, release = threading.Event(), threading.Event()
    deleted: list[str] = []

    def slow_hook(name: str, info: dict[str, Any]) -> None:
        entered.set()
        release.wait(5)

    plane.on_in_service.append(slow_hook)
    plane.on_deleted.append(deleted.append)
    _model(sm)
    _config(sm, "c1")
    sm.create_endpoint(EndpointName="e1", EndpointConfigName="c1")
    assert entered.wait(5)
    sm.delete_endpoint(EndpointName="e1")
    release.set()
    deadline = time.monotonic() + 5
    while len(deleted) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert deleted == ["e1", "e1"]


def test_controlplane_instances_do_not_see_each_other(plane: Any, sm: Any) -> None:
    from mme_triton.local.aws.controlplane import ControlPlane

    _model(sm, "only-here")
    with ControlPlane() as other:
        other_sm = other.boto3_session().client("sagemaker")
        assert other_sm.list_models()["Models"] == []
        assert other.account_id != plane.account_id
    assert [m["ModelName"] for m in sm.list_models()["Models"]] == ["only-here"]


def test_controlplane_session_leaves_process_environment_alone(plane: Any) -> None:
    before = dict(os.environ)
    session = plane.boto3_session()
    client = session.client("s3")
    assert client.meta.endpoint_url == plane.url
    assert dict(os.environ) == before
    assert session.client("s3", endpoint_url="http://127.0.0.1:1").meta.endpoint_url == "http://127.0.0.1:1"


def test_controlplane_wsgi_middleware_wraps_moto() -> None:
    from mme_triton.local.aws.controlplane import ControlPlane

    paths: list[str] = []

    def middleware(app: Any) -> Any:
        def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
            paths.append(environ["PATH_INFO"])
            if environ["PATH_INFO"].endswith("/invocations"):
                start_response("200 OK", [("Content-Type", "application/json")])
                return [b'{"shadowed": true}']
            return app(environ, start_response)

        return wrapped

    with ControlPlane(wsgi_middleware=middleware) as plane:
        runtime = plane.boto3_session().client("sagemaker-runtime")
        answer = runtime.invoke_endpoint(EndpointName="e1", Body=b"{}", ContentType="application/json")
        assert answer["Body"].read() == b'{"shadowed": true}'
        plane.boto3_session().client("sagemaker").list_endpoints()
    assert "/endpoints/e1/invocations" in paths
    assert "/" in paths


def test_controlplane_list_tags_of_deleted_resource_is_a_validation_error(sm: Any) -> None:
    _model(sm)
    arn = sm.describe_model(ModelName="m1")["ModelArn"]
    sm.delete_model(ModelName="m1")
    with pytest.raises(ClientError) as raised:
        sm.list_tags(ResourceArn=arn)
    assert raised.value.response["Error"]["Code"] == "ValidationException"
