"""deploy_mme() and teardown() against a control plane that throttles, fails and drops connections.

Faults are injected into real boto3 clients with botocore event hooks (conftest.Faults) on moto's
server; the clients otherwise keep botocore's defaults (standard retry mode, 3 attempts), as a new
user's would. After each fault: the full inventory, then a plain re-run and a teardown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from mme_triton.endpoint import AutoScaling, deploy_mme, plan_deployment, teardown
from mme_triton.errors import DeploymentError, DeploymentTimeoutError, EndpointFailedError

pytestmark = pytest.mark.moto

#: Changed settings: a new model and a new config, so the second deploy is an UpdateEndpoint.
UPDATE: dict[str, Any] = {"environment": {"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}}
SCALING = AutoScaling(min_capacity=1, max_capacity=2, target_invocations_per_instance=100)
TARGET = "endpoint/my-mme/variant/AllTraffic"
POLICY = "mme-triton-my-mme-AllTraffic-invocations"


def _only(endpoint: Any, *, scaling: bool = False) -> dict[str, list[str]]:
    """The inventory of exactly one deployment: its endpoint, config, model (and scaling)."""
    return {
        "endpoints": [endpoint.name],
        "configs": [endpoint.endpoint_config_name],
        "models": [endpoint.model_name],
        "targets": [TARGET] if scaling else [],
        "policies": [POLICY] if scaling else [],
    }


def _settled(sm: Any) -> dict[str, Any]:
    """The endpoint once it is neither Creating nor Updating (the plane moves it within a second)."""
    end = time.monotonic() + 10
    while True:
        description: dict[str, Any] = sm.describe_endpoint(EndpointName="my-mme")
        if description["EndpointStatus"] not in ("Creating", "Updating") or time.monotonic() > end:
            return description
        time.sleep(0.02)


def _names(deploy_kwargs: dict[str, Any], model_data_url: str, **settings: Any) -> Any:
    """The model and config names deploy_mme derives for these settings (from the plan)."""
    return plan_deployment("my-mme", model_data_url, **{**_plan_kwargs(deploy_kwargs), **settings})


def _plan_kwargs(deploy_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in deploy_kwargs.items() if k not in ("timeout", "poll_interval")}


def _rerun_and_teardown(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    *,
    scaling: bool = False,
    **settings: Any,
) -> None:
    """A plain re-run (no faults) ends with exactly one deployment; a teardown then leaves nothing."""
    if scaling:
        settings["autoscaling"] = SCALING
    endpoint = deploy_mme("my-mme", model_data_url, **deploy_kwargs, **settings)
    assert endpoint.status == "InService"
    assert inventory() == _only(endpoint, scaling=scaling)
    teardown("my-mme", boto3_session=session)
    assert inventory() == nothing


# -- status polls that fail ---------------------------------------------------------------------------

POLL_FAULTS = [
    pytest.param("throttle", 3, id="throttled-3"),
    pytest.param("throttle", 10, id="throttled-10"),
    pytest.param("server_error", 5, id="5xx"),
    pytest.param("drop_connection", 5, id="dropped-connection"),
]


@pytest.mark.parametrize(("fault", "times"), POLL_FAULTS)
def test_deploy_mme_create_survives_failing_status_polls(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    faulty: Any,
    inventory: Callable[[], Any],
    fault: str,
    times: int,
) -> None:
    plane.transition_delay = 0.5  # the polls fail while the endpoint is Creating
    sm, faults = faulty("sagemaker")
    getattr(faults, fault)("DescribeEndpoint", times=times, after=1)  # the existence check goes through
    endpoint = deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm})
    assert faults.hits["DescribeEndpoint"] == times
    assert endpoint.status == "InService"
    assert inventory() == _only(endpoint)


@pytest.mark.parametrize(("fault", "times"), POLL_FAULTS)
def test_deploy_mme_update_survives_failing_status_polls(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    faulty: Any,
    inventory: Callable[[], Any],
    fault: str,
    times: int,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    plane.transition_delay = 0.5
    sm, faults = faulty("sagemaker")
    getattr(faults, fault)("DescribeEndpoint", times=times, after=1)
    second = deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm}, **UPDATE)
    assert faults.hits["DescribeEndpoint"] == times
    assert second.endpoint_config_name != first.endpoint_config_name
    assert inventory() == _only(second)  # the superseded config and model are gone


def test_deploy_mme_create_throttled_until_timeout_keeps_the_endpoint_coming_up(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    sm: Any,
    faulty: Any,
    mutations: Any,
    inventory: Callable[[], Any],
    nothing: Any,
) -> None:
    names = _names(deploy_kwargs, model_data_url)
    plane.transition_delay = 0.5
    client, faults = faulty("sagemaker")
    faults.throttle("DescribeEndpoint", after=1)  # every poll, and every read after the wait
    with pytest.raises(DeploymentTimeoutError, match="no status could be read") as caught:
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": client, "timeout": 1.5})
    assert caught.value.kept == [
        ("endpoint", "my-mme"),
        ("endpoint-config", names.endpoint_config_name),
        ("model", names.model_name),
    ]
    assert caught.value.rolled_back == []
    assert "run deploy_mme('my-mme', ...) again with the same arguments" in str(caught.value)
    # The endpoint came up healthy meanwhile, on a config that still exists.
    assert _settled(sm)["EndpointStatus"] == "InService"
    assert inventory()["configs"] == [names.endpoint_config_name]
    recorder = session.client("sagemaker")
    sent = mutations(recorder)
    deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": recorder})
    assert sent == []  # nothing left to do
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing)


def test_deploy_mme_update_throttled_until_timeout_keeps_both_configs_until_rerun(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    sm: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    names = _names(deploy_kwargs, model_data_url, **UPDATE)
    plane.transition_delay = 0.5
    client, faults = faulty("sagemaker")
    faults.throttle("DescribeEndpoint", after=1)
    with pytest.raises(DeploymentTimeoutError, match="no status could be read") as caught:
        deploy_mme(
            "my-mme",
            model_data_url,
            **{**deploy_kwargs, "sagemaker_client": client, "timeout": 1.5},
            **UPDATE,
        )
    assert caught.value.kept == [
        ("endpoint-config", names.endpoint_config_name),
        ("model", names.model_name),
    ]
    assert caught.value.rolled_back == []
    # The update went through; the endpoint is in service on the new config, which still exists.
    assert _settled(sm)["EndpointConfigName"] == names.endpoint_config_name
    assert inventory()["configs"] == sorted([first.endpoint_config_name, names.endpoint_config_name])
    assert inventory()["models"] == sorted([first.model_name, names.model_name])
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing, **UPDATE)


# -- reads other than the status polls ------------------------------------------------------------


@pytest.mark.parametrize(
    "operation", ["DescribeEndpoint", "DescribeModel", "DescribeEndpointConfig", "ListTags"]
)
@pytest.mark.parametrize("fault", ["throttle", "server_error", "drop_connection"])
def test_deploy_mme_retries_every_read_it_makes(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    faulty: Any,
    inventory: Callable[[], Any],
    operation: str,
    fault: str,
) -> None:
    deploy_mme("my-mme", model_data_url, **deploy_kwargs)  # so that the re-run reads tags and configs
    sm, faults = faulty("sagemaker")
    getattr(faults, fault)(operation, times=4)  # more than botocore's 3 attempts
    endpoint = deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm}, **UPDATE)
    assert faults.hits[operation] == 4
    assert inventory() == _only(endpoint)


@pytest.mark.parametrize(
    "operation",
    ["DescribeEndpoint", "ListEndpointConfigs", "ListModels", "ListTags", "DescribeEndpointConfig"],
)
@pytest.mark.parametrize("fault", ["throttle", "server_error", "drop_connection"])
def test_teardown_retries_every_read_it_makes(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    operation: str,
    fault: str,
) -> None:
    deploy_mme("my-mme", model_data_url, autoscaling=SCALING, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    aas, scaling_faults = faulty("application-autoscaling")
    getattr(faults, fault)(operation, times=4)
    getattr(scaling_faults, fault)("DescribeScalableTargets", times=4)
    report = teardown("my-mme", boto3_session=session, sagemaker_client=sm, autoscaling_client=aas)
    assert faults.hits[operation] == 4 and scaling_faults.hits["DescribeScalableTargets"] == 4
    assert report.errors == []
    assert inventory() == nothing


# -- each mutating step failing --------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["CreateModel", "CreateEndpointConfig", "CreateEndpoint"])
def test_deploy_mme_create_step_refused_rolls_back_then_rerun_deploys(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    operation: str,
) -> None:
    sm, faults = faulty("sagemaker")
    faults.server_error(operation)  # every attempt answered 500
    with pytest.raises(DeploymentError, match="InternalFailure") as caught:
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm})
    assert caught.value.kept == []
    assert inventory() == nothing
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing)


@pytest.mark.parametrize("operation", ["CreateModel", "CreateEndpointConfig", "UpdateEndpoint"])
def test_deploy_mme_update_step_refused_leaves_the_running_deployment_then_rerun_updates(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    operation: str,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    faults.server_error(operation)
    with pytest.raises(DeploymentError, match="InternalFailure") as caught:
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm}, **UPDATE)
    assert caught.value.kept == []
    assert inventory() == _only(first)
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing, **UPDATE)


@pytest.mark.parametrize(
    ("operation", "update"),
    [
        pytest.param("CreateModel", False, id="create-model"),
        pytest.param("CreateEndpointConfig", False, id="create-endpoint-config"),
        pytest.param("CreateEndpoint", False, id="create-endpoint"),
        pytest.param("UpdateEndpoint", True, id="update-endpoint"),
    ],
)
def test_deploy_mme_call_whose_answer_is_lost_is_seen_through(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    faulty: Any,
    inventory: Callable[[], Any],
    operation: str,
    update: bool,
) -> None:
    # The call reaches the control plane and succeeds, but its answer is lost (a dropped connection):
    # the deployment reads what happened and goes on.
    if update:
        deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    faults.lose_answer(operation)
    endpoint = deploy_mme(
        "my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm}, **(UPDATE if update else {})
    )
    assert faults.hits[operation] == 1
    assert endpoint.status == "InService"
    assert inventory() == _only(endpoint)


@pytest.mark.parametrize("operation", ["RegisterScalableTarget", "PutScalingPolicy"])
@pytest.mark.parametrize("update", [False, True], ids=["create", "update"])
def test_deploy_mme_autoscaling_failure_keeps_the_endpoint_in_service_and_rerun_applies_it(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    operation: str,
    update: bool,
) -> None:
    if update:
        deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    settings = UPDATE if update else {}
    names = _names(deploy_kwargs, model_data_url, **settings)
    aas, faults = faulty("application-autoscaling")
    faults.server_error(operation)
    with pytest.raises(DeploymentError, match="autoscaling could not be applied") as caught:
        deploy_mme(
            "my-mme",
            model_data_url,
            autoscaling=SCALING,
            **{**deploy_kwargs, "autoscaling_client": aas},
            **settings,
        )
    assert caught.value.kept == [
        ("endpoint", "my-mme"),
        ("endpoint-config", names.endpoint_config_name),
        ("model", names.model_name),
    ]
    # In service on the new config, nothing superseded left, no scalable target without its policy.
    assert inventory() == {
        "endpoints": ["my-mme"],
        "configs": [names.endpoint_config_name],
        "models": [names.model_name],
        "targets": [],
        "policies": [],
    }
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing, scaling=True, **settings)


def test_deploy_mme_changed_autoscaling_failing_is_applied_by_rerun(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    aas: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
) -> None:
    deploy_mme("my-mme", model_data_url, autoscaling=SCALING, **deploy_kwargs)
    wider = AutoScaling(min_capacity=1, max_capacity=5, target_invocations_per_instance=100)
    client, faults = faulty("application-autoscaling")
    faults.server_error("PutScalingPolicy")
    with pytest.raises(DeploymentError, match="autoscaling could not be applied"):
        deploy_mme(
            "my-mme", model_data_url, autoscaling=wider, **{**deploy_kwargs, "autoscaling_client": client}
        )
    # The earlier registration stays (with its policy): the variant is never left unscaled.
    assert inventory()["policies"] == [POLICY]
    deploy_mme("my-mme", model_data_url, autoscaling=wider, **deploy_kwargs)
    [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert target["MaxCapacity"] == 5
    teardown("my-mme", boto3_session=session)
    assert inventory() == nothing


def test_deploy_mme_superseded_config_that_cannot_be_deleted_is_removed_by_rerun(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    faults.server_error("DeleteEndpointConfig")
    second = deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sm}, **UPDATE)
    assert second.status == "InService"  # the endpoint is in service: the leftover is only logged
    assert inventory()["configs"] == sorted([first.endpoint_config_name, second.endpoint_config_name])
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing, **UPDATE)


# -- the endpoint failing, and interrupts ----------------------------------------------------------


@pytest.mark.parametrize("update", [False, True], ids=["create", "update"])
def test_deploy_mme_endpoint_failing_rolls_back_this_calls_pieces_then_rerun_deploys(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    update: bool,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs) if update else None
    plane.fail_next("my-mme", "CannotStartContainerError")
    with pytest.raises(EndpointFailedError, match="CannotStartContainerError") as caught:
        deploy_mme("my-mme", model_data_url, **deploy_kwargs, **(UPDATE if update else {}))
    assert caught.value.failure_reason == "CannotStartContainerError"
    assert caught.value.kept == []
    if first is None:
        assert [kind for kind, _ in caught.value.rolled_back] == ["endpoint", "endpoint-config", "model"]
        assert inventory() == nothing
    else:
        # SageMaker rolled the update back: the endpoint runs its old config, the new one is unused.
        assert [kind for kind, _ in caught.value.rolled_back] == ["endpoint-config", "model"]
        assert inventory() == _only(first)
    _rerun_and_teardown(
        deploy_kwargs, model_data_url, session, inventory, nothing, **(UPDATE if update else {})
    )


@pytest.mark.parametrize("update", [False, True], ids=["create", "update"])
def test_deploy_mme_interrupted_mid_wait_leaves_everything_for_the_rerun(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    sm: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    update: bool,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs) if update else None
    settings = UPDATE if update else {}
    names = _names(deploy_kwargs, model_data_url, **settings)
    plane.transition_delay = 0.3

    def interrupt(stage: str, detail: str) -> None:
        if stage == "wait":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        deploy_mme("my-mme", model_data_url, progress=interrupt, **deploy_kwargs, **settings)
    if hasattr(caught.value, "add_note"):  # Python 3.11+
        assert "interrupted; left as they are" in "".join(caught.value.__notes__)
    assert _settled(sm)["EndpointConfigName"] == names.endpoint_config_name
    found = inventory()
    assert found["endpoints"] == ["my-mme"]
    assert names.endpoint_config_name in found["configs"] and names.model_name in found["models"]
    if first is not None:
        assert first.endpoint_config_name in found["configs"]  # superseded, removed by the re-run
    _rerun_and_teardown(deploy_kwargs, model_data_url, session, inventory, nothing, **settings)


@pytest.mark.parametrize("operation", ["DescribeEndpoint", "DescribeEndpointConfig", "DescribeModel"])
def test_endpoint_model_data_url_retries_its_reads(
    deploy_kwargs: dict[str, Any], model_data_url: str, faulty: Any, operation: str
) -> None:
    from mme_triton.endpoint import endpoint_model_data_url

    deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    sm, faults = faulty("sagemaker")
    faults.server_error(operation, times=4)
    assert endpoint_model_data_url("my-mme", sagemaker_client=sm) == model_data_url
    assert faults.hits[operation] == 4


# -- a variant rename with autoscaling ------------------------------------------------------------

RENAMED = "endpoint/my-mme/variant/Renamed"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


def _add_users_own_policy(aas: Any) -> None:
    """A step-scaling policy the user put on the live variant themselves, beside the library's."""
    aas.put_scaling_policy(
        PolicyName="users-own-step",
        ServiceNamespace="sagemaker",
        ResourceId=TARGET,
        ScalableDimension=DIMENSION,
        PolicyType="StepScaling",
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity",
            "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}],
            "Cooldown": 120,
        },
    )


