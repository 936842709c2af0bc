"""From ``deploy_inference_components``' arguments to what it sends: checks, clients, each component's
model and specification, the endpoint config. Nothing here mutates anything on AWS.

What is sent, per component: a SageMaker model with one single-model Triton container (the region's
Triton image, ``ModelDataUrl`` the component's archive, the ``SAGEMAKER_TRITON_*`` Environment with
``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` the model directory inside the archive, which the container's serve
script loads) and a CreateInferenceComponent ``Specification`` (that model, the memory, cores and
accelerators of a copy); for the endpoint, a config whose variant names no model, with the execution role
SageMaker requires on it for components. Model and config names are the endpoint name plus a hash of their
settings, as ``deploy_mme`` names its own, so a re-run with the same arguments names the same resources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._inference_components import ROUTING_STRATEGIES
from mme_triton.endpoint._inputs import (
    check_kms_key,
    check_vpc,
    environment_dict,
    normalise_tags,
)
from mme_triton.endpoint._plan import EndpointPlan, resource_tags
from mme_triton.endpoint._resolve import EndpointArguments, Reach, check_endpoint_arguments, reach
from mme_triton.endpoint._resources import config_name_for, model_name_for, settings_hash
from mme_triton.endpoint.components import InferenceComponent, is_artifact_url
from mme_triton.endpoint.environment import DEFAULT_MODEL_NAME, TritonEnvironment
from mme_triton.endpoint.instance_specs import INSTANCE_TYPES
from mme_triton.endpoint.instances import check_inference_ami_version, check_instance_type, gpu_warnings

if TYPE_CHECKING:
    from mme_triton.endpoint.component_scaling import ComponentAutoScaling

__all__ = [
    "ComponentArguments",
    "ComponentPlan",
    "ComponentSource",
    "ComponentSpec",
    "ResolvedComponents",
    "build_component_plan",
    "resolve_components",
]


@dataclass(kw_only=True)
class ComponentArguments(EndpointArguments):
    """``deploy_inference_components``' arguments about what to deploy, as the caller gave them."""

    components: Any
    managed_instance_scaling: tuple[int, int] | None
    routing: str | None


@dataclass
class ComponentSource:
    """Where one component's archive comes from, and what is known of it before any upload."""

    component: InferenceComponent
    upload: Any = None
    """The model directory or Artifact to upload under the prefix (None: already uploaded)."""
    url: str | None = None
    """The archive's URL, when known (an UploadedArtifact, an s3:// URL, or once uploaded)."""
    model_name: str | None = None
    """The model directory at the archive's root that the container serves, when known."""
    members: tuple[str, ...] = ()
    """Every model directory at the archive's root, when known."""


@dataclass
class ComponentSpec:
    """One component as it would be sent: its SageMaker model and CreateInferenceComponent's parts."""

    name: str
    model_name: str
    model_request: dict[str, Any]
    specification: dict[str, Any]
    copies: int
    artifact_url: str
    autoscaling: ComponentAutoScaling | None = None


@dataclass
class ComponentPlan(EndpointPlan):
    """Every SageMaker resource of one ``deploy_inference_components`` call."""

    components: list[ComponentSpec] = field(default_factory=list)

    @property
    def model_names(self) -> set[str]:
        """The SageMaker models the components name."""
        return {spec.model_name for spec in self.components}


@dataclass
class ResolvedComponents:
    """The checked arguments: where and how (see :class:`~mme_triton.endpoint._resolve.Reach`), each
    component's source and Environment, the config request, the warnings to give."""

    args: ComponentArguments
    where: Reach
    sources: list[ComponentSource]
    environments: dict[str, dict[str, str]]
    config_request: dict[str, Any]
    tags: dict[str, str]
    vpc: dict[str, list[str]] | None
    warnings: list[str] = field(default_factory=list)


def _components(value: Any) -> list[InferenceComponent]:
    if isinstance(value, InferenceComponent):
        return [value]
    if isinstance(value, str | bytes | os.PathLike | Mapping) or not hasattr(value, "__iter__"):
        raise TypeError(f"components must be InferenceComponent objects, got {type(value).__name__}")
    found = list(value)
    for item in found:
        if not isinstance(item, InferenceComponent):
            raise TypeError(f"components must be InferenceComponent objects, got {type(item).__name__}")
    if not found:
        raise ValueError("components is empty: an endpoint of inference components needs at least one")
    names = [c.name for c in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"several components are named {', '.join(twice)}")
    return found


