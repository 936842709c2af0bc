"""plan_inference_components(): what deploy_inference_components would do, found with read calls only, on
the control plane (moto's server with the stack's inference components; no Triton)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mme_triton import ComponentDeploymentPlan, plan_inference_components
from mme_triton.endpoint import (
    ComponentAutoScaling,
    InferenceComponent,
    deploy_inference_components,
    deploy_mme,
)

pytestmark = pytest.mark.moto

SCALING = ComponentAutoScaling(min_copies=1, max_copies=2, target_invocations_per_copy=50)


@pytest.fixture
def plan_kwargs(ic_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ic_kwargs.items() if k not in ("timeout", "poll_interval")}


def _small(name: str, model: Any, **kwargs: Any) -> InferenceComponent:
    return InferenceComponent(name, model, memory=kwargs.pop("memory", "256MiB"), cpus=0.5, **kwargs)


def _actions(plan: ComponentDeploymentPlan) -> dict[str, str]:
    return {c.name: c.action for c in plan.components}


def test_plan_inference_components_of_a_new_endpoint_reads_only_and_matches_the_deployment(
    repo: Path,
    plan_kwargs: dict[str, Any],
    ic_kwargs: dict[str, Any],
    session: Any,
    mutations: Any,
    inventory: Any,
    nothing: Any,
    sm: Any,
) -> None:
    components = [_small("linear", repo / "linear"), _small("scale", repo / "scale", copies=2)]
    sagemaker, s3 = session.client("sagemaker"), session.client("s3")
    sent = mutations(sagemaker) + mutations(s3)
    plan = plan_inference_components(
        "ic-ep", components, **{**plan_kwargs, "sagemaker_client": sagemaker, "s3_client": s3}
    )
    assert sent == [] and inventory() == nothing  # read calls only
    assert (plan.endpoint_action, plan.endpoint_status, plan.blockers) == ("create", None, [])
    assert [(c.name, c.action, c.copies) for c in plan.components] == [
        ("linear", "create", 1),
        ("scale", "create", 2),
    ]
    assert plan.components[1].requirements == {"MinMemoryRequiredInMb": 256, "NumberOfCpuCoresRequired": 0.5}
    assert [(u.source, u.action) for u in plan.uploads] == [
        (str(repo / "linear"), "upload"),
        (str(repo / "scale"), "upload"),
    ]
    assert all(u.target_model.startswith(("linear-", "scale-")) for u in plan.uploads)  # versioned names
    models = sorted(name for kind, name in plan.to_create if kind == "model")
    assert [kind for kind, _ in plan.to_create] == [
        "model",
        "model",
        "endpoint-config",
        "endpoint",
        "inference-component",
        "inference-component",
    ]
    text = str(plan)
    assert "inference components plan for endpoint ic-ep (us-east-1): create" in text
    assert "component:    scale: create, 2 copies" in text
    assert json.loads(json.dumps(plan.to_dict()))["to_create"][-1] == ["inference-component", "scale"]

    endpoint = deploy_inference_components("ic-ep", components, **ic_kwargs)
    assert endpoint.endpoint_config_name == plan.endpoint_config_name
    assert inventory()["models"] == models
    for component in plan.components:
        described = sm.describe_inference_component(InferenceComponentName=component.name)
        assert described["Specification"]["ModelName"] == component.model_name
        model = sm.describe_model(ModelName=component.model_name)
        assert model["PrimaryContainer"]["ModelDataUrl"] == component.archive_url

    again = plan_inference_components("ic-ep", components, **plan_kwargs)
    assert (again.endpoint_action, again.endpoint_status) == ("none", "InService")
    assert set(_actions(again).values()) == {"none"}
    assert [u.action for u in again.uploads] == ["unchanged", "unchanged"]
    assert again.to_create == again.to_update == again.to_delete == []


def test_plan_inference_components_of_a_rerun_lists_updates_copies_creates_and_deletes(
    repo: Path, plan_kwargs: dict[str, Any], ic_kwargs: dict[str, Any], sm: Any, inventory: Any
) -> None:
    first = [
        _small("linear", repo / "linear"),
        _small("scale", repo / "scale", autoscaling=SCALING),
        _small("pipeline", repo / "pipeline", autoscaling=SCALING),
    ]
    deploy_inference_components("ic-ep", first, **ic_kwargs)
    old = {
        name: sm.describe_inference_component(InferenceComponentName=name)["Specification"]["ModelName"]
        for name in ("scale", "pipeline")
    }
    # linear gets 2 copies; scale's content changes (a new model) and keeps its autoscaling; pipeline goes;
    # extra (linear's directory under another name) comes
    (repo / "scale" / "1" / "model.py").write_text(
        (repo / "scale" / "1" / "model.py").read_text() + "\n# changed\n"
    )
    second = [
        _small("linear", repo / "linear", copies=2),
        _small("scale", repo / "scale", autoscaling=SCALING),
        _small("extra", repo / "linear", memory="512MiB"),
    ]
    plan = plan_inference_components("ic-ep", second, **plan_kwargs)
    assert _actions(plan) == {"linear": "copies", "scale": "update", "extra": "create", "pipeline": "delete"}
    assert plan.endpoint_action == "none" and plan.blockers == []
    assert [u.action for u in plan.uploads] == ["unchanged", "upload", "unchanged"]
    assert ("inference-component", "extra") in plan.to_create
    assert sorted(pair for pair in plan.to_update if pair[0] == "inference-component") == [
        ("inference-component", "linear"),
        ("inference-component", "scale"),
    ]
    assert sorted(plan.to_delete) == sorted(
        [
            ("inference-component", "pipeline"),
            ("autoscaling", "inference-component/pipeline"),
            ("model", old["scale"]),
            ("model", old["pipeline"]),
        ]
    )
    assert ("autoscaling", "inference-component/scale") in plan.to_keep
    assert "component:    pipeline: delete" in str(plan)

    deploy_inference_components("ic-ep", second, **ic_kwargs)
    left = set(inventory()["models"])
    assert not left & set(old.values())  # what the plan said went
    assert {c.model_name for c in plan.components if c.action != "delete"} == left


def test_plan_inference_components_says_what_would_fail(
    repo: Path,
    plan_kwargs: dict[str, Any],
    deploy_kwargs: dict[str, Any],
    ic_kwargs: dict[str, Any],
    model_data_url: str,
    inventory: Any,
) -> None:
    deploy_inference_components("ic-ep", [_small("linear", repo / "linear")], **ic_kwargs)
    deploy_mme("mme-ep", model_data_url, **deploy_kwargs)
    before = inventory()
    zero = plan_inference_components(
        "ic-ep", [_small("linear", repo / "linear"), _small("zero", repo / "scale", copies=0)], **plan_kwargs
    )
    assert zero.blockers == [
        "inference component 'zero' does not exist yet and copies=0: SageMaker creates a component with at "
        "least 1 copy"
    ]
    foreign = plan_inference_components("other", [_small("linear", repo / "linear")], **plan_kwargs)
    assert any("was not created for endpoint 'other'" in b for b in foreign.blockers)
    mme = plan_inference_components("mme-ep", [_small("scale", repo / "scale")], **plan_kwargs)
    assert any("is a multi-model endpoint" in b for b in mme.blockers)
    missing = plan_inference_components(
        "ic-ep", [_small("linear", model_data_url + "nothing-here.tar.gz")], **plan_kwargs
    )
    assert missing.blockers == [
        f"component 'linear': there is no archive at {model_data_url}nothing-here.tar.gz"
    ]
    assert "would fail:" in str(missing)
    assert inventory() == before


def test_plan_inference_components_rejects_what_the_deployer_rejects(
    repo: Path, plan_kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match="timeout must be > 0"):
        plan_inference_components("ic-ep", [_small("linear", repo / "linear")], timeout=0, **plan_kwargs)
    with pytest.raises(ValueError, match="routing"):
        plan_inference_components(
            "ic-ep", [_small("linear", repo / "linear")], routing="NEAREST", **plan_kwargs
        )
    with pytest.raises(ValueError, match="several components are named linear"):
        plan_inference_components(
            "ic-ep", [_small("linear", repo / "linear"), _small("linear", repo / "scale")], **plan_kwargs
        )
