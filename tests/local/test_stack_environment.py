"""The model's Environment on the stack, by the container's rules: endpoints made with plain boto3 calls.

The serve script of SageMaker's Triton container ignores what it does not read and exits on what it
refuses; ``tritonserver`` refuses what it cannot parse. The stack must behave the same for endpoints any
client creates (``deploy_mme`` keeps its own, stricter checks).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import InferenceError, MMEClient, upload_models
from mme_triton.local import LocalStack

pytestmark = [pytest.mark.triton, pytest.mark.moto]

X = np.ones((1, 4), dtype=np.float32)


@pytest.fixture(scope="module")
def env_stack(repository: Path) -> Iterator[LocalStack]:
    """A stack with ``scale`` uploaded under ``env/``."""
    with LocalStack() as running:
        upload_models(
            [repository / "scale"], running.model_data_url("env/"), boto3_session=running.boto3_session()
        )
        yield running


def _container(stack: LocalStack, environment: dict[str, str]) -> dict[str, object]:
    return {
        "ModelDataUrl": f"s3://{stack.default_bucket}/env/",
        "Mode": "MultiModel",
        "Environment": environment,
    }


def test_stack_serves_an_endpoint_whose_environment_sets_what_the_container_ignores(
    endpoint_by_hand: Any, env_stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    environment = {
        "SAGEMAKER_TRITON_BATCH_SIZE": "16",
        "SAGEMAKER_TRITON_MAX_BATCH_DELAY": "1000",
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "scale",
        "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
    }
    caplog.set_level(logging.INFO, logger="mme_triton.local.serve")

    described = endpoint_by_hand(env_stack, "ignores", _container(env_stack, environment))
    out = MMEClient("ignores", boto3_session=env_stack.boto3_session()).infer("scale.tar.gz", {"INPUT0": X})

    assert described["EndpointStatus"] == "InService"
    np.testing.assert_allclose(out["OUTPUT0"], X * 2)
    ignored = [r.getMessage() for r in caplog.records if "ignoring" in r.getMessage()]
    assert any("SAGEMAKER_TRITON_MAX_BATCH_DELAY: the serve script does not read it" in m for m in ignored)
    assert any("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in m and "single-model" in m for m in ignored)


@pytest.mark.parametrize(
    ("environment", "reason"),
    [
        (
            {"SAGEMAKER_TRITON_INFERENCE_TYPE": "bogus"},
            "ERROR: Invalid SAGEMAKER_TRITON_INFERENCE_TYPE 'bogus'",
        ),
        ({"SAGEMAKER_TRITON_LOG_VERBOSE": "lots"}, 'Bad option: "--log-verbose".'),
        ({"SAGEMAKER_TRITON_THREAD_COUNT": "many"}, 'Bad option: "--sagemaker-thread-count".'),
        (
            {"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--no-such-option=1"},
            "unrecognized option '--no-such-option=1'",
        ),
    ],
    ids=["serve-script", "log-verbose", "thread-count", "additional-args"],
)
def test_stack_fails_an_endpoint_the_container_would_refuse_with_its_reason(
    endpoint_by_hand: Any,
    env_stack: LocalStack,
    environment: dict[str, str],
    reason: str,
    request: pytest.FixtureRequest,
) -> None:
    name = f"refused-{request.node.callspec.id}"

    described = endpoint_by_hand(env_stack, name, _container(env_stack, environment))

    assert described["EndpointStatus"] == "Failed"
    assert reason in described["FailureReason"]
    assert "/tmp" not in described["FailureReason"] and "Usage:" not in described["FailureReason"]
    assert env_stack.triton(name) is None


def test_stack_answers_what_the_python_backend_refuses_when_a_model_loads(
    endpoint_by_hand: Any, env_stack: LocalStack
) -> None:
    # the container starts with it; the python backend reads its sizes (std::stol) when a model loads
    described = endpoint_by_hand(
        env_stack, "unreadable-shm", _container(env_stack, {"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "lots"})
    )

    with pytest.raises(InferenceError, match="stol") as caught:
        MMEClient("unreadable-shm", boto3_session=env_stack.boto3_session()).infer(
            "scale.tar.gz", {"INPUT0": X}
        )

    assert described["EndpointStatus"] == "InService"
    assert caught.value.error_code == "ModelError"
