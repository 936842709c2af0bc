"""What the control plane refuses in an inference component request, worded as SageMaker words it.

Each check raises moto's SageMaker ``ValidationError`` (``ValidationException``, HTTP 400). The wording is
SageMaker's where it is known (docs/local.md, "Inference components", cites the source of each):

- the API's own constraints (``1 validation error detected: Value '64' at
  'specification.computeResourceRequirements.minMemoryRequiredInMb' failed to satisfy constraint: Member must
  have value greater than or equal to 128``), which botocore's parameter validation already refuses on the
  client side;
- ``Could not find endpoint "<arn>".`` and ``Could not find model "<arn>".``;
- ``Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy
  inference components.`` for an endpoint whose variant serves a model (a multi-model endpoint among them);
- ``Inference components copy count an integer larger than 0`` for a create with ``CopyCount`` 0 (a
  component reaches zero copies through an update, never at creation).

The rest (an unknown variant, a missing ``ComputeResourceRequirements``, what the stack does not model) is
the stack's own wording, saying what to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mme_triton._inference_components import MIN_ACCELERATORS, MIN_CPU_CORES, MIN_MEMORY_MB

__all__ = [
    "check_copy_count",
    "check_create",
    "check_requirements",
    "endpoint_variant",
    "not_found",
    "refuse",
]

_NAME = re.compile(r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$")
NOT_SUPPORTED = (
    "Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy "
    "inference components."
)
ZERO_COPIES_AT_CREATE = "Inference components copy count an integer larger than 0"


def refuse(message: str) -> Exception:
    """moto's SageMaker ``ValidationError`` carrying ``message``."""
    from moto.sagemaker.exceptions import ValidationError

    return ValidationError(message=message)


def not_found(arn: str) -> Exception:
    """SageMaker's answer for a component that does not exist (the SDK and Terraform's provider look for
    ``Could not find inference component``)."""
    return refuse(f'Could not find inference component "{arn}".')


def _constraint(value: Any, where: str, rule: str) -> Exception:
    return refuse(
        f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy constraint: {rule}"
    )


def check_name(name: Any, where: str = "inferenceComponentName") -> str:
    if not isinstance(name, str) or len(name) > 63 or not _NAME.match(name):
        raise _constraint(
            name,
            where,
            "Member must have length less than or equal to 63 and Member must satisfy regular expression "
            "pattern: ^[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?$",
        )
    return name


def check_copy_count(value: Any, where: str, *, create: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _constraint(value, where, "Member must not be null")
    if value < 0:
        raise _constraint(value, where, "Member must have value greater than or equal to 0")
    if create and value == 0:
        raise refuse(ZERO_COPIES_AT_CREATE)
    return value


def check_requirements(requirements: Any, instance_type: str | None) -> dict[str, Any]:
    """``ComputeResourceRequirements``, checked: SageMaker's minimums, the maximum memory not below the
    minimum, accelerators only on an instance type that has them."""
    where = "specification.computeResourceRequirements"
    if not isinstance(requirements, Mapping):
        raise refuse(
            "Specification.ComputeResourceRequirements is required for an inference component that is not "
            "an adapter: give MinMemoryRequiredInMb (and NumberOfCpuCoresRequired, "
            "NumberOfAcceleratorDevicesRequired) to reserve for each copy."
        )
    low = requirements.get("MinMemoryRequiredInMb")
    if isinstance(low, bool) or not isinstance(low, int):
        raise _constraint(low, f"{where}.minMemoryRequiredInMb", "Member must not be null")
    for key, minimum in (
        ("MinMemoryRequiredInMb", float(MIN_MEMORY_MB)),
        ("MaxMemoryRequiredInMb", float(MIN_MEMORY_MB)),
        ("NumberOfCpuCoresRequired", MIN_CPU_CORES),
        ("NumberOfAcceleratorDevicesRequired", MIN_ACCELERATORS),
    ):
        value = requirements.get(key)
        if value is not None and value < minimum:
            name = key[0].lower() + key[1:]
            raise _constraint(
                value, f"{where}.{name}", f"Member must have value greater than or equal to {minimum:g}"
            )
    high = requirements.get("MaxMemoryRequiredInMb")
    if high is not None and high < low:
        raise refuse(
            f"MaxMemoryRequiredInMb ({high}) must be greater than or equal to MinMemoryRequiredInMb ({low})."
        )
    accelerators = requirements.get("NumberOfAcceleratorDevicesRequired")
    if accelerators and instance_type is not None:
        from mme_triton._inference_components import instance_resources

        try:
            offered = instance_resources(instance_type).accelerators
        except ValueError:
            offered = None
        if offered == 0:
            raise refuse(
                f"NumberOfAcceleratorDevicesRequired is {accelerators:g}, but instance type {instance_type} "
                "has no accelerator devices."
            )
    return dict(requirements)


def endpoint_variant(
    backend: Any, endpoint_name: str, variant_name: str | None
) -> tuple[Any, dict[str, Any]]:
    """The endpoint (moto's) and its config's production variant a component goes on.

    Raises:
        ValidationError: no such endpoint or variant, or an endpoint that cannot host components.
    """
    from moto.sagemaker.models import FakeEndpoint

    endpoint = backend.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = FakeEndpoint.arn_formatter(endpoint_name, backend.account_id, backend.region_name)
        raise refuse(f'Could not find endpoint "{arn}".')
    if endpoint.endpoint_status in ("Failed", "Deleting"):
        raise refuse(
            f'Endpoint "{endpoint.arn}" is in status {endpoint.endpoint_status}: an inference component '
            "needs an endpoint that is Creating, Updating or InService."
        )
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name)
    variants = list(config.production_variants) if config is not None else []
    if any(variant.get("ModelName") for variant in variants):
        raise refuse(NOT_SUPPORTED)
    wanted = variant_name or (variants[0]["VariantName"] if variants else None)
    for variant in variants:
        if variant["VariantName"] == wanted:
            return endpoint, dict(variant)
    raise refuse(f'Could not find variant "{wanted}" in endpoint "{endpoint.arn}".')


