"""Inference components in moto's SageMaker: the six operations, and endpoint configs that host them.

:func:`install` (called once, with the other patches of :mod:`._moto_patches`) adds to moto's SageMaker
response class ``CreateInferenceComponent``, ``DescribeInferenceComponent``, ``ListInferenceComponents``,
``UpdateInferenceComponent``, ``UpdateInferenceComponentRuntimeConfig`` and ``DeleteInferenceComponent``,
answered from the account's :class:`~._components.ComponentStore` in botocore's output shapes, and teaches
moto's backend what an endpoint that hosts components is:

- an endpoint config whose production variant names no ``ModelName`` (moto fails with an internal error);
  such a config needs an ``ExecutionRoleArn`` (kept, and reported by ``DescribeEndpointConfig``);
  ``ManagedInstanceScaling`` on a variant that names a model is refused with SageMaker's
  ``ManagedInstanceScaling is only supported for inference component endpoints.``;
- ``DescribeEndpoint`` reports each variant's ``ManagedInstanceScaling`` and ``RoutingConfig``, and the
  instances the components' copies use;
- tags on a component's ARN (``CreateInferenceComponent(Tags=)``, ``AddTags``, ``ListTags``, ``DeleteTags``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from mme_triton.local.aws._component_checks import (
    check_copy_count,
    check_create,
    check_specification,
    refuse,
)
from mme_triton.local.aws._components import Component, ComponentStore, store_of

__all__ = ["describe", "install"]

_MANAGED_ONLY = "ManagedInstanceScaling is only supported for inference component endpoints."
_SORT_KEYS = {"Name": "name", "CreationTime": "creation_time", "Status": "status"}


def describe(component: Component) -> dict[str, Any]:
    """DescribeInferenceComponent's answer for ``component``."""
    specification = component.specification
    summary: dict[str, Any] = {}
    for key in ("ModelName", "StartupParameters", "ComputeResourceRequirements", "SchedulingConfig"):
        if specification.get(key) is not None:
            summary[key] = specification[key]
    container = specification.get("Container")
    if isinstance(container, Mapping):
        image = container.get("Image")
        summary["Container"] = {
            **(
                {
                    "DeployedImage": {
                        "SpecifiedImage": image,
                        "ResolvedImage": image,
                        "ResolutionTime": component.creation_time,
                    }
                }
                if image
                else {}
            ),
            **{k: container[k] for k in ("ArtifactUrl", "Environment") if container.get(k) is not None},
        }
    if specification.get("DataCacheConfig") is not None:
        summary["DataCacheConfig"] = {
            "EnableCaching": bool(specification["DataCacheConfig"].get("EnableCaching"))
        }
    runtime: dict[str, Any] = {
        "DesiredCopyCount": component.desired,
        "CurrentCopyCount": len(component.copies),
    }
    if component.copies:
        runtime["PlacementStatus"] = [
            {"InstanceType": component.instance_type, "CurrentCopyCount": len(component.copies)}
        ]
    answer: dict[str, Any] = {
        "InferenceComponentName": component.name,
        "InferenceComponentArn": component.arn,
        "EndpointName": component.endpoint_name,
        "EndpointArn": component.endpoint_arn,
        "VariantName": component.variant_name,
        "Specification": summary,
        "RuntimeConfig": runtime,
        "CreationTime": component.creation_time,
        "LastModifiedTime": component.last_modified_time,
        "InferenceComponentStatus": component.status,
    }
    if component.failure_reason:
        answer["FailureReason"] = component.failure_reason
    if component.deployment_config:
        answer["LastDeploymentConfig"] = component.deployment_config
    return answer