def _registration(aas: Any, resource_id: str = TARGET) -> dict[str, Any]:
    """What a variant's autoscaling is made of: the target's bounds and each policy's settings."""
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource_id])
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource_id)
    settings = ("PolicyType", "TargetTrackingScalingPolicyConfiguration", "StepScalingPolicyConfiguration")
    return {
        "targets": [(t["MinCapacity"], t["MaxCapacity"]) for t in targets["ScalableTargets"]],
        "policies": {
            p["PolicyName"]: {k: p[k] for k in settings if k in p} for p in policies["ScalingPolicies"]
        },
    }


@pytest.mark.parametrize("failure", ["update-refused", "update-rolled-back"])
def test_deploy_mme_variant_rename_that_fails_restores_the_live_variants_autoscaling(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    aas: Any,
    faulty: Any,
    inventory: Callable[[], Any],
    nothing: Any,
    failure: str,
) -> None:
    first = deploy_mme("my-mme", model_data_url, autoscaling=SCALING, **deploy_kwargs)
    _add_users_own_policy(aas)
    before = _registration(aas)
    assert set(before["policies"]) == {POLICY, "users-own-step"}
    sm, faults = faulty("sagemaker")
    if failure == "update-refused":
        faults.server_error("UpdateEndpoint")
    else:
        plane.fail_next("my-mme", "CannotStartContainerError")  # SageMaker rolls the update back
    with pytest.raises(DeploymentError) as caught:
        deploy_mme(
            "my-mme", model_data_url, variant_name="Renamed", **{**deploy_kwargs, "sagemaker_client": sm}
        )
    # The old variant runs on, with all of its autoscaling (the user's own policy included) put back.
    assert ("autoscaling", TARGET) in caught.value.rolled_back
    assert ("autoscaling", TARGET) not in caught.value.kept
    assert "restored the autoscaling removed for the variant rename" in str(caught.value)
    assert _registration(aas) == before
    assert inventory()["configs"] == [first.endpoint_config_name]
    assert inventory()["targets"] == [TARGET]
    teardown("my-mme", boto3_session=session)  # the variant's every policy, the user's too
    assert inventory() == nothing


