"""InferenceComponent, ComponentAutoScaling and what deploy_inference_components would send, checked before
any AWS call: CreateInferenceComponent's limits (botocore's ``sagemaker`` model), the rules of
mme_triton._inference_components, the single-model container's Environment, the endpoint config without a
model. Pure tests: nothing here reaches a server."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import boto3
import pytest

from mme_triton import _inference_components as rules
from mme_triton.endpoint import ComponentAutoScaling, InferenceComponent, TritonEnvironment
from mme_triton.endpoint._component_plan import (
    ComponentArguments,
    build_component_plan,
    resolve_components,
)
from mme_triton.endpoint.components import artifact_url_parts
from mme_triton.endpoint.environment import DEFAULT_MODEL_NAME, SHM_DEFAULT_BYTE_SIZE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
URL = "s3://models/ic/"


# -- the rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("linear", None),
        ("a", None),
        ("resnet-50-v2", None),
        ("x" * 63, None),
        ("x" * 64, "at most 63"),
        ("", "must not be empty"),
        ("-linear", "letters, digits and hyphens"),
        ("linear-", "letters, digits and hyphens"),
        ("linear.tar.gz", "letters, digits and hyphens"),
        ("linear_v2", "letters, digits and hyphens"),
        (42, "must be a str"),
    ],
    ids=[
        "plain",
        "one-char",
        "hyphens",
        "63",
        "64",
        "empty",
        "leading-hyphen",
        "trailing-hyphen",
        "dots",
        "underscore",
        "int",
    ],
)
def test_component_name_problem_follows_the_api_pattern(name: Any, problem: str | None) -> None:
    found = rules.component_name_problem(name)
    assert (found is None) if problem is None else (problem in str(found))


def test_check_component_name_raises_type_and_value_errors() -> None:
    assert rules.check_component_name("linear") == "linear"
    with pytest.raises(TypeError):
        rules.check_component_name(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot name an inference component"):
        rules.check_component_name("linear.tar.gz")


def test_component_name_pattern_is_botocores() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model("InvokeEndpoint").input_shape.members["InferenceComponentName"]
    assert shape.metadata["pattern"] == rules.COMPONENT_NAME_PATTERN
    assert shape.metadata["max"] == rules.COMPONENT_NAME_MAX
    assert shape.serialization["name"] == rules.INFERENCE_COMPONENT_HEADER


def test_resource_minimums_are_botocores() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    members = model.shape_for("InferenceComponentComputeResourceRequirements").members
    assert members["MinMemoryRequiredInMb"].metadata["min"] == rules.MIN_MEMORY_MB
    assert members["NumberOfCpuCoresRequired"].metadata["min"] == rules.MIN_CPU_CORES
    assert members["NumberOfAcceleratorDevicesRequired"].metadata["min"] == rules.MIN_ACCELERATORS
    copies = model.shape_for("InferenceComponentRuntimeConfig").members["CopyCount"]
    assert copies.metadata["min"] == rules.MIN_COPY_COUNT
    statuses = model.shape_for("InferenceComponentStatus").enum
    assert set(rules.COMPONENT_STATUSES) == set(statuses)


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        ([{"VariantName": "AllTraffic", "InstanceType": "ml.m5.xlarge"}], True),
        ([{"VariantName": "AllTraffic", "ModelName": "m"}], False),
        ([{"VariantName": "a"}, {"VariantName": "b", "ModelName": "m"}], False),
        ([], False),
    ],
    ids=["no-model", "model", "mixed", "no-variant"],
)
def test_hosts_components_reads_the_config(variants: list[dict[str, Any]], expected: bool) -> None:
    assert rules.hosts_components({"ProductionVariants": variants}) is expected


# -- InferenceComponent --------------------------------------------------------------------------------


def test_inference_component_defaults_and_requirements() -> None:
    component = InferenceComponent("linear", EXAMPLES / "linear")
    assert (component.memory_mb, component.cpus, component.accelerators, component.copies) == (
        1024,
        1,
        None,
        1,
    )
    assert component.compute_resource_requirements() == {
        "MinMemoryRequiredInMb": 1024,
        "NumberOfCpuCoresRequired": 1.0,
    }
    gpu = InferenceComponent("bert", EXAMPLES / "linear", memory="8GiB", cpus=2, accelerators=1)
    assert gpu.compute_resource_requirements() == {
        "MinMemoryRequiredInMb": 8192,
        "NumberOfCpuCoresRequired": 2.0,
        "NumberOfAcceleratorDevicesRequired": 1.0,
    }


@pytest.mark.parametrize(
    ("memory", "mb"),
    [("128MiB", 128), ("1GiB", 1024), ("1GB", 954), ("1.5GiB", 1536), (256 * 2**20, 256), ("200MB", 191)],
    ids=["128MiB", "1GiB", "1GB-rounded-up", "fraction", "bare-bytes", "200MB"],
)
def test_inference_component_memory_in_mib_rounded_up(memory: Any, mb: int) -> None:
    assert InferenceComponent("m", "repo/m", memory=memory).memory_mb == mb


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"name": "m.tar.gz"}, ValueError, "cannot name an inference component"),
        ({"memory": "127MiB"}, ValueError, "at least 128 MiB"),
        ({"memory": 1024}, ValueError, "a bare number is bytes"),
        ({"memory": "lots"}, ValueError, "not a size"),
        ({"cpus": 0.2}, ValueError, r"cpus must be >= 0.25"),
        ({"cpus": float("nan")}, TypeError, "cpus must be a number"),
        ({"cpus": True}, TypeError, "cpus must be a number"),
        ({"accelerators": 0}, ValueError, "accelerators must be >= 1"),
        ({"accelerators": 1.5}, TypeError, "accelerators must be an int"),
        ({"copies": -1}, ValueError, "copies must be >= 0"),
        ({"copies": 1.0}, TypeError, "copies must be an int"),
        ({"environment": "X=1"}, TypeError, "environment must be a TritonEnvironment or a mapping"),
        ({"model": 3}, TypeError, "model must be a model directory"),
        ({"model": "s3://models/ic/"}, ValueError, "not the URL of an uploaded model archive"),
        ({"model": "s3://Bad_Bucket/linear.tar.gz"}, ValueError, "not the URL of an uploaded model archive"),
        ({"autoscaling": {"min": 1}}, TypeError, "autoscaling must be a ComponentAutoScaling"),
        (
            {"copies": 5, "autoscaling": ComponentAutoScaling(0, 4, 100)},
            ValueError,
            r"copies 5 is outside its autoscaling's \[0, 4\]",
        ),
    ],
    ids=[
        "name",
        "memory-min",
        "bare-number",
        "memory-text",
        "cpus-min",
        "cpus-nan",
        "cpus-bool",
        "accelerators-min",
        "accelerators-float",
        "copies-negative",
        "copies-float",
        "environment-type",
        "model-type",
        "url-prefix",
        "url-bucket",
        "autoscaling-type",
        "copies-outside-autoscaling",
    ],
)
def test_inference_component_refuses_what_sagemaker_refuses(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    arguments: dict[str, Any] = {"name": "m", "model": "repo/m", **kwargs}
    name, model = arguments.pop("name"), arguments.pop("model")
    with pytest.raises(error, match=match):
        InferenceComponent(name, model, **arguments)


def test_inference_component_takes_an_uploaded_archive_url() -> None:
    component = InferenceComponent("m", "s3://models/ic/linear-0123456789ab.tar.gz")
    assert artifact_url_parts(str(component.model)) == ("s3://models/ic/", "linear-0123456789ab.tar.gz")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"min_copies": -1}, ValueError, "min_copies must be >= 0"),
        ({"max_copies": 0, "min_copies": 0}, ValueError, "max_copies"),
        ({"min_copies": 3, "max_copies": 2}, ValueError, "max_copies"),
        ({"target_invocations_per_copy": 0}, ValueError, "must be > 0"),
        ({"target_invocations_per_copy": float("inf")}, TypeError, "must be a number"),
        ({"scale_in_cooldown": -1}, ValueError, "cooldowns"),
        ({"min_copies": 1.0}, TypeError, "must be an int"),
    ],
    ids=["min", "max-zero", "max-below-min", "target", "target-inf", "cooldown", "float"],
)
def test_component_autoscaling_refuses_bad_values(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    arguments = {"min_copies": 1, "max_copies": 4, "target_invocations_per_copy": 10.0, **kwargs}
    with pytest.raises(error, match=match):
        ComponentAutoScaling(**arguments)


def test_component_autoscaling_scales_to_zero_only_from_a_minimum_of_zero() -> None:
    assert ComponentAutoScaling(0, 2, 5).scales_to_zero
    assert not ComponentAutoScaling(1, 2, 5).scales_to_zero
    assert "back from zero" in str(ComponentAutoScaling(0, 2, 5))


# -- what a deployment would send -----------------------------------------------------------------------


@functools.cache
def _session() -> Any:
    """One session for the module: its service models are read once (no call reaches AWS)."""
    return boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")


def _arguments(components: Any, **overrides: Any) -> ComponentArguments:
    session = _session()
    values: dict[str, Any] = {
        "endpoint_name": "ic",
        "components": components,
        "role": ROLE,
        "instance_type": "ml.m5.xlarge",
        "instance_count": 1,
        "model_data_url": URL,
        "region": None,
        "image_uri": None,
        "triton_version": "24.09",
        "environment": None,
        "inference_ami_version": None,
        "managed_instance_scaling": None,
        "routing": None,
        "vpc_config": None,
        "enable_network_isolation": False,
        "kms_key_id": None,
        "tags": None,
        "variant_name": "AllTraffic",
        "boto3_session": session,
        **overrides,
    }
    return ComponentArguments(**values)


def _plan(components: Any, **overrides: Any) -> Any:
    resolved = resolve_components(_arguments(components, **overrides), plan_only=True)
    for source in resolved.sources:
        source.url = source.url or f"{URL}{source.model_name}-0123456789ab.tar.gz"
    return resolved, build_component_plan(resolved)


def test_plan_one_single_model_triton_model_per_component_and_a_config_without_model() -> None:
    resolved, plan = _plan(
        [
            InferenceComponent("linear", EXAMPLES / "linear", memory="512MiB", cpus=0.5),
            InferenceComponent("scale", EXAMPLES / "scale", copies=2),
        ],
        managed_instance_scaling=(0, 3),
        routing="RANDOM",
    )
    (variant,) = plan.config_request["ProductionVariants"]
    assert "ModelName" not in variant
    assert variant["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 0,
        "MaxInstanceCount": 3,
    }
    assert variant["RoutingConfig"] == {"RoutingStrategy": "RANDOM"}
    assert plan.config_request["ExecutionRoleArn"] == ROLE
    assert rules.hosts_components(plan.config_request)
    linear, scale = plan.components
    container = linear.model_request["PrimaryContainer"]
    assert "Mode" not in container  # single-model: the serve script loads the archive's one model
    assert container["Image"].endswith("sagemaker-tritonserver:24.09-py3-cpu")
    assert container["ModelDataUrl"] == f"{URL}linear-0123456789ab.tar.gz"
    assert container["Environment"][DEFAULT_MODEL_NAME] == "linear"
    assert SHM_DEFAULT_BYTE_SIZE in container["Environment"]  # the shared-memory defaults, as for an MME
    assert linear.specification == {
        "ModelName": linear.model_name,
        "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 512, "NumberOfCpuCoresRequired": 0.5},
    }
    assert (linear.copies, scale.copies) == (1, 2)
    assert linear.model_name != scale.model_name
    assert plan.model_names == {linear.model_name, scale.model_name}
    assert resolved.warnings == []


def test_plan_names_are_stable_and_follow_the_settings() -> None:
    component = InferenceComponent("linear", EXAMPLES / "linear")
    _, first = _plan([component])
    _, again = _plan([component])
    assert (first.config_name, first.components[0].model_name) == (
        again.config_name,
        again.components[0].model_name,
    )
    _, bigger = _plan([component], instance_type="ml.m5.2xlarge")
    assert bigger.config_name != first.config_name
    assert bigger.components[0].model_name == first.components[0].model_name  # the model did not change
    _, resized = _plan([InferenceComponent("linear", EXAMPLES / "linear", memory="2GiB")])
    assert resized.components[0].model_name == first.components[0].model_name  # resources: the component's
    assert resized.components[0].specification != first.components[0].specification


def test_plan_environment_layers_component_over_deployment_over_defaults() -> None:
    _, plan = _plan(
        [
            InferenceComponent(
                "linear",
                EXAMPLES / "linear",
                environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "2", SHM_DEFAULT_BYTE_SIZE: None},
            ),
            InferenceComponent("scale", EXAMPLES / "scale", environment=TritonEnvironment(thread_count=4)),
        ],
        environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "0", "SAGEMAKER_TRITON_INFERENCE_TYPE": "infer"},
    )
    linear = plan.components[0].model_request["PrimaryContainer"]["Environment"]
    scale = plan.components[1].model_request["PrimaryContainer"]["Environment"]
    assert linear["SAGEMAKER_TRITON_LOG_VERBOSE"] == "2" and SHM_DEFAULT_BYTE_SIZE not in linear
    assert scale["SAGEMAKER_TRITON_LOG_VERBOSE"] == "0" and scale["SAGEMAKER_TRITON_THREAD_COUNT"] == "4"
    assert scale[SHM_DEFAULT_BYTE_SIZE] == str(16 * 2**20)
    # the single-model /invocations route honours the inference type: no MME warning here
    assert scale["SAGEMAKER_TRITON_INFERENCE_TYPE"] == "infer"


@pytest.mark.parametrize(
    ("components", "overrides", "error", "match"),
    [
        ([], {}, ValueError, "components is empty"),
        ("linear", {}, TypeError, "components must be InferenceComponent objects"),
        (
            [InferenceComponent("a", EXAMPLES / "linear"), InferenceComponent("a", EXAMPLES / "scale")],
            {},
            ValueError,
            "several components are named a",
        ),
        (None, {"instance_type": "ml.inf2.xlarge"}, ValueError, "no SageMaker Triton image"),
        (None, {"instance_count": 0}, ValueError, "instance_count must be an int >= 1"),
        (None, {"managed_instance_scaling": (2, 1)}, ValueError, "need 0 <= min <= max"),
        (None, {"managed_instance_scaling": (0, 3), "instance_count": 4}, ValueError, "outside"),
        (None, {"managed_instance_scaling": 3}, TypeError, r"takes \(min, max\)"),
        (None, {"routing": "ROUND_ROBIN"}, ValueError, "routing must be one of"),
        (None, {"variant_name": "all traffic"}, ValueError, "variant name"),
        (None, {"tags": {"aws:x": "y"}}, ValueError, "reserved"),
        (None, {"environment": {"SAGEMAKER_MULTI_MODEL": "true"}}, ValueError, "set by SageMaker"),
        (
            [InferenceComponent("big", EXAMPLES / "linear", memory="64GiB")],
            {},
            ValueError,
            "no instance could place a copy: component 'big' reserves 65536 MiB",
        ),
        (
            [InferenceComponent("busy", EXAMPLES / "linear", cpus=8)],
            {},
            ValueError,
            "reserves 8 cores; ml.m5.xlarge has 4",
        ),
        (
            [InferenceComponent("gpu", EXAMPLES / "linear", accelerators=1)],
            {},
            ValueError,
            "asks for 1 accelerator",
        ),
        (
            [InferenceComponent("g", EXAMPLES / "linear", accelerators=2)],
            {"instance_type": "ml.g5.xlarge"},
            ValueError,
            "asks for 2 GPUs; ml.g5.xlarge has 1",
        ),
        (
            [InferenceComponent("x", EXAMPLES / "linear", environment={DEFAULT_MODEL_NAME: "scale"})],
            {},
            ValueError,
            "names no model of its archive",
        ),
    ],
    ids=[
        "empty",
        "string",
        "duplicate",
        "no-triton",
        "count",
        "managed-bounds",
        "managed-count",
        "managed-type",
        "routing",
        "variant",
        "tag",
        "platform-variable",
        "memory-fits-no-instance",
        "cores-fit-no-instance",
        "accelerator-on-cpu",
        "more-gpus-than-the-type",
        "default-model",
    ],
)
def test_resolve_components_refuses_before_any_call(
    components: Any, overrides: dict[str, Any], error: type[Exception], match: str
) -> None:
    if components is None:
        components = [InferenceComponent("linear", EXAMPLES / "linear")]
    with pytest.raises(error, match=match):
        resolve_components(_arguments(components, **overrides), plan_only=True)


def test_resolve_components_takes_multi_gpu_types_and_warns_of_gpu_less_components() -> None:
    resolved = resolve_components(
        _arguments(
            [
                InferenceComponent("gpu", EXAMPLES / "linear", accelerators=1),
                InferenceComponent("cpu", EXAMPLES / "scale"),
            ],
            instance_type="ml.g5.12xlarge",
        ),
        plan_only=True,
    )
    assert resolved.where.image_uri.endswith(":24.09-py3")
    assert [w for w in resolved.warnings if "reserves no accelerator" in w] == [
        "component 'cpu' reserves no accelerator on GPU instance type ml.g5.12xlarge: its copies see no GPU "
        "(pass accelerators=1 for a model that runs on the GPU)"
    ]


def test_resolve_components_warns_when_copies_reach_zero_but_instances_cannot() -> None:
    component = InferenceComponent("z", EXAMPLES / "linear", autoscaling=ComponentAutoScaling(0, 2, 10))
    kept = resolve_components(_arguments([component]), plan_only=True)
    assert any("managed_instance_scaling=(0, n)" in w for w in kept.warnings)
    released = resolve_components(_arguments([component], managed_instance_scaling=(0, 2)), plan_only=True)
    assert not any("managed_instance_scaling" in w for w in released.warnings)
