"""Inference components on the embedded stack, with real copies: each copy a Triton in single-model mode.

One stack for the module (``metrics_period=1``, so that a request's metrics reach CloudWatch within a
second); each test has its own endpoint. AWS's sample call sequence runs in plain boto3 and every answer
is checked against botocore's shapes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from api_shapes import ResponseRecorder
from components_helpers import (
    component_endpoint,
    create_component,
    error_of,
    set_copies,
    settled,
    upload_model,
    wait_for,
    write_sleep,
)

from mme_triton import decode_response, encode_request
from mme_triton.local.aws._components import NO_ROOM

pytestmark = [pytest.mark.triton, pytest.mark.moto]


@pytest.fixture(scope="module")
def ic_stack(tmp_path_factory: pytest.TempPathFactory, model_writers: dict[str, Any]) -> Iterator[Any]:
    """One stack for the module with ``metrics_period=1`` (the shared ``stack`` fixture publishes every
    minute), and the models ``scale``, ``linear`` and ``sleep`` as single-model SageMaker models; the answers
    of its clients (``stack.client``) are recorded."""
    from mme_triton.local import LocalStack

    repository = tmp_path_factory.mktemp("ic_models")
    out = tmp_path_factory.mktemp("ic_artifacts")
    model_writers["scale"](repository)
    model_writers["linear"](repository)
    write_sleep(repository)
    with LocalStack(metrics_period=1) as running:
        session = running.boto3_session()
        running.answers = ResponseRecorder(session)  # type: ignore[attr-defined]
        running.client = session.client  # type: ignore[method-assign]  # every client's answers recorded
        for name in ("scale", "linear", "sleep"):
            upload_model(running, repository / name, out, f"ic/{name}.tar.gz")
        yield running


def invoke(
    stack: Any, endpoint: str, component: str | None, inputs: dict[str, Any], *, url: str | None = None
) -> Any:
    client: Any = (
        stack.boto3_session().client("sagemaker-runtime", endpoint_url=url)
        if url
        else stack.client("sagemaker-runtime")
    )
    body, content_type = encode_request(inputs)
    extra = {"InferenceComponentName": component} if component else {}
    answer = client.invoke_endpoint(
        EndpointName=endpoint, Body=bytes(body), ContentType=content_type, **extra
    )
    return decode_response(answer["Body"].read(), answer["ContentType"])


def test_stack_components_aws_sample_sequence_in_plain_boto3(ic_stack: Any, expected_linear: Any) -> None:
    """The calls of AWS's inference-component samples: two models, a config without ModelName, the endpoint,
    two components, invocations by component name on both InvokeEndpoint routes, a copy count change, and
    the deletes; every answer in botocore's shapes."""
    sm = ic_stack.client("sagemaker")
    endpoint = component_endpoint(
        ic_stack, "sample-ep", managed={"MinInstanceCount": 0, "MaxInstanceCount": 2}
    )
    scale = create_component(ic_stack, "scale-ic", endpoint, "scale-model")
    linear = create_component(ic_stack, "linear-ic", endpoint, "linear-model")
    assert (scale["InferenceComponentStatus"], linear["InferenceComponentStatus"]) == (
        "InService",
        "InService",
    )
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for url in (None, ic_stack.endpoint_url):  # the stack's own route, and the one in front of moto
        assert np.array_equal(
            invoke(ic_stack, endpoint, "scale-ic", {"INPUT0": x}, url=url)["OUTPUT0"], 2 * x
        )
        out = invoke(ic_stack, endpoint, "linear-ic", {"INPUT0": x}, url=url)
        assert np.allclose(out["OUTPUT0"], expected_linear(x))
    scaled = set_copies(ic_stack, "scale-ic", 2)
    assert scaled["RuntimeConfig"]["CurrentCopyCount"] == 2
    copies = ic_stack.hosting(endpoint).component("scale-ic").copies
    assert len(copies) == 2 and len({c.triton.pid for c in copies}) == 2
    for name in ("scale-ic", "linear-ic"):
        sm.delete_inference_component(InferenceComponentName=name)
    wait_for(lambda: not sm.list_inference_components(EndpointNameEquals=endpoint)["InferenceComponents"])
    assert all(c.triton.pid is None for c in copies)
    sm.delete_endpoint(EndpointName=endpoint)
    sm.delete_endpoint_config(EndpointConfigName=endpoint)
    assert [problem for answer in ic_stack.answers.answers for problem in answer.problems()] == []
    operations = {answer.operation for answer in ic_stack.answers.answers}
    assert {
        "CreateInferenceComponent",
        "DescribeInferenceComponent",
        "UpdateInferenceComponentRuntimeConfig",
        "DeleteInferenceComponent",
        "ListInferenceComponents",
    } <= operations


