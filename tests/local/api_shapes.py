"""Check AWS answers against botocore's service model, and record the answers a boto3 session receives.

:func:`shape_problems` walks an operation's output shape over the JSON body as it came off the wire
(the json protocol of SageMaker and Application Auto Scaling): members the shape does not have, required
members missing, types, enum values, string patterns and length/range limits, timestamps as epoch
seconds, and nothing unset-but-empty (a ``null``, or an empty structure where the service leaves an unset
one out). It is written for the tests, independently of the stack's own response filter, so that one
does not grade itself.

:class:`ResponseRecorder` registers an ``after-call`` handler on a boto3 session: every client made from
the session afterwards (the library's, the SageMaker SDK's) records the operation, the raw body and
botocore's parsed answer.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = ["Answer", "ResponseRecorder", "output_shape", "result_keys", "shape_problems"]


@cache
def _service_model(service: str) -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def output_shape(service: str, operation: str) -> Any:
    """botocore's output shape of ``operation`` (``None`` for an operation without output)."""
    return _service_model(service).operation_model(operation).output_shape


@cache
def _pattern(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error:  # a construct Python's re lacks (\p{...}): the pattern is not checked
        return None


def result_keys(service: str, operation: str) -> frozenset[str]:
    """The members botocore's paginator names as ``operation``'s result collection (written even empty)."""
    import botocore.session

    paginators = botocore.session.get_session().get_paginator_model(service)
    try:
        keys = paginators.get_paginator(operation)["result_key"]
    except ValueError:
        return frozenset()
    return frozenset([keys] if isinstance(keys, str) else keys)


def shape_problems(
    shape: Any, value: Any, path: str = "$", *, collections: frozenset[str] = frozenset()
) -> list[str]:
    """What is wrong with ``value`` (decoded JSON) as an instance of botocore ``shape``; empty when nothing.

    ``collections``: members of the top-level structure that may be empty lists or maps (the result
    collection of a List or Describe operation); any other empty list or map must be required to be there.
    """
    kind = shape.type_name
    problems: list[str] = []
    if value is None:
        return [f"{path}: null (the service leaves an unset member out)"]
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, expected a structure ({shape.name})"]
        if not value and path != "$":
            problems.append(f"{path}: empty structure {shape.name} (an unset structure is left out)")
        for name in shape.required_members:
            if name not in value:
                problems.append(f"{path}.{name}: required member of {shape.name} missing")
        for name, member_value in value.items():
            member = shape.members.get(name)
            if member is None:
                problems.append(f"{path}.{name}: not a member of {shape.name}")
                continue
            meant = name in shape.required_members or name in collections
            if member_value in ([], {}) and member.type_name in ("list", "map") and not meant:
                problems.append(
                    f"{path}.{name}: empty {member.type_name} (an unset {member.type_name} is left out)"
                )
            problems.extend(shape_problems(member, member_value, f"{path}.{name}"))
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, expected a list ({shape.name})"]
        problems.extend(_limits(shape, len(value), path, "items"))
        for index, item in enumerate(value):
            problems.extend(shape_problems(shape.member, item, f"{path}[{index}]"))
        return problems
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, expected a map ({shape.name})"]
        problems.extend(_limits(shape, len(value), path, "entries"))
        for key, item in value.items():
            problems.extend(shape_problems(shape.key, key, f"{path}<key {key!r}>"))
            problems.extend(shape_problems(shape.value, item, f"{path}[{key!r}]"))
        return problems
    return _scalar_problems(shape, value, path)


def _scalar_problems(shape: Any, value: Any, path: str) -> list[str]:
    kind = shape.type_name
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: {type(value).__name__} {value!r}, expected a string ({shape.name})"]
        if shape.enum and value not in shape.enum:
            return [f"{path}: {value!r} is not one of {shape.name}'s values {list(shape.enum)}"]
        problems = _limits(shape, len(value), path, "characters")
        pattern = shape.metadata.get("pattern")
        compiled = _pattern(pattern) if pattern else None
        if compiled is not None and compiled.fullmatch(value) is None:
            problems.append(f"{path}: {value!r} does not match {shape.name}'s pattern {pattern}")
        return problems
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a boolean"]
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{path}: {value!r} is not an integer ({shape.name})"]
        return _limits(shape, value, path, "")
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return [f"{path}: {value!r} is not a number ({shape.name})"]
        return _limits(shape, value, path, "")
    if kind == "timestamp":
        # the json protocol writes epoch seconds unless the shape says otherwise
        if shape.serialization.get("timestampFormat", "unixTimestamp") != "unixTimestamp":
            return [] if isinstance(value, str) else [f"{path}: {value!r} is not a timestamp string"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            return [f"{path}: {value!r} is not a timestamp in epoch seconds"]
        return []
    if kind == "blob":
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not base64 text"]
    return [f"{path}: shape type {kind} is not checked"]


def _limits(shape: Any, size: float, path: str, unit: str) -> list[str]:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    what = f"{size} {unit}".strip()
    if low is not None and size < low:
        return [f"{path}: {what}, fewer than {shape.name}'s minimum {low}"]
    if high is not None and size > high:
        return [f"{path}: {what}, more than {shape.name}'s maximum {high}"]
    return []


@dataclass(frozen=True)
class Answer:
    """One answer a client received: its service, operation, JSON body and botocore's parsed dict."""

    service: str
    operation: str
    status: int
    body: Any
    parsed: dict[str, Any]

    def problems(self) -> list[str]:
        shape = output_shape(self.service, self.operation)
        if shape is None:
            return [] if not self.body else [f"{self.operation}: a body where the API has no output"]
        collections = result_keys(self.service, self.operation)
        problems = shape_problems(shape, self.body, collections=collections)
        return [f"{self.operation} {problem}" for problem in problems]


class ResponseRecorder:
    """Records every successful JSON answer to clients of ``services`` made from ``boto3_session``."""

    def __init__(
        self, boto3_session: Any, services: tuple[str, ...] = ("sagemaker", "application-autoscaling")
    ):
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._services = services
        boto3_session.events.register("after-call", self._after_call)

    def _after_call(self, http_response: Any, parsed: dict[str, Any], model: Any, **kwargs: Any) -> None:
        service = model.service_model.service_name
        if service not in self._services or http_response.status_code >= 300:
            return
        content = http_response.content
        body = json.loads(content) if content else {}
        answer = Answer(service, model.name, http_response.status_code, body, parsed)
        with self._lock:
            self.answers.append(answer)

    def operations(self) -> set[tuple[str, str]]:
        """``(service, operation)`` of every recorded answer."""
        with self._lock:
            return {(answer.service, answer.operation) for answer in self.answers}

    def of(self, operation: str) -> list[Answer]:
        """The recorded answers of ``operation``."""
        with self._lock:
            return [answer for answer in self.answers if answer.operation == operation]


# -- the resources the library and the SageMaker SDK touch, in every state --------------------------------

#: Every operation the flows below call, by service: each one's answers are checked against its shape.
OPERATIONS = {
    "sagemaker": (
        "CreateModel",
        "DescribeModel",
        "ListModels",
        "DeleteModel",
        "CreateEndpointConfig",
        "DescribeEndpointConfig",
        "ListEndpointConfigs",
        "DeleteEndpointConfig",
        "CreateEndpoint",
        "DescribeEndpoint",
        "ListEndpoints",
        "UpdateEndpoint",
        "DeleteEndpoint",
        "AddTags",
        "ListTags",
        "DeleteTags",
    ),
    "application-autoscaling": (
        "RegisterScalableTarget",
        "DescribeScalableTargets",
        "PutScalingPolicy",
        "DescribeScalingPolicies",
        "DeleteScalingPolicy",
        "DeregisterScalableTarget",
    ),
}

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3-cpu"


def exercise_resources(plane: Any, session: Any, models: Any) -> None:
    """Drive a ControlPlane (``transition_delay`` > 0) through what the library and the SDK do to models,
    endpoint configs, endpoints and their autoscaling, reading each in every state it passes through:
    ``deploy_mme`` (create, then update), ``endpoint_status``, a failed create, a failed update, tags, the
    List calls, and ``teardown``. ``models``: model directories ``deploy_mme`` uploads."""
    from mme_triton import AutoScaling, deploy_mme, teardown
    from mme_triton.endpoint.status import endpoint_status

    role = f"arn:aws:iam::{plane.account_id}:role/shapes"
    bucket = f"shapes-{plane.account_id}"
    session.client("s3").create_bucket(Bucket=bucket)
    deploy = {
        "role": role,
        "instance_type": "ml.m5.large",
        "autoscaling": AutoScaling(min_capacity=1, max_capacity=2, target_invocations_per_instance=100),
        "tags": {"team": "shapes"},
        "poll_interval": 0.05,
        "boto3_session": session,
    }
    deploy_mme("shapes", f"s3://{bucket}/models/", models=models, **deploy)  # Creating -> InService
    deploy_mme("shapes", f"s3://{bucket}/models/", instance_count=2, **deploy)  # Updating -> InService
    endpoint_status("shapes", boto3_session=session)

    sm = session.client("sagemaker")
    # a model with Containers and a VpcConfig, a config with data capture (structures that are set), and an
    # endpoint that fails, then is made again and fails an update
    container = {"Image": IMAGE, "Mode": "MultiModel", "ModelDataUrl": f"s3://{bucket}/models/"}
    vpc = {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
    sm.create_model(ModelName="by-hand", ExecutionRoleArn=role, Containers=[container], VpcConfig=vpc)
    variant = {"VariantName": "AllTraffic", "ModelName": "by-hand", "InstanceType": "ml.m5.large"}
    capture = {
        "InitialSamplingPercentage": 50,
        "DestinationS3Uri": f"s3://{bucket}/capture/",
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    }
    sm.create_endpoint_config(
        EndpointConfigName="by-hand",
        ProductionVariants=[{**variant, "InitialInstanceCount": 1}],
        DataCaptureConfig=capture,
    )
    plane.fail_next("by-hand", "CapacityError: no ml.m5.large capacity")
    sm.create_endpoint(EndpointName="by-hand", EndpointConfigName="by-hand")
    _wait(sm, "by-hand", "Failed")
    sm.delete_endpoint(EndpointName="by-hand")
    sm.create_endpoint(EndpointName="by-hand", EndpointConfigName="by-hand")
    _wait(sm, "by-hand", "InService")
    plane.fail_next("by-hand", "the model failed to load")  # a failed update: InService, with FailureReason
    sm.update_endpoint(EndpointName="by-hand", EndpointConfigName="by-hand")
    _wait(sm, "by-hand", "InService")
    for arn in (
        sm.describe_model(ModelName="by-hand")["ModelArn"],
        sm.describe_endpoint_config(EndpointConfigName="by-hand")["EndpointConfigArn"],
        sm.describe_endpoint(EndpointName="by-hand")["EndpointArn"],
    ):
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": "by", "Value": "hand"}])
        sm.list_tags(ResourceArn=arn)
        sm.delete_tags(ResourceArn=arn, TagKeys=["by"])
        sm.list_tags(ResourceArn=arn)  # no tags: an empty collection
    sm.list_models()
    sm.list_endpoint_configs()
    sm.list_endpoints()
    sm.delete_endpoint(EndpointName="by-hand")
    sm.delete_endpoint_config(EndpointConfigName="by-hand")
    sm.delete_model(ModelName="by-hand")

    teardown("shapes", delete_artifacts=True, boto3_session=session)
    autoscaling = session.client("application-autoscaling")
    autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker")  # none left: empty collections
    sm.list_models()


def _wait(sm: Any, name: str, status: str, timeout: float = 30) -> None:
    """Until ``name`` is ``status`` (each create and update leaves it Creating or Updating first)."""
    import time

    deadline = time.monotonic() + timeout
    while (described := sm.describe_endpoint(EndpointName=name))["EndpointStatus"] != status:
        if time.monotonic() > deadline:
            raise AssertionError(f"endpoint {name} did not become {status}: {described}")
        time.sleep(0.02)
