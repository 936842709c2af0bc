"""Fixtures: a ControlPlane (moto's server plus what moto lacks) and real boto3 clients on it."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

import pytest

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.fixture
def session(plane: Any) -> Any:
    return plane.boto3_session()


@pytest.fixture
def sm(session: Any) -> Any:
    return session.client("sagemaker")


@pytest.fixture
def aas(session: Any) -> Any:
    return session.client("application-autoscaling")


@pytest.fixture
def s3(session: Any) -> Any:
    return session.client("s3")


@pytest.fixture
def model_data_url(s3: Any) -> str:
    bucket = f"models-{secrets.token_hex(4)}"
    s3.create_bucket(Bucket=bucket)
    return f"s3://{bucket}/mme/"


@pytest.fixture
def deploy_kwargs(session: Any) -> dict[str, Any]:
    return {
        "role": ROLE,
        "instance_type": "ml.g5.xlarge",
        "boto3_session": session,
        "poll_interval": 0.05,
        "timeout": 20,
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the example repository (linear, scale, pipeline) that a test may change."""
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLES, target)
    return target


@pytest.fixture
def ic_kwargs(deploy_kwargs: dict[str, Any], model_data_url: str) -> dict[str, Any]:
    """deploy_inference_components' arguments: deploy_kwargs on a CPU type, with an S3 prefix."""
    return {**deploy_kwargs, "instance_type": "ml.m5.xlarge", "model_data_url": model_data_url}


@pytest.fixture
def inventory(sm: Any, aas: Any) -> Any:
    """``inventory()``: every endpoint, config, model, scalable target and policy in the plane's account."""
    return lambda: _resources(sm, aas)


def _resources(sm: Any, aas: Any) -> dict[str, list[str]]:
    found = {
        "endpoints": sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]),
        "configs": sorted(c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]),
        "models": sorted(m["ModelName"] for m in sm.list_models()["Models"]),
    }
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    found["targets"] = sorted(t["ResourceId"] for t in targets)
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    found["policies"] = sorted(p["PolicyName"] for p in policies)
    return found


#: What ``inventory()`` returns for an account with nothing in it.
EMPTY: dict[str, list[str]] = {"endpoints": [], "configs": [], "models": [], "targets": [], "policies": []}


@pytest.fixture
def nothing() -> dict[str, list[str]]:
    return {k: list(v) for k, v in EMPTY.items()}


@pytest.fixture
def snapshot(sm: Any, aas: Any, s3: Any) -> Any:
    """``snapshot(bucket)``: the full description of every resource, with its tags, and the bucket's objects.

    Unlike ``inventory()`` it compares settings, tags, timestamps, scaling policies and object ETags, so
    an update, a re-tag or a re-upload shows up as a difference.
    """
    return lambda bucket: _snapshot(sm, aas, s3, bucket)


def _described(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "ResponseMetadata"}


