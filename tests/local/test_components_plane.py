"""Inference components in the control plane alone (no Triton): the six operations in the API's shapes,
their status transitions, what SageMaker refuses and in what words, where copies go, and Application Auto
Scaling's inference-component targets.

The control plane runs without the stack's route here, so a component's copies are only bookkeeping:
``InService`` once placed. The stack's tests (test_stack_components.py) run the same calls with real copies.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from api_shapes import ResponseRecorder
from components_helpers import error_of as error_with_status
from components_helpers import wait_for

from mme_triton._inference_components import COPY_COUNT_DIMENSION, resource_id
from mme_triton.local.aws._components import NO_ROOM

pytestmark = pytest.mark.moto

REQUIREMENTS = {"MinMemoryRequiredInMb": 1024, "NumberOfCpuCoresRequired": 1}


def error_of(call: Callable[[], Any]) -> tuple[str, str]:
    code, message, _ = error_with_status(call)
    return code, message


def _recorded_plane(transition_delay: float) -> Iterator[Any]:
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane(transition_delay=transition_delay) as control_plane:
        session = control_plane.boto3_session()
        control_plane.answers = ResponseRecorder(session)  # type: ignore[attr-defined]
        control_plane.sm = session.client("sagemaker")  # type: ignore[attr-defined]
        control_plane.role = control_plane.execution_role()  # type: ignore[attr-defined]
        control_plane.sm.create_model(  # type: ignore[attr-defined]
            ModelName="m",
            ExecutionRoleArn=control_plane.role,  # type: ignore[attr-defined]
            PrimaryContainer={
                "Image": "img",
                "ModelDataUrl": "s3://b/ic/linear.tar.gz",
                "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "linear"},
            },
        )
        yield control_plane


@pytest.fixture(scope="module")
def ic_plane() -> Iterator[Any]:
    """A control plane whose answers are recorded (``.answers``), with a model ``m`` to host."""
    yield from _recorded_plane(0.05)


@pytest.fixture(scope="module")
def slow_plane() -> Iterator[Any]:
    """The same, whose transitions take a second: time to read a component in each transitional status
    (a loaded machine may take longer than ``ic_plane``'s 0.05 s to read it)."""
    yield from _recorded_plane(1.0)


def ic_endpoint(
    plane: Any,
    name: str,
    *,
    instances: int = 1,
    managed: dict[str, Any] | None = None,
    instance_type: str = "ml.m5.xlarge",
    routing: str | None = None,
) -> str:
    """An in-service endpoint that hosts components (its variant names no model)."""
    variant: dict[str, Any] = {
        "VariantName": "AllTraffic",
        "InstanceType": instance_type,
        "InitialInstanceCount": instances,
    }
    if managed is not None:
        variant["ManagedInstanceScaling"] = {"Status": "ENABLED", **managed}
    if routing is not None:
        variant["RoutingConfig"] = {"RoutingStrategy": routing}
    plane.sm.create_endpoint_config(
        EndpointConfigName=name, ExecutionRoleArn=plane.role, ProductionVariants=[variant]
    )
    plane.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    assert wait_for(lambda: plane.sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")
    return name


def create(
    plane: Any,
    name: str,
    endpoint: str,
    *,
    copies: int = 1,
    requirements: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    plane.sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification={
            "ModelName": "m",
            "ComputeResourceRequirements": requirements or REQUIREMENTS,
            **extra,
        },
        RuntimeConfig={"CopyCount": copies},
    )
    return settled(plane, name)


def settled(plane: Any, name: str) -> dict[str, Any]:
    """The component's description once no transition runs."""

    def done() -> dict[str, Any] | None:
        found = plane.sm.describe_inference_component(InferenceComponentName=name)
        return found if found["InferenceComponentStatus"] in ("InService", "Failed") else None

    found = wait_for(done)
    assert found, f"{name} stayed in transition"
    return dict(found)


# -- the answers ---------------------------------------------------------------------------------------------


def test_components_every_operation_answers_in_the_api_shape_through_every_status(slow_plane: Any) -> None:
    sm = slow_plane.sm
    ic_endpoint(slow_plane, "shapes-ep")
    sm.create_inference_component(
        InferenceComponentName="shapes-ic",
        EndpointName="shapes-ep",
        VariantName="AllTraffic",
        Specification={"ModelName": "m", "ComputeResourceRequirements": REQUIREMENTS},
        RuntimeConfig={"CopyCount": 1},
        Tags=[{"Key": "team", "Value": "shapes"}],
    )
    creating = sm.describe_inference_component(InferenceComponentName="shapes-ic")
    assert creating["InferenceComponentStatus"] == "Creating"
    assert creating["RuntimeConfig"] == {"DesiredCopyCount": 1, "CurrentCopyCount": 0}
    assert settled(slow_plane, "shapes-ic")["RuntimeConfig"]["CurrentCopyCount"] == 1
    sm.update_inference_component_runtime_config(
        InferenceComponentName="shapes-ic", DesiredRuntimeConfig={"CopyCount": 2}
    )
    updating = sm.describe_inference_component(InferenceComponentName="shapes-ic")
    assert updating["InferenceComponentStatus"] == "Updating"
    assert updating["RuntimeConfig"]["DesiredCopyCount"] == 2
    assert settled(slow_plane, "shapes-ic")["RuntimeConfig"]["PlacementStatus"] == [
        {"InstanceType": "ml.m5.xlarge", "CurrentCopyCount": 2}
    ]
    sm.update_inference_component(
        InferenceComponentName="shapes-ic",
        Specification={"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 512}},
        RuntimeConfig={"CopyCount": 1},
    )
    updated = settled(slow_plane, "shapes-ic")
    assert updated["Specification"]["ComputeResourceRequirements"] == {"MinMemoryRequiredInMb": 512}
    assert updated["Specification"]["ModelName"] == "m"
    sm.list_inference_components(EndpointNameEquals="shapes-ep")
    arn = updated["InferenceComponentArn"]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "team", "Value": "shapes"}]
    sm.delete_inference_component(InferenceComponentName="shapes-ic")
    deleting = sm.describe_inference_component(InferenceComponentName="shapes-ic")
    assert deleting["InferenceComponentStatus"] == "Deleting"
    assert wait_for(lambda: not sm.list_inference_components(NameContains="shapes-ic")["InferenceComponents"])
    operations = {answer.operation for answer in slow_plane.answers.answers}
    assert {
        "CreateInferenceComponent",
        "DescribeInferenceComponent",
        "ListInferenceComponents",
        "UpdateInferenceComponent",
        "UpdateInferenceComponentRuntimeConfig",
        "DeleteInferenceComponent",
    } <= operations
    assert [problem for answer in slow_plane.answers.answers for problem in answer.problems()] == []


def test_components_arn_and_description_name_the_endpoint(ic_plane: Any) -> None:
    ic_endpoint(ic_plane, "arn-ep")
    found = create(ic_plane, "Arn-IC", "arn-ep")
    account, region = ic_plane.account_id, ic_plane.region
    assert (
        found["InferenceComponentArn"] == f"arn:aws:sagemaker:{region}:{account}:inference-component/arn-ic"
    )
    assert found["EndpointArn"] == ic_plane.sm.describe_endpoint(EndpointName="arn-ep")["EndpointArn"]
    assert (found["EndpointName"], found["VariantName"]) == ("arn-ep", "AllTraffic")
    assert "FailureReason" not in found


@pytest.mark.sagemaker
def test_components_sdk_core_parses_every_component_answer(ic_plane: Any) -> None:
    """The SDK v3 resource class ``InferenceComponent`` (and the list's summary shape) take each answer."""
    from sagemaker.core import resources, shapes
    from sagemaker.core.utils.code_injection.codec import transform

    ic_endpoint(ic_plane, "sdk-ep")
    create(ic_plane, "sdk-ic", "sdk-ep", copies=2)
    ic_plane.sm.list_inference_components()
    parsed = 0
    for answer in ic_plane.answers.answers:
        if answer.operation == "DescribeInferenceComponent":
            fields = transform(answer.parsed, "DescribeInferenceComponentOutput")
            assert resources.InferenceComponent(**fields).get_name()
            parsed += 1
        elif answer.operation == "ListInferenceComponents":
            for item in answer.parsed["InferenceComponents"]:
                shapes.InferenceComponentSummary(**transform(item, "InferenceComponentSummary"))
                parsed += 1
    assert parsed >= 2


@pytest.mark.sagemaker
def test_components_sdk_v3_inference_component_class_creates_waits_updates_and_deletes(ic_plane: Any) -> None:
    """``sagemaker.core.resources.InferenceComponent`` drives the control plane as it drives SageMaker."""
    from sagemaker.core.resources import InferenceComponent
    from sagemaker.core.shapes import (
        InferenceComponentComputeResourceRequirements,
        InferenceComponentRuntimeConfig,
        InferenceComponentSpecification,
    )

    ic_endpoint(ic_plane, "sdk-class-ep")
    where = {"session": ic_plane.boto3_session(), "region": ic_plane.region}
    created = InferenceComponent.create(
        inference_component_name="sdk-class-ic",
        endpoint_name="sdk-class-ep",
        variant_name="AllTraffic",
        specification=InferenceComponentSpecification(
            model_name="m",
            compute_resource_requirements=InferenceComponentComputeResourceRequirements(
                min_memory_required_in_mb=512
            ),
        ),
        runtime_config=InferenceComponentRuntimeConfig(copy_count=1),
        **where,
    )
    created.wait_for_status("InService", poll=1)
    created.update(runtime_config=InferenceComponentRuntimeConfig(copy_count=2))
    created.wait_for_status("InService", poll=1)
    found = InferenceComponent.get("sdk-class-ic", **where)
    assert (found.runtime_config.desired_copy_count, found.runtime_config.current_copy_count) == (2, 2)
    assert "sdk-class-ic" in [c.inference_component_name for c in InferenceComponent.get_all(**where)]
    found.delete()
    found.wait_for_delete(poll=1)
    assert not ic_plane.sm.list_inference_components(NameContains="sdk-class-ic")["InferenceComponents"]


# -- what SageMaker refuses ------------------------------------------------------------------------------


REFUSALS = [
    (
        "unknown-endpoint",
        {"EndpointName": "nowhere"},
        'Could not find endpoint "arn:aws:sagemaker:{region}:{account}:endpoint/nowhere".',
    ),
    ("unknown-variant", {"VariantName": "Other"}, 'Could not find variant "Other" in endpoint'),
    (
        "zero-copies",
        {"RuntimeConfig": {"CopyCount": 0}},
        "Inference components copy count an integer larger than 0",
    ),
    (
        "unknown-model",
        {"Specification": {"ModelName": "nope", "ComputeResourceRequirements": REQUIREMENTS}},
        'Could not find model "arn:aws:sagemaker:{region}:{account}:model/nope".',
    ),
    (
        "no-requirements",
        {"Specification": {"ModelName": "m"}},
        "Specification.ComputeResourceRequirements is required",
    ),
    (
        "max-below-min",
        {
            "Specification": {
                "ModelName": "m",
                "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 2048, "MaxMemoryRequiredInMb": 1024},
            }
        },
        "MaxMemoryRequiredInMb (1024) must be greater than or equal to MinMemoryRequiredInMb (2048).",
    ),
    (
        "accelerators-on-cpu",
        {
            "Specification": {
                "ModelName": "m",
                "ComputeResourceRequirements": {
                    "MinMemoryRequiredInMb": 1024,
                    "NumberOfAcceleratorDevicesRequired": 1,
                },
            }
        },
        "has no accelerator devices",
    ),
    (
        "instance-pools",
        {"Specifications": [{"ModelName": "m", "ComputeResourceRequirements": REQUIREMENTS}]},
        "not Specifications (instance pools)",
    ),
    (
        "adapter",
        {"Specification": {"BaseInferenceComponentName": "base"}},
        "does not serve adapter inference components",
    ),
    ("no-runtime-config", {"RuntimeConfig": None}, "RuntimeConfig is required"),
]


@pytest.mark.parametrize(("change", "message"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_components_create_refusals_are_sagemakers_validation_errors(
    ic_plane: Any, change: dict[str, Any], message: str
) -> None:
    if "refusals-ep" not in _endpoints(ic_plane):
        ic_endpoint(ic_plane, "refusals-ep")
    request: dict[str, Any] = {
        "InferenceComponentName": "refused",
        "EndpointName": "refusals-ep",
        "VariantName": "AllTraffic",
        "Specification": {"ModelName": "m", "ComputeResourceRequirements": REQUIREMENTS},
        "RuntimeConfig": {"CopyCount": 1},
        **change,
    }
    request = {key: value for key, value in request.items() if value is not None}
    code, text = error_of(lambda: ic_plane.sm.create_inference_component(**request))
    assert code == "ValidationException"
    assert message.format(region=ic_plane.region, account=ic_plane.account_id) in text
    assert not ic_plane.sm.list_inference_components(NameContains="refused")["InferenceComponents"]


def _endpoints(plane: Any) -> set[str]:
    return {e["EndpointName"] for e in plane.sm.list_endpoints(MaxResults=100)["Endpoints"]}


def test_components_refused_on_an_endpoint_that_serves_a_model(ic_plane: Any) -> None:
    """An endpoint whose variant names a model (a multi-model endpoint among them) hosts no component."""
    sm = ic_plane.sm
    sm.create_endpoint_config(
        EndpointConfigName="model-ep",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName="model-ep", EndpointConfigName="model-ep")
    code, text = error_of(lambda: create(ic_plane, "on-model", "model-ep"))
    assert (code, text) == (
        "ValidationException",
        "Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy "
        "inference components.",
    )


def test_components_endpoint_configs_that_host_them_need_a_role_and_refuse_managed_scaling_with_a_model(
    ic_plane: Any,
) -> None:
    sm = ic_plane.sm
    variant = {"VariantName": "AllTraffic", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1}
    code, text = error_of(
        lambda: sm.create_endpoint_config(EndpointConfigName="no-role", ProductionVariants=[variant])
    )
    assert code == "ValidationException" and "ExecutionRoleArn is required" in text
    managed = {
        **variant,
        "ModelName": "m",
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2},
    }
    code, text = error_of(
        lambda: sm.create_endpoint_config(EndpointConfigName="managed", ProductionVariants=[managed])
    )
    assert text == "ManagedInstanceScaling is only supported for inference component endpoints."
    scaled = {
        **variant,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2},
        "RoutingConfig": {"RoutingStrategy": "RANDOM"},
    }
    sm.create_endpoint_config(
        EndpointConfigName="hosting", ExecutionRoleArn=ic_plane.role, ProductionVariants=[scaled]
    )
    config = sm.describe_endpoint_config(EndpointConfigName="hosting")
    assert config["ExecutionRoleArn"] == ic_plane.role
    assert config["ProductionVariants"][0]["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    sm.create_endpoint(EndpointName="hosting", EndpointConfigName="hosting")
    summary = sm.describe_endpoint(EndpointName="hosting")["ProductionVariants"][0]
    assert summary["RoutingConfig"] == {"RoutingStrategy": "RANDOM"}
    assert summary["ManagedInstanceScaling"]["MaxInstanceCount"] == 2


def test_components_duplicate_name_and_unknown_name(ic_plane: Any) -> None:
    ic_endpoint(ic_plane, "dup-ep")
    create(ic_plane, "dup-ic", "dup-ep")
    arn = f"arn:aws:sagemaker:{ic_plane.region}:{ic_plane.account_id}:inference-component"
    assert error_of(lambda: create(ic_plane, "dup-ic", "dup-ep"))[1] == (
        f'Cannot create already existing inference component "{arn}/dup-ic".'
    )
    for call in (
        lambda: ic_plane.sm.describe_inference_component(InferenceComponentName="ghost"),
        lambda: ic_plane.sm.delete_inference_component(InferenceComponentName="ghost"),
        lambda: ic_plane.sm.update_inference_component_runtime_config(
            InferenceComponentName="ghost", DesiredRuntimeConfig={"CopyCount": 1}
        ),
    ):
        assert error_of(call) == ("ValidationException", f'Could not find inference component "{arn}/ghost".')


def test_components_changes_are_refused_while_a_transition_runs(slow_plane: Any) -> None:
    sm = slow_plane.sm
    ic_endpoint(slow_plane, "busy-ep")
    sm.create_inference_component(
        InferenceComponentName="busy-ic",
        EndpointName="busy-ep",
        Specification={"ModelName": "m", "ComputeResourceRequirements": REQUIREMENTS},
        RuntimeConfig={"CopyCount": 1},
    )
    code, text = error_of(lambda: sm.delete_inference_component(InferenceComponentName="busy-ic"))
    assert code == "ValidationException" and "CREATE_IN_PROGRESS" in text
    code, text = error_of(
        lambda: sm.update_inference_component_runtime_config(
            InferenceComponentName="busy-ic", DesiredRuntimeConfig={"CopyCount": 2}
        )
    )
    assert "while it is in status Creating" in text
    settled(slow_plane, "busy-ic")
    sm.delete_inference_component(InferenceComponentName="busy-ic")
    code, text = error_of(lambda: sm.delete_inference_component(InferenceComponentName="busy-ic"))
    assert "DELETE_IN_PROGRESS" in text


# -- where copies go -------------------------------------------------------------------------------------


def test_components_a_copy_that_fits_no_instance_fails_with_sagemakers_reason_the_others_serve(
    ic_plane: Any,
) -> None:
    ic_endpoint(ic_plane, "room-ep")  # ml.m5.xlarge: 16 GiB, 4 vCPUs, one instance
    assert create(ic_plane, "fits", "room-ep", copies=2)["InferenceComponentStatus"] == "InService"
    failed = create(ic_plane, "too-big", "room-ep", requirements={"MinMemoryRequiredInMb": 16 * 1024})
    assert (failed["InferenceComponentStatus"], failed["FailureReason"]) == ("Failed", NO_ROOM)
    assert failed["RuntimeConfig"]["CurrentCopyCount"] == 0
    # cores run out too: two copies of 1 core each are there, three more fit no 4-vCPU instance
    more = create(ic_plane, "three-more", "room-ep", copies=3)
    assert more["InferenceComponentStatus"] == "Failed"
    assert settled(ic_plane, "fits")["RuntimeConfig"]["CurrentCopyCount"] == 2


def test_components_a_copy_count_that_does_not_fit_is_undone_with_the_reason(ic_plane: Any) -> None:
    sm = ic_plane.sm
    ic_endpoint(ic_plane, "undo-ep")
    create(ic_plane, "undo-ic", "undo-ep", copies=2)
    sm.update_inference_component_runtime_config(
        InferenceComponentName="undo-ic", DesiredRuntimeConfig={"CopyCount": 5}
    )
    after = settled(ic_plane, "undo-ic")
    assert after["InferenceComponentStatus"] == "InService"
    assert after["FailureReason"] == NO_ROOM
    assert after["RuntimeConfig"]["DesiredCopyCount"] == after["RuntimeConfig"]["CurrentCopyCount"] == 2


def test_components_managed_instance_scaling_adds_instances_up_to_max_and_releases_to_min(
    ic_plane: Any,
) -> None:
    sm = ic_plane.sm
    ic_endpoint(ic_plane, "managed-ep", managed={"MinInstanceCount": 0, "MaxInstanceCount": 2})

    def instances() -> int:
        return int(
            sm.describe_endpoint(EndpointName="managed-ep")["ProductionVariants"][0]["CurrentInstanceCount"]
        )

    assert instances() == 1
    create(ic_plane, "managed-ic", "managed-ep", copies=8)  # 4 one-core copies per 4-vCPU instance
    assert instances() == 2
    sm.update_inference_component_runtime_config(
        InferenceComponentName="managed-ic", DesiredRuntimeConfig={"CopyCount": 9}
    )
    assert settled(ic_plane, "managed-ic")["FailureReason"] == NO_ROOM  # MaxInstanceCount 2
    sm.update_inference_component_runtime_config(
        InferenceComponentName="managed-ic", DesiredRuntimeConfig={"CopyCount": 3}
    )
    settled(ic_plane, "managed-ic")
    assert instances() == 1
    sm.update_inference_component_runtime_config(
        InferenceComponentName="managed-ic", DesiredRuntimeConfig={"CopyCount": 0}
    )
    zero = settled(ic_plane, "managed-ic")
    assert zero["RuntimeConfig"] == {"DesiredCopyCount": 0, "CurrentCopyCount": 0}
    assert instances() == 0  # MinInstanceCount 0: scaled to zero instances


def test_components_without_managed_scaling_stay_on_the_variants_instances(ic_plane: Any) -> None:
    ic_endpoint(ic_plane, "fixed-ep", instances=2)
    create(ic_plane, "fixed-ic", "fixed-ep", copies=8)
    assert create(ic_plane, "fixed-more", "fixed-ep")["FailureReason"] == NO_ROOM
    variant = ic_plane.sm.describe_endpoint(EndpointName="fixed-ep")["ProductionVariants"][0]
    assert variant["CurrentInstanceCount"] == 2


def test_components_delete_endpoint_leaves_its_components(ic_plane: Any) -> None:
    """SageMaker deletes the endpoint and keeps its components, which still answer Describe (delete them
    first); the stack does the same."""
    ic_endpoint(ic_plane, "orphan-ep")
    create(ic_plane, "orphan-ic", "orphan-ep")
    ic_plane.sm.delete_endpoint(EndpointName="orphan-ep")
    assert (
        ic_plane.sm.describe_inference_component(InferenceComponentName="orphan-ic")["EndpointName"]
        == "orphan-ep"
    )
    ic_plane.sm.delete_inference_component(InferenceComponentName="orphan-ic")
    assert wait_for(
        lambda: not ic_plane.sm.list_inference_components(NameContains="orphan-ic")["InferenceComponents"]
    )


def test_components_a_hook_that_raises_fails_a_create_and_undoes_an_update(ic_plane: Any) -> None:
    """The route's hook raising (a copy that does not start) is the component's FailureReason."""
    calls: list[tuple[str, int]] = []

    def hook(name: str, plan: dict[str, Any]) -> None:
        calls.append((name, len(plan["Copies"])))
        if name.startswith("hooked") and len(plan["Copies"]) == 3:
            raise RuntimeError("the container did not start")

    ic_plane.on_component.append(hook)
    try:
        ic_endpoint(ic_plane, "hook-ep")
        failed = create(ic_plane, "hooked-create", "hook-ep", copies=3)
        assert (failed["InferenceComponentStatus"], failed["FailureReason"]) == (
            "Failed",
            "the container did not start",
        )
        create(ic_plane, "hooked-update", "hook-ep", copies=1)
        ic_plane.sm.update_inference_component_runtime_config(
            InferenceComponentName="hooked-update", DesiredRuntimeConfig={"CopyCount": 3}
        )
        undone = settled(ic_plane, "hooked-update")
        assert undone["FailureReason"] == "the container did not start"
        assert undone["RuntimeConfig"]["CurrentCopyCount"] == undone["RuntimeConfig"]["DesiredCopyCount"] == 1
    finally:
        ic_plane.on_component.remove(hook)
    # the hooks ran again with what stays: none for the failed create, the one copy for the update
    assert ("hooked-create", 0) in calls and calls[-1] == ("hooked-update", 1)


# -- the list ----------------------------------------------------------------------------------------------


def test_components_list_filters_sorts_and_pages(ic_plane: Any) -> None:
    sm = ic_plane.sm
    ic_endpoint(ic_plane, "list-ep")
    for name in ("list-b", "list-a", "list-c"):
        create(ic_plane, name, "list-ep", requirements={"MinMemoryRequiredInMb": 128})
    listed = sm.list_inference_components(NameContains="list-", SortBy="Name", SortOrder="Ascending")
    assert [c["InferenceComponentName"] for c in listed["InferenceComponents"]] == [
        "list-a",
        "list-b",
        "list-c",
    ]
    newest = sm.list_inference_components(NameContains="list-")["InferenceComponents"][0]
    assert newest["InferenceComponentName"] == "list-c"  # CreationTime, Descending by default
    pages = list(
        sm.get_paginator("list_inference_components").paginate(
            EndpointNameEquals="list-ep", PaginationConfig={"PageSize": 2}
        )
    )
    assert [len(page["InferenceComponents"]) for page in pages] == [2, 1]
    assert not sm.list_inference_components(EndpointNameEquals="list-ep", StatusEquals="Failed")[
        "InferenceComponents"
    ]
    assert not sm.list_inference_components(VariantNameEquals="Other")["InferenceComponents"]


# -- Application Auto Scaling ------------------------------------------------------------------------------


def test_components_scalable_target_is_accepted_and_brings_copies_within_range(ic_plane: Any) -> None:
    ic_endpoint(ic_plane, "aas-ep")
    create(ic_plane, "aas-ic", "aas-ep", copies=3)
    scaling = ic_plane.boto3_session().client("application-autoscaling")
    scaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id("aas-ic"),
        ScalableDimension=COPY_COUNT_DIMENSION,
        MinCapacity=0,
        MaxCapacity=2,
    )
    assert wait_for(
        lambda: settled(ic_plane, "aas-ic")["RuntimeConfig"]["CurrentCopyCount"] == 2
    )  # RegisterScalableTarget brings the count within [0, 2]
    policy = scaling.put_scaling_policy(
        PolicyName="track",
        ServiceNamespace="sagemaker",
        ResourceId=resource_id("aas-ic"),
        ScalableDimension=COPY_COUNT_DIMENSION,
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
            },
            "TargetValue": 1.0,
        },
    )
    assert ":resource/sagemaker/inference-component/aas-ic:policyName/track" in policy["PolicyARN"]
    target = scaling.describe_scalable_targets(
        ServiceNamespace="sagemaker", ResourceIds=[resource_id("aas-ic")]
    )
    assert target["ScalableTargets"][0]["ScalableDimension"] == COPY_COUNT_DIMENSION
    assert [
        problem for answer in ic_plane.answers.of("RegisterScalableTarget") for problem in answer.problems()
    ] == []
