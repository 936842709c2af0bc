"""plan_deployment(): what deploy_mme would do, found with read calls only, and the settings it adds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from mme_triton import DeploymentPlan, MMETritonWarning, plan_deployment
from mme_triton.endpoint import AutoScaling, deploy_mme
from mme_triton.endpoint.environment import DEFAULT_ENVIRONMENT

pytestmark = pytest.mark.moto

UPDATE: dict[str, Any] = {"environment": {"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}}


@pytest.fixture
def plan_kwargs(deploy_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in deploy_kwargs.items() if k not in ("timeout", "poll_interval")}


def _echo_model(root: Any, name: str = "echo") -> Any:
    model = root / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]\n'
    )
    (model / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    )
    return model


def test_plan_deployment_for_a_new_endpoint_lists_what_would_be_created(
    plan_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    mutations: Any,
    tmp_path: Any,
    nothing: Any,
    inventory: Callable[[], Any],
) -> None:
    sagemaker, s3 = session.client("sagemaker"), session.client("s3")
    sent = mutations(sagemaker) + mutations(s3)
    plan = plan_deployment(
        "my-mme",
        model_data_url,
        models=[_echo_model(tmp_path)],
        **{**plan_kwargs, "sagemaker_client": sagemaker, "s3_client": s3},
    )
    assert isinstance(plan, DeploymentPlan)
    assert plan.endpoint_action == "create" and plan.endpoint_status is None
    assert plan.to_create == [
        ("model", plan.model_name),
        ("endpoint-config", plan.endpoint_config_name),
        ("endpoint", "my-mme"),
    ]
    assert plan.to_update == plan.to_delete == plan.to_keep == []
    assert [(u.target_model, u.action) for u in plan.uploads] == [("echo.tar.gz", "upload")]
    assert plan.environment == DEFAULT_ENVIRONMENT
    assert plan.image_uri.endswith("sagemaker-tritonserver:24.09-py3") and plan.triton_version == "24.09"
    assert plan.inference_ami_version is None
    assert plan.warnings == [] and plan.blockers == []
    assert sent == []  # read calls only
    assert inventory() == nothing
    text = str(plan)
    assert "deployment plan for endpoint my-mme (us-east-1): create" in text
    assert "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE=16777216" in text
    assert json.loads(json.dumps(plan.to_dict()))["to_create"][2] == ["endpoint", "my-mme"]


def test_plan_deployment_matches_what_deploy_mme_then_creates(
    plan_kwargs: dict[str, Any], deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any
) -> None:
    plan = plan_deployment("my-mme", model_data_url, **plan_kwargs)
    endpoint = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    assert (endpoint.model_name, endpoint.endpoint_config_name) == (
        plan.model_name,
        plan.endpoint_config_name,
    )
    container = sm.describe_model(ModelName=endpoint.model_name)["PrimaryContainer"]
    assert container["Environment"] == plan.environment
    assert container["Image"] == plan.image_uri
    again = plan_deployment("my-mme", model_data_url, **plan_kwargs)
    assert again.endpoint_action == "none"
    assert again.to_create == again.to_update == again.to_delete == []
    assert sorted(again.to_keep) == sorted(
        [("model", plan.model_name), ("endpoint-config", plan.endpoint_config_name), ("endpoint", "my-mme")]
    )


def test_plan_deployment_of_changed_settings_lists_the_update_and_what_it_supersedes(
    plan_kwargs: dict[str, Any], deploy_kwargs: dict[str, Any], model_data_url: str
) -> None:
    scaling = AutoScaling(min_capacity=1, max_capacity=2, target_invocations_per_instance=100)
    first = deploy_mme("my-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)
    plan = plan_deployment("my-mme", model_data_url, **plan_kwargs, **UPDATE)
    assert plan.endpoint_action == "update"
    assert (plan.endpoint_status, plan.current_endpoint_config) == ("InService", first.endpoint_config_name)
    assert plan.to_update == [("endpoint", "my-mme")]
    assert sorted(plan.to_delete) == sorted(
        [
            ("endpoint-config", first.endpoint_config_name),
            ("model", first.model_name),
            ("autoscaling", "endpoint/my-mme/variant/AllTraffic"),  # not asked for any more
        ]
    )
    assert plan.environment == {**DEFAULT_ENVIRONMENT, "SAGEMAKER_TRITON_LOG_VERBOSE": "0"}


def test_plan_deployment_lists_the_leftovers_of_an_interrupted_run_deploy_mme_removes(
    plan_kwargs: dict[str, Any],
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    sm: Any,
    inventory: Callable[[], Any],
) -> None:
    # An earlier run left its config and model and no endpoint (a create interrupted after its rollback
    # could not delete them, say): deploy_mme removes them once the new endpoint is in service.
    earlier = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    sm.delete_endpoint(EndpointName="my-mme")
    plan = plan_deployment("my-mme", model_data_url, **plan_kwargs, **UPDATE)
    assert plan.endpoint_action == "create"
    assert sorted(plan.to_delete) == sorted(
        [("endpoint-config", earlier.endpoint_config_name), ("model", earlier.model_name)]
    )
    endpoint = deploy_mme("my-mme", model_data_url, **deploy_kwargs, **UPDATE)
    assert inventory()["configs"] == [endpoint.endpoint_config_name]  # what the plan said went
    assert inventory()["models"] == [endpoint.model_name]


def test_plan_deployment_of_a_variant_rename_lists_the_old_variants_autoscaling(
    plan_kwargs: dict[str, Any], deploy_kwargs: dict[str, Any], model_data_url: str, aas: Any
) -> None:
    scaling = AutoScaling(min_capacity=1, max_capacity=2, target_invocations_per_instance=100)
    deploy_mme("my-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)
    renamed = {"variant_name": "Renamed", "autoscaling": scaling}
    plan = plan_deployment("my-mme", model_data_url, **renamed, **plan_kwargs)
    assert ("autoscaling", "endpoint/my-mme/variant/AllTraffic") in plan.to_delete
    assert plan.to_create[-1] == ("autoscaling", "endpoint/my-mme/variant/Renamed")
    deploy_mme("my-mme", model_data_url, **renamed, **deploy_kwargs)
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert [t["ResourceId"] for t in targets] == ["endpoint/my-mme/variant/Renamed"]


def test_plan_deployment_reads_for_as_long_as_its_timeout(
    plan_kwargs: dict[str, Any], model_data_url: str, faulty: Any
) -> None:
    from mme_triton.errors import DeploymentError

    sm, faults = faulty("sagemaker")
    faults.throttle("DescribeEndpoint")  # every attempt, for ever
    with pytest.raises(DeploymentError, match="cannot plan endpoint 'my-mme': Rate exceeded"):
        plan_deployment("my-mme", model_data_url, timeout=0.5, **{**plan_kwargs, "sagemaker_client": sm})
    assert faults.hits["DescribeEndpoint"] >= 1
    with pytest.raises(ValueError, match="timeout must be > 0"):
        plan_deployment("my-mme", model_data_url, timeout=0, **plan_kwargs)


def test_plan_deployment_says_what_would_fail(
    plan_kwargs: dict[str, Any], model_data_url: str, s3: Any, sm: Any, tmp_path: Any
) -> None:
    bucket, prefix = model_data_url[len("s3://") :].split("/", 1)
    s3.put_object(Bucket=bucket, Key=prefix + "echo.tar.gz", Body=b"another model")
    container = {"Image": "img", "Mode": "MultiModel", "ModelDataUrl": model_data_url}
    sm.create_model(ModelName="theirs", ExecutionRoleArn=plan_kwargs["role"], PrimaryContainer=container)
    variant = {
        "VariantName": "v",
        "ModelName": "theirs",
        "InstanceType": "ml.m5.large",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName="theirs", ProductionVariants=[variant])
    sm.create_endpoint(EndpointName="theirs", EndpointConfigName="theirs")
    plan = plan_deployment("theirs", model_data_url, models=[_echo_model(tmp_path)], **plan_kwargs)
    assert [u.action for u in plan.uploads] == ["conflict"]
    assert any("holds different content" in b for b in plan.blockers)
    assert any("not created by mme_triton" in b for b in plan.blockers)
    assert "would fail:" in str(plan)


@pytest.mark.parametrize(
    ("overrides", "warning"),
    [
        pytest.param({"instance_type": "ml.g6.xlarge"}, "not among the GPU instance types", id="gpu-type"),
        pytest.param({"triton_version": "25.09"}, "needs NVIDIA driver 580", id="driver"),
        pytest.param(
            {"environment": {"SAGEMAKER_TRITON_INFERENCE_TYPE": "generate"}},
            "/invocations route",
            id="variable",
        ),
    ],
)
def test_plan_deployment_warns_as_deploy_mme_would(
    plan_kwargs: dict[str, Any], model_data_url: str, overrides: dict[str, Any], warning: str
) -> None:
    with pytest.warns(MMETritonWarning, match=warning):
        plan = plan_deployment("my-mme", model_data_url, **{**plan_kwargs, **overrides})
    assert any(warning in message for message in plan.warnings)


def test_plan_deployment_shows_the_ami_and_no_driver_warning_when_it_fits(
    plan_kwargs: dict[str, Any], model_data_url: str
) -> None:
    plan = plan_deployment(
        "my-mme",
        model_data_url,
        triton_version="26.05",
        inference_ami_version="al2023-ami-sagemaker-inference-gpu-4-1",
        **plan_kwargs,
    )
    assert plan.inference_ami_version == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert plan.warnings == []
    assert "al2023-ami-sagemaker-inference-gpu-4-1" in str(plan)


def test_plan_deployment_rejects_what_deploy_mme_rejects(
    plan_kwargs: dict[str, Any], model_data_url: str
) -> None:
    with pytest.raises(ValueError, match=r"did you mean ml\.g5\.xlarge"):
        plan_deployment("my-mme", model_data_url, **{**plan_kwargs, "instance_type": "ml.g5.xlarg"})
