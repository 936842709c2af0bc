"""teardown() and sweep(): idempotent, concurrent-safe removal of what deploy_mme() created."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from mme_triton.endpoint import AutoScaling, TeardownReport, deploy_mme, sweep, teardown
from mme_triton.errors import DeploymentError

pytestmark = pytest.mark.moto


@pytest.fixture
def deployed(deploy_kwargs: dict[str, Any], model_data_url: str) -> Any:
    scaling = AutoScaling(min_capacity=1, max_capacity=2, target_invocations_per_instance=100)
    return deploy_mme("my-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)


def test_teardown_removes_endpoint_config_model_and_autoscaling(
    deployed: Any, session: Any, nothing: Any, inventory: Callable[[], Any]
) -> None:
    report = teardown("my-mme", boto3_session=session)
    assert isinstance(report, TeardownReport)
    assert report.names("endpoint") == ["my-mme"]
    assert report.names("endpoint-config") == [deployed.endpoint_config_name]
    assert report.names("model") == [deployed.model_name]
    assert report.names("autoscaling") == ["endpoint/my-mme/variant/AllTraffic"]
    assert report.missing == [] and report.errors == []
    assert inventory() == nothing


def test_teardown_twice_reports_missing_not_errors(
    deployed: Any, session: Any, nothing: Any, inventory: Any
) -> None:
    teardown("my-mme", boto3_session=session)
    again = teardown("my-mme", boto3_session=session)
    assert again.deleted == []
    assert again.missing == [("endpoint", "my-mme")]
    assert again.errors == []
    assert inventory() == nothing


def _refuse(client: Any, *operations: str) -> None:
    """Make a real client fail ``operations`` (as an interrupted or denied call would)."""

    def boom(**_: Any) -> None:
        raise RuntimeError("injected failure")

    for operation in operations:
        client.meta.events.register(f"before-call.sagemaker.{operation}", boom)


def _interrupted_deploy(session: Any, deploy_kwargs: dict[str, Any], url: str, *operations: str) -> None:
    """A deployment that failed at ``operations[0]`` and whose rollback could not delete the rest."""
    sagemaker = session.client("sagemaker")
    _refuse(sagemaker, *operations)
    with pytest.raises(DeploymentError, match="could not roll back"):
        deploy_mme("my-mme", url, **{**deploy_kwargs, "sagemaker_client": sagemaker})


@pytest.mark.parametrize(
    ("left", "kinds"),
    [
        pytest.param(("CreateEndpointConfig", "DeleteModel"), ["model"], id="model-only"),
        pytest.param(
            ("CreateEndpoint", "DeleteEndpointConfig", "DeleteModel"),
            ["endpoint-config", "model"],
            id="model-and-config",
        ),
        pytest.param((), ["endpoint", "endpoint-config", "model"], id="endpoint-still-creating"),
    ],
)
def test_teardown_of_half_created_deployment_removes_what_is_there(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    nothing: Any,
    inventory: Callable[[], Any],
    left: tuple[str, ...],
    kinds: list[str],
) -> None:
    plane.transition_delay = 30  # an endpoint that gets created stays Creating
    if left:
        _interrupted_deploy(session, deploy_kwargs, model_data_url, *left)
    else:
        assert deploy_mme("my-mme", model_data_url, wait=False, **deploy_kwargs).status == "Creating"
    assert inventory() != nothing

    report = teardown("my-mme", boto3_session=session)

    assert sorted({kind for kind, _ in report.deleted}) == kinds
    assert report.errors == []
    if "endpoint" not in kinds:
        assert report.missing == [("endpoint", "my-mme")]
    assert inventory() == nothing


def test_teardown_after_endpoint_deleted_by_hand_finds_pieces_by_tag(
    deployed: Any, session: Any, sm: Any, nothing: Any, inventory: Callable[[], Any]
) -> None:
    # The endpoint is gone (a manual delete); config, model and the autoscaling registration are left.
    sm.delete_endpoint(EndpointName="my-mme")
    report = teardown("my-mme", boto3_session=session)
    assert ("endpoint", "my-mme") in report.missing
    assert report.names("endpoint-config") == [deployed.endpoint_config_name]
    assert report.names("model") == [deployed.model_name]
    assert report.names("autoscaling") == ["endpoint/my-mme/variant/AllTraffic"]
    assert inventory() == nothing


def test_teardown_leaves_other_endpoints_alone(
    deployed: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    inventory: Callable[[], Any],
) -> None:
    other = deploy_mme("my-mme-2", model_data_url, **deploy_kwargs)
    teardown("my-mme", boto3_session=session)
    assert inventory()["endpoints"] == ["my-mme-2"]
    assert inventory()["configs"] == [other.endpoint_config_name]
    assert inventory()["models"] == [other.model_name]


def test_teardown_concurrently_from_two_threads(
    deployed: Any, plane: Any, nothing: Any, inventory: Any
) -> None:
    reports: list[TeardownReport] = []
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def run() -> None:
        try:
            start.wait()
            reports.append(teardown("my-mme", boto3_session=plane.boto3_session()))  # a session per thread
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    deleted = [item for report in reports for item in report.deleted]
    assert len(deleted) == len(set(deleted))  # each piece deleted once
    assert {kind for kind, _ in deleted} == {"autoscaling", "endpoint", "endpoint-config", "model"}
    assert inventory() == nothing


def test_teardown_dry_run_deletes_nothing(deployed: Any, session: Any, inventory: Callable[[], Any]) -> None:
    before = inventory()
    report = teardown("my-mme", boto3_session=session, dry_run=True)
    assert report.dry_run
    assert report.names("endpoint") == ["my-mme"]
    assert report.names("autoscaling") == ["endpoint/my-mme/variant/AllTraffic"]
    assert inventory() == before


def test_teardown_delete_artifacts_removes_objects_under_prefix(
    deployed: Any, session: Any, s3: Any, model_data_url: str
) -> None:
    bucket, prefix = model_data_url[len("s3://") :].split("/", 1)
    for name in ("a.tar.gz", "b.tar.gz"):
        s3.put_object(Bucket=bucket, Key=prefix + name, Body=b"x")
    s3.put_object(Bucket=bucket, Key="elsewhere/c.tar.gz", Body=b"x")
    report = teardown("my-mme", boto3_session=session, delete_artifacts=True)
    assert sorted(report.names("artifact")) == [model_data_url + "a.tar.gz", model_data_url + "b.tar.gz"]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys == ["elsewhere/c.tar.gz"]


def test_teardown_rejects_bad_name(session: Any) -> None:
    with pytest.raises(ValueError, match="endpoint name 'bad_name' is invalid"):
        teardown("bad_name", boto3_session=session)


def _foreign_endpoint(sm: Any, name: str, model_data_url: str) -> None:
    container = {"Image": "img", "Mode": "MultiModel", "ModelDataUrl": model_data_url}
    sm.create_model(
        ModelName=name, ExecutionRoleArn="arn:aws:iam::123456789012:role/x", PrimaryContainer=container
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InstanceType": "ml.c5.xlarge",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def test_sweep_dry_run_lists_managed_endpoints_only(
    deployed: Any, deploy_kwargs: dict[str, Any], model_data_url: str, session: Any, sm: Any, inventory: Any
) -> None:
    deploy_mme("second", model_data_url, **deploy_kwargs)
    _foreign_endpoint(sm, "not-ours", model_data_url)
    before = inventory()
    reports = sweep(dry_run=True, boto3_session=session, orphan_min_age=timedelta(0))
    assert sorted(r.endpoint_name for r in reports) == ["my-mme", "second"]
    assert all(r.dry_run for r in reports)
    assert inventory() == before


def test_sweep_selects_by_tags_and_age(
    deploy_kwargs: dict[str, Any], model_data_url: str, session: Any, sm: Any, inventory: Callable[[], Any]
) -> None:
    deploy_mme("team-a", model_data_url, tags={"team": "a"}, **deploy_kwargs)
    deploy_mme("team-b", model_data_url, tags={"team": "b"}, **deploy_kwargs)
    assert sweep(older_than=timedelta(hours=1), boto3_session=session) == []
    assert inventory()["endpoints"] == ["team-a", "team-b"]
    reports = sweep(tags={"team": "a"}, older_than=timedelta(0), boto3_session=session)
    assert [r.endpoint_name for r in reports] == ["team-a"]
    assert inventory()["endpoints"] == ["team-b"]
    assert all(name.startswith("team-b") for name in inventory()["configs"] + inventory()["models"])


def test_sweep_removes_orphaned_configs_and_models(
    deployed: Any, deploy_kwargs: dict[str, Any], model_data_url: str, session: Any, sm: Any, inventory: Any
) -> None:
    gone = deploy_mme("gone", model_data_url, tags={"team": "x"}, **deploy_kwargs)
    sm.delete_endpoint(EndpointName="gone")  # leaves a managed config and model that nothing uses
    _foreign_endpoint(sm, "not-ours", model_data_url)
    sm.delete_endpoint(EndpointName="not-ours")  # unmanaged leftovers: not sweep's business

    young = sweep(tags={"team": "x"}, boto3_session=session)  # the default grace period protects them
    assert young == []
    before = inventory()
    [planned] = sweep(tags={"team": "x"}, orphan_min_age=timedelta(0), dry_run=True, boto3_session=session)
    assert planned.dry_run
    assert planned.deleted == [("endpoint-config", gone.endpoint_config_name), ("model", gone.model_name)]
    assert inventory() == before
    reports = sweep(tags={"team": "x"}, orphan_min_age=timedelta(0), boto3_session=session)
    [report] = reports
    assert report.endpoint_name == "gone"
    assert report.names("endpoint-config") == [gone.endpoint_config_name]
    assert report.names("model") == [gone.model_name]
    assert inventory()["configs"] == sorted([deployed.endpoint_config_name, "not-ours"])
    assert inventory()["models"] == sorted([deployed.model_name, "not-ours"])


def test_teardown_removes_the_rest_and_reports_what_failed(deployed: Any, session: Any, sm: Any) -> None:
    from botocore.exceptions import ClientError

    from mme_triton.endpoint import TeardownError

    sagemaker = session.client("sagemaker")

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}, "Delete")

    sagemaker.meta.events.register("before-call.sagemaker.DeleteEndpointConfig", refuse)
    with pytest.raises(TeardownError) as caught:
        teardown("my-mme", sagemaker_client=sagemaker, boto3_session=session)
    report = caught.value.report
    assert [(kind, name) for kind, name, _ in report.errors] == [
        ("endpoint-config", deployed.endpoint_config_name)
    ]
    assert report.names("endpoint") == ["my-mme"]
    assert report.names("model") == [deployed.model_name]
    assert [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]] == [
        deployed.endpoint_config_name
    ]


def _delete_before_list_tags(client: Any, sm: Any) -> list[str]:
    """Before ``client`` lists a resource's tags, delete the resource (as a concurrent run would)."""
    deleted: list[str] = []
    delete = {
        "endpoint": lambda name: sm.delete_endpoint(EndpointName=name),
        "endpoint-config": lambda name: sm.delete_endpoint_config(EndpointConfigName=name),
        "model": lambda name: sm.delete_model(ModelName=name),
    }

    def race(params: dict[str, Any], **_: Any) -> None:
        kind, name = params["ResourceArn"].split(":")[-1].split("/", 1)
        if name not in deleted:
            deleted.append(name)
            delete[kind](name)

    client.meta.events.register("before-parameter-build.sagemaker.ListTags", race)
    return deleted


def test_teardown_tolerates_pieces_vanishing_while_it_runs(
    deployed: Any, session: Any, sm: Any, nothing: Any, inventory: Callable[[], Any]
) -> None:
    sagemaker = session.client("sagemaker")
    vanished = _delete_before_list_tags(sagemaker, sm)

    report = teardown("my-mme", sagemaker_client=sagemaker, boto3_session=session)

    assert sorted(vanished) == sorted([deployed.endpoint_config_name, deployed.model_name])
    assert report.errors == []
    assert report.names("endpoint") == ["my-mme"]
    assert ("endpoint-config", deployed.endpoint_config_name) in report.missing
    assert inventory() == nothing


def test_sweep_tolerates_endpoints_torn_down_while_it_runs(
    deployed: Any, session: Any, sm: Any, inventory: Callable[[], Any]
) -> None:
    sagemaker = session.client("sagemaker")
    vanished = _delete_before_list_tags(sagemaker, sm)

    reports = sweep(sagemaker_client=sagemaker, boto3_session=session, orphans=False)

    assert vanished == ["my-mme"]
    assert reports == []  # gone before its tags were read: someone else's teardown got it
    assert inventory()["endpoints"] == []