def _listed(store: ComponentStore, params: Mapping[str, Any]) -> dict[str, Any]:
    """ListInferenceComponents: the filters, the sort (CreationTime, Descending by default) and pages."""
    with store.lock:
        found = list(store.components.values())
    contains = params.get("NameContains")
    found = [
        c
        for c in found
        if (not contains or str(contains).lower() in c.name.lower())
        and (not params.get("StatusEquals") or c.status == params["StatusEquals"])
        and (not params.get("EndpointNameEquals") or c.endpoint_name == params["EndpointNameEquals"])
        and (not params.get("VariantNameEquals") or c.variant_name == params["VariantNameEquals"])
        and _within(c.creation_time, params.get("CreationTimeAfter"), params.get("CreationTimeBefore"))
        and _within(
            c.last_modified_time, params.get("LastModifiedTimeAfter"), params.get("LastModifiedTimeBefore")
        )
    ]
    key = _SORT_KEYS.get(str(params.get("SortBy") or "CreationTime"), "creation_time")
    found.sort(
        key=lambda c: (getattr(c, key), c.name), reverse=params.get("SortOrder", "Descending") != "Ascending"
    )
    start = 0
    if params.get("NextToken"):
        try:
            start = int(base64.b64decode(str(params["NextToken"])).decode())
        except (ValueError, UnicodeDecodeError):
            raise refuse("Invalid pagination token because of an unexpected format.") from None
    size = int(params.get("MaxResults") or 10)
    page = found[start : start + size]
    answer: dict[str, Any] = {
        "InferenceComponents": [
            {
                "CreationTime": c.creation_time,
                "InferenceComponentArn": c.arn,
                "InferenceComponentName": c.name,
                "EndpointArn": c.endpoint_arn,
                "EndpointName": c.endpoint_name,
                "VariantName": c.variant_name,
                "InferenceComponentStatus": c.status,
                "LastModifiedTime": c.last_modified_time,
            }
            for c in page
        ]
    }
    if start + size < len(found):
        answer["NextToken"] = base64.b64encode(str(start + size).encode()).decode()
    return answer


def _within(moment: Any, after: Any, before: Any) -> bool:
    from datetime import datetime, timezone

    def stamp(value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, datetime):
            return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
        try:
            return float(value)
        except (TypeError, ValueError):
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()

    when = moment.replace(tzinfo=timezone.utc).timestamp()
    low, high = stamp(after), stamp(before)
    return (low is None or when > low) and (high is None or when < high)


def install() -> None:
    """Patch moto's SageMaker (called once per process, under the patches' lock)."""
    from moto.core.responses import ActionResult, EmptyResult
    from moto.sagemaker import models, responses

    backend_cls = models.SageMakerModelBackend
    response_cls = responses.SageMakerResponse

    def create(self: Any) -> Any:
        backend = self.sagemaker_backend
        params = self._get_params()
        endpoint, variant, specification, copies = check_create(backend, params)
        store = store_of(backend)
        name = params["InferenceComponentName"]
        component = Component(
            name=name,
            arn=store.arn(name),
            endpoint_name=endpoint.endpoint_name,
            endpoint_arn=endpoint.arn,
            variant_name=variant["VariantName"],
            instance_type=str(variant.get("InstanceType") or ""),
            specification=specification,
            desired=copies,
            tags=list(params.get("Tags") or []),
        )
        store.add(component)
        return ActionResult({"InferenceComponentArn": component.arn})

    def describe_action(self: Any) -> Any:
        store = store_of(self.sagemaker_backend)
        return ActionResult(describe(store.get(self._get_param("InferenceComponentName"))))

    def list_action(self: Any) -> Any:
        return ActionResult(_listed(store_of(self.sagemaker_backend), self._get_params()))

    def update(self: Any) -> Any:
        backend = self.sagemaker_backend
        params = self._get_params()
        store = store_of(backend)
        component = store.get(params.get("InferenceComponentName", ""))
        specification = params.get("Specification")
        if specification is not None:
            merged = {**component.specification, **specification}
            if "ModelName" in specification:
                merged.pop("Container", None)
            if "Container" in specification:
                merged.pop("ModelName", None)
            variant = {"InstanceType": component.instance_type}
            specification = check_specification(backend, merged, params, variant)
        runtime = params.get("RuntimeConfig")
        copies = None
        if runtime is not None:
            copies = check_copy_count(runtime.get("CopyCount"), "runtimeConfig.copyCount", create=False)
        if specification is None and copies is None:
            raise refuse("UpdateInferenceComponent needs a Specification or a RuntimeConfig to change.")
        arn = store.change(
            component.name,
            copies=copies,
            specification=specification,
            deployment_config=params.get("DeploymentConfig"),
        )
        return ActionResult({"InferenceComponentArn": arn})

    def update_runtime(self: Any) -> Any:
        params = self._get_params()
        desired = params.get("DesiredRuntimeConfig") or {}
        copies = check_copy_count(desired.get("CopyCount"), "desiredRuntimeConfig.copyCount", create=False)
        store = store_of(self.sagemaker_backend)
        arn = store.change(str(params.get("InferenceComponentName", "")), copies=copies, why="copies")
        return ActionResult({"InferenceComponentArn": arn})

    def delete(self: Any) -> Any:
        store_of(self.sagemaker_backend).remove(self._get_param("InferenceComponentName"))
        return EmptyResult()

    for name, method in (
        ("create_inference_component", create),
        ("describe_inference_component", describe_action),
        ("list_inference_components", list_action),
        ("update_inference_component", update),
        ("update_inference_component_runtime_config", update_runtime),
        ("delete_inference_component", delete),
    ):
        setattr(response_cls, name, method)
    _install_endpoint_configs(models, backend_cls, response_cls)


