"""serve_plan: the container's serve script, as the stack plays it (its rules, not the library's)."""

from __future__ import annotations

import pytest

from mme_triton.endpoint.environment import TritonEnvironment
from mme_triton.local.serve import ContainerExitError, serve_args, serve_environment, serve_plan

MiB = 1024 * 1024

# The Environment of AWS's RoBERTa and ResNet multi-model samples, every variable they set.
AWS_SAMPLE_ENVIRONMENT = {
    "SAGEMAKER_TRITON_BATCH_SIZE": "16",
    "SAGEMAKER_TRITON_MAX_BATCH_DELAY": "1000",
    "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216000",
    "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "104857600",
    "SAGEMAKER_TRITON_LOG_VERBOSE": "false",
    "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "resnet",
    "SAGEMAKER_TRITON_THREAD_COUNT": "10",
    "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "5",
}


def test_serve_plan_defaults_follow_the_serve_script() -> None:
    assert serve_args({}) == [
        "--model-namespacing=true",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--log-verbose=true",
        "--backend-config=python,shm-default-byte-size=16777216",
        "--backend-config=python,shm-growth-byte-size=1048576",
    ]


def test_serve_plan_turns_the_environment_into_arguments() -> None:
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


def test_serve_plan_gpu_limit_needs_gpus() -> None:
    assert "--model-load-gpu-limit" not in serve_args({"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.5"})


def test_serve_plan_treats_an_empty_variable_as_unset() -> None:
    assert serve_args({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": ""}) == serve_args({})


def test_serve_plan_ignores_what_the_script_does_not_read_in_multi_model_mode() -> None:
    plan = serve_plan(AWS_SAMPLE_ENVIRONMENT)

    assert sorted(line.split(":")[0] for line in plan.ignored) == [
        "SAGEMAKER_TRITON_BATCH_SIZE",
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME",
        "SAGEMAKER_TRITON_MAX_BATCH_DELAY",
    ]
    assert "single-model mode only" in next(line for line in plan.ignored if "DEFAULT_MODEL_NAME" in line)
    assert not any("--load-model" in arg or "BATCH" in arg for arg in plan.args)
    assert "--log-verbose=false" in plan.args
    assert "--backend-config=python,shm-default-byte-size=16777216000" in plan.args  # bounded later


def test_serve_plan_passes_values_on_for_tritonserver_to_judge() -> None:
    # the script does not check these: tritonserver refuses them when it starts
    plan = serve_plan({"SAGEMAKER_TRITON_LOG_VERBOSE": "lots", "SAGEMAKER_TRITON_THREAD_COUNT": "x"})

    assert "--log-verbose=lots" in plan.args and "--sagemaker-thread-count=x" in plan.args


@pytest.mark.parametrize("value", ["bogus", "INFER", " infer"], ids=["unknown", "upper-case", "blank"])
def test_serve_plan_refuses_an_inference_type_as_the_script_does(value: str) -> None:
    with pytest.raises(ContainerExitError, match=r"Invalid SAGEMAKER_TRITON_INFERENCE_TYPE") as caught:
        serve_plan({"SAGEMAKER_TRITON_INFERENCE_TYPE": value})

    assert "Must be one of: infer, generate, generate_stream" in str(caught.value)


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
                "SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "ready",
                "SAGEMAKER_TRITON_INFERENCE_TYPE": "infer",
            },
            id="override",
        ),
        pytest.param(
            {"OMP_NUM_THREADS": "1", "SAGEMAKER_BIND_TO_PORT": "8080", "PATH": "/nowhere"},
            {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TRITON_PING_MODE": "live", "OMP_NUM_THREADS": "1"},
            id="container-environment",
        ),
    ],
)
def test_serve_environment_is_the_containers_process_environment(
    environment: dict[str, str], expected: dict[str, str]
) -> None:
    assert serve_environment(environment) == expected


def test_serve_plan_says_why_it_ignores_what_the_stack_sets() -> None:
    plan = serve_plan({"SAGEMAKER_BIND_TO_PORT": "8080", "LD_LIBRARY_PATH": "/opt/lib"})

    assert plan.ignored == [
        "SAGEMAKER_BIND_TO_PORT: the stack picks the port",
        "LD_LIBRARY_PATH: the stack sets it for Triton's python stubs",
    ]
