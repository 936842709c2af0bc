"""The SageMaker Triton image for a region, a Triton version and an instance type.

SageMaker publishes Triton as ``<account>.dkr.ecr.<region>.<domain>/sagemaker-tritonserver:<YY.MM>-py3``
(``-py3-cpu`` for CPU instances). Releases before 23.12 live in a separate per-region set of accounts;
from 23.12 on they live in the deep-learning-container accounts (763104351884 in most regions, an
account of their own in opt-in regions). China regions use the ``amazonaws.com.cn`` domain.

The tables below are as published in the SageMaker Python SDK's image URI config
(``sagemaker-tritonserver.json``) for 23.12 and later, and in the AWS Deep Learning Containers list of
available images (with the per-region accounts of SageMaker's Triton examples) for earlier releases.
"""

from __future__ import annotations

__all__ = ["DEFAULT_TRITON_VERSION", "TRITON_VERSIONS", "is_gpu_instance_type", "triton_image_uri"]

#: The default Triton release: the one closest to the Triton the embedded stack runs (2.51 = 24.10),
#: so that what is tried locally behaves like what is deployed.
DEFAULT_TRITON_VERSION = "24.09"

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
    "26.05": _DLC_ACCOUNTS_2509,
}

# Instance families with NVIDIA GPUs; everything else is served by the CPU image.
_GPU_FAMILIES = ("p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e", "g6f")


def is_gpu_instance_type(instance_type: str) -> bool:
    """True for SageMaker instance types with an NVIDIA GPU (``ml.g5.xlarge``), False otherwise."""
    parts = instance_type.split(".")
    return len(parts) == 3 and parts[1] in _GPU_FAMILIES


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
