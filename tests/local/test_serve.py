"""serve_args / serve_environment: the serve script's tritonserver arguments, as the stack plays them."""

from __future__ import annotations

import pytest

from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.local.serve import serve_args, serve_environment

MiB = 1024 * 1024


def test_serve_args_defaults_follow_the_serve_script() -> None:
    assert serve_args({}) == [
        "--model-namespacing=true",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--log-verbose=true",
        "--backend-config=python,shm-default-byte-size=16777216",
        "--backend-config=python,shm-growth-byte-size=1048576",
    ]


def test_serve_args_from_environment() -> None:
    env = TritonEnvironment(
        shm_default_byte_size=32 * MiB,
        shm_growth_byte_size=4 * MiB,
        log_verbose=0,
        log_error=True,
        thread_count=4,
        buffer_manager_thread_count=2,
        model_load_gpu_limit=0.5,
        tensorflow_version="2",
        additional_args=["--exit-timeout-secs=5"],
    ).to_environment()
    args = serve_args(env, gpu_count=2)
    assert args == [
        "--model-namespacing=true",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--buffer-manager-thread-count=2",
        "--sagemaker-thread-count=4",
        "--log-verbose=0",
        "--log-error=true",
        "--backend-config=python,shm-default-byte-size=33554432",
        "--backend-config=python,shm-growth-byte-size=4194304",
        "--backend-config=tensorflow,version=2",
        "--model-load-gpu-limit",
        "0:0.5",
        "--model-load-gpu-limit",
        "1:0.5",
        "--exit-timeout-secs=5",
    ]


def test_serve_args_gpu_limit_needs_gpus() -> None:
    assert "--model-load-gpu-limit" not in serve_args({"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.5"})


def test_serve_args_rejects_invalid_environment() -> None:
    with pytest.raises(ValueError, match="did you mean"):
        serve_args({"SAGEMAKER_TRITON_LOG_VERBOS": "1"})


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        pytest.param(
            {}, {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TRITON_PING_MODE": "live"}, id="mme-default"
        ),
        pytest.param(
            {"SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "ready", "SAGEMAKER_TRITON_INFERENCE_TYPE": "infer"},
            {
                "SAGEMAKER_MULTI_MODEL": "true",
                "SAGEMAKER_TRITON_PING_MODE": "ready",
                "SAGEMAKER_TRITON_INFERENCE_TYPE": "infer",
            },
            id="override",
        ),
    ],
)
def test_serve_environment_for_the_triton_process(
    environment: dict[str, str], expected: dict[str, str]
) -> None:
    assert serve_environment(environment) == expected
