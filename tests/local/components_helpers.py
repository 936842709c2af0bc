"""What the embedded-stack tests of inference components share: the calls of AWS's inference-component
samples in plain boto3 (a single-model Triton model per component, an endpoint config without ModelName,
components with reserved memory and cores), and polls instead of sleeps."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

IMAGE = "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
REQUIREMENTS = {"MinMemoryRequiredInMb": 256, "NumberOfCpuCoresRequired": 0.5}

SLEEP_MODEL_PY = """\
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            time.sleep(float(data.flat[0]))
            out = pb_utils.Tensor("OUTPUT0", data.astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def write_sleep(repository: Path, name: str = "sleep") -> Path:
    """A python model that sleeps ``INPUT0[0]`` seconds and echoes ``INPUT0``."""
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    (directory / "1" / "model.py").write_text(SLEEP_MODEL_PY)
    (directory / "config.pbtxt").write_text(
        textwrap.dedent(
            f"""\
            name: "{name}"
            backend: "python"
            max_batch_size: 0
            input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
            output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] }} ]
            """
        )
    )
    return directory


def wait_for(check: Callable[[], Any], timeout: float = 90.0, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something true (returned) or ``timeout`` seconds pass (an error)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(interval)


def error_of(call: Callable[[], Any]) -> tuple[str, str, int]:
    """The ``Error.Code``, ``Error.Message`` and HTTP status of the ClientError ``call`` raises."""
    import pytest
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as raised:
        call()
    error = raised.value.response
    return error["Error"]["Code"], error["Error"]["Message"], error["ResponseMetadata"]["HTTPStatusCode"]


def upload_model(
    stack: Any, model_dir: Path, out: Path, key: str, *, default_model: str | None = None
) -> str:
    """Package ``model_dir``, put it at ``s3://<bucket>/<key>`` and create a SageMaker model of it (a
    single-model Triton container); returns the model's name (the key's stem)."""
    from mme_triton import package_model

    artifact = package_model(model_dir, out)
    bucket = stack.create_bucket()
    stack.client("s3").upload_file(str(artifact.path), bucket, key)
    name = key.rsplit("/", 1)[-1].removesuffix(".tar.gz") + "-model"
    stack.client("sagemaker").create_model(
        ModelName=name,
        ExecutionRoleArn=stack.role_arn,
        PrimaryContainer={
            "Image": IMAGE,
            "ModelDataUrl": f"s3://{bucket}/{key}",
            "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": default_model or model_dir.name},
        },
    )
    return name


def component_endpoint(
    stack: Any,
    name: str,
    *,
    routing: str = "LEAST_OUTSTANDING_REQUESTS",
    managed: dict[str, int] | None = None,
) -> str:
    """An in-service endpoint that hosts components: its config names no model."""
    sm = stack.client("sagemaker")
    variant: dict[str, Any] = {
        "VariantName": "AllTraffic",
        "InstanceType": "ml.m5.xlarge",
        "InitialInstanceCount": 1,
        "RoutingConfig": {"RoutingStrategy": routing},
    }
    if managed is not None:
        variant["ManagedInstanceScaling"] = {"Status": "ENABLED", **managed}
    sm.create_endpoint_config(
        EndpointConfigName=name, ExecutionRoleArn=stack.role_arn, ProductionVariants=[variant]
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    sm.get_waiter("endpoint_in_service").wait(
        EndpointName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300}
    )
    return name


def create_component(
    stack: Any,
    name: str,
    endpoint: str,
    model: str,
    *,
    copies: int = 1,
    requirements: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """CreateInferenceComponent, then its description once it left Creating."""
    sm = stack.client("sagemaker")
    sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification={"ModelName": model, "ComputeResourceRequirements": requirements or REQUIREMENTS},
        RuntimeConfig={"CopyCount": copies},
    )
    return settled(stack, name)


def settled(stack: Any, name: str) -> dict[str, Any]:
    """The component's description once no transition runs (InService or Failed)."""
    sm = stack.client("sagemaker")

    def done() -> dict[str, Any] | None:
        found = sm.describe_inference_component(InferenceComponentName=name)
        return found if found["InferenceComponentStatus"] in ("InService", "Failed") else None

    return dict(wait_for(done))


def set_copies(stack: Any, name: str, copies: int) -> dict[str, Any]:
    stack.client("sagemaker").update_inference_component_runtime_config(
        InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": copies}
    )
    return settled(stack, name)