def test_stack_components_refusals_of_invoke_endpoint(ic_stack: Any, endpoint_by_hand: Any) -> None:
    endpoint = component_endpoint(ic_stack, "refuse-ep")
    create_component(ic_stack, "refuse-ic", endpoint, "scale-model")
    x = {"INPUT0": np.ones((1, 4), np.float32)}
    code, message, status = error_of(lambda: invoke(ic_stack, endpoint, None, x))
    assert (code, status) == ("ValidationError", 400)
    assert message.startswith("Inference Component Name header is required for endpoints to which you plan")
    code, message, status = error_of(lambda: invoke(ic_stack, endpoint, "nope", x))
    assert (code, message, status) == (
        "ValidationError",
        f"Inference Component nope of account {ic_stack.account_id} not found.",
        400,
    )
    code, message, _ = error_of(lambda: invoke(ic_stack, endpoint, "refuse-ic", {"BAD": x["INPUT0"]}))
    assert code == "ModelError"
    assert message.startswith('Received client error (400) from model with message "')
    assert "/aws/sagemaker/InferenceComponents/refuse-ic" in message
    endpoint_by_hand(
        ic_stack, "mme-ep", {"ModelDataUrl": f"s3://{ic_stack.default_bucket}/ic/", "Mode": "MultiModel"}
    )
    code, message, _ = error_of(lambda: invoke(ic_stack, "mme-ep", "refuse-ic", x))
    assert message.startswith(
        "Inference Component Name header is not allowed for endpoints to which you dont"
    )
    ic_stack.client("sagemaker").delete_endpoint(EndpointName="mme-ep")


def test_stack_components_zero_copies_answer_no_capacity_and_count_it(ic_stack: Any) -> None:
    endpoint = component_endpoint(ic_stack, "zero-ep")
    create_component(ic_stack, "zero-ic", endpoint, "scale-model")
    set_copies(ic_stack, "zero-ic", 0)
    x = {"INPUT0": np.ones((1, 4), np.float32)}
    for _ in range(3):
        code, message, status = error_of(lambda: invoke(ic_stack, endpoint, "zero-ic", x))
        assert (code, status) == ("ValidationError", 400)
        assert message.startswith("Inference Component has no capacity to process this request.")
    cloudwatch = ic_stack.client("cloudwatch")

    def failures() -> float:
        end = time.time() + 60
        answer = cloudwatch.get_metric_statistics(
            Namespace="AWS/SageMaker",
            MetricName="NoCapacityInvocationFailures",
            Dimensions=[{"Name": "InferenceComponentName", "Value": "zero-ic"}],
            StartTime=end - 600,
            EndTime=end,
            Period=60,
            Statistics=["Sum"],
        )
        return sum(point["Sum"] for point in answer["Datapoints"])

    assert wait_for(lambda: failures() == 3, timeout=30)
    assert set_copies(ic_stack, "zero-ic", 1)["RuntimeConfig"]["CurrentCopyCount"] == 1
    assert np.array_equal(invoke(ic_stack, endpoint, "zero-ic", x)["OUTPUT0"], 2 * x["INPUT0"])


