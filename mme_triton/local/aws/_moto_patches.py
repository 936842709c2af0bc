"""What moto's SageMaker backend lacks, patched into its classes at runtime (once per process).

Every call still goes through moto's HTTP server and its backends; the patches add ``UpdateEndpoint``,
endpoint status transitions (``Creating``/``Updating`` → ``InService`` or ``Failed``, run by the
:class:`~mme_triton.local.aws.controlplane.ControlPlane` that owns the account), instance count changes
(``UpdateEndpointWeightsAndCapacities`` goes through ``Updating`` too, and Application Auto Scaling's
``RegisterScalableTarget`` brings a variant's count within the target's range, as AWS does), a wider
instance-type check,
SageMaker's ``ValidationException`` for tag calls on deleted resources, and the required members moto
leaves unset: a SageMaker variant's scalable target's ``RoleARN`` (and the ``SuspendedState`` AWS always
reports), an endpoint's data capture summary. Accounts no plane owns see moto as shipped, plus those
additions.

For the accounts of the planes, CloudWatch's PutMetricData, ListMetrics, GetMetricData and
GetMetricStatistics are answered by a :class:`~mme_triton.local.aws.cloudwatch.MetricStore` kept on moto's
CloudWatch backend of the account and region (so dropping the backend drops the metrics); other accounts
get moto's own answers.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mme_triton.local.aws.cloudwatch import MetricStore
    from mme_triton.local.aws.controlplane import ControlPlane

from mme_triton._sagemaker import autoscaling_role_arn
from mme_triton.local.aws import _component_api, _component_scaling
from mme_triton.local.aws._components import store_of

__all__ = [
    "apply_capacities",
    "data_capture_summary",
    "describe_for_hooks",
    "hosts_components",
    "install_patches",
    "metric_store",
    "plane_for",
    "register",
    "switch_config",
    "unregister",
    "utcnow",
]

_SUSPENDED_STATE = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")
_INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9-]+$")
_VARIANT_TARGET = re.compile(r"^endpoint/(?P<endpoint>[^/]+)/variant/(?P<variant>[^/]+)$")
_VARIANT_COUNT = "sagemaker:variant:DesiredInstanceCount"

_registry_lock = threading.Lock()
_planes: dict[str, ControlPlane] = {}  # account id -> the plane that owns it
_patched = False


def plane_for(account_id: str) -> ControlPlane | None:
    with _registry_lock:
        return _planes.get(account_id)


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def install_patches() -> None:
    """Add what moto's SageMaker lacks to its backend and response classes (once per process)."""
    global _patched
    with _registry_lock:
        if _patched:
            return
        from moto.applicationautoscaling.models import ApplicationAutoscalingBackend
        from moto.core.responses import ActionResult
        from moto.sagemaker import models, responses
        from moto.sagemaker.exceptions import ValidationError

        backend_cls = models.SageMakerModelBackend
        original_create = backend_cls.create_endpoint
        original_delete = backend_cls.delete_endpoint
        original_resource_from_arn = backend_cls._get_resource_from_arn

        def resource_from_arn(self: Any, arn: str) -> Any:
            if ":inference-component/" in arn:  # tags on an inference component (_component_api)
                resource = store_of(self).by_arn(arn)
                if resource is None:
                    raise ValidationError(message=f"Could not find resource '{arn}'.")
                return resource
            # moto fails with an internal error (HTTP 500) for the ARN of a deleted resource.
            resource = original_resource_from_arn(self, arn)
            if resource is None:
                raise ValidationError(message=f"Could not find resource '{arn}'.")
            return resource

        def validate_instance_type(self: Any, instance_type: str) -> None:
            if not _INSTANCE_TYPE.match(instance_type or ""):
                raise ValidationError(
                    message=f"Value '{instance_type}' at 'instanceType' failed to satisfy constraint: "
                    "Member must satisfy enum value set"
                )

        def create_endpoint(self: Any, *args: Any, **kwargs: Any) -> Any:
            endpoint: Any = original_create(self, *args, **kwargs)
            endpoint.data_capture_config = data_capture_summary(endpoint.data_capture_config)
            plane = plane_for(self.account_id)
            if plane is not None:
                endpoint.endpoint_status = "Creating"
                endpoint.failure_reason = None
                plane._schedule(self, endpoint.endpoint_name, endpoint.endpoint_config_name, update=False)
            return endpoint

        def delete_endpoint(self: Any, endpoint_name: str) -> None:
            original_delete(self, endpoint_name)
            store_of(self).endpoint_gone(endpoint_name)
            plane = plane_for(self.account_id)
            if plane is not None:
                plane._endpoint_deleted(endpoint_name)

        def update_endpoint(self: Any, endpoint_name: str, endpoint_config_name: str) -> str:
            endpoint = self.endpoints.get(endpoint_name)
            if endpoint is None:
                arn = models.FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
                raise ValidationError(message=f"Could not find endpoint '{arn}'.")
            if endpoint_config_name not in self.endpoint_configs:
                arn = models.FakeEndpointConfig.arn_formatter(
                    endpoint_config_name, self.account_id, self.region_name
                )
                raise ValidationError(message=f"Could not find endpoint configuration '{arn}'.")
            if endpoint.endpoint_status != "InService":
                raise ValidationError(message=f'Cannot update in-progress endpoint "{endpoint.arn}".')
            plane = plane_for(self.account_id)
            if plane is None:
                switch_config(self, endpoint, endpoint_config_name)
            else:
                endpoint.endpoint_status = "Updating"
                endpoint.last_modified_time = utcnow()
                plane._schedule(self, endpoint_name, endpoint_config_name, update=True)
            return str(endpoint.arn)

        original_weights = backend_cls.update_endpoint_weights_and_capacities

        def update_endpoint_weights_and_capacities(
            self: Any, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
        ) -> str:
            plane = plane_for(self.account_id)
            if plane is None:
                return str(original_weights(self, endpoint_name, desired_weights_and_capacities))
            endpoint = self.endpoints.get(endpoint_name)
            if endpoint is None:
                arn = models.FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
                raise ValidationError(message=f'Could not find endpoint "{arn}".')
            names = [change.get("VariantName") for change in desired_weights_and_capacities]
            known = {variant["VariantName"] for variant in endpoint.production_variants}
            if len(set(names)) != len(names) or not set(names) <= known:
                raise ValidationError(
                    message=f"The variant names {names} must be distinct variants of endpoint "
                    f"{endpoint_name}."
                )
            hosting = hosts_components(self, endpoint)
            for change in desired_weights_and_capacities:
                count = change.get("DesiredInstanceCount")
                if hosting and count is not None:
                    store_of(self).set_instance_count(endpoint_name, change["VariantName"], int(count))
                elif count is not None and int(count) < 1:
                    raise ValidationError(
                        message=f"DesiredInstanceCount {count} of variant {change['VariantName']}: a "
                        "multi-model endpoint's variant runs at least one instance."
                    )
            if endpoint.endpoint_status != "InService":
                raise ValidationError(message=f'Cannot update in-progress endpoint "{endpoint.arn}".')
            for variant in endpoint.production_variants:
                for change in desired_weights_and_capacities:
                    if change["VariantName"] != variant["VariantName"]:
                        continue
                    if change.get("DesiredWeight") is not None:
                        variant["DesiredWeight"] = change["DesiredWeight"]
                    if change.get("DesiredInstanceCount") is not None:
                        variant["DesiredInstanceCount"] = int(change["DesiredInstanceCount"])
            endpoint.endpoint_status = "Updating"
            endpoint.last_modified_time = utcnow()
            plane._schedule_capacities(self, endpoint_name, copy.deepcopy(desired_weights_and_capacities))
            return str(endpoint.arn)

        def update_endpoint_action(self: Any) -> Any:
            arn = self.sagemaker_backend.update_endpoint(
                endpoint_name=self._get_param("EndpointName"),
                endpoint_config_name=self._get_param("EndpointConfigName"),
            )
            return ActionResult({"EndpointArn": arn})

        original_register = ApplicationAutoscalingBackend.register_scalable_target

        def register_scalable_target(self: Any, namespace: str, *args: Any, **kwargs: Any) -> Any:
            target: Any = original_register(self, namespace, *args, **kwargs)
            if namespace == "sagemaker":
                # what Application Auto Scaling reports when the caller names no role and suspends nothing
                target.role_arn = target.role_arn or autoscaling_role_arn(
                    self.account_id, partition=str(target.arn).split(":")[1]
                )
                target.suspended_state = target.suspended_state or dict.fromkeys(_SUSPENDED_STATE, False)
                _within_range(self, target)
            return target

        setattr(ApplicationAutoscalingBackend, "register_scalable_target", register_scalable_target)  # noqa: B010
        setattr(models.FakeEndpointConfig, "validate_instance_type", validate_instance_type)  # noqa: B010
        setattr(backend_cls, "_get_resource_from_arn", resource_from_arn)  # noqa: B010
        setattr(backend_cls, "create_endpoint", create_endpoint)  # noqa: B010
        setattr(backend_cls, "delete_endpoint", delete_endpoint)  # noqa: B010
        setattr(backend_cls, "update_endpoint", update_endpoint)  # noqa: B010
        setattr(backend_cls, "update_endpoint_weights_and_capacities", update_endpoint_weights_and_capacities)  # noqa: B010
        setattr(responses.SageMakerResponse, "update_endpoint", update_endpoint_action)  # noqa: B010
        _component_api.install()
        _component_scaling.install()
        _install_cloudwatch()
        _patched = True