def _snapshot(sm: Any, aas: Any, s3: Any, bucket: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for endpoint in sm.list_endpoints()["Endpoints"]:
        described = _described(sm.describe_endpoint(EndpointName=endpoint["EndpointName"]))
        described["Tags"] = sm.list_tags(ResourceArn=described["EndpointArn"])["Tags"]
        found[f"endpoint {endpoint['EndpointName']}"] = described
    for config in sm.list_endpoint_configs()["EndpointConfigs"]:
        described = _described(sm.describe_endpoint_config(EndpointConfigName=config["EndpointConfigName"]))
        described["Tags"] = sm.list_tags(ResourceArn=described["EndpointConfigArn"])["Tags"]
        found[f"config {config['EndpointConfigName']}"] = described
    for model in sm.list_models()["Models"]:
        described = _described(sm.describe_model(ModelName=model["ModelName"]))
        described["Tags"] = sm.list_tags(ResourceArn=described["ModelArn"])["Tags"]
        found[f"model {model['ModelName']}"] = described
    found["targets"] = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    found["policies"] = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    found["objects"] = [
        (item["Key"], item["ETag"], item["LastModified"])
        for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    ]
    return found


# -- faults injected into real clients -------------------------------------------------------------


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


class Faults:
    """Faults injected into one real boto3 client through botocore's event hooks (nothing is mocked).

    Each fault counts the HTTP attempts it sees: botocore's own retries go through ``before-send`` again,
    so ``throttle("DescribeEndpoint", times=3)`` answers three attempts with a ThrottlingException and
    lets the fourth reach moto's server. ``after`` lets that many attempts through first; ``times=None``
    never stops. ``hits[operation]`` counts the attempts a fault answered.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.service = client.meta.service_model.service_id.hyphenize()
        self.hits: dict[str, int] = {}

    def _register(self, operation: str, answer: Any, *, times: int | None, after: int) -> None:
        seen = [0]

        def handler(request: Any, **_: Any) -> Any:
            seen[0] += 1
            answered = self.hits.get(operation, 0)
            if seen[0] <= after or (times is not None and answered >= times):
                return None
            self.hits[operation] = answered + 1
            return answer(request)

        self.client.meta.events.register(f"before-send.{self.service}.{operation}", handler)

    def error(
        self,
        operation: str,
        *,
        status: int,
        code: str,
        message: str = "injected",
        times: int | None = None,
        after: int = 0,
    ) -> None:
        """Answer with an AWS error (a JSON-protocol error body), as the service would."""
        from botocore.awsrequest import AWSResponse

        body = json.dumps({"__type": code, "message": message}).encode()
        headers = {"x-amzn-RequestId": "injected", "Content-Type": "application/x-amz-json-1.1"}
        self._register(
            operation,
            lambda request: AWSResponse(request.url, status, headers, _Body(body)),
            times=times,
            after=after,
        )

    def throttle(self, operation: str, *, times: int | None = None, after: int = 0) -> None:
        self.error(
            operation,
            status=400,
            code="ThrottlingException",
            message="Rate exceeded",
            times=times,
            after=after,
        )

    def server_error(self, operation: str, *, times: int | None = None, after: int = 0) -> None:
        self.error(
            operation, status=500, code="InternalFailure", message="injected 500", times=times, after=after
        )

    def drop_connection(self, operation: str, *, times: int | None = None, after: int = 0) -> None:
        """Fail the attempt as a refused connection does (botocore's EndpointConnectionError)."""
        from botocore.exceptions import EndpointConnectionError

        def refuse(request: Any) -> Any:
            raise EndpointConnectionError(endpoint_url=request.url)

        self._register(operation, refuse, times=times, after=after)

    def lose_answer(self, operation: str) -> None:
        """Let the call through to the server, then lose its answer (ConnectionClosedError)."""
        from botocore.exceptions import ConnectionClosedError

        def lost(**_: Any) -> None:
            self.hits[operation] = self.hits.get(operation, 0) + 1
            raise ConnectionClosedError(endpoint_url="injected")

        self.client.meta.events.register(f"after-call.{self.service}.{operation}", lost)


@pytest.fixture
def faulty(session: Any) -> Any:
    """``faulty(service)``: a new real client of the plane's session, with a :class:`Faults` on it."""

    def make(service: str) -> tuple[Any, Faults]:
        client = session.client(service)
        return client, Faults(client)

    return make


@pytest.fixture
def mutations() -> Any:
    """``mutations(client)``: a list that fills with the mutating operations ``client`` calls from now on."""

    def record(client: Any) -> list[str]:
        names: list[str] = []

        def note(model: Any, **_: Any) -> None:
            if model.name.startswith(MUTATING):
                names.append(model.name)

        client.meta.events.register("before-call.*.*", note)
        return names

    return record


#: Operation-name prefixes of calls that change something.
MUTATING = ("Create", "Update", "Delete", "Put", "Register", "Deregister", "Add", "Upload", "Complete")