def _install_endpoint_configs(models: Any, backend_cls: Any, response_cls: Any) -> None:
    """Endpoint configs and endpoints that host components (see the module's docstring)."""
    from moto.core.responses import ActionResult

    def validate_production_variants(self: Any, production_variants: list[dict[str, Any]]) -> None:
        for variant in production_variants:
            if not variant.get("ModelName"):
                continue
            if variant["ModelName"] not in self._models:
                from moto.sagemaker.utils import arn_formatter

                arn = arn_formatter("model", variant["ModelName"], self.account_id, self.region_name)
                raise refuse(f"Could not find model '{arn}'.")
            if variant.get("ManagedInstanceScaling"):
                raise refuse(_MANAGED_ONLY)

    def create_endpoint_config(self: Any) -> Any:
        variants = self._get_param("ProductionVariants") or []
        role = self._get_param("ExecutionRoleArn")
        hosting = [v for v in variants if not v.get("ModelName")]
        if hosting and not role:
            raise refuse(
                "ExecutionRoleArn is required for an endpoint configuration whose production variants name "
                "no model (an endpoint that hosts inference components)."
            )
        for variant in hosting:
            requirements = variant.get("ManagedInstanceScaling") or {}
            low, high = requirements.get("MinInstanceCount"), requirements.get("MaxInstanceCount")
            if low is not None and high is not None and high < low:
                raise refuse(
                    f"ManagedInstanceScaling.MaxInstanceCount ({high}) must be greater than or equal to "
                    f"MinInstanceCount ({low})."
                )
        config = self.sagemaker_backend.create_endpoint_config(
            endpoint_config_name=self._get_param("EndpointConfigName"),
            async_inference_config=self._get_param("AsyncInferenceConfig"),
            production_variants=variants,
            data_capture_config=self._get_param("DataCaptureConfig"),
            tags=self._get_param("Tags"),
            kms_key_id=self._get_param("KmsKeyId"),
        )
        if role:
            config.execution_role_arn = role
        return ActionResult({"EndpointConfigArn": config.endpoint_config_arn})

    original_process = models.FakeEndpoint._process_production_variants

    def process_production_variants(
        self: Any, production_variants: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        processed: list[dict[str, Any]] = original_process(self, production_variants)
        for summary, variant in zip(processed, production_variants, strict=False):
            for key in ("ManagedInstanceScaling", "RoutingConfig"):
                if variant.get(key):
                    summary[key] = dict(variant[key])
        return processed

    setattr(backend_cls, "validate_production_variants", validate_production_variants)  # noqa: B010
    setattr(response_cls, "create_endpoint_config", create_endpoint_config)  # noqa: B010
    setattr(models.FakeEndpoint, "_process_production_variants", process_production_variants)  # noqa: B010
