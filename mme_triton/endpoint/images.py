"""The SageMaker Triton image for a region, a Triton version and an instance type.

SageMaker publishes Triton as ``<account>.dkr.ecr.<region>.<domain>/sagemaker-tritonserver:<YY.MM>-py3``
(``-py3-cpu`` for CPU instances). Releases before 23.12 live in a separate per-region set of accounts;
from 23.12 on they live in the deep-learning-container accounts (763104351884 in most regions, an
account of their own in opt-in regions). China regions use the ``amazonaws.com.cn`` domain.

The tables below are as published in the SageMaker Python SDK's image URI config
(``sagemaker-tritonserver.json``, in ``sagemaker-core``) for 23.12 and later, and in the AWS Deep
Learning Containers list of available images for the releases the SDK does not list (26.03, 26.04: the
DLC list names them with the same account set as 25.09 and 26.05) and for earlier releases (with the
per-region accounts of SageMaker's Triton examples).

What each release needs of the GPU host (:data:`TRITON_MIN_DRIVER`, :data:`TRITON_MIN_COMPUTE_CAPABILITY`)
comes from NVIDIA's Triton release notes: up to 24.09 (CUDA 11.4-12.6) the images run on an R470 driver
through CUDA forward compatibility on data-center GPUs, which is the driver of SageMaker's default AMI on
ml.g4dn/ml.g5/ml.p3; 25.04 (CUDA 12.9) does not (a 25.04 MME on the default AMI fails with "compatibility
mode is UNAVAILABLE", aws/deep-learning-containers#4990) and needs a CUDA 12 driver (R525 or newer;
SageMaker's nearest is 535); 25.09 and later are built on CUDA 13 and need driver 580, and from 25.08 on
compute capability 7.5 (no V100, so no ml.p3).

Which Python each release's python backend runs (:data:`TRITON_PYTHON`, what an ``EXECUTION_ENV_PATH``
environment must match) and the default release (:data:`DEFAULT_TRITON_VERSION`) are defined in
:mod:`mme_triton._triton_releases`, where the model stage reads them too, and exported here.
"""

from __future__ import annotations

import re

from mme_triton._triton_releases import DEFAULT_TRITON_VERSION, TRITON_PYTHON

__all__ = [
    "DEFAULT_TRITON_VERSION",
    "TRITON_MIN_COMPUTE_CAPABILITY",
    "TRITON_MIN_DRIVER",
    "TRITON_PYTHON",
    "TRITON_VERSIONS",
    "is_gpu_instance_type",
    "triton_image_uri",
    "triton_version_of",
]


_REPOSITORY = "sagemaker-tritonserver"

# Releases before 23.12: one account per region.
_LEGACY_ACCOUNTS: dict[str, str] = {
    "af-south-1": "774647643957",
    "ap-east-1": "110948597952",
    "ap-northeast-1": "941853720454",
    "ap-northeast-2": "151534178276",
    "ap-south-1": "763008648453",
    "ap-southeast-1": "324986816169",
    "ap-southeast-2": "355873309152",
    "ca-central-1": "464438896020",
    "cn-north-1": "472730292857",
    "cn-northwest-1": "474822919863",
    "eu-central-1": "746233611703",
    "eu-north-1": "601324751636",
    "eu-south-1": "966458181534",
    "eu-west-1": "802834080501",
    "eu-west-2": "205493899709",
    "eu-west-3": "254080097072",
    "me-south-1": "836785723513",
    "sa-east-1": "756306329178",
    "us-east-1": "785573368785",
    "us-east-2": "007439368137",
    "us-west-1": "710691900526",
    "us-west-2": "301217895009",
}
_LEGACY_VERSIONS = (
    "21.08",
    "22.05",
    "22.07",
    "22.08",
    "22.09",
    "22.10",
    "22.12",
    "23.01",
    "23.02",
    "23.03",
    "23.05",
    "23.06",
    "23.07",
    "23.08",
    "23.09",
    "23.10",
)

_DLC = "763104351884"
# From 23.12 on: the deep-learning-container accounts.
_DLC_ACCOUNTS_2312: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-1": _DLC,
    "ap-northeast-2": _DLC,
    "ap-northeast-3": "364406365360",
    "ap-south-1": _DLC,
    "ap-southeast-1": _DLC,
    "ap-southeast-2": _DLC,
    "ap-southeast-3": "907027046896",
    "ca-central-1": _DLC,
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-1": _DLC,
    "eu-north-1": _DLC,
    "eu-south-1": "692866216735",
    "eu-west-1": _DLC,
    "eu-west-2": _DLC,
    "eu-west-3": _DLC,
    "il-central-1": "780543022126",
    "me-south-1": "217643126080",
    "sa-east-1": _DLC,
    "us-east-1": _DLC,
    "us-east-2": _DLC,
    "us-west-1": _DLC,
    "us-west-2": _DLC,
}
# Later releases add the newer opt-in regions.
_NEWER_REGIONS: dict[str, str] = {
    "ap-east-2": "975050140332",
    "ap-south-2": "772153158452",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-7": "590183813437",
    "eu-central-2": "380420809688",
    "eu-south-2": "503227376785",
    "me-central-1": "914824155844",
    "mx-central-1": "637423239942",
}
_DLC_ACCOUNTS_2504 = {**_DLC_ACCOUNTS_2312, **_NEWER_REGIONS}
# 25.09 and later: ap-southeast-6 added, the China regions not published.
_DLC_ACCOUNTS_2509 = {
    **{r: a for r, a in _DLC_ACCOUNTS_2504.items() if not r.startswith("cn-")},
    "ap-southeast-6": "633930458069",
}

