"""TritonEnvironment / validate_environment: CreateModel's limits and the container's variables."""

from __future__ import annotations

from typing import Any

import pytest

from mme_triton.endpoint._inputs import environment_dict, environment_warnings
from mme_triton.endpoint.environment import DEFAULT_ENVIRONMENT, TritonEnvironment, validate_environment

MiB = 1024 * 1024


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({}, {}, id="nothing-set"),
        pytest.param(
            {"shm_default_byte_size": 64 * MiB, "shm_growth_byte_size": 2 * MiB},
            {
                "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "67108864",
                "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "2097152",
            },
            id="shm",
        ),
        pytest.param(
            {"log_verbose": 0, "log_info": True, "log_warning": False, "log_error": True},
            {
                "SAGEMAKER_TRITON_LOG_VERBOSE": "0",
                "SAGEMAKER_TRITON_LOG_INFO": "true",
                "SAGEMAKER_TRITON_LOG_WARNING": "false",
                "SAGEMAKER_TRITON_LOG_ERROR": "true",
            },
            id="logging",
        ),
        pytest.param(
            {"thread_count": 8, "buffer_manager_thread_count": 2},
            {"SAGEMAKER_TRITON_THREAD_COUNT": "8", "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "2"},
            id="threads",
        ),
        pytest.param(
            {"ping_mode": "ready"}, {"SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "ready"}, id="ping-mode"
        ),
        pytest.param(
            {"additional_args": ["--exit-timeout-secs=10", "--strict-readiness=false"]},
            {"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--exit-timeout-secs=10 --strict-readiness=false"},
            id="additional-args",
        ),
        pytest.param(
            {"model_namespacing": False},
            {"SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING": "false"},
            id="namespacing-off",
        ),
        pytest.param(
            {"model_load_gpu_limit": 0.8, "tensorflow_version": "2"},
            {"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.8", "SAGEMAKER_TRITON_TENSORFLOW_VERSION": "2"},
            id="gpu-limit-and-tf",
        ),
        pytest.param(
            {"inference_type": "generate", "extra": {"MY_SETTING": "x"}},
            {"SAGEMAKER_TRITON_INFERENCE_TYPE": "generate", "MY_SETTING": "x"},
            id="extra",
        ),
    ],
)
def test_triton_environment_to_environment_maps_fields(
    options: dict[str, Any], expected: dict[str, str]
) -> None:
    assert TritonEnvironment(**options).to_environment() == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"shm_default_byte_size": MiB - 1}, r"SHM_DEFAULT_BYTE_SIZE must be >= 1048576", id="shm-small"
        ),
        pytest.param({"shm_growth_byte_size": 0}, r"SHM_GROWTH_BYTE_SIZE must be >= 1", id="growth-zero"),
        pytest.param({"thread_count": 0}, r"THREAD_COUNT must be >= 1", id="no-threads"),
        pytest.param({"model_load_gpu_limit": 1.5}, r"fraction in \(0, 1\]", id="gpu-limit"),
        pytest.param({"additional_args": ["--a b"]}, "whitespace", id="arg-with-space"),
        pytest.param(
            {"extra": {"SAGEMAKER_TRITON_SHM_DEFAUL_BYTE_SIZE": "4194304"}},
            "did you mean SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE",
            id="typo-suggested",
        ),
        pytest.param(
            {"extra": {"SAGEMAKER_TRITON_WHATEVER": "1"}}, "unknown Triton container variable", id="unknown"
        ),
        pytest.param(
            {"extra": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "resnet"}},
            "single-model endpoints only",
            id="default-model",
        ),
        pytest.param(
            {"extra": {"SAGEMAKER_BIND_TO_PORT": "8080"}}, "set by SageMaker", id="platform-variable"
        ),
        pytest.param(
            {"extra": {"SAGEMAKER_TRITON_LOG_VERBOSE": "1"}},
            "TritonEnvironment.log_verbose",
            id="field-in-extra",
        ),
        pytest.param({"extra": {"1BAD": "x"}}, r"must match \[a-zA-Z_\]", id="bad-key"),
        pytest.param({"extra": {"PING": "x" * 1025}}, "1025 bytes", id="value-over-1024-bytes"),
        pytest.param({"extra": {"PING": "é" * 513}}, "1026 bytes", id="value-counted-in-utf8-bytes"),
        pytest.param({"extra": {"K" + "x" * 1024: "v"}}, "1025 bytes", id="key-over-1024-bytes"),
    ],
)
def test_triton_environment_rejects_invalid_settings(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TritonEnvironment(**options).to_environment()


def test_validate_environment_total_limit_is_32_kib_of_keys_and_values() -> None:
    # 32 entries of a 4-byte key and a 1020-byte value: exactly 32 * 1024 bytes.
    at_limit = {f"K{i:03d}": "v" * 1020 for i in range(32)}
    assert validate_environment(at_limit) == at_limit
    over = dict(at_limit, Z="")
    with pytest.raises(ValueError, match="32769 bytes"):
        validate_environment(over)


def test_validate_environment_at_most_100_variables() -> None:
    assert len(validate_environment({f"V{i}": "1" for i in range(100)})) == 100
    with pytest.raises(ValueError, match="101 variables"):
        validate_environment({f"V{i}": "1" for i in range(101)})


def test_validate_environment_rejects_non_string_values() -> None:
    with pytest.raises(TypeError, match="must be str"):
        validate_environment({"A": 1})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        pytest.param(None, DEFAULT_ENVIRONMENT, id="none-gives-defaults"),
        pytest.param({}, DEFAULT_ENVIRONMENT, id="empty-gives-defaults"),
        pytest.param(
            {"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "67108864"},
            {**DEFAULT_ENVIRONMENT, "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "67108864"},
            id="override-one",
        ),
        pytest.param(
            {"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": None},
            {"SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "1048576"},
            id="remove-one",
        ),
        pytest.param(
            {"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": None, "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": None},
            {},
            id="remove-both",
        ),
        pytest.param(
            TritonEnvironment(log_verbose=0),
            {**DEFAULT_ENVIRONMENT, "SAGEMAKER_TRITON_LOG_VERBOSE": "0"},
            id="typed-keeps-defaults",
        ),
        pytest.param(
            TritonEnvironment(shm_growth_byte_size=2 * MiB),
            {**DEFAULT_ENVIRONMENT, "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "2097152"},
            id="typed-override",
        ),
    ],
)
def test_environment_dict_adds_the_shared_memory_defaults(environment: Any, expected: dict[str, str]) -> None:
    assert environment_dict(environment) == expected


def test_default_environment_is_what_the_serve_script_sets_for_current_images() -> None:
    # docker/sagemaker/serve (23.01 and later): 16 MiB default, 1 MiB growth.
    assert DEFAULT_ENVIRONMENT == {
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216",
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "1048576",
    }
    assert validate_environment(DEFAULT_ENVIRONMENT) == DEFAULT_ENVIRONMENT


def test_environment_warnings_flag_the_inference_type_on_a_multi_model_endpoint() -> None:
    [warning] = environment_warnings({"SAGEMAKER_TRITON_INFERENCE_TYPE": "generate"})
    assert "single-model endpoint's /invocations route" in warning
    assert environment_warnings(DEFAULT_ENVIRONMENT) == []
