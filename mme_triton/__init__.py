"""mme_triton: Triton model repositories to SageMaker multi-model endpoints, and back.

The public API is flat: everything below is importable from ``mme_triton`` directly. Submodules are
imported on first use, so ``import mme_triton`` stays cheap (no boto3, no protobuf, no numpy until needed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mme_triton.errors import (
    ArtifactConflictError,
    ArtifactError,
    CodecError,
    DeploymentError,
    DeploymentTimeoutError,
    EndpointError,
    EndpointFailedError,
    EndpointNotFoundError,
    ExportError,
    InferenceComponentNotFoundError,
    InferenceError,
    InvalidInputError,
    LocalStackError,
    MMETritonError,
    MMETritonWarning,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    ModelOutOfMemoryError,
    ModelValidationError,
    NoCapacityError,
    PayloadTooLargeError,
    ProfileError,
    TeardownError,
    ThrottlingError,
    UnsupportedPlatformError,
)

if TYPE_CHECKING:
    from mme_triton.artifact.digest import content_digest
    from mme_triton.artifact.package import Artifact, package_model
    from mme_triton.artifact.s3 import UploadedArtifact, list_models, remove_model, upload_models
    from mme_triton.capacity.plan import CapacityPlan, plan_capacity
    from mme_triton.capacity.profile import ModelProfile
    from mme_triton.capacity.traffic import Traffic
    from mme_triton.client.aio import AsyncMMEClient
    from mme_triton.client.client import MMEClient
    from mme_triton.client.codec import (
        InferInput,
        InferRequestedOutput,
        decode_response,
        encode_request,
    )
    from mme_triton.endpoint.autoscaling import AutoScaling
    from mme_triton.endpoint.component_scaling import ComponentAutoScaling
    from mme_triton.endpoint.components import InferenceComponent
    from mme_triton.endpoint.deploy import deploy_mme
    from mme_triton.endpoint.deploy_components import deploy_inference_components
    from mme_triton.endpoint.environment import TritonEnvironment
    from mme_triton.endpoint.handle import Endpoint
    from mme_triton.endpoint.images import triton_image_uri
    from mme_triton.endpoint.instance_specs import INSTANCE_TYPES, InstanceType
    from mme_triton.endpoint.metrics import EndpointMetrics, endpoint_metrics
    from mme_triton.endpoint.planning import DeploymentPlan, plan_deployment
    from mme_triton.endpoint.planning_components import ComponentDeploymentPlan, plan_inference_components
    from mme_triton.endpoint.teardown import TeardownReport, sweep, teardown
    from mme_triton.model.authoring import configure_model, read_config
    from mme_triton.model.ensemble_builder import EnsembleStep, build_ensemble
    from mme_triton.model.options import DynamicBatching, InstanceGroup, ModelWarmup, TensorRT
    from mme_triton.model.perf_data import perf_analyzer_data
    from mme_triton.model.problems import Problem
    from mme_triton.model.python_model import TensorSpec, new_python_model
    from mme_triton.model.repository import TritonModel, load_model
    from mme_triton.model.validate import validate_model, validate_repository
    from mme_triton.profile.candidates import Candidate
    from mme_triton.profile.report import ProfileReport
    from mme_triton.profile.run import profile_model

__version__ = "0.1.0"

# name -> module that defines it; resolved lazily by __getattr__ below.
_LAZY: dict[str, str] = {
    "validate_model": "mme_triton.model.validate",
    "validate_repository": "mme_triton.model.validate",
    "load_model": "mme_triton.model.repository",
    "TritonModel": "mme_triton.model.repository",
    "Problem": "mme_triton.model.problems",
    "content_digest": "mme_triton.artifact.digest",
    "UploadedArtifact": "mme_triton.artifact.s3",
    "package_model": "mme_triton.artifact.package",
    "Artifact": "mme_triton.artifact.package",
    "upload_models": "mme_triton.artifact.s3",
    "list_models": "mme_triton.artifact.s3",
    "remove_model": "mme_triton.artifact.s3",
    "triton_image_uri": "mme_triton.endpoint.images",
    "TritonEnvironment": "mme_triton.endpoint.environment",
    "deploy_mme": "mme_triton.endpoint.deploy",
    "deploy_inference_components": "mme_triton.endpoint.deploy_components",
    "InferenceComponent": "mme_triton.endpoint.components",
    "ComponentAutoScaling": "mme_triton.endpoint.component_scaling",
    "plan_deployment": "mme_triton.endpoint.planning",
    "DeploymentPlan": "mme_triton.endpoint.planning",
    "plan_inference_components": "mme_triton.endpoint.planning_components",
    "ComponentDeploymentPlan": "mme_triton.endpoint.planning_components",
    "Endpoint": "mme_triton.endpoint.handle",
    "endpoint_metrics": "mme_triton.endpoint.metrics",
    "EndpointMetrics": "mme_triton.endpoint.metrics",
    "AutoScaling": "mme_triton.endpoint.autoscaling",
    "teardown": "mme_triton.endpoint.teardown",
    "sweep": "mme_triton.endpoint.teardown",
    "TeardownReport": "mme_triton.endpoint.teardown",
    "MMEClient": "mme_triton.client.client",
    "AsyncMMEClient": "mme_triton.client.aio",
    "encode_request": "mme_triton.client.codec",
    "decode_response": "mme_triton.client.codec",
    "InferInput": "mme_triton.client.codec",
    "InferRequestedOutput": "mme_triton.client.codec",
    "configure_model": "mme_triton.model.authoring",
    "read_config": "mme_triton.model.authoring",
    "DynamicBatching": "mme_triton.model.options",
    "InstanceGroup": "mme_triton.model.options",
    "ModelWarmup": "mme_triton.model.options",
    "TensorRT": "mme_triton.model.options",
    "build_ensemble": "mme_triton.model.ensemble_builder",
    "EnsembleStep": "mme_triton.model.ensemble_builder",
    "new_python_model": "mme_triton.model.python_model",
    "TensorSpec": "mme_triton.model.python_model",
    "perf_analyzer_data": "mme_triton.model.perf_data",
    "profile_model": "mme_triton.profile.run",
    "Candidate": "mme_triton.profile.candidates",
    "ProfileReport": "mme_triton.profile.report",
    "ModelProfile": "mme_triton.capacity.profile",
    "Traffic": "mme_triton.capacity.traffic",
    "InstanceType": "mme_triton.endpoint.instance_specs",
    "INSTANCE_TYPES": "mme_triton.endpoint.instance_specs",
    "plan_capacity": "mme_triton.capacity.plan",
    "CapacityPlan": "mme_triton.capacity.plan",
}

# In Python's sort order (tests/test_public_api.py), which puts INSTANCE_TYPES where isort-style would not.
__all__ = [  # noqa: RUF022
    "Artifact",
    "ArtifactConflictError",
    "ArtifactError",
    "AsyncMMEClient",
    "AutoScaling",
    "Candidate",
    "CapacityPlan",
    "CodecError",
    "ComponentAutoScaling",
    "ComponentDeploymentPlan",
    "DeploymentError",
    "DeploymentPlan",
    "DeploymentTimeoutError",
    "DynamicBatching",
    "Endpoint",
    "EndpointError",
    "EndpointFailedError",
    "EndpointMetrics",
    "EndpointNotFoundError",
    "EnsembleStep",
    "ExportError",
    "INSTANCE_TYPES",
    "InferInput",
    "InferRequestedOutput",
    "InferenceComponent",
    "InferenceComponentNotFoundError",
    "InferenceError",
    "InstanceGroup",
    "InstanceType",
    "InvalidInputError",
    "LocalStackError",
    "MMEClient",
    "MMETritonError",
    "MMETritonWarning",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelNotReadyError",
    "ModelOutOfMemoryError",
    "ModelProfile",
    "ModelValidationError",
    "ModelWarmup",
    "NoCapacityError",
    "PayloadTooLargeError",
    "Problem",
    "ProfileError",
    "ProfileReport",
    "TeardownError",
    "TeardownReport",
    "TensorRT",
    "TensorSpec",
    "ThrottlingError",
    "Traffic",
    "TritonEnvironment",
    "TritonModel",
    "UnsupportedPlatformError",
    "UploadedArtifact",
    "__version__",
    "build_ensemble",
    "configure_model",
    "content_digest",
    "decode_response",
    "deploy_inference_components",
    "deploy_mme",
    "encode_request",
    "endpoint_metrics",
    "list_models",
    "load_model",
    "new_python_model",
    "package_model",
    "perf_analyzer_data",
    "plan_capacity",
    "plan_deployment",
    "plan_inference_components",
    "profile_model",
    "read_config",
    "remove_model",
    "sweep",
    "teardown",
    "triton_image_uri",
    "upload_models",
    "validate_model",
    "validate_repository",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mme_triton' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
