"""deploy_inference_components() against the control plane (moto's server with what the stack adds: the
inference component operations, their transitions and copy placement; no Triton): what it creates, what a
re-run changes, what a failure rolls back, and what teardown and sweep remove."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mme_triton.endpoint import (
    ComponentAutoScaling,
    InferenceComponent,
    deploy_inference_components,
    deploy_mme,
    endpoint_components,
    sweep,
    teardown,
)
from mme_triton.endpoint.status import endpoint_status
from mme_triton.errors import DeploymentError, EndpointFailedError

pytestmark = pytest.mark.moto

NO_ROOM = "not enough hardware resources"


def _components(sm: Any) -> dict[str, dict[str, Any]]:
    """Every inference component of the plane's account, described."""
    found = {}
    for item in sm.list_inference_components()["InferenceComponents"]:
        name = item["InferenceComponentName"]
        found[name] = sm.describe_inference_component(InferenceComponentName=name)
    return found


def _small(name: str, model: Any, **kwargs: Any) -> InferenceComponent:
    return InferenceComponent(name, model, memory=kwargs.pop("memory", "256MiB"), cpus=0.5, **kwargs)


def test_deploy_inference_components_creates_models_config_endpoint_and_components(
    repo: Path, ic_kwargs: dict[str, Any], sm: Any, inventory: Any
) -> None:
    endpoint = deploy_inference_components(
        "ic-ep", [_small("linear", repo / "linear"), _small("scale", repo / "scale", copies=2)], **ic_kwargs
    )
    assert (endpoint.status, endpoint.hosting, endpoint.components, endpoint.model_name) == (
        "InService",
        "inference-components",
        ("linear", "scale"),
        "",
    )
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint.endpoint_config_name)
    assert "ModelName" not in config["ProductionVariants"][0]
    assert config["ExecutionRoleArn"] == ic_kwargs["role"]
    components = _components(sm)
    assert sorted(components) == ["linear", "scale"]
    for name, copies in (("linear", 1), ("scale", 2)):
        described = components[name]
        assert described["InferenceComponentStatus"] == "InService"
        assert described["EndpointName"] == "ic-ep"
        assert described["RuntimeConfig"]["DesiredCopyCount"] == copies
        requirements = described["Specification"]["ComputeResourceRequirements"]
        assert (requirements["MinMemoryRequiredInMb"], requirements["NumberOfCpuCoresRequired"]) == (256, 0.5)
        model = sm.describe_model(ModelName=described["Specification"]["ModelName"])
        container = model["PrimaryContainer"]
        assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == name
        assert container["ModelDataUrl"].startswith(f"{ic_kwargs['model_data_url']}{name}-")
        tags = {
            t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=described["InferenceComponentArn"])["Tags"]
        }
        assert (tags["mme-triton:managed"], tags["mme-triton:endpoint"]) == ("true", "ic-ep")
    assert inventory()["models"] == sorted(c["Specification"]["ModelName"] for c in components.values())
    assert endpoint_components("ic-ep", boto3_session=ic_kwargs["boto3_session"]) == ["linear", "scale"]
    assert endpoint.models() == ["linear", "scale"]


def test_deploy_inference_components_rerun_with_the_same_arguments_changes_nothing(
    repo: Path, ic_kwargs: dict[str, Any], session: Any, mutations: Any
) -> None:
    components = [_small("linear", repo / "linear"), _small("scale", repo / "scale")]
    first = deploy_inference_components("ic-ep", components, **ic_kwargs)
    sm = session.client("sagemaker")
    calls = mutations(sm)
    again = deploy_inference_components("ic-ep", components, **{**ic_kwargs, "sagemaker_client": sm})
    assert calls == []
    assert (again.endpoint_config_name, again.components) == (first.endpoint_config_name, first.components)