#: Triton release (``YY.MM``) → {region: ECR account} for every release SageMaker publishes.
TRITON_VERSIONS: dict[str, dict[str, str]] = {
    **{version: _LEGACY_ACCOUNTS for version in _LEGACY_VERSIONS},
    **{version: _DLC_ACCOUNTS_2312 for version in ("23.12", "24.01", "24.03", "24.05", "24.09")},
    "25.04": _DLC_ACCOUNTS_2504,
    "25.09": _DLC_ACCOUNTS_2509,
    "26.03": _DLC_ACCOUNTS_2509,
    "26.04": _DLC_ACCOUNTS_2509,
    "26.05": _DLC_ACCOUNTS_2509,
}

#: The oldest NVIDIA driver branch each release runs on at SageMaker (see the module docstring).
TRITON_MIN_DRIVER: dict[str, int] = {
    **dict.fromkeys((*_LEGACY_VERSIONS, "23.12", "24.01", "24.03", "24.05", "24.09"), 470),
    "25.04": 525,
    **dict.fromkeys(("25.09", "26.03", "26.04", "26.05"), 580),
}

#: The lowest GPU compute capability each release supports (NVIDIA's release notes: 6.0 up to 25.07,
#: 7.5 from 25.08 on).
TRITON_MIN_COMPUTE_CAPABILITY: dict[str, float] = {
    **{version: 6.0 for version in TRITON_MIN_DRIVER if version < "25.08"},
    **{version: 7.5 for version in TRITON_MIN_DRIVER if version >= "25.08"},
}

# ml.g* and ml.p* families have NVIDIA GPUs (g4dn, g5, g6, g6e, p3, p4d, p5 ... and those AWS adds).
_GPU_FAMILY = re.compile(r"^[gp][0-9]+[a-z]*$")
_TAG = re.compile(r"/sagemaker-tritonserver:(?P<version>[0-9]{2}\.[0-9]{2})-py3(?:-cpu)?$")


def is_gpu_instance_type(instance_type: str) -> bool:
    """True for SageMaker instance types with an NVIDIA GPU (``ml.g5.xlarge``), False otherwise.

    Example:
        >>> is_gpu_instance_type("ml.g6e.xlarge"), is_gpu_instance_type("ml.c5.xlarge")
        (True, False)
    """
    parts = instance_type.split(".")
    return len(parts) == 3 and _GPU_FAMILY.match(parts[1]) is not None


def triton_version_of(image_uri: str) -> str | None:
    """The Triton release (``YY.MM``) of a SageMaker Triton image URI, None for any other image.

    Example:
        >>> triton_version_of("763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:25.04-py3")
        '25.04'
    """
    match = _TAG.search(image_uri)
    return match["version"] if match else None


def _domain(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def triton_image_uri(
    region: str,
    *,
    version: str = DEFAULT_TRITON_VERSION,
    instance_type: str | None = None,
    cpu: bool | None = None,
) -> str:
    """The SageMaker Triton image URI for ``region`` and Triton ``version``.

    Parameters:
        region: AWS region, e.g. ``"us-east-1"`` or ``"cn-north-1"``.
        version: Triton release ``YY.MM`` as SageMaker publishes it (see ``TRITON_VERSIONS``).
        instance_type: picks the ``-cpu`` image for instance types without a GPU (``ml.c5.xlarge``).
        cpu: force the CPU (True) or GPU (False) image; wins over ``instance_type``.

    Raises:
        ValueError: the version is not published, or not in that region (the message lists the valid
            ones).

    Example::

        >>> triton_image_uri("us-east-1", version="24.09")
        '763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3'
        >>> triton_image_uri("eu-west-1", version="23.02", instance_type="ml.c5.xlarge")
        '802834080501.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tritonserver:23.02-py3-cpu'
    """
    accounts = TRITON_VERSIONS.get(version)
    if accounts is None:
        raise ValueError(
            f"SageMaker publishes no Triton image {version!r}; known versions: {', '.join(TRITON_VERSIONS)}"
        )
    account = accounts.get(region)
    if account is None:
        others = [v for v, table in TRITON_VERSIONS.items() if region in table]
        hint = (
            f"; versions published there: {', '.join(others)}"
            if others
            else f"; regions with Triton {version}: {', '.join(sorted(accounts))}"
        )
        raise ValueError(f"Triton {version} is not published for region {region!r}{hint}")
    if cpu is None:
        cpu = instance_type is not None and not is_gpu_instance_type(instance_type)
    tag = f"{version}-py3-cpu" if cpu else f"{version}-py3"
    return f"{account}.dkr.ecr.{region}.{_domain(region)}/{_REPOSITORY}:{tag}"