def _install_cloudwatch() -> None:
    """Route the metric calls of the planes' accounts to a MetricStore (called under the registry lock)."""
    from moto.cloudwatch.exceptions import CloudWatchException
    from moto.cloudwatch.responses import CloudWatchResponse
    from moto.core.responses import ActionResult, EmptyResult

    from mme_triton.local.aws import _cloudwatch_reads
    from mme_triton.local.aws.cloudwatch import CloudWatchError, MetricStore

    answers: dict[str, Callable[[MetricStore, dict[str, Any]], Any]] = {
        "put_metric_data": MetricStore.put_metric_data,
        "list_metrics": _cloudwatch_reads.list_metrics,
        "get_metric_data": _cloudwatch_reads.get_metric_data,
        "get_metric_statistics": _cloudwatch_reads.get_metric_statistics,
    }

    def routed(action: str) -> Callable[[Any], Any]:
        original = getattr(CloudWatchResponse, action)
        answer = answers[action]

        def respond(self: Any) -> Any:
            if plane_for(self.current_account) is None:
                return original(self)
            try:
                result = answer(metric_store(self.cloudwatch_backend), self._get_params())
            except CloudWatchError as exc:
                raise CloudWatchException(exc.code, exc.message) from None
            return EmptyResult() if result is None else ActionResult(result)

        return respond

    for action in answers:
        setattr(CloudWatchResponse, action, routed(action))


