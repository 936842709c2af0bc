"""Triton image URIs: the published accounts, -cpu images, China partitions, clear errors."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from mme_triton.endpoint.images import TRITON_VERSIONS, triton_image_uri, triton_version_of

# Expected URIs as SageMaker publishes them (SDK image URI config / DLC available-images list).
KNOWN = [
    pytest.param(
        "us-east-1",
        "24.09",
        None,
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3",
        id="dlc-us-east-1",
    ),
    pytest.param(
        "af-south-1",
        "23.12",
        None,
        "626614931356.dkr.ecr.af-south-1.amazonaws.com/sagemaker-tritonserver:23.12-py3",
        id="dlc-opt-in-region",
    ),
    pytest.param(
        "us-east-1",
        "22.12",
        None,
        "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:22.12-py3",
        id="legacy-us-east-1",
    ),
    pytest.param(
        "us-west-2",
        "23.02",
        "ml.c5.xlarge",
        "301217895009.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tritonserver:23.02-py3-cpu",
        id="legacy-cpu",
    ),
    pytest.param(
        "eu-west-1",
        "24.05",
        "ml.m5.large",
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tritonserver:24.05-py3-cpu",
        id="dlc-cpu",
    ),
    pytest.param(
        "eu-west-1",
        "24.05",
        "ml.g5.xlarge",
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tritonserver:24.05-py3",
        id="gpu-instance",
    ),
    pytest.param(
        "cn-north-1",
        "24.09",
        None,
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-tritonserver:24.09-py3",
        id="china-dlc",
    ),
    pytest.param(
        "cn-northwest-1",
        "22.07",
        None,
        "474822919863.dkr.ecr.cn-northwest-1.amazonaws.com.cn/sagemaker-tritonserver:22.07-py3",
        id="china-legacy",
    ),
    pytest.param(
        "ap-south-1",
        "22.07",
        None,
        "763008648453.dkr.ecr.ap-south-1.amazonaws.com/sagemaker-tritonserver:22.07-py3",
        id="legacy-ap-south-1",
    ),
    pytest.param(
        "me-south-1",
        "23.05",
        "ml.c5.xlarge",
        "836785723513.dkr.ecr.me-south-1.amazonaws.com/sagemaker-tritonserver:23.05-py3-cpu",
        id="legacy-me-south-1-cpu",
    ),
    pytest.param(
        "il-central-1",
        "24.09",
        None,
        "780543022126.dkr.ecr.il-central-1.amazonaws.com/sagemaker-tritonserver:24.09-py3",
        id="dlc-il-central-1",
    ),
    pytest.param(
        "ca-west-1",
        "24.01",
        None,
        "204538143572.dkr.ecr.ca-west-1.amazonaws.com/sagemaker-tritonserver:24.01-py3",
        id="dlc-ca-west-1",
    ),
    pytest.param(
        "ap-southeast-6",
        "25.09",
        None,
        "633930458069.dkr.ecr.ap-southeast-6.amazonaws.com/sagemaker-tritonserver:25.09-py3",
        id="newest-region",
    ),
    pytest.param(
        "us-west-2",
        "26.04",
        "ml.g5.xlarge",
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/sagemaker-tritonserver:26.04-py3",
        id="2604",
    ),
    pytest.param(
        "eu-south-2",
        "26.03",
        None,
        "503227376785.dkr.ecr.eu-south-2.amazonaws.com/sagemaker-tritonserver:26.03-py3",
        id="2603-opt-in-region",
    ),
]


@pytest.mark.parametrize(("region", "version", "instance_type", "expected"), KNOWN)
def test_triton_image_uri_matches_published_uri(
    region: str, version: str, instance_type: str | None, expected: str
) -> None:
    assert triton_image_uri(region, version=version, instance_type=instance_type) == expected


def test_triton_image_uri_cpu_flag_wins_over_instance_type() -> None:
    assert triton_image_uri("us-east-1", version="24.09", instance_type="ml.g5.xlarge", cpu=True).endswith(
        ":24.09-py3-cpu"
    )
    assert triton_image_uri("us-east-1", version="24.09", instance_type="ml.c5.xlarge", cpu=False).endswith(
        ":24.09-py3"
    )


def test_triton_image_uri_covers_every_release_before_and_after_2312() -> None:
    for version in ("21.08", "22.05", "23.10", "23.12", "24.01", "24.03", "25.04", "26.03", "26.04", "26.05"):
        assert version in TRITON_VERSIONS
    assert "22.06" not in TRITON_VERSIONS  # never published for SageMaker


@pytest.mark.parametrize(
    ("region", "version", "message"),
    [
        pytest.param("us-east-1", "24.02", "known versions: 21.08", id="unknown-version"),
        pytest.param("xx-nowhere-1", "24.09", "regions with Triton 24.09: af-south-1", id="unknown-region"),
        pytest.param("cn-north-1", "25.09", "versions published there:", id="not-in-china-any-more"),
        pytest.param(
            "ca-west-1", "22.12", "versions published there: 23.12", id="region-too-new-for-release"
        ),
    ],
)
def test_triton_image_uri_rejects_unpublished_combinations(region: str, version: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        triton_image_uri(region, version=version)


def test_triton_version_of_reads_the_release_from_the_tag() -> None:
    assert triton_version_of(triton_image_uri("us-east-1", version="26.04", cpu=True)) == "26.04"
    assert triton_version_of("123456789012.dkr.ecr.us-east-1.amazonaws.com/my-triton:latest") is None


# Releases the SageMaker SDK's table does not carry: the ones before 23.12 (another set of accounts), and
# 26.03 and 26.04, which AWS's Deep Learning Containers list of available images names.
NOT_IN_SDK = {v for v in TRITON_VERSIONS if v < "23.12"} | {"26.03", "26.04"}


def _sdk_triton_config() -> dict[str, Any]:
    """The SageMaker SDK's own sagemaker-tritonserver image config, read from the installed package."""
    for distribution in ("sagemaker-core", "sagemaker"):
        try:
            files = metadata.distribution(distribution).files or []
        except metadata.PackageNotFoundError:
            continue
        for file in files:
            if str(file).endswith("image_uri_config/sagemaker-tritonserver.json"):
                loaded: dict[str, Any] = json.loads(Path(str(file.locate())).read_text())
                return loaded
    pytest.skip("the SageMaker SDK (sagemaker-core or sagemaker) is not installed: table not cross-checked")


@pytest.mark.sagemaker
def test_triton_versions_agree_with_the_sagemaker_sdk_image_config() -> None:
    config = _sdk_triton_config()
    sdk = config["versions"]
    for version, entry in sdk.items():
        assert entry["repository"] == "sagemaker-tritonserver"
        assert entry["tag_prefix"] == f"{version}-py3"
        assert TRITON_VERSIONS.get(version) == entry["registries"], f"Triton {version} differs from the SDK"
    assert set(TRITON_VERSIONS) - set(sdk) <= NOT_IN_SDK


def test_every_release_has_the_python_of_its_python_backend() -> None:
    from mme_triton.endpoint.images import TRITON_PYTHON

    assert set(TRITON_PYTHON) == set(TRITON_VERSIONS)
    # the Ubuntu each release is built on: 20.04 up to 23.04, 22.04 from 23.05, 24.04 from 24.11
    assert {TRITON_PYTHON[v] for v in TRITON_PYTHON if v < "23.05"} == {"3.8"}
    assert {TRITON_PYTHON[v] for v in TRITON_PYTHON if "23.05" <= v < "24.11"} == {"3.10"}
    assert {TRITON_PYTHON[v] for v in TRITON_PYTHON if v >= "24.11"} == {"3.12"}