def test_stack_components_copy_count_changes_under_traffic_fail_no_call(ic_stack: Any) -> None:
    """Copies added join the routing once they answer; copies removed leave it at once and stop once their
    requests finished: a client calling all along sees no error."""
    endpoint = component_endpoint(ic_stack, "traffic-ep")
    create_component(ic_stack, "traffic-ic", endpoint, "scale-model")
    x = {"INPUT0": np.ones((1, 4), np.float32)}
    errors: list[BaseException] = []
    calls = [0]
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                out = invoke(ic_stack, endpoint, "traffic-ic", x)
                assert np.array_equal(out["OUTPUT0"], 2 * x["INPUT0"])
                calls[0] += 1
            except BaseException as exc:  # reported below
                errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for copies in (2, 1, 3, 1):
            assert set_copies(ic_stack, "traffic-ic", copies)["RuntimeConfig"]["CurrentCopyCount"] == copies
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert calls[0] > 10
    served = ic_stack.hosting(endpoint).component("traffic-ic").copies
    assert len(served) == 1


def test_stack_components_least_outstanding_requests_avoid_the_busy_copy(ic_stack: Any) -> None:
    """With one copy busy on a long request, LEAST_OUTSTANDING_REQUESTS sends every other request to the
    idle copy (RANDOM would send about half to the busy one: the pure tests in test_component_routing.py)."""
    endpoint = component_endpoint(ic_stack, "lor-ep", routing="LEAST_OUTSTANDING_REQUESTS")
    create_component(ic_stack, "lor-ic", endpoint, "sleep-model", copies=2)
    runtime = ic_stack.hosting(endpoint).component("lor-ic")
    slow = threading.Thread(
        target=invoke, args=(ic_stack, endpoint, "lor-ic", {"INPUT0": np.array([3.0], np.float32)})
    )
    slow.start()
    busy = wait_for(lambda: next((c for c in runtime.copies if c.in_flight), None), timeout=10, interval=0.01)
    before = busy.served
    for _ in range(8):
        invoke(ic_stack, endpoint, "lor-ic", {"INPUT0": np.array([0.0], np.float32)})
    idle = next(c for c in runtime.copies if c is not busy)
    assert busy.served == before and idle.served >= 8
    slow.join()


def test_stack_components_a_component_that_fits_no_instance_fails_the_others_serve(ic_stack: Any) -> None:
    endpoint = component_endpoint(ic_stack, "room-ep")  # ml.m5.xlarge, one instance
    create_component(ic_stack, "room-ic", endpoint, "scale-model")
    big = create_component(
        ic_stack, "room-big", endpoint, "linear-model", requirements={"MinMemoryRequiredInMb": 64 * 1024}
    )
    assert (big["InferenceComponentStatus"], big["FailureReason"]) == ("Failed", NO_ROOM)
    runtime = ic_stack.hosting(endpoint).component("room-big")
    assert runtime is None or runtime.copies == []
    x = {"INPUT0": np.ones((1, 4), np.float32)}
    assert np.array_equal(invoke(ic_stack, endpoint, "room-ic", x)["OUTPUT0"], 2 * x["INPUT0"])


def test_stack_components_a_copy_that_does_not_start_fails_its_component(
    ic_stack: Any, tmp_path: Path
) -> None:
    """The serve script exits when SAGEMAKER_TRITON_DEFAULT_MODEL_NAME names no directory of the archive:
    the component fails with its words; an archive missing from S3 fails with SageMaker's."""
    sm = ic_stack.client("sagemaker")
    bucket = ic_stack.default_bucket
    sm.create_model(
        ModelName="misnamed-model",
        ExecutionRoleArn=ic_stack.role_arn,
        PrimaryContainer={
            "Image": "img",
            "ModelDataUrl": f"s3://{bucket}/ic/scale.tar.gz",
            "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "nope"},
        },
    )
    sm.create_model(
        ModelName="missing-model",
        ExecutionRoleArn=ic_stack.role_arn,
        PrimaryContainer={"Image": "img", "ModelDataUrl": f"s3://{bucket}/ic/missing.tar.gz"},
    )
    endpoint = component_endpoint(ic_stack, "broken-ep")
    running = ic_stack.runtime.copy_budget.running
    misnamed = create_component(ic_stack, "misnamed-ic", endpoint, "misnamed-model")
    assert misnamed["InferenceComponentStatus"] == "Failed"
    assert misnamed["FailureReason"] == (
        "The container for inference component misnamed-ic exited: ERROR: Directory with provided "
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME nope does not exist"
    )
    missing = create_component(ic_stack, "missing-ic", endpoint, "missing-model")
    assert missing["FailureReason"].startswith(
        f"Failed to download model data(bucket: {bucket}, key: ic/missing.tar.gz). Please ensure"
    )
    assert ic_stack.runtime.copy_budget.running == running  # nothing left running, nothing counted


