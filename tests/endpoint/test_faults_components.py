"""deploy_inference_components() and teardown() of components against a control plane that throttles,
fails and loses answers: faults injected into real boto3 clients with botocore event hooks
(conftest.Faults) on moto's server with the stack's inference components. After each fault: what is left,
then a plain re-run and a teardown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mme_triton.endpoint import InferenceComponent, deploy_inference_components, teardown
from mme_triton.errors import DeploymentError

pytestmark = pytest.mark.moto

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
COMPONENTS = [
    InferenceComponent("linear", EXAMPLES / "linear", memory="256MiB", cpus=0.5),
    InferenceComponent("scale", EXAMPLES / "scale", memory="256MiB", cpus=0.5),
]


def _components(sm: Any) -> list[str]:
    return sorted(c["InferenceComponentName"] for c in sm.list_inference_components()["InferenceComponents"])


def _rerun_and_teardown(
    ic_kwargs: dict[str, Any], session: Any, sm: Any, inventory: Any, nothing: Any
) -> None:
    """A plain re-run (no faults) ends with the deployment whole; a teardown then leaves nothing."""
    endpoint = deploy_inference_components("ic-ep", COMPONENTS, **ic_kwargs)
    assert endpoint.status == "InService" and _components(sm) == ["linear", "scale"]
    assert len(inventory()["models"]) == 2
    teardown("ic-ep", boto3_session=session)
    assert inventory() == nothing and _components(sm) == []


@pytest.mark.parametrize(
    ("fault", "times"),
    [("throttle", 4), ("server_error", 3), ("drop_connection", 3)],
    ids=["throttled", "5xx", "dropped-connection"],
)
def test_deploy_inference_components_survives_failing_component_polls(
    plane: Any,
    ic_kwargs: dict[str, Any],
    faulty: Any,
    session: Any,
    sm: Any,
    inventory: Any,
    nothing: Any,
    fault: str,
    times: int,
) -> None:
    plane.transition_delay = 0.3  # the polls fail while the components are Creating
    client, faults = faulty("sagemaker")
    # the existence checks go through; the waits' polls fail
    getattr(faults, fault)("DescribeInferenceComponent", times=times, after=len(COMPONENTS))
    endpoint = deploy_inference_components("ic-ep", COMPONENTS, **{**ic_kwargs, "sagemaker_client": client})
    assert faults.hits["DescribeInferenceComponent"] == times
    assert endpoint.components == ("linear", "scale")
    _rerun_and_teardown(ic_kwargs, session, sm, inventory, nothing)


def test_deploy_inference_components_create_whose_answer_is_lost_is_seen_through(
    ic_kwargs: dict[str, Any], faulty: Any, session: Any, sm: Any, inventory: Any, nothing: Any
) -> None:
    client, faults = faulty("sagemaker")
    faults.lose_answer("CreateInferenceComponent")
    endpoint = deploy_inference_components("ic-ep", COMPONENTS, **{**ic_kwargs, "sagemaker_client": client})
    assert faults.hits["CreateInferenceComponent"] >= 1
    assert endpoint.components == ("linear", "scale") and _components(sm) == ["linear", "scale"]
    _rerun_and_teardown(ic_kwargs, session, sm, inventory, nothing)


def test_deploy_inference_components_refused_component_rolls_the_new_endpoint_back(
    ic_kwargs: dict[str, Any], faulty: Any, session: Any, sm: Any, inventory: Any, nothing: Any
) -> None:
    client, faults = faulty("sagemaker")
    faults.error(
        "CreateInferenceComponent", status=400, code="ResourceLimitExceeded", message="too many", after=1
    )
    with pytest.raises(DeploymentError, match="too many") as caught:
        deploy_inference_components("ic-ep", COMPONENTS, **{**ic_kwargs, "sagemaker_client": client})
    rolled_back = sorted(kind for kind, _ in caught.value.rolled_back)
    assert rolled_back == ["endpoint", "endpoint-config", "inference-component", "model", "model"]
    assert caught.value.kept == []
    assert inventory() == nothing and _components(sm) == []
    _rerun_and_teardown(ic_kwargs, session, sm, inventory, nothing)


def test_deploy_inference_components_interrupted_mid_wait_leaves_everything_for_the_rerun(
    plane: Any, ic_kwargs: dict[str, Any], session: Any, sm: Any, inventory: Any, nothing: Any
) -> None:
    plane.transition_delay = 0.3

    def interrupt(stage: str, detail: str) -> None:
        if stage == "wait" and detail.startswith("components"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        deploy_inference_components("ic-ep", COMPONENTS, progress=interrupt, **ic_kwargs)
    if hasattr(caught.value, "add_note"):  # Python 3.11+
        note = "".join(caught.value.__notes__)
        assert "deploy_inference_components('ic-ep') was interrupted" in note
        assert "inference-component linear" in note
    assert _components(sm) == ["linear", "scale"]  # nothing was deleted
    assert inventory()["endpoints"] == ["ic-ep"]
    _rerun_and_teardown(ic_kwargs, session, sm, inventory, nothing)


@pytest.mark.parametrize("operation", ["ListInferenceComponents", "DescribeInferenceComponent"])
def test_teardown_retries_the_component_reads_it_makes(
    ic_kwargs: dict[str, Any],
    faulty: Any,
    session: Any,
    sm: Any,
    inventory: Any,
    nothing: Any,
    operation: str,
) -> None:
    deploy_inference_components("ic-ep", COMPONENTS, **ic_kwargs)
    client, faults = faulty("sagemaker")
    faults.throttle(operation, times=4)
    report = teardown("ic-ep", sagemaker_client=client, boto3_session=session)
    assert faults.hits[operation] == 4
    assert sorted(report.names("inference-component")) == ["linear", "scale"]
    assert inventory() == nothing and _components(sm) == []