def test_deploy_inference_components_rerun_updates_adds_and_removes_components(
    repo: Path, ic_kwargs: dict[str, Any], session: Any, sm: Any, mutations: Any, inventory: Any
) -> None:
    deploy_inference_components(
        "ic-ep", [_small("linear", repo / "linear"), _small("scale", repo / "scale")], **ic_kwargs
    )
    old_scale_model = _components(sm)["scale"]["Specification"]["ModelName"]
    # scale's content changes (a new archive, a new model), linear gets more memory and 2 copies, pipeline
    # is added and nothing names scale's old model any more
    (repo / "scale" / "1" / "model.py").write_text(
        (repo / "scale" / "1" / "model.py").read_text() + "\n# changed\n"
    )
    client = session.client("sagemaker")
    calls = mutations(client)
    endpoint = deploy_inference_components(
        "ic-ep",
        [
            _small("linear", repo / "linear", memory="512MiB", copies=2),
            _small("scale", repo / "scale"),
            _small("pipeline", repo / "pipeline"),
        ],
        **{**ic_kwargs, "sagemaker_client": client},
    )
    assert endpoint.components == ("linear", "pipeline", "scale")
    assert sorted(c for c in calls if "InferenceComponent" in c) == [
        "CreateInferenceComponent",
        "UpdateInferenceComponent",
        "UpdateInferenceComponent",
    ]
    components = _components(sm)
    linear, scale, pipeline = components["linear"], components["scale"], components["pipeline"]
    assert linear["Specification"]["ComputeResourceRequirements"]["MinMemoryRequiredInMb"] == 512
    assert linear["RuntimeConfig"]["DesiredCopyCount"] == 2
    assert scale["Specification"]["ModelName"] != old_scale_model
    ensemble = sm.describe_model(ModelName=pipeline["Specification"]["ModelName"])
    assert ensemble["PrimaryContainer"]["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "pipeline"
    assert old_scale_model not in inventory()["models"]  # superseded: deleted once nothing named it

    calls.clear()
    endpoint = deploy_inference_components(
        "ic-ep",
        [_small("linear", repo / "linear", memory="512MiB", copies=3)],
        **{**ic_kwargs, "sagemaker_client": client},
    )
    assert endpoint.components == ("linear",)
    assert sorted(c for c in calls if "InferenceComponent" in c) == [
        "DeleteInferenceComponent",
        "DeleteInferenceComponent",
        "UpdateInferenceComponentRuntimeConfig",
    ]
    assert sorted(_components(sm)) == ["linear"]
    assert inventory()["models"] == [_components(sm)["linear"]["Specification"]["ModelName"]]


def test_deploy_inference_components_new_instance_type_updates_the_endpoint_and_keeps_the_components(
    repo: Path, ic_kwargs: dict[str, Any], sm: Any, inventory: Any
) -> None:
    first = deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    second = deploy_inference_components(
        "ic-ep", [_small("linear", repo / "linear")], **{**ic_kwargs, "instance_type": "ml.m5.2xlarge"}
    )
    assert second.endpoint_config_name != first.endpoint_config_name
    described = sm.describe_endpoint(EndpointName="ic-ep")
    assert described["EndpointConfigName"] == second.endpoint_config_name
    assert _components(sm)["linear"]["InferenceComponentStatus"] == "InService"
    assert inventory()["configs"] == [second.endpoint_config_name]  # the old config is superseded


def test_deploy_inference_components_first_deploy_whose_component_fails_rolls_everything_back(
    repo: Path, ic_kwargs: dict[str, Any], sm: Any, inventory: Any, nothing: Any
) -> None:
    """7.5 GiB passes the library's check against an ml.m5.large's 8 GiB, but the instance keeps some for
    itself: SageMaker (and the stack) place no copy, and the component fails."""
    with pytest.raises(EndpointFailedError, match=NO_ROOM) as caught:
        deploy_inference_components(
            "ic-ep",
            [_small("linear", repo / "linear"), _small("big", repo / "scale", memory="7.5GiB")],
            **{**ic_kwargs, "instance_type": "ml.m5.large"},
        )
    error = caught.value
    assert NO_ROOM in error.failure_reason
    kinds = sorted(kind for kind, _ in error.rolled_back)
    assert kinds == [
        "endpoint",
        "endpoint-config",
        "inference-component",
        "inference-component",
        "model",
        "model",
    ]
    assert error.kept == []
    assert inventory() == nothing
    assert _components(sm) == {}


def test_deploy_inference_components_failed_new_component_on_a_live_endpoint_leaves_the_others_serving(
    repo: Path, ic_kwargs: dict[str, Any], sm: Any, inventory: Any
) -> None:
    first = deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    before = inventory()
    with pytest.raises(EndpointFailedError, match=NO_ROOM) as caught:
        deploy_inference_components(
            "ic-ep",
            [_small("linear", repo / "linear"), _small("big", repo / "scale", memory="15.5GiB")],
            **ic_kwargs,
        )
    assert ("inference-component", "big") in caught.value.rolled_back
    assert ("endpoint", "ic-ep") not in caught.value.rolled_back
    assert sorted(_components(sm)) == ["linear"]
    assert inventory() == before  # the new component's model went with it
    assert sm.describe_endpoint(EndpointName="ic-ep")["EndpointConfigName"] == first.endpoint_config_name


def test_deploy_inference_components_update_that_fails_keeps_the_old_model_serving(
    repo: Path, ic_kwargs: dict[str, Any], plane: Any, sm: Any, inventory: Any
) -> None:
    deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    old_model = _components(sm)["linear"]["Specification"]["ModelName"]
    old_url = sm.describe_model(ModelName=old_model)["PrimaryContainer"]["ModelDataUrl"]
    before = inventory()

    def refuse_new_model(component: str, plan: dict[str, Any]) -> None:
        if plan["Copies"] and plan["Container"]["ModelDataUrl"] != old_url:
            raise RuntimeError("the new copies did not start")

    plane.on_component.append(refuse_new_model)
    (repo / "linear" / "config.pbtxt").write_text((repo / "linear" / "config.pbtxt").read_text() + "\n")
    with pytest.raises(EndpointFailedError) as caught:
        deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    assert caught.value.rolled_back and all(kind == "model" for kind, _ in caught.value.rolled_back)
    linear = _components(sm)["linear"]
    assert (linear["InferenceComponentStatus"], linear["Specification"]["ModelName"]) == (
        "InService",
        old_model,
    )
    assert inventory() == before


def test_deploy_inference_components_refuses_what_it_must_not_take_over(
    repo: Path,
    ic_kwargs: dict[str, Any],
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    sm: Any,
    inventory: Any,
) -> None:
    deploy_mme("mme-ep", model_data_url, **deploy_kwargs)
    before = inventory()
    with pytest.raises(DeploymentError, match="is a multi-model endpoint"):
        deploy_inference_components("mme-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    assert inventory() == before

    deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    with pytest.raises(DeploymentError, match="hosts inference components"):
        deploy_mme("ic-ep", model_data_url, **deploy_kwargs)
    before = inventory()
    with pytest.raises(DeploymentError, match="was not created for endpoint 'other'"):
        deploy_inference_components("other", [_small("linear", repo / "linear")], **ic_kwargs)
    with pytest.raises(DeploymentError, match="CreateInferenceComponent refuses a CopyCount of 0"):
        deploy_inference_components(
            "ic-ep",
            [_small("linear", repo / "linear"), _small("zero", repo / "scale", copies=0)],
            **ic_kwargs,
        )
    with pytest.raises(DeploymentError, match="needs a new endpoint"):
        deploy_inference_components(
            "ic-ep", [_small("linear", repo / "linear")], **{**ic_kwargs, "variant_name": "Blue"}
        )
    assert inventory() == before
    assert sorted(_components(sm)) == ["linear"]


def test_deploy_inference_components_parks_an_existing_component_at_zero_copies(
    repo: Path, ic_kwargs: dict[str, Any], sm: Any
) -> None:
    deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    deploy_inference_components("ic-ep", [_small("linear", repo / "linear", copies=0)], **ic_kwargs)
    runtime = _components(sm)["linear"]["RuntimeConfig"]
    assert (runtime["DesiredCopyCount"], runtime["CurrentCopyCount"]) == (0, 0)


def test_deploy_inference_components_registers_each_components_autoscaling(
    repo: Path, ic_kwargs: dict[str, Any], aas: Any, session: Any
) -> None:
    zero = ComponentAutoScaling(min_copies=0, max_copies=3, target_invocations_per_copy=5)
    deploy_inference_components(
        "ic-ep",
        [
            _small("linear", repo / "linear", autoscaling=zero),
            _small("scale", repo / "scale", autoscaling=ComponentAutoScaling(1, 2, 50)),
        ],
        **{**ic_kwargs, "managed_instance_scaling": (0, 2)},
    )
    targets = {
        t["ResourceId"]: (t["MinCapacity"], t["MaxCapacity"])
        for t in aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    }
    assert targets == {"inference-component/linear": (0, 3), "inference-component/scale": (1, 2)}
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    by_name = {p["PolicyName"]: p for p in policies}
    assert sorted(by_name) == [
        "mme-triton-linear-from-zero",
        "mme-triton-linear-invocations-per-copy",
        "mme-triton-scale-invocations-per-copy",
    ]
    tracking = by_name["mme-triton-linear-invocations-per-copy"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "SageMakerInferenceComponentInvocationsPerCopy"
    )
    assert tracking["TargetValue"] == 5
    step = by_name["mme-triton-linear-from-zero"]["StepScalingPolicyConfiguration"]
    assert step["StepAdjustments"] == [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]
    (alarm,) = session.client("cloudwatch").describe_alarms(AlarmNamePrefix="mme-triton-")["MetricAlarms"]
    assert (alarm["AlarmName"], alarm["MetricName"], alarm["Namespace"]) == (
        "mme-triton-linear-no-capacity",
        "NoCapacityInvocationFailures",
        "AWS/SageMaker",
    )
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": "linear"}]
    assert alarm["AlarmActions"] == [by_name["mme-triton-linear-from-zero"]["PolicyARN"]]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1.0)

    # a re-run without autoscaling removes what this library registered
    deploy_inference_components(
        "ic-ep", [_small("linear", repo / "linear"), _small("scale", repo / "scale")], **ic_kwargs
    )
    assert aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []
    assert session.client("cloudwatch").describe_alarms(AlarmNamePrefix="mme-triton-")["MetricAlarms"] == []


def test_teardown_removes_components_their_autoscaling_endpoint_config_and_models(
    repo: Path, ic_kwargs: dict[str, Any], session: Any, sm: Any, aas: Any, inventory: Any, nothing: Any
) -> None:
    deploy_inference_components(
        "ic-ep",
        [
            _small("linear", repo / "linear", autoscaling=ComponentAutoScaling(0, 2, 5)),
            _small("scale", repo / "scale"),
        ],
        **{**ic_kwargs, "managed_instance_scaling": (0, 2)},
    )
    planned = teardown("ic-ep", boto3_session=session, dry_run=True)
    assert sorted(planned.names("inference-component")) == ["linear", "scale"]
    assert planned.names("autoscaling") == ["inference-component/linear"]
    assert sorted(_components(sm)) == ["linear", "scale"]  # a dry run deletes nothing

    report = teardown("ic-ep", boto3_session=session, delete_artifacts=True)
    assert sorted(report.names("inference-component")) == ["linear", "scale"]
    assert report.names("autoscaling") == ["inference-component/linear"]
    assert report.names("endpoint") == ["ic-ep"] and len(report.names("model")) == 2
    assert len(report.names("artifact")) == 2
    assert inventory() == nothing and _components(sm) == {}
    assert session.client("cloudwatch").describe_alarms(AlarmNamePrefix="mme-triton-")["MetricAlarms"] == []
    again = teardown("ic-ep", boto3_session=session)
    assert again.deleted == [] and ("endpoint", "ic-ep") in again.missing


def test_sweep_keeps_the_models_inference_components_use(
    repo: Path, ic_kwargs: dict[str, Any], session: Any, sm: Any, inventory: Any
) -> None:
    """Components name their models; no config does. A sweep that does not select their endpoint (here it
    lost its team tag) must not take those models for orphans."""
    deploy_inference_components(
        "ic-ep", [_small("linear", repo / "linear")], **{**ic_kwargs, "tags": {"team": "search"}}
    )
    arn = sm.describe_endpoint(EndpointName="ic-ep")["EndpointArn"]
    sm.delete_tags(ResourceArn=arn, TagKeys=["team"])
    before = inventory()
    reports = sweep(tags={"team": "search"}, orphan_min_age=timedelta(0), boto3_session=session)
    assert [r.deleted for r in reports] == []
    assert inventory() == before


def test_endpoint_status_lists_the_components(repo: Path, ic_kwargs: dict[str, Any], session: Any) -> None:
    deploy_inference_components(
        "ic-ep",
        [
            _small("linear", repo / "linear", copies=2, autoscaling=ComponentAutoScaling(1, 3, 20)),
            _small("scale", repo / "scale"),
        ],
        **ic_kwargs,
    )
    status = endpoint_status("ic-ep", boto3_session=session)
    assert (status.hosting, status.model_data_url, status.models) == ("inference-components", None, None)
    linear, scale = status.components
    assert (linear.name, linear.status, linear.current_copy_count, linear.desired_copy_count) == (
        "linear",
        "InService",
        2,
        2,
    )
    assert (linear.memory_mb, linear.cpus, linear.accelerators) == (256, 0.5, None)
    assert linear.artifact_url is not None and linear.artifact_url.startswith(
        ic_kwargs["model_data_url"] + "linear-"
    )
    assert linear.scaling is not None and (linear.scaling.min_capacity, linear.scaling.max_capacity) == (1, 3)
    assert linear.scaling.target_invocations_per_instance == 20
    assert scale.scaling is None
    text = str(status)
    assert "inference components (2)" in text
    assert "component linear: InService, 2/2 copies (current/desired), 256 MiB, 0.5 cores" in text
    assert "1-3 copies, target 20 invocations/copy/min" in text
    assert status.to_dict()["components"][0]["name"] == "linear"


def test_deploy_inference_components_without_wait_then_teardown_of_creating_components(
    repo: Path, ic_kwargs: dict[str, Any], plane: Any, session: Any, sm: Any, inventory: Any, nothing: Any
) -> None:
    """Without ``wait`` the call returns once the components are sent (the endpoint itself is waited for);
    SageMaker refuses to delete a component while it is Creating, so teardown waits for it first."""
    plane.transition_delay = 0.5
    endpoint = deploy_inference_components(
        "ic-ep", [_small("linear", repo / "linear")], **{**ic_kwargs, "wait": False}
    )
    assert endpoint.status == "InService"
    assert _components(sm)["linear"]["InferenceComponentStatus"] == "Creating"
    report = teardown("ic-ep", boto3_session=session)
    assert report.names("inference-component") == ["linear"] and report.errors == []
    assert inventory() == nothing and _components(sm) == {}