def test_deploy_mme_variant_rename_still_updating_at_timeout_names_the_removed_autoscaling(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    aas: Any,
    sm: Any,
    inventory: Callable[[], Any],
    nothing: Any,
) -> None:
    deploy_mme("my-mme", model_data_url, autoscaling=SCALING, **deploy_kwargs)
    plane.transition_delay = 2.0
    with pytest.raises(DeploymentTimeoutError) as caught:
        deploy_mme("my-mme", model_data_url, variant_name="Renamed", **{**deploy_kwargs, "timeout": 0.5})
    # The endpoint may still switch to the renamed variant: the removal stands, and the error says what
    # to put back should the endpoint stay on its old config.
    assert ("autoscaling", TARGET) in caught.value.kept
    assert ("autoscaling", TARGET) not in caught.value.rolled_back
    assert f"put back {TARGET}: 1-2 instances, {POLICY}" in str(caught.value)
    assert _registration(aas)["targets"] == []
    assert _settled(sm)["ProductionVariants"][0]["VariantName"] == "Renamed"
    plane.transition_delay = 0.0
    endpoint = deploy_mme(
        "my-mme", model_data_url, variant_name="Renamed", autoscaling=SCALING, **deploy_kwargs
    )
    assert inventory()["targets"] == [RENAMED] and endpoint.status == "InService"
    teardown("my-mme", boto3_session=session)
    assert inventory() == nothing


def test_deploy_mme_variant_rename_moves_autoscaling_to_the_new_variant(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    inventory: Callable[[], Any],
    nothing: Any,
) -> None:
    deploy_mme("my-mme", model_data_url, autoscaling=SCALING, **deploy_kwargs)
    deploy_mme("my-mme", model_data_url, variant_name="Renamed", autoscaling=SCALING, **deploy_kwargs)
    assert inventory()["targets"] == [RENAMED]
    assert inventory()["policies"] == ["mme-triton-my-mme-Renamed-invocations"]
    teardown("my-mme", boto3_session=session)
    assert inventory() == nothing