_stores_lock = threading.Lock()


def metric_store(backend: Any) -> MetricStore:
    """The MetricStore kept on a moto CloudWatch backend (created on first use)."""
    from mme_triton.local.aws.cloudwatch import MetricStore

    with _stores_lock:
        store: MetricStore | None = getattr(backend, "_mme_triton_metrics", None)
        if store is None:
            store = MetricStore()
            backend._mme_triton_metrics = store
        return store


def _within_range(autoscaling: Any, target: Any) -> None:
    """RegisterScalableTarget on an active resource "changes the resource's current capacity to a value that
    is inside of this range" (its API reference): a variant of a plane's in-service endpoint whose count is
    outside ``[MinCapacity, MaxCapacity]`` is updated to the nearest bound, as Application Auto Scaling does
    through ``UpdateEndpointWeightsAndCapacities``."""
    match = _VARIANT_TARGET.match(str(target.resource_id))
    if (
        match is None
        or target.scalable_dimension != _VARIANT_COUNT
        or plane_for(autoscaling.account_id) is None
    ):
        return
    from moto.sagemaker.models import sagemaker_backends

    sagemaker = sagemaker_backends[autoscaling.account_id][autoscaling.region_name]
    endpoint = sagemaker.endpoints.get(match.group("endpoint"))
    if endpoint is None or endpoint.endpoint_status != "InService":
        return  # "If the specified resource is not active ..., this operation does not change" it
    for variant in endpoint.production_variants:
        if variant["VariantName"] != match.group("variant"):
            continue
        current = int(variant.get("DesiredInstanceCount") or variant.get("CurrentInstanceCount") or 1)
        wanted = min(max(current, int(target.min_capacity)), int(target.max_capacity))
        if wanted != current:
            sagemaker.update_endpoint_weights_and_capacities(
                endpoint.endpoint_name,
                [{"VariantName": variant["VariantName"], "DesiredInstanceCount": wanted}],
            )


