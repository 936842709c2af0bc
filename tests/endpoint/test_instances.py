"""Instance types and GPU AMIs: the multi-model documentation's list, drivers, compute capability."""

from __future__ import annotations

import pytest

from mme_triton.endpoint.images import TRITON_MIN_DRIVER, TRITON_VERSIONS
from mme_triton.endpoint.instances import (
    DEFAULT_AMI_DRIVERS,
    INFERENCE_AMI_DRIVERS,
    MME_GPU_DOCS,
    MME_GPU_INSTANCE_TYPES,
    check_inference_ami_version,
    check_instance_type,
    gpu_warnings,
)


@pytest.mark.parametrize(
    ("instance_type", "is_gpu"),
    [
        pytest.param("ml.g5.xlarge", True, id="g5"),
        pytest.param("ml.g4dn.2xlarge", True, id="g4dn"),
        pytest.param("ml.p3.2xlarge", True, id="p3"),
        pytest.param("ml.c5.xlarge", False, id="c5"),
        pytest.param("ml.m7i.large", False, id="m7i"),
        pytest.param("ml.c8i.xlarge", False, id="cpu-type-newer-than-the-table"),
    ],
)
def test_check_instance_type_accepts_documented_and_cpu_types_silently(
    instance_type: str, is_gpu: bool
) -> None:
    checked = check_instance_type(instance_type)
    assert (checked.is_gpu, checked.warnings) == (is_gpu, [])


@pytest.mark.parametrize("instance_type", ["ml.g6.xlarge", "ml.g6e.2xlarge", "ml.g7e.xlarge"])
def test_check_instance_type_warns_for_gpu_types_the_documentation_does_not_list(instance_type: str) -> None:
    checked = check_instance_type(instance_type)
    assert checked.is_gpu
    [warning] = checked.warnings
    assert instance_type in warning and MME_GPU_DOCS in warning
    # the list it cites is the table's, every documented type of it (not a summary written beside it)
    for documented in MME_GPU_INSTANCE_TYPES:
        _, family, size = documented.split(".")
        assert f"ml.{family}: " in warning
        assert size in warning.split(f"ml.{family}: ")[1].split(";")[0].split(", ")


@pytest.mark.parametrize(
    ("instance_type", "message"),
    [
        pytest.param("ml.g5.xlarg", "did you mean ml.g5.xlarge", id="typo"),
        pytest.param("g5.xlarge", "ml.<family>.<size>", id="no-ml-prefix"),
        pytest.param("ml.g5.12xlarge", "single-GPU instances only", id="multi-gpu"),
        pytest.param("ml.inf2.xlarge", "no SageMaker Triton image for Inferentia2", id="inferentia"),
        pytest.param("ml.p2.xlarge", "K80", id="k80"),
    ],
)
def test_check_instance_type_refuses_what_cannot_work(instance_type: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_instance_type(instance_type)


def test_mme_gpu_list_is_single_gpu_g4dn_g5_and_p3() -> None:
    families = {t.split(".")[1] for t in MME_GPU_INSTANCE_TYPES}
    assert families == {"g4dn", "g5", "p3"}
    assert "ml.g5.12xlarge" not in MME_GPU_INSTANCE_TYPES


@pytest.mark.parametrize(
    ("instance_type", "version", "ami", "expected"),
    [
        pytest.param("ml.g5.xlarge", "24.09", None, [], id="default-image-default-ami"),
        pytest.param(
            "ml.g5.xlarge", "25.04", None, ["driver 525", "al2-ami-sagemaker-inference-gpu-2-1"], id="2504"
        ),
        pytest.param(
            "ml.g5.xlarge", "25.04", "al2-ami-sagemaker-inference-gpu-2-1", [], id="2504-with-535-ami"
        ),
        pytest.param(
            "ml.g4dn.xlarge",
            "26.05",
            "al2-ami-sagemaker-inference-gpu-3-1",
            ["driver 580", "al2023-ami-sagemaker-inference-gpu-4-1"],
            id="cuda13-on-550",
        ),
        pytest.param(
            "ml.g4dn.xlarge", "26.05", "al2023-ami-sagemaker-inference-gpu-4-1", [], id="cuda13-on-580"
        ),
        pytest.param("ml.g6.xlarge", "25.04", None, [], id="g6-default-is-535"),
        pytest.param(
            "ml.p3.2xlarge",
            "25.09",
            "al2023-ami-sagemaker-inference-gpu-4-1",
            ["compute capability 7.5"],
            id="v100-too-old-for-2509",
        ),
        pytest.param("ml.c5.xlarge", "25.09", None, [], id="cpu-needs-no-driver"),
        pytest.param(
            "ml.c5.xlarge",
            "25.09",
            "al2-ami-sagemaker-inference-gpu-2",
            ["has no NVIDIA GPU"],
            id="gpu-ami-on-cpu",
        ),
        pytest.param(
            "ml.g5.xlarge", "24.09", "al2-ami-sagemaker-inference-neuron-2", ["a Neuron AMI"], id="neuron-ami"
        ),
        pytest.param(
            "ml.g5.xlarge", "24.09", "al2-ami-sagemaker-inference-gpu-9", ["cannot be checked"], id="new"
        ),
        pytest.param("ml.g5.xlarge", None, None, [], id="custom-image"),
    ],
)
def test_gpu_warnings_say_when_the_ami_cannot_run_the_image(
    instance_type: str, version: str | None, ami: str | None, expected: list[str]
) -> None:
    warnings = gpu_warnings(instance_type, version, ami)
    assert len(warnings) == (1 if expected else 0)
    for fragment in expected:
        assert fragment in warnings[0]


def test_every_published_release_has_a_driver_requirement() -> None:
    assert set(TRITON_MIN_DRIVER) == set(TRITON_VERSIONS)


def test_ami_tables_name_known_drivers() -> None:
    assert INFERENCE_AMI_DRIVERS["al2023-ami-sagemaker-inference-gpu-4-1"] == 580
    assert DEFAULT_AMI_DRIVERS["g5"] == 470 and DEFAULT_AMI_DRIVERS["g6"] == 535


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        pytest.param(3, TypeError, "must be a str", id="not-a-string"),
        pytest.param("GPU 2", ValueError, "not an AMI version name", id="blank"),
        pytest.param("", ValueError, "not an AMI version name", id="empty"),
    ],
)
def test_check_inference_ami_version_refuses_malformed_names(
    value: object, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        check_inference_ami_version(value)  # type: ignore[arg-type]
