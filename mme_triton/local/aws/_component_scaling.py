"""Application Auto Scaling for inference components, patched into moto (which refuses their dimension).

:func:`install` makes moto's Application Auto Scaling accept ``ResourceId`` ``inference-component/<name>``
with ``ScalableDimension`` ``sagemaker:inference-component:DesiredCopyCount`` (moto's enum of dimensions
lacks it, so both its request validation and its backend refuse it), and makes ``RegisterScalableTarget``
on a component in service bring its copy count within ``[MinCapacity, MaxCapacity]``, as it does for a
variant ("changes the resource's current capacity to a value that is inside of this range", its API
reference). The stack's :mod:`.autoscaling` evaluates the policies.
"""

from __future__ import annotations

from typing import Any

from mme_triton._inference_components import COPY_COUNT_DIMENSION, component_of_resource_id

__all__ = ["install", "set_copies"]


def _is_component_target(namespace: Any, resource_id: Any, dimension: Any) -> bool:
    return (
        namespace == "sagemaker"
        and dimension == COPY_COUNT_DIMENSION
        and component_of_resource_id(str(resource_id or "")) is not None
    )


def set_copies(account_id: str, region: str, component_name: str, copies: int) -> bool:
    """Set a component's copy count as ``UpdateInferenceComponentRuntimeConfig`` does; ``False`` when the
    component does not exist or a change of it is under way."""
    from moto.sagemaker.models import sagemaker_backends

    from mme_triton.local.aws._components import store_of

    store = store_of(sagemaker_backends[account_id][region])
    with store.lock:
        component = store.components.get(component_name)
        if component is None or component.status != "InService":
            return False
        if component.desired == copies:
            return True
        store.change(component_name, copies=copies, why="autoscaling")
    return True


def install() -> None:
    """Patch moto's Application Auto Scaling (once per process, under the patches' lock)."""
    from moto.applicationautoscaling import models, responses

    original_valid = models._target_params_are_valid

    def target_params_are_valid(namespace: str, r_id: str, dimension: str) -> bool:
        if _is_component_target(namespace, r_id, dimension):
            return True
        return bool(original_valid(namespace, r_id, dimension))

    original_validate = responses.ApplicationAutoScalingResponse._validate_params

    def validate_params(self: Any) -> None:
        dimension, namespace = self._get_param("ScalableDimension"), self._get_param("ServiceNamespace")
        if dimension == COPY_COUNT_DIMENSION and namespace == "sagemaker":
            return
        original_validate(self)

    backend_cls = models.ApplicationAutoscalingBackend
    original_register = backend_cls.register_scalable_target

    def register_scalable_target(
        self: Any, namespace: str, r_id: str, dimension: str, *args: Any, **kwargs: Any
    ) -> Any:
        target = original_register(self, namespace, r_id, dimension, *args, **kwargs)
        if _is_component_target(namespace, r_id, dimension):
            _within_range(self, target)
        return target

    models._target_params_are_valid = target_params_are_valid
    setattr(responses.ApplicationAutoScalingResponse, "_validate_params", validate_params)  # noqa: B010
    setattr(backend_cls, "register_scalable_target", register_scalable_target)  # noqa: B010


def _within_range(autoscaling: Any, target: Any) -> None:
    from moto.sagemaker.models import sagemaker_backends

    from mme_triton.local.aws._components import store_of

    name = component_of_resource_id(str(target.resource_id))
    store = store_of(sagemaker_backends[autoscaling.account_id][autoscaling.region_name])
    with store.lock:
        component = store.components.get(name or "")
        if component is None or component.status != "InService":
            return
        current = component.desired
    low = int(target.min_capacity) if target.min_capacity is not None else current
    high = int(target.max_capacity) if target.max_capacity is not None else current
    wanted = min(max(current, low), high)
    if wanted != current:
        set_copies(autoscaling.account_id, autoscaling.region_name, component.name, wanted)