def _managed_scaling(value: Any, count: int) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        low, high = value
    except (TypeError, ValueError):
        raise TypeError(f"managed_instance_scaling takes (min, max) instance counts, got {value!r}") from None
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise TypeError(f"managed_instance_scaling takes int instance counts, got {value!r}")
    if low < 0 or high < max(1, low):
        raise ValueError(f"managed_instance_scaling ({low}, {high}): need 0 <= min <= max and max >= 1")
    if not low <= count <= high:
        raise ValueError(f"instance_count {count} is outside managed_instance_scaling's [{low}, {high}]")
    return {"Status": "ENABLED", "MinInstanceCount": low, "MaxInstanceCount": high}


def _fit_problems(component: InferenceComponent, instance_type: str, is_gpu: bool) -> list[str]:
    """Why no instance of ``instance_type`` could hold one copy of ``component`` (its hardware known)."""
    name = f"component {component.name!r}"
    if component.accelerators is not None and not is_gpu:
        return [f"{name} asks for {component.accelerators} accelerator(s) on {instance_type}"]
    spec = INSTANCE_TYPES.get(instance_type)
    if spec is None:
        return []
    problems = []
    if component.memory_mb * (1 << 20) > spec.memory_bytes:
        problems.append(
            f"{name} reserves {component.memory_mb} MiB per copy; {instance_type} has "
            f"{spec.memory_bytes >> 20} MiB"
        )
    if component.cpus > spec.vcpus:
        problems.append(f"{name} reserves {component.cpus:g} cores; {instance_type} has {spec.vcpus}")
    if component.accelerators is not None and component.accelerators > spec.gpus:
        problems.append(f"{name} asks for {component.accelerators} GPUs; {instance_type} has {spec.gpus}")
    return problems


def _environment(
    base: TritonEnvironment | Mapping[str, str | None] | None, component: InferenceComponent
) -> dict[str, str]:
    """The component's Environment: its own over the deployment's over the shared-memory defaults."""
    merged: dict[str, str | None] = {}
    for layer in (base, component.environment):
        if isinstance(layer, TritonEnvironment):
            merged.update(layer.to_environment(multi_model=False))
        elif layer is not None:
            merged.update(layer)
    return environment_dict(merged, multi_model=False)


def _source(component: InferenceComponent) -> ComponentSource:
    from mme_triton.artifact.package import Artifact
    from mme_triton.artifact.s3 import UploadedArtifact

    model = component.model
    if isinstance(model, UploadedArtifact):
        return ComponentSource(component, url=model.url, model_name=model.model_name, members=model.members)
    if isinstance(model, Artifact):
        return ComponentSource(component, upload=model, model_name=model.model_name, members=model.members)
    if is_artifact_url(model):
        return ComponentSource(component, url=str(model))
    directory = Path(model).resolve()
    return ComponentSource(component, upload=model, model_name=directory.name)