def apply_capacities(endpoint: Any, changes: list[dict[str, Any]], *, reason: str | None) -> None:
    """End an ``UpdateEndpointWeightsAndCapacities``: the desired counts and weights become current and the
    endpoint ``InService``; when it failed (``reason``), the desired ones go back to the current ones and
    ``FailureReason`` says why."""
    for variant in endpoint.production_variants:
        for change in changes:
            if change["VariantName"] != variant["VariantName"]:
                continue
            for desired, current in (
                ("DesiredInstanceCount", "CurrentInstanceCount"),
                ("DesiredWeight", "CurrentWeight"),
            ):
                if desired not in variant:
                    continue
                if reason is None:
                    variant[current] = variant[desired]
                elif current in variant:
                    variant[desired] = variant[current]
    endpoint.endpoint_status = "InService"
    endpoint.failure_reason = reason
    endpoint.last_modified_time = utcnow()


def switch_config(backend: Any, endpoint: Any, endpoint_config_name: str) -> None:
    config = backend.endpoint_configs[endpoint_config_name]
    endpoint.endpoint_config_name = endpoint_config_name
    endpoint.production_variants = endpoint._process_production_variants(config.production_variants)
    endpoint.data_capture_config = data_capture_summary(config.data_capture_config)
    endpoint.endpoint_status = "InService"
    endpoint.failure_reason = None
    endpoint.last_modified_time = utcnow()


def data_capture_summary(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """DescribeEndpoint's ``DataCaptureConfig`` (a ``DataCaptureConfigSummary``, all of whose members are
    required) for an endpoint config's ``DataCaptureConfig``; moto echoes the config's own shape.

    Capture is enabled unless the config says otherwise, as in CreateEndpointConfig; without a
    ``KmsKeyId`` in the config the summary has an empty one (what SageMaker writes then is not documented).
    """
    if not config:
        return None
    if "CaptureStatus" in config:  # a summary already
        return config
    enabled = bool(config.get("EnableCapture", True))
    return {
        "EnableCapture": enabled,
        "CaptureStatus": "Started" if enabled else "Stopped",
        "CurrentSamplingPercentage": config.get("InitialSamplingPercentage", 0),
        "DestinationS3Uri": config.get("DestinationS3Uri", ""),
        "KmsKeyId": config.get("KmsKeyId", ""),
    }


def describe_for_hooks(backend: Any, endpoint_name: str, endpoint_config_name: str) -> dict[str, Any]:
    """A DescribeEndpoint-like dict for ``endpoint_config_name``, with the config and model descriptions."""
    endpoint = dict(backend.describe_endpoint(endpoint_name))
    config = dict(backend.describe_endpoint_config(endpoint_config_name))
    current = {v["VariantName"]: v for v in endpoint.get("ProductionVariants", [])}
    variants = []
    models: dict[str, dict[str, Any]] = {}
    for variant in config.get("ProductionVariants", []):
        merged = {**current.get(variant["VariantName"], {}), **variant}
        if "InitialInstanceCount" in variant:  # the counts the config brings into service
            merged["CurrentInstanceCount"] = merged["DesiredInstanceCount"] = variant["InitialInstanceCount"]
        variants.append(merged)
        model_name = variant.get("ModelName")
        if model_name:  # a variant that hosts inference components names none
            models[model_name] = dict(backend.describe_model(model_name).response_object)
    endpoint["EndpointConfigName"] = endpoint_config_name
    endpoint["ProductionVariants"] = variants
    endpoint["EndpointConfig"] = config
    endpoint["Models"] = models
    first = config.get("ProductionVariants", [{}])[0].get("ModelName")
    endpoint["Model"] = models.get(first or "", {})
    return copy.deepcopy(endpoint)


def hosts_components(backend: Any, endpoint: Any) -> bool:
    """Whether ``endpoint`` hosts inference components: its config's variants name no model."""
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name)
    variants = config.production_variants if config is not None else []
    return bool(variants) and not any(variant.get("ModelName") for variant in variants)


def register(plane: ControlPlane) -> None:
    """Make ``plane`` the owner of its account: its endpoints get transitions and hooks."""
    with _registry_lock:
        _planes[plane.account_id] = plane


def unregister(plane: ControlPlane) -> None:
    """Forget ``plane`` (moto behaves as shipped again for its account)."""
    with _registry_lock:
        if _planes.get(plane.account_id) is plane:
            del _planes[plane.account_id]