def test_stack_components_publish_their_invocation_metrics(ic_stack: Any) -> None:
    endpoint = component_endpoint(ic_stack, "metrics-ep")
    create_component(ic_stack, "metrics-ic", endpoint, "scale-model", copies=2)
    for _ in range(4):
        invoke(ic_stack, endpoint, "metrics-ic", {"INPUT0": np.ones((1, 4), np.float32)})
    cloudwatch = ic_stack.client("cloudwatch")

    def statistic(metric: str, dimensions: list[dict[str, str]], stat: str) -> float:
        end = time.time() + 60
        answer = cloudwatch.get_metric_statistics(
            Namespace="AWS/SageMaker",
            MetricName=metric,
            Dimensions=dimensions,
            StartTime=end - 600,
            EndTime=end,
            Period=600,
            Statistics=[stat],
        )
        return sum(point[stat] for point in answer["Datapoints"])

    own = [{"Name": "InferenceComponentName", "Value": "metrics-ic"}]
    variant = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]
    assert wait_for(lambda: statistic("Invocations", own, "Sum") == 4, timeout=30)
    assert statistic("InvocationsPerCopy", own, "Sum") == pytest.approx(2.0)  # 4 requests over 2 copies
    assert statistic("Invocations", variant, "Sum") == 4
    assert statistic("ModelLatency", own, "SampleCount") == 4
    assert statistic("Invocation4XXErrors", own, "Sum") == 0


def test_stack_components_update_to_a_new_model_replaces_the_copies(
    ic_stack: Any, expected_linear: Any
) -> None:
    """UpdateInferenceComponent with another model: new copies serve it once they answer, the old ones stop
    (``Updating`` until then); a specification whose copy cannot start leaves the old copies serving."""
    sm = ic_stack.client("sagemaker")
    endpoint = component_endpoint(ic_stack, "update-ep")
    create_component(ic_stack, "update-ic", endpoint, "scale-model")
    old = ic_stack.hosting(endpoint).component("update-ic").copies
    x = np.ones((1, 4), np.float32)
    sm.update_inference_component(
        InferenceComponentName="update-ic", Specification={"ModelName": "linear-model"}
    )
    updated = settled(ic_stack, "update-ic")
    assert (updated["InferenceComponentStatus"], updated["Specification"]["ModelName"]) == (
        "InService",
        "linear-model",
    )
    assert np.allclose(invoke(ic_stack, endpoint, "update-ic", {"INPUT0": x})["OUTPUT0"], expected_linear(x))
    assert wait_for(lambda: all(copy.triton.pid is None for copy in old), timeout=30)
    sm.create_model(
        ModelName="broken-model",
        ExecutionRoleArn=ic_stack.role_arn,
        PrimaryContainer={"Image": "img", "ModelDataUrl": f"s3://{ic_stack.default_bucket}/ic/none.tar.gz"},
    )
    sm.update_inference_component(
        InferenceComponentName="update-ic", Specification={"ModelName": "broken-model"}
    )
    undone = settled(ic_stack, "update-ic")
    assert undone["Specification"]["ModelName"] == "linear-model"
    assert undone["FailureReason"].startswith("Failed to download model data(")
    assert np.allclose(invoke(ic_stack, endpoint, "update-ic", {"INPUT0": x})["OUTPUT0"], expected_linear(x))