def resolve_components(args: ComponentArguments, *, plan_only: bool = False) -> ResolvedComponents:
    """Check every argument (no AWS call before that), then derive the SageMaker SDK's defaults and make
    the clients. The components' archives are neither read nor uploaded here.

    Raises:
        ValueError, TypeError: an argument AWS would refuse (see ``deploy_inference_components``).
    """
    check_endpoint_arguments(args)
    components = _components(args.components)
    instance = check_instance_type(args.instance_type, multi_model=False)
    count = args.instance_count
    managed = _managed_scaling(args.managed_instance_scaling, count)
    if args.routing is not None and args.routing not in ROUTING_STRATEGIES:
        raise ValueError(
            f"routing must be one of {', '.join(ROUTING_STRATEGIES)} or None, got {args.routing!r}"
        )
    ami = check_inference_ami_version(args.inference_ami_version)
    vpc = check_vpc(args.vpc_config)
    check_kms_key(args.kms_key_id)
    user_tags = normalise_tags(args.tags)
    environments = {c.name: _environment(args.environment, c) for c in components}
    problems = [p for c in components for p in _fit_problems(c, args.instance_type, instance.is_gpu)]
    if problems:
        raise ValueError("no instance could place a copy: " + "; ".join(problems))
    sources = [_source(c) for c in components]
    for source in sources:
        _check_default_model(source, environments[source.component.name])

    where = reach(args, gpu=instance.is_gpu, plan_only=plan_only)
    warnings = [*instance.warnings, *gpu_warnings(args.instance_type, where.version, ami)]
    if instance.is_gpu:
        warnings += [
            f"component {c.name!r} reserves no accelerator on GPU instance type {args.instance_type}: its "
            "copies see no GPU (pass accelerators=1 for a model that runs on the GPU)"
            for c in components
            if c.accelerators is None
        ]
    if managed is None or managed["MinInstanceCount"] > 0:
        warnings += [
            f"component {c.name!r} scales to zero copies, but the endpoint keeps its instances: pass "
            "managed_instance_scaling=(0, n) to let SageMaker release them too"
            for c in components
            if c.autoscaling is not None and c.autoscaling.scales_to_zero
        ]
    variant: dict[str, Any] = {
        "VariantName": args.variant_name,
        "InstanceType": args.instance_type,
        "InitialInstanceCount": count,
    }
    if managed is not None:
        variant["ManagedInstanceScaling"] = managed
    if args.routing is not None:
        variant["RoutingConfig"] = {"RoutingStrategy": args.routing}
    if ami is not None:
        variant["InferenceAmiVersion"] = ami
    config_request: dict[str, Any] = {"ExecutionRoleArn": where.role, "ProductionVariants": [variant]}
    if args.kms_key_id is not None:
        config_request["KmsKeyId"] = args.kms_key_id
    return ResolvedComponents(
        args=args,
        where=where,
        sources=sources,
        environments=environments,
        config_request=config_request,
        tags=user_tags,
        vpc=vpc,
        warnings=warnings,
    )


def _check_default_model(source: ComponentSource, environment: Mapping[str, str]) -> None:
    """Refuse a ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` that names no model of a known archive (the
    container's serve script exits: "Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME ... does
    not exist")."""
    chosen = environment.get(DEFAULT_MODEL_NAME)
    known = source.members or ((source.model_name,) if source.model_name else ())
    if chosen is not None and known and chosen not in known:
        raise ValueError(
            f"component {source.component.name!r}: {DEFAULT_MODEL_NAME}={chosen!r} names no model of its "
            f"archive ({', '.join(known)}); the container would exit"
        )


def build_component_plan(resolved: ResolvedComponents) -> ComponentPlan:
    """The plan once every source's URL is known (uploaded, or planned under its versioned name)."""
    args, where = resolved.args, resolved.where
    specs = []
    for source in resolved.sources:
        component = source.component
        assert source.url is not None, f"{component.name}: no archive URL"
        environment = dict(resolved.environments[component.name])
        if source.model_name is not None:
            environment.setdefault(DEFAULT_MODEL_NAME, source.model_name)
        container: dict[str, Any] = {
            "Image": where.image_uri,
            "ModelDataUrl": source.url,
            "Environment": environment,
        }
        model_request: dict[str, Any] = {"ExecutionRoleArn": where.role, "PrimaryContainer": container}
        if resolved.vpc is not None:
            model_request["VpcConfig"] = dict(resolved.vpc)
        if args.enable_network_isolation:
            model_request["EnableNetworkIsolation"] = True
        model_name = model_name_for(args.endpoint_name, settings_hash(model_request))
        specs.append(
            ComponentSpec(
                name=component.name,
                model_name=model_name,
                model_request=model_request,
                specification={
                    "ModelName": model_name,
                    "ComputeResourceRequirements": component.compute_resource_requirements(),
                },
                copies=component.copies,
                artifact_url=source.url,
                autoscaling=component.autoscaling,
            )
        )
    config_request = resolved.config_request
    return ComponentPlan(
        endpoint_name=args.endpoint_name,
        model_data_url=where.model_data_url,
        config_name=config_name_for(args.endpoint_name, settings_hash(config_request)),
        config_request=config_request,
        tags=resource_tags(args.endpoint_name, resolved.tags),
        variant_name=args.variant_name,
        components=specs,
    )
