"""The endpoint stage: SageMaker resources around the artifacts.

- :func:`~mme_triton.endpoint.images.triton_image_uri` — the SageMaker Triton image for a region/version;
- :data:`~mme_triton.endpoint.instance_specs.INSTANCE_TYPES` — each instance type's hardware, price and
  memory for models (:class:`~mme_triton.endpoint.instance_specs.InstanceType`);
- :class:`~mme_triton.endpoint.environment.TritonEnvironment` — the ``SAGEMAKER_TRITON_*`` settings;
- :func:`~mme_triton.endpoint.deploy.deploy_mme` → :class:`~mme_triton.endpoint.handle.Endpoint`, with
  optional :class:`~mme_triton.endpoint.autoscaling.AutoScaling`;
- :func:`~mme_triton.endpoint.deploy_components.deploy_inference_components` → the same handle, for
  :class:`~mme_triton.endpoint.components.InferenceComponent` objects, each with optional
  :class:`~mme_triton.endpoint.component_scaling.ComponentAutoScaling`;
- :func:`~mme_triton.endpoint.planning.plan_deployment` → what deploy_mme would do, as a
  :class:`~mme_triton.endpoint.planning.DeploymentPlan` (read calls only), and
  :func:`~mme_triton.endpoint.planning_components.plan_inference_components` → a
  :class:`~mme_triton.endpoint.planning_components.ComponentDeploymentPlan` for inference components;
- :func:`~mme_triton.endpoint.models.endpoint_models` — the TargetModels a live endpoint serves
  (:func:`~mme_triton.endpoint.models.endpoint_components`: its inference components);
- :func:`~mme_triton.endpoint.metrics.endpoint_metrics` →
  :class:`~mme_triton.endpoint.metrics.EndpointMetrics` — what it is doing, from CloudWatch;
- :func:`~mme_triton.endpoint.teardown.teardown` and :func:`~mme_triton.endpoint.teardown.sweep` →
  :class:`~mme_triton.endpoint.teardown.TeardownReport`.
"""

from __future__ import annotations

from mme_triton.endpoint.autoscaling import AutoScaling
from mme_triton.endpoint.component_scaling import ComponentAutoScaling
from mme_triton.endpoint.components import InferenceComponent
from mme_triton.endpoint.deploy import deploy_mme
from mme_triton.endpoint.deploy_components import deploy_inference_components
from mme_triton.endpoint.environment import TritonEnvironment, validate_environment
from mme_triton.endpoint.handle import Endpoint
from mme_triton.endpoint.images import triton_image_uri
from mme_triton.endpoint.metrics import EndpointMetrics, MetricPoint, endpoint_metrics
from mme_triton.endpoint.models import endpoint_components, endpoint_model_data_url, endpoint_models
from mme_triton.endpoint.planning import DeploymentPlan, PlannedUpload, plan_deployment
from mme_triton.endpoint.planning_components import (
    ComponentDeploymentPlan,
    PlannedComponent,
    plan_inference_components,
)
from mme_triton.endpoint.teardown import TeardownError, TeardownReport, sweep, teardown

__all__ = [
    "AutoScaling",
    "ComponentAutoScaling",
    "ComponentDeploymentPlan",
    "DeploymentPlan",
    "Endpoint",
    "EndpointMetrics",
    "InferenceComponent",
    "MetricPoint",
    "PlannedComponent",
    "PlannedUpload",
    "TeardownError",
    "TeardownReport",
    "TritonEnvironment",
    "deploy_inference_components",
    "deploy_mme",
    "endpoint_components",
    "endpoint_metrics",
    "endpoint_model_data_url",
    "endpoint_models",
    "plan_deployment",
    "plan_inference_components",
    "sweep",
    "teardown",
    "triton_image_uri",
    "validate_environment",
]