def test_stack_components_a_copy_whose_triton_dies_is_replaced(ic_stack: Any, is_alive: Any) -> None:
    """A request that finds its copy's Triton gone is answered ``ServiceUnavailable`` (boto3 retries it, and
    another copy answers); the copy leaves the routing and a new Triton takes its place, as SageMaker
    replaces an unhealthy container."""
    import os
    import signal

    endpoint = component_endpoint(ic_stack, "crash-ep")
    create_component(ic_stack, "crash-ic", endpoint, "scale-model", copies=2)
    runtime = ic_stack.hosting(endpoint).component("crash-ic")
    victim = runtime.copies[0]
    pid = victim.triton.pid
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not is_alive(pid), timeout=10)
    x = {"INPUT0": np.ones((1, 4), np.float32)}
    for _ in range(6):
        assert np.array_equal(invoke(ic_stack, endpoint, "crash-ic", x)["OUTPUT0"], 2 * x["INPUT0"])
    replaced = wait_for(
        lambda: next(
            (c for c in runtime.copies if c.copy_id == victim.copy_id and c is not victim and c.triton.pid),
            None,
        ),
        timeout=60,
    )
    assert replaced.triton.pid != pid and len(runtime.copies) == 2
    assert np.array_equal(invoke(ic_stack, endpoint, "crash-ic", x)["OUTPUT0"], 2 * x["INPUT0"])


def test_stack_status_shows_each_components_copies_in_python_json_and_the_cli(
    ic_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from mme_triton.local.cli import add_local_commands
    from mme_triton.local.route.status import status_from_json

    endpoint = component_endpoint(ic_stack, "status-ep")
    create_component(ic_stack, "status-scale", endpoint, "scale-model")
    create_component(ic_stack, "status-linear", endpoint, "linear-model")
    x = {"INPUT0": np.ones((1, 4), np.float32)}
    for _ in range(3):
        invoke(ic_stack, endpoint, "status-scale", x)
    invoke(ic_stack, endpoint, "status-linear", x)
    set_copies(ic_stack, "status-scale", 2)

    statuses = ic_stack.status()
    status = {s.endpoint_name: s for s in statuses}[endpoint]
    components = {c.component_name: c for c in status.components}
    assert sorted(components) == ["status-linear", "status-scale"]
    assert (status.variant_name, status.instance_type, status.loaded) == ("AllTraffic", "ml.m5.xlarge", [])
    scale, linear = components["status-scale"], components["status-linear"]
    assert (scale.copy_count, len(scale.copies), linear.copy_count, len(linear.copies)) == (2, 2, 1, 1)
    assert sorted(c.served for c in scale.copies) == [0, 3]  # the new copy has served nothing yet
    assert [(c.served, c.in_flight) for c in linear.copies] == [(1, 0)]
    assert len({c.copy_id for c in scale.copies}) == 2 and all(c.instance_id for c in scale.copies)
    assert status_from_json({"endpoints": [s.to_dict() for s in statuses]}) == statuses

    parser = argparse.ArgumentParser(prog="mme-triton")
    add_local_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["local", "status", "--url", ic_stack.runtime_url])
    assert args.handler(args) == 0
    blocks = ["endpoint " + block for block in capsys.readouterr().out.split("endpoint ")[1:]]
    printed = next(block for block in blocks if block.startswith(f"endpoint {endpoint} "))
    assert printed.startswith(f"endpoint {endpoint} (AllTraffic, ml.m5.xlarge): 2 inference components\n")
    assert "component status-scale: 2 copies in the routing (copy count 2)" in printed
    assert "component status-linear: 1 copy in the routing (copy count 1)" in printed
    assert printed.count(" served, 0 in flight") == 3
    assert ": 1 served, 0 in flight" in printed and ": 3 served, 0 in flight" in printed

    sm = ic_stack.client("sagemaker")  # its three copies stop: the module's other tests share the machine
    for name in ("status-scale", "status-linear"):
        sm.delete_inference_component(InferenceComponentName=name)
    wait_for(lambda: not sm.list_inference_components(EndpointNameEquals=endpoint)["InferenceComponents"])
    sm.delete_endpoint(EndpointName=endpoint)
