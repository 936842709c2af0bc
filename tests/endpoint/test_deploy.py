"""deploy_mme() against the ControlPlane: happy path, idempotence, updates, failures and rollback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mme_triton.endpoint import AutoScaling, Endpoint, TritonEnvironment, deploy_mme
from mme_triton.endpoint.handle import wait_for_endpoint
from mme_triton.errors import DeploymentError, DeploymentTimeoutError, EndpointFailedError, MMETritonWarning

pytestmark = pytest.mark.moto


def _calls(client: Any) -> list[str]:
    """Record the operation names a real client sends from now on."""
    names: list[str] = []
    client.meta.events.register("before-call.*.*", lambda model, **_: names.append(model.name))
    return names


def _fail_on(client: Any, operation: str, service: str = "sagemaker", *, skip: int = 0) -> None:
    """Make the real client raise before sending ``operation`` (a failure injected at the client), after
    letting the first ``skip`` calls of it through."""
    passed: list[int] = []

    def boom(**_: Any) -> None:
        if len(passed) < skip:
            passed.append(1)
            return
        raise RuntimeError(f"injected failure at {operation}")

    client.meta.events.register(f"before-call.{service}.{operation}", boom)


def test_deploy_mme_creates_in_service_multi_model_endpoint(
    deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any, inventory: Callable[[], Any]
) -> None:
    endpoint = deploy_mme(
        "my-mme",
        model_data_url,
        environment=TritonEnvironment(shm_default_byte_size=32 * 1024 * 1024),
        model_cache="Disabled",
        tags={"team": "search"},
        **deploy_kwargs,
    )
    assert isinstance(endpoint, Endpoint)
    assert (endpoint.name, endpoint.status, endpoint.region) == ("my-mme", "InService", "us-east-1")
    assert endpoint.model_data_url == model_data_url
    assert inventory()["endpoints"] == ["my-mme"]
    assert inventory()["configs"] == [endpoint.endpoint_config_name]
    assert inventory()["models"] == [endpoint.model_name]

    container = sm.describe_model(ModelName=endpoint.model_name)["PrimaryContainer"]
    assert container["Mode"] == "MultiModel"
    assert container["ModelDataUrl"] == model_data_url
    assert container["Environment"] == {
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432",  # the given value
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "1048576",  # the default
    }
    assert container["MultiModelConfig"] == {"ModelCacheSetting": "Disabled"}
    assert (
        container["Image"] == "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
    )

    variant = sm.describe_endpoint_config(EndpointConfigName=endpoint.endpoint_config_name)[
        "ProductionVariants"
    ][0]
    assert (variant["InstanceType"], variant["InitialInstanceCount"], variant["ModelName"]) == (
        "ml.g5.xlarge",
        1,
        endpoint.model_name,
    )
    for arn in (
        endpoint.arn,
        sm.describe_endpoint_config(EndpointConfigName=endpoint.endpoint_config_name)["EndpointConfigArn"],
        sm.describe_model(ModelName=endpoint.model_name)["ModelArn"],
    ):
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
        assert tags["mme-triton:managed"] == "true"
        assert tags["mme-triton:endpoint"] == "my-mme"
        assert tags["team"] == "search"
        assert "mme-triton:created-at" in tags


def test_deploy_mme_with_defaults_sets_both_shared_memory_variables(
    deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any
) -> None:
    endpoint = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    environment = sm.describe_model(ModelName=endpoint.model_name)["PrimaryContainer"]["Environment"]
    assert environment == {
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216",
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "1048576",
    }


def test_deploy_mme_environment_value_none_removes_a_default(
    deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any
) -> None:
    endpoint = deploy_mme(
        "my-mme",
        model_data_url,
        environment={"SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": None, "SAGEMAKER_TRITON_LOG_VERBOSE": "0"},
        **deploy_kwargs,
    )
    environment = sm.describe_model(ModelName=endpoint.model_name)["PrimaryContainer"]["Environment"]
    assert environment == {
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216",
        "SAGEMAKER_TRITON_LOG_VERBOSE": "0",
    }


def test_deploy_mme_sends_the_inference_ami_version(
    deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any
) -> None:
    endpoint = deploy_mme(
        "my-mme",
        model_data_url,
        triton_version="26.05",
        inference_ami_version="al2023-ami-sagemaker-inference-gpu-4-1",
        **deploy_kwargs,
    )
    [variant] = sm.describe_endpoint_config(EndpointConfigName=endpoint.endpoint_config_name)[
        "ProductionVariants"
    ]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    image = sm.describe_model(ModelName=endpoint.model_name)["PrimaryContainer"]["Image"]
    assert image.endswith("sagemaker-tritonserver:26.05-py3")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"instance_type": "ml.g6.xlarge"}, "not among the GPU instance types", id="gpu-type"),
        pytest.param({"triton_version": "25.04"}, "needs NVIDIA driver 525", id="driver"),
        pytest.param(
            {"environment": {"SAGEMAKER_TRITON_INFERENCE_TYPE": "infer"}},
            "SAGEMAKER_TRITON_INFERENCE_TYPE acts only",
            id="inference-type",
        ),
    ],
)
def test_deploy_mme_warns_and_still_deploys(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    caplog: pytest.LogCaptureFixture,
    overrides: dict[str, Any],
    message: str,
) -> None:
    with pytest.warns(MMETritonWarning, match=message) as caught:
        endpoint = deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, **overrides})
    assert endpoint.status == "InService"
    assert caught[0].filename == __file__  # the warning points at the caller
    assert any(message in record.getMessage() for record in caplog.records if record.levelname == "WARNING")


def test_deploy_mme_cpu_instance_gets_cpu_image(
    deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any
) -> None:
    endpoint = deploy_mme("cpu-mme", model_data_url, **{**deploy_kwargs, "instance_type": "ml.c5.xlarge"})
    image = sm.describe_model(ModelName=endpoint.model_name)["PrimaryContainer"]["Image"]
    assert image.endswith("sagemaker-tritonserver:24.09-py3-cpu")


_MUTATING = ("Create", "Update", "Delete", "Put", "Register", "Deregister", "Add", "Upload", "Complete")


def test_deploy_mme_rerun_with_same_settings_changes_nothing(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    snapshot: Callable[[str], Any],
    tmp_path: Any,
) -> None:
    settings: dict[str, Any] = {
        "models": [_echo_model(tmp_path, "echo"), _echo_model(tmp_path, "echo2")],
        "environment": TritonEnvironment(log_verbose=0, shm_default_byte_size=32 * 1024 * 1024),
        "model_cache": "Enabled",
        "tags": {"team": "search"},
        "autoscaling": AutoScaling(min_capacity=1, max_capacity=3, target_invocations_per_instance=50),
        **deploy_kwargs,
    }
    bucket = model_data_url[len("s3://") :].split("/", 1)[0]
    first = deploy_mme("my-mme", model_data_url, **settings)
    before = snapshot(bucket)
    assert len(before["objects"]) == 2 and len(before["policies"]) == 1  # the snapshot sees them all
    clients = {name: session.client(name) for name in ("sagemaker", "application-autoscaling", "s3")}
    calls = [_calls(client) for client in clients.values()]

    second = deploy_mme(
        "my-mme",
        model_data_url,
        **{
            **settings,
            "sagemaker_client": clients["sagemaker"],
            "autoscaling_client": clients["application-autoscaling"],
            "s3_client": clients["s3"],
        },
    )

    assert snapshot(bucket) == before
    assert (second.endpoint_config_name, second.model_name) == (first.endpoint_config_name, first.model_name)
    sent = [name for recorded in calls for name in recorded]
    assert "DescribeEndpoint" in sent and "HeadObject" in sent  # the recorders saw the second run
    assert [name for name in sent if name.startswith(_MUTATING)] == []


def test_deploy_mme_changed_settings_update_endpoint_to_new_config(
    deploy_kwargs: dict[str, Any], model_data_url: str, session: Any, sm: Any, inventory: Callable[[], Any]
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    sagemaker = session.client("sagemaker")
    calls = _calls(sagemaker)
    second = deploy_mme(
        "my-mme",
        model_data_url,
        instance_count=2,
        environment=TritonEnvironment(log_verbose=0),
        **{**deploy_kwargs, "sagemaker_client": sagemaker},
    )
    assert "UpdateEndpoint" in calls and "CreateEndpoint" not in calls
    assert second.endpoint_config_name != first.endpoint_config_name
    assert second.model_name != first.model_name
    description = sm.describe_endpoint(EndpointName="my-mme")
    assert (description["EndpointStatus"], description["EndpointConfigName"]) == (
        "InService",
        second.endpoint_config_name,
    )
    assert description["ProductionVariants"][0]["CurrentInstanceCount"] == 2
    # The superseded config and model were removed once the update was in service.
    assert inventory()["configs"] == [second.endpoint_config_name]
    assert inventory()["models"] == [second.model_name]


def test_deploy_mme_only_instance_count_changed_keeps_model(
    deploy_kwargs: dict[str, Any], model_data_url: str, inventory: Callable[[], Any]
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    second = deploy_mme("my-mme", model_data_url, instance_count=3, **deploy_kwargs)
    assert second.model_name == first.model_name
    assert second.endpoint_config_name != first.endpoint_config_name
    assert inventory()["models"] == [first.model_name]


def test_deploy_mme_failed_endpoint_raises_reason_and_leaves_nothing(
    plane: Any, deploy_kwargs: dict[str, Any], model_data_url: str, nothing: Any, inventory: Callable[[], Any]
) -> None:
    plane.fail_next("my-mme", "Ping failed: the container did not start")
    with pytest.raises(EndpointFailedError) as caught:
        deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    assert caught.value.failure_reason == "Ping failed: the container did not start"
    assert caught.value.endpoint_name == "my-mme"
    assert inventory() == nothing


def test_deploy_mme_failed_update_keeps_old_config_and_removes_new_one(
    plane: Any, deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any, inventory: Callable[[], Any]
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    before = inventory()
    plane.fail_next("my-mme", "model load failed")
    with pytest.raises(EndpointFailedError, match="model load failed"):
        deploy_mme(
            "my-mme", model_data_url, environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "3"}, **deploy_kwargs
        )
    assert inventory() == before
    assert sm.describe_endpoint(EndpointName="my-mme")["EndpointConfigName"] == first.endpoint_config_name


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param("CreateModel", id="create-model"),
        pytest.param("CreateEndpointConfig", id="create-endpoint-config"),
        pytest.param("CreateEndpoint", id="create-endpoint"),
    ],
)
def test_deploy_mme_failure_before_the_endpoint_exists_rolls_back_everything(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    nothing: Any,
    inventory: Callable[[], Any],
    operation: str,
) -> None:
    sagemaker = session.client("sagemaker")
    _fail_on(sagemaker, operation)
    with pytest.raises(DeploymentError, match=f"injected failure at {operation}") as caught:
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sagemaker})
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert caught.value.kept == []
    assert inventory() == nothing


def test_deploy_mme_unreadable_endpoint_after_create_keeps_everything(
    deploy_kwargs: dict[str, Any], model_data_url: str, session: Any, inventory: Callable[[], Any]
) -> None:
    # DescribeEndpoint fails for good after the existence check: whether the endpoint is coming up cannot
    # be known, so nothing is deleted; the error names what was kept.
    sagemaker = session.client("sagemaker")
    _fail_on(sagemaker, "DescribeEndpoint", skip=1)
    with pytest.raises(DeploymentError, match="injected failure at DescribeEndpoint") as caught:
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "sagemaker_client": sagemaker})
    kinds = [kind for kind, _ in caught.value.kept]
    assert kinds == ["endpoint", "endpoint-config", "model"]
    assert caught.value.rolled_back == []
    assert "kept endpoint my-mme" in str(caught.value)
    assert "run deploy_mme('my-mme', ...) again" in str(caught.value)
    found = inventory()
    assert (found["endpoints"], found["configs"], found["models"]) == (
        ["my-mme"],
        [name for kind, name in caught.value.kept if kind == "endpoint-config"],
        [name for kind, name in caught.value.kept if kind == "model"],
    )


def test_deploy_mme_timeout_while_creating_rolls_back(
    plane: Any, deploy_kwargs: dict[str, Any], model_data_url: str, nothing: Any, inventory: Callable[[], Any]
) -> None:
    # The endpoint is readable and still Creating: it never served, so it and its config and model go.
    plane.transition_delay = 30
    with pytest.raises(DeploymentTimeoutError, match="still Creating") as caught:
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, "timeout": 0.3})
    assert [kind for kind, _ in caught.value.rolled_back] == ["endpoint", "endpoint-config", "model"]
    assert caught.value.kept == []
    assert inventory() == nothing


def test_deploy_mme_registers_autoscaling(
    deploy_kwargs: dict[str, Any], model_data_url: str, aas: Any
) -> None:
    scaling = AutoScaling(
        min_capacity=1, max_capacity=4, target_invocations_per_instance=250, scale_in_cooldown=600
    )
    deploy_mme("my-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)
    [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
        "endpoint/my-mme/variant/AllTraffic",
        1,
        4,
    )
    [policy] = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert policy["PolicyType"] == "TargetTrackingScaling"
    assert config["TargetValue"] == 250
    assert (
        config["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "SageMakerVariantInvocationsPerInstance"
    )
    assert (config["ScaleInCooldown"], config["ScaleOutCooldown"]) == (600, 60)


def test_deploy_mme_without_autoscaling_removes_earlier_registration(
    deploy_kwargs: dict[str, Any], model_data_url: str, aas: Any
) -> None:
    scaling = AutoScaling(min_capacity=1, max_capacity=2, target_invocations_per_instance=100)
    deploy_mme("my-mme", model_data_url, autoscaling=scaling, **deploy_kwargs)
    deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    assert aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []


def test_deploy_mme_wait_false_returns_creating_handle(
    plane: Any, deploy_kwargs: dict[str, Any], model_data_url: str
) -> None:
    plane.transition_delay = 0.3
    endpoint = deploy_mme("my-mme", model_data_url, wait=False, **deploy_kwargs)
    assert endpoint.status == "Creating"
    assert endpoint.wait(poll_interval=0.05, timeout=10).status == "InService"
    assert endpoint.refresh().status == "InService"


@pytest.mark.parametrize(
    ("waits", "message"),
    [
        pytest.param({"poll_interval": 0}, "poll_interval must be > 0", id="zero-interval"),
        pytest.param({"poll_interval": -1}, "poll_interval must be > 0", id="negative-interval"),
        pytest.param({"poll_interval": float("nan")}, "poll_interval must be > 0", id="nan-interval"),
        pytest.param({"timeout": 0}, "timeout must be > 0", id="zero-timeout"),
    ],
)
def test_endpoint_wait_refuses_times_that_are_not_positive(
    plane: Any,
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    sm: Any,
    waits: dict[str, float],
    message: str,
) -> None:
    # 0 used to poll DescribeEndpoint in a tight loop for the whole timeout; -1 made time.sleep raise
    plane.transition_delay = 0.3
    endpoint = deploy_mme("my-mme", model_data_url, wait=False, **deploy_kwargs)
    sent = _calls(sm)
    with pytest.raises(ValueError, match=message):
        endpoint.wait(**{"timeout": 10, "poll_interval": 0.05, **waits})
    with pytest.raises(ValueError, match=message):
        wait_for_endpoint(sm, "my-mme", **{"timeout": 10, "poll_interval": 0.05, **waits})
    with pytest.raises(ValueError, match=message):
        deploy_mme("my-mme", model_data_url, **{**deploy_kwargs, **waits})
    assert sent == []  # refused before any call
    assert endpoint.wait(timeout=10, poll_interval=0.05).status == "InService"


def test_deploy_mme_reports_progress(deploy_kwargs: dict[str, Any], model_data_url: str) -> None:
    stages: list[str] = []
    deploy_mme("my-mme", model_data_url, progress=lambda stage, detail: stages.append(stage), **deploy_kwargs)
    assert stages[:3] == ["create-model", "create-endpoint-config", "create-endpoint"]
    assert "wait" in stages
    assert stages[-1] == "done"


def test_deploy_mme_refuses_endpoint_it_did_not_create(
    deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any, inventory: Callable[[], Any]
) -> None:
    container = {"Image": "img", "Mode": "MultiModel", "ModelDataUrl": model_data_url}
    sm.create_model(ModelName="theirs", ExecutionRoleArn=deploy_kwargs["role"], PrimaryContainer=container)
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "theirs",
        "InstanceType": "ml.g5.xlarge",
        "InitialInstanceCount": 1,
    }
    sm.create_endpoint_config(EndpointConfigName="theirs", ProductionVariants=[variant])
    sm.create_endpoint(EndpointName="theirs", EndpointConfigName="theirs")
    before = inventory()
    with pytest.raises(DeploymentError, match="not created by mme_triton"):
        deploy_mme("theirs", model_data_url, **deploy_kwargs)
    assert inventory() == before


ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"role": "SageMakerExecution"}, "not an IAM role ARN", id="role-name-not-arn"),
        pytest.param({"role": "arn:aws:iam::12345:role/x"}, "not an IAM role ARN", id="role-short-account"),
        pytest.param({"role": "arn:aws:iam::123456789012:user/x"}, "not an IAM role ARN", id="user-not-role"),
        pytest.param({"endpoint_name": "-starts-with-hyphen"}, "endpoint name", id="leading-hyphen"),
        pytest.param({"endpoint_name": "under_score"}, "endpoint name", id="underscore"),
        pytest.param({"endpoint_name": "x" * 64}, "endpoint name", id="64-chars"),
        pytest.param({"endpoint_name": ""}, "endpoint name", id="empty"),
        pytest.param({"instance_type": "ml.g5.12xlarge"}, "single-GPU instances only", id="multi-gpu-g5"),
        pytest.param({"instance_type": "ml.p3.8xlarge"}, "single-GPU instances only", id="multi-gpu-p3"),
        pytest.param({"instance_type": "ml.inf2.xlarge"}, "no SageMaker Triton image", id="inferentia"),
        pytest.param({"instance_type": "ml.g5.xlarg"}, "did you mean ml.g5.xlarge", id="typo"),
        pytest.param({"environment": {"BIG": "x" * 1025}}, "1025 bytes", id="env-value-too-long"),
        pytest.param(
            {"environment": {f"K{i:03d}": "v" * 1020 for i in range(33)}}, "32 KB", id="env-over-32kb"
        ),
        pytest.param({"environment": {"SAGEMAKER_TRITON_SHM_SIZE": "1"}}, "unknown Triton", id="env-unknown"),
        pytest.param({"model_cache": "enabled"}, "model_cache", id="model-cache-case"),
        pytest.param({"instance_count": 0}, "instance_count", id="no-instances"),
        pytest.param({"tags": {"mme-triton:managed": "false"}}, "reserved", id="reserved-tag"),
        pytest.param({"tags": {"aws:x": "1"}}, "reserved", id="aws-tag"),
        pytest.param({"variant_name": "All Traffic"}, "variant name", id="variant-name"),
        pytest.param(
            {"models": ["repo/a", "other/a"]}, "several models would be uploaded as a.tar.gz", id="dup-models"
        ),
        pytest.param(
            {"vpc_config": {"SecurityGroupIds": [], "Subnets": ["subnet-1"]}}, "SecurityGroupIds", id="vpc"
        ),
        pytest.param({"triton_version": "19.01"}, "known versions", id="unknown-version"),
        pytest.param({"inference_ami_version": "gpu 3"}, "not an AMI version name", id="ami-name"),
        pytest.param(
            {"autoscaling": AutoScaling(min_capacity=2, max_capacity=3, target_invocations_per_instance=1)},
            "outside autoscaling",
            id="count-outside-autoscaling",
        ),
    ],
)
def test_deploy_mme_rejects_what_aws_refuses_before_any_call(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    overrides: dict[str, Any],
    message: str,
) -> None:
    sagemaker = session.client("sagemaker")
    calls = _calls(sagemaker)
    kwargs: dict[str, Any] = {**deploy_kwargs, "sagemaker_client": sagemaker}
    name = overrides.pop("endpoint_name", "my-mme")
    kwargs.update(overrides)
    with pytest.raises(ValueError, match=message):
        deploy_mme(name, model_data_url, **kwargs)
    assert calls == []


def test_deploy_mme_rejects_bad_model_data_url(deploy_kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="is not an S3 URL"):
        deploy_mme("my-mme", "https://bucket/prefix", **deploy_kwargs)


def test_endpoint_client_is_a_ready_mme_client(deploy_kwargs: dict[str, Any], model_data_url: str) -> None:
    from mme_triton.client.client import MMEClient

    endpoint = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    client = endpoint.client()
    assert isinstance(client, MMEClient)


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


def test_deploy_mme_uploads_models_under_the_prefix_first(
    deploy_kwargs: dict[str, Any], model_data_url: str, s3: Any, tmp_path: Any
) -> None:
    from mme_triton.artifact.s3 import list_models

    models = [_echo_model(tmp_path, "echo"), _echo_model(tmp_path, "echo2")]
    endpoint = deploy_mme("my-mme", model_data_url, models=models, **deploy_kwargs)
    assert endpoint.status == "InService"
    assert list_models(model_data_url, s3_client=s3) == ["echo.tar.gz", "echo2.tar.gz"]
    # Running again finds the same content already there and changes nothing.
    again = deploy_mme("my-mme", model_data_url, models=models, **deploy_kwargs)
    assert again.endpoint_config_name == endpoint.endpoint_config_name


def test_deploy_mme_checks_python_environments_against_its_release_before_uploading(
    deploy_kwargs: dict[str, Any], model_data_url: str, s3: Any, inventory: Callable[[], Any]
) -> None:
    """The fixture's environment is Python 3.12: not what 24.09's python backend runs (3.10), what 25.04's
    does."""
    from pathlib import Path

    from mme_triton.artifact.s3 import list_models
    from mme_triton.errors import ModelValidationError

    model = Path(__file__).parents[1] / "model" / "fixtures" / "python_env_python_mismatch" / "scale"
    before = inventory()
    with pytest.raises(ModelValidationError, match="python-env-python-mismatch"):
        deploy_mme("env-mme", model_data_url, models=[model], **deploy_kwargs)
    assert list_models(model_data_url, s3_client=s3) == [] and inventory() == before

    deploy_mme(
        "env-mme",
        model_data_url,
        models=[model],
        triton_version="25.04",
        **{**deploy_kwargs, "instance_type": "ml.m5.xlarge"},
    )
    assert list_models(model_data_url, s3_client=s3) == ["scale.tar.gz"]


def test_deploy_mme_leaves_autoscaling_it_did_not_make(
    deploy_kwargs: dict[str, Any], model_data_url: str, aas: Any
) -> None:
    deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    aas.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId="endpoint/my-mme/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=5,
    )
    deploy_mme("my-mme", model_data_url, instance_count=2, **deploy_kwargs)
    [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert target["MaxCapacity"] == 5


@pytest.mark.parametrize("kind", ["model", "config"])
def test_deploy_mme_refuses_a_name_taken_by_someone_else(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    sm: Any,
    inventory: Callable[[], Any],
    kind: str,
) -> None:
    # moto replaces a model or config created under an existing name; SageMaker refuses. The library
    # checks before creating, so someone else's resource under the derived name is never replaced.
    from mme_triton.endpoint import teardown

    names = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    teardown("my-mme", boto3_session=session)
    container = {"Image": "their-image", "Mode": "SingleModel", "ModelDataUrl": "s3://theirs/model.tar.gz"}
    their_model = names.model_name if kind == "model" else "their-model"
    sm.create_model(ModelName=their_model, ExecutionRoleArn=ROLE, PrimaryContainer=container)
    if kind == "config":
        variant = {
            "VariantName": "Theirs",
            "ModelName": their_model,
            "InstanceType": "ml.m5.large",
            "InitialInstanceCount": 1,
        }
        sm.create_endpoint_config(EndpointConfigName=names.endpoint_config_name, ProductionVariants=[variant])
    before = inventory()
    taken = names.model_name if kind == "model" else names.endpoint_config_name

    with pytest.raises(DeploymentError, match=f"{taken} exists and was not created for endpoint"):
        deploy_mme("my-mme", model_data_url, **deploy_kwargs)

    assert inventory() == before
    assert sm.describe_model(ModelName=their_model)["PrimaryContainer"]["Image"] == "their-image"
    if kind == "config":
        config = sm.describe_endpoint_config(EndpointConfigName=names.endpoint_config_name)
        assert config["ProductionVariants"][0]["VariantName"] == "Theirs"


@pytest.mark.parametrize(
    "operation", ["CreateModel", "CreateEndpointConfig", "UpdateEndpoint", "DescribeEndpoint"]
)
def test_deploy_mme_failed_update_step_leaves_the_running_deployment_as_it_was(
    deploy_kwargs: dict[str, Any],
    model_data_url: str,
    session: Any,
    sm: Any,
    snapshot: Callable[[str], Any],
    operation: str,
) -> None:
    first = deploy_mme("my-mme", model_data_url, **deploy_kwargs)
    bucket = model_data_url[len("s3://") :].split("/", 1)[0]
    before = snapshot(bucket)
    sagemaker = session.client("sagemaker")
    # DescribeEndpoint: the existence check passes, waiting for the update fails.
    _fail_on(sagemaker, operation, skip=1 if operation == "DescribeEndpoint" else 0)

    with pytest.raises(DeploymentError, match=f"injected failure at {operation}") as caught:
        deploy_mme(
            "my-mme",
            model_data_url,
            environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "0"},  # a new model and config
            **{**deploy_kwargs, "sagemaker_client": sagemaker},
        )

    if operation == "DescribeEndpoint":
        # The update was sent and its progress cannot be read: the new config and model are kept (the
        # endpoint may be switching to them, and here it does), the old ones too.
        assert {kind for kind, _ in caught.value.kept} == {"endpoint-config", "model"}
        settled = _wait_settled(sm)
        kept_config = next(name for kind, name in caught.value.kept if kind == "endpoint-config")
        assert settled["EndpointConfigName"] == kept_config
        after = snapshot(bucket)
        assert sorted(key for key in after if key.startswith("config ")) == sorted(
            [f"config {first.endpoint_config_name}", f"config {kept_config}"]
        )
    else:
        assert caught.value.kept == []
        assert snapshot(bucket) == before


def _wait_settled(sm: Any) -> dict[str, Any]:
    import time

    end = time.monotonic() + 10
    while True:
        description: dict[str, Any] = sm.describe_endpoint(EndpointName="my-mme")
        if description["EndpointStatus"] not in ("Creating", "Updating") or time.monotonic() > end:
            return description
        time.sleep(0.02)


def test_deploy_mme_sends_vpc_isolation_and_kms_settings(
    deploy_kwargs: dict[str, Any], model_data_url: str, session: Any
) -> None:
    sagemaker = session.client("sagemaker")
    sent: dict[str, dict[str, Any]] = {}

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        sent[model.name] = dict(params)

    sagemaker.meta.events.register("before-parameter-build.sagemaker.*", record)
    vpc = {"SecurityGroupIds": ["sg-0123"], "Subnets": ["subnet-a", "subnet-b"]}
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    deploy_mme(
        "my-mme",
        model_data_url,
        vpc_config=vpc,
        enable_network_isolation=True,
        kms_key_id=key,
        **{**deploy_kwargs, "sagemaker_client": sagemaker},
    )
    assert sent["CreateModel"]["VpcConfig"] == vpc
    assert sent["CreateModel"]["EnableNetworkIsolation"] is True
    assert sent["CreateEndpointConfig"]["KmsKeyId"] == key


def test_deploy_mme_refuses_an_endpoint_left_failed(
    plane: Any, deploy_kwargs: dict[str, Any], model_data_url: str, sm: Any, inventory: Callable[[], Any]
) -> None:
    plane.fail_next("my-mme", "CapacityError")
    deploy_mme("my-mme", model_data_url, wait=False, **deploy_kwargs)  # not waited for: not rolled back
    _wait_settled(sm)
    before = inventory()
    with pytest.raises(DeploymentError, match=r"is Failed \(CapacityError\); teardown\(\) it first"):
        deploy_mme(
            "my-mme", model_data_url, environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "0"}, **deploy_kwargs
        )
    assert inventory() == before


def test_deploy_mme_upload_conflict_creates_nothing_on_sagemaker(
    deploy_kwargs: dict[str, Any], model_data_url: str, s3: Any, nothing: Any, inventory: Any, tmp_path: Any
) -> None:
    from mme_triton.errors import ArtifactConflictError

    bucket, prefix = model_data_url[len("s3://") :].split("/", 1)
    s3.put_object(Bucket=bucket, Key=prefix + "echo.tar.gz", Body=b"another model")
    with pytest.raises(ArtifactConflictError):
        deploy_mme("my-mme", model_data_url, models=[_echo_model(tmp_path)], **deploy_kwargs)
    assert inventory() == nothing