def check_create(backend: Any, params: Mapping[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any], int]:
    """A CreateInferenceComponent request checked: the endpoint, its variant, the specification and the
    copy count.

    Raises:
        ValidationError: the first thing SageMaker would refuse.
    """
    check_name(params.get("InferenceComponentName"))
    endpoint, variant = endpoint_variant(
        backend, str(params.get("EndpointName") or ""), params.get("VariantName")
    )
    specification = check_specification(backend, params.get("Specification"), params, variant)
    runtime = params.get("RuntimeConfig")
    if not isinstance(runtime, Mapping):
        raise refuse(
            "RuntimeConfig is required for an inference component that is not an adapter: give "
            "RuntimeConfig={'CopyCount': n}."
        )
    copies = check_copy_count(runtime.get("CopyCount"), "runtimeConfig.copyCount", create=True)
    return endpoint, variant, specification, copies


def check_specification(
    backend: Any, specification: Any, params: Mapping[str, Any], variant: Mapping[str, Any]
) -> dict[str, Any]:
    """``Specification`` checked: a model that exists or a container with an artifact, and its
    requirements."""
    if params.get("Specifications"):
        raise refuse(
            "The embedded stack serves Specification (one instance type), not Specifications (instance "
            "pools); give Specification."
        )
    if not isinstance(specification, Mapping):
        raise refuse(
            "Specification is required: give ModelName or Container, and ComputeResourceRequirements."
        )
    if specification.get("BaseInferenceComponentName"):
        raise refuse(
            "The embedded stack does not serve adapter inference components (BaseInferenceComponentName); "
            "give the component a ModelName or a Container of its own."
        )
    model_name = specification.get("ModelName")
    container = specification.get("Container")
    if model_name:
        if model_name not in backend._models:
            from moto.sagemaker.utils import arn_formatter

            arn = arn_formatter("model", model_name, backend.account_id, backend.region_name)
            raise refuse(f'Could not find model "{arn}".')
        model = backend.describe_model(model_name).response_object
        from mme_triton._sagemaker import serving_container

        mode = (serving_container(model) or {}).get("Mode")
        if mode == "MultiModel":
            raise refuse(
                f"Model {model_name} has a MultiModel container: an inference component hosts one model per "
                "copy (a container without Mode, or Mode SingleModel)."
            )
    elif not isinstance(container, Mapping) or not container.get("ArtifactUrl"):
        raise refuse(
            "Specification needs a ModelName, or a Container with an Image and an ArtifactUrl (the embedded "
            "stack serves a component from its model's artifact)."
        )
    check_requirements(specification.get("ComputeResourceRequirements"), variant.get("InstanceType"))
    return dict(specification)
