"""The SageMaker SDK's habits: a ``sagemaker.Session`` wherever a boto3 session goes, and the defaults the
SDK derives (execution role, default bucket) when ``deploy_mme`` is not given them; and the SDK v3's
resource classes (``sagemaker.core.resources``) on the stack: they parse every answer of the control plane,
read, wait for, invoke and delete what ``deploy_mme`` made, make an endpoint the library then reads and
tears down, and find the stack through its exported environment as well as through a session.

The tests with the SDK (marker ``sagemaker``) run on the embedded stack; CI's full suite installs the SDK
and its core run deselects them (where it is missing, they are skipped with the reason). The tests
without it hide the SDK from the import system.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import _sdk

sys.path.insert(0, str(Path(__file__).parent / "local"))
from api_shapes import OPERATIONS, ResponseRecorder, exercise_resources

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "model_repository"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture
def no_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK cannot be imported (as where it is not installed)."""
    for name in [m for m in sys.modules if m == "sagemaker" or m.startswith("sagemaker.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("sagemaker", "sagemaker.core.helper.session_helper", "sagemaker.session"):
        monkeypatch.setitem(sys.modules, name, None)
    assert _sdk._load_sdk() is None


@pytest.fixture(scope="module")
def sdk() -> Any:
    """The installed SDK's ``Session`` and ``get_execution_role`` (v3 or v2 layout)."""
    found = _sdk._load_sdk()
    if found is None:
        pytest.skip("the SageMaker SDK is not installed (pip install 'mme-triton[sagemaker]')")
    return found


# -- without the SDK ----------------------------------------------------------------------------------


def test_sdk_import_mme_triton_does_not_import_it() -> None:
    code = "import sys, mme_triton, mme_triton._sdk; print('sagemaker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.usefixtures("no_sdk")
def test_sdk_missing_role_says_to_pass_role() -> None:
    with pytest.raises(ValueError, match=r"role is required: pass role='arn:aws:iam::<account>:role/<name>'"):
        _sdk.default_role()


@pytest.mark.usefixtures("no_sdk")
def test_sdk_missing_model_data_url_says_to_pass_it() -> None:
    with pytest.raises(ValueError, match=r"model_data_url is required: pass model_data_url='s3://"):
        _sdk.default_model_data_url("my-endpoint")


@pytest.mark.usefixtures("no_sdk")
def test_sdk_deploy_without_role_fails_before_any_aws_call() -> None:
    from mme_triton import deploy_mme

    # no region, no credentials needed: the argument check comes first
    with pytest.raises(ValueError, match="role is required"):
        deploy_mme("my-endpoint", "s3://my-bucket/mme/", instance_type="ml.m5.xlarge")


def test_sdk_boto3_session_of_passes_a_boto3_session_through() -> None:
    import boto3

    session = boto3.Session(region_name="us-east-1")
    assert _sdk.boto3_session_of(session, None) is session
    assert _sdk.boto3_session_of(None, None) is None


def test_sdk_both_sessions_are_refused() -> None:
    import boto3

    session = boto3.Session(region_name="us-east-1")
    with pytest.raises(ValueError, match="not both"):
        _sdk.boto3_session_of(session, session)


def test_sdk_session_without_boto_session_is_refused() -> None:
    with pytest.raises(TypeError, match=r"must be a sagemaker\.Session"):
        _sdk.boto3_session_of(None, object())


# -- with the SDK, on the embedded stack ----------------------------------------------------------------


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from mme_triton.local import LocalStack

    with LocalStack() as running:
        yield running


@pytest.mark.sagemaker
@pytest.mark.moto
def test_sdk_session_is_unwrapped(sdk: Any, plane: Any) -> None:
    session = sdk.session_class(boto_session=plane.boto3_session(), default_bucket="unwrapped")
    assert _sdk.boto3_session_of(None, session) is session.boto_session
    assert _sdk.boto3_session_of(session, None) is session.boto_session  # passed as boto3_session=


@pytest.mark.sagemaker
@pytest.mark.moto
def test_sdk_session_lists_and_removes_models(sdk: Any, plane: Any, tmp_path: Path) -> None:
    from mme_triton import list_models, remove_model, upload_models

    session = sdk.session_class(boto_session=plane.boto3_session(), default_bucket=f"sdk-{plane.account_id}")
    url = f"s3://{session.default_bucket()}/models/"  # the SDK creates its default bucket
    upload_models([EXAMPLES / "scale"], url, sagemaker_session=session)
    assert list_models(url, sagemaker_session=session) == ["scale.tar.gz"]
    assert remove_model(url, "scale.tar.gz", sagemaker_session=session)
    assert list_models(url, sagemaker_session=session) == []


@pytest.mark.sagemaker
@pytest.mark.triton
@pytest.mark.moto
def test_sdk_session_drives_deploy_client_and_teardown(
    sdk: Any, stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from mme_triton import MMEClient, deploy_mme, list_models, teardown

    bucket = f"sdk-{stack.account_id}"
    session = sdk.session_class(boto_session=stack.boto3_session(), default_bucket=bucket)
    endpoint = deploy_mme(
        "sdk-endpoint",
        models=[EXAMPLES / "linear"],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        poll_interval=0.2,
        sagemaker_session=session,
    )
    # the prefix was derived from the session's default bucket, and the log says so
    assert endpoint.model_data_url == f"s3://{bucket}/mme-triton/sdk-endpoint/"
    assert f"model_data_url: s3://{bucket}/mme-triton/sdk-endpoint/" in caplog.text
    assert list_models(endpoint.model_data_url, sagemaker_session=session) == ["linear.tar.gz"]

    x = np.ones((2, 4), dtype=np.float32)
    out = MMEClient("sdk-endpoint", sagemaker_session=session).infer("linear.tar.gz", {"INPUT0": x})
    assert out["OUTPUT0"].shape == (2, 3)

    report = teardown("sdk-endpoint", delete_artifacts=True, sagemaker_session=session)
    assert report.names("endpoint") == ["sdk-endpoint"]
    assert list_models(endpoint.model_data_url, sagemaker_session=session) == []


@pytest.mark.sagemaker
@pytest.mark.moto
def test_sdk_derives_the_execution_role(sdk: Any, plane: Any, caplog: pytest.LogCaptureFixture) -> None:
    """``get_execution_role()`` asks STS at its regional endpoint; this session sends every client to the
    control plane, the way a proxy or VPC endpoint would, so the SDK's own lookup runs unchanged."""
    import boto3

    frozen = plane.boto3_session().get_credentials().get_frozen_credentials()

    class EverythingToThePlane(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["endpoint_url"] = plane.url
            return super().client(*args, **kwargs)

    boto_session = EverythingToThePlane(
        aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key,
        aws_session_token=frozen.token,
        region_name=plane.region,
    )
    session = sdk.session_class(boto_session=boto_session, default_bucket=f"role-{plane.account_id}")
    role = _sdk.default_role(sagemaker_session=session)
    # the control plane's credentials are an assumed role; the SDK names the role behind them
    assert role == f"arn:aws:iam::{plane.account_id}:role/mme-triton-control-plane"
    assert f"role: {role} (the SageMaker SDK's execution role)" in caplog.text


@pytest.mark.sagemaker
@pytest.mark.moto
def test_sdk_role_that_is_not_a_role_says_to_pass_role(sdk: Any, moto_url: str) -> None:
    """Plain IAM-user credentials are not an execution role: the SDK says so, and the error says what
    to pass."""
    import boto3

    class EverythingToMoto(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["endpoint_url"] = moto_url
            return super().client(*args, **kwargs)

    boto_session = EverythingToMoto(
        aws_access_key_id="AKIAIOSFODNN7EXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
    )
    session = sdk.session_class(boto_session=boto_session, default_bucket="not-a-role")
    with pytest.raises(ValueError, match=r"found no execution role .*pass role="):
        _sdk.default_role(sagemaker_session=session)


# -- with the SDK: checks first, and a plan never writes -------------------------------------------------

_READ_PREFIXES = ("Describe", "List", "Get", "Head")


def _sdk_session_on(plane: Any, sdk: Any) -> tuple[Any, list[str]]:
    """A ``sagemaker.Session`` whose every client (the SDK's STS and S3 ones included) goes to the control
    plane, and the list every API call any of them sends is recorded in (botocore's ``before-call``)."""
    import boto3

    frozen = plane.boto3_session().get_credentials().get_frozen_credentials()

    class EverythingToThePlane(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["endpoint_url"] = plane.url
            return super().client(*args, **kwargs)

        def resource(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["endpoint_url"] = plane.url
            return super().resource(*args, **kwargs)

    boto_session = EverythingToThePlane(
        aws_access_key_id=frozen.access_key,
        aws_secret_access_key=frozen.secret_key,
        aws_session_token=frozen.token,
        region_name=plane.region,
    )
    calls: list[str] = []
    boto_session.events.register(
        "before-call", lambda model, **_: calls.append(f"{model.service_model.service_name}:{model.name}")
    )
    return sdk.session_class(boto_session=boto_session), calls


def _writes(calls: list[str]) -> list[str]:
    return [call for call in calls if not call.split(":")[1].startswith(_READ_PREFIXES)]


def _bucket_exists(plane: Any, bucket: str) -> bool:
    return any(b["Name"] == bucket for b in plane.boto3_session().client("s3").list_buckets()["Buckets"])


# -- the SDK's resource classes (sagemaker.core, SDK v3) on the embedded stack ---------------------------


@pytest.fixture(scope="module")
def core() -> Any:
    """``sagemaker.core``'s resources, shapes and codec (SDK v3; v2 has no resource classes)."""
    try:
        from sagemaker.core import resources, shapes
        from sagemaker.core.utils.code_injection.codec import transform
    except ImportError:
        pytest.skip(
            "the SageMaker SDK v3 (sagemaker.core) is not installed (pip install 'mme-triton[sagemaker]')"
        )
    return type("Core", (), {"resources": resources, "shapes": shapes, "transform": staticmethod(transform)})


@pytest.fixture(scope="module")
def plane_answers() -> Iterator[ResponseRecorder]:
    """The answers of tests/local/test_controlplane_shapes.py's flows, from a control plane of this module."""
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane(transition_delay=0.2) as control_plane:
        session = control_plane.boto3_session()
        recorder = ResponseRecorder(session)
        exercise_resources(control_plane, session, [EXAMPLES / "linear"])
        yield recorder


#: operation -> the sagemaker.core class its answer becomes: a resource class (Describe*), or the member
#: holding the items and their shape class (List*, and the Tags AddTags echoes).
_CORE_CLASSES = {
    "DescribeModel": "Model",
    "DescribeEndpointConfig": "EndpointConfig",
    "DescribeEndpoint": "Endpoint",
    "ListModels": ("Models", "ModelSummary", "Model"),
    "ListEndpointConfigs": ("EndpointConfigs", "EndpointConfigSummary", "EndpointConfig"),
    "ListEndpoints": ("Endpoints", "EndpointSummary", "Endpoint"),
    "ListTags": ("Tags", "Tag", None),
    "AddTags": ("Tags", "Tag", None),
}


@pytest.mark.sagemaker
@pytest.mark.moto
@pytest.mark.parametrize("entry", ["plan_deployment", "deploy_mme"])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"instance_type": "ml.g5.12xlarge"}, "has several GPUs"),
        ({"instance_count": 0}, "instance_count must be an int >= 1"),
        ({"environment": {"SAGEMAKER_TRITON_LOG_VERBOSTY": "1"}}, "SAGEMAKER_TRITON_LOG_VERBOSE"),
        ({"tags": {"aws:team": "x"}}, "aws: prefix is reserved"),
    ],
    ids=["instance-type", "count", "environment", "tag"],
)
def test_sdk_defaults_come_after_every_argument_check(
    sdk: Any, plane: Any, entry: str, bad: dict[str, Any], message: str
) -> None:
    """Without role and model_data_url, a bad argument is refused before the SDK is asked anything:
    no STS call, and above all no default bucket created."""
    import mme_triton

    session, calls = _sdk_session_on(plane, sdk)
    arguments = {"instance_type": "ml.m5.xlarge", "sagemaker_session": session, **bad}
    with pytest.raises(ValueError, match=message):
        getattr(mme_triton, entry)("sdk-checks", **arguments)
    assert calls == []
    assert not _bucket_exists(plane, f"sagemaker-{plane.region}-{plane.account_id}")


@pytest.mark.sagemaker
@pytest.mark.moto
def test_sdk_plan_deployment_names_the_default_bucket_without_creating_it(
    sdk: Any, plane: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from mme_triton import plan_deployment

    session, calls = _sdk_session_on(plane, sdk)
    plan = plan_deployment(
        "sdk-plan", models=[EXAMPLES / "linear"], instance_type="ml.m5.xlarge", sagemaker_session=session
    )
    bucket = f"sagemaker-{plane.region}-{plane.account_id}"
    assert plan.model_data_url == f"s3://{bucket}/mme-triton/sdk-plan/"
    assert ("bucket", bucket) in plan.to_create
    assert [u.action for u in plan.uploads] == ["upload"]
    assert plan.blockers == []
    assert f"role: arn:aws:iam::{plane.account_id}:role/" in caplog.text  # derived with reads
    assert calls and _writes(calls) == []  # reads only: STS, S3, SageMaker
    assert not _bucket_exists(plane, bucket)


@pytest.mark.sagemaker
@pytest.mark.moto
def test_sdk_deploy_creates_the_default_bucket_the_plan_named(sdk: Any, plane: Any) -> None:
    from mme_triton import deploy_mme, plan_deployment, teardown

    session, calls = _sdk_session_on(plane, sdk)
    planned = plan_deployment("sdk-deploy", instance_type="ml.m5.xlarge", sagemaker_session=session)
    endpoint = deploy_mme(
        "sdk-deploy", instance_type="ml.m5.xlarge", poll_interval=0.05, timeout=30, sagemaker_session=session
    )
    assert endpoint.model_data_url == planned.model_data_url
    assert "s3:CreateBucket" in _writes(calls)
    assert _bucket_exists(plane, planned.model_data_url.split("/")[2])
    teardown("sdk-deploy", sagemaker_session=session)


@pytest.mark.sagemaker
@pytest.mark.parametrize("derive", ["default_role", "default_model_data_url", "deploy_defaults"])
def test_sdk_missing_region_is_noregionerror_everywhere(
    sdk: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, derive: str
) -> None:
    """No region is an AWS set-up problem, the same error every AWS call of the library gives (the CLI
    says what to set); not a ValueError from one of the three and botocore's from the others."""
    import boto3
    from botocore.exceptions import NoRegionError

    for variable in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x")
    assert session.region_name is None
    calls = {
        "default_role": lambda: _sdk.default_role(boto3_session=session),
        "default_model_data_url": lambda: _sdk.default_model_data_url("ep", boto3_session=session),
        "deploy_defaults": lambda: _sdk.deploy_defaults(
            "ep", None, None, boto3_session=session, sagemaker_session=None
        ),
    }
    with pytest.raises(NoRegionError):
        calls[derive]()


@pytest.mark.sagemaker
@pytest.mark.moto
@pytest.mark.parametrize("operation", sorted(_CORE_CLASSES))
def test_sdk_core_parses_every_answer_of_the_control_plane(
    core: Any, plane_answers: ResponseRecorder, operation: str
) -> None:
    """Each answer becomes the SDK's resource object as ``get`` builds it, and each listed item its summary
    shape and then its resource object as ``get_all`` builds them (pydantic validates every field)."""
    answers = plane_answers.of(operation)
    assert answers, f"the flows never called {operation}"
    parsed = 0
    for answer in answers:
        spec = _CORE_CLASSES[operation]
        if isinstance(spec, str):
            resource = getattr(core.resources, spec)(**core.transform(answer.parsed, f"{operation}Output"))
            assert resource.get_name()
            parsed += 1
            continue
        member, summary_name, resource_name = spec
        for item in answer.parsed[member]:
            fields = core.transform(item, summary_name)
            getattr(core.shapes, summary_name)(**fields)
            if resource_name is not None:
                resource_class = getattr(core.resources, resource_name)
                resource_class(**{k: v for k, v in fields.items() if k in resource_class.__annotations__})
            parsed += 1
    assert parsed
    assert [problem for answer in answers for problem in answer.problems()] == []


def _image(stack: Any) -> str:
    from mme_triton import triton_image_uri

    return triton_image_uri(stack.region, instance_type="ml.m5.xlarge")


@pytest.mark.sagemaker
@pytest.mark.triton
@pytest.mark.moto
def test_sdk_resources_read_wait_invoke_and_delete_what_deploy_mme_created(core: Any, stack: Any) -> None:
    from mme_triton import decode_response, deploy_mme, encode_request

    Endpoint, EndpointConfig, Model = (
        core.resources.Endpoint,
        core.resources.EndpointConfig,
        core.resources.Model,
    )
    session = stack.boto3_session()
    answers = ResponseRecorder(session)
    deploy_mme(
        "sdk-reads",
        stack.model_data_url("sdk-reads/"),
        models=[EXAMPLES / "scale", EXAMPLES / "linear"],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        poll_interval=0.2,
        boto3_session=session,
    )

    endpoint = Endpoint.get("sdk-reads", session=session, region=stack.region)
    endpoint.wait_for_status("InService", poll=1, timeout=60)
    assert endpoint.endpoint_status == "InService"
    (variant,) = endpoint.production_variants
    assert (variant.variant_name, variant.current_instance_count) == ("AllTraffic", 1)
    config = EndpointConfig.get(endpoint.endpoint_config_name, session=session, region=stack.region)
    model = Model.get(config.production_variants[0].model_name, session=session, region=stack.region)
    assert (model.primary_container.mode, model.primary_container.model_data_url) == (
        "MultiModel",
        stack.model_data_url("sdk-reads/"),
    )
    assert model.model_name in [m.model_name for m in Model.get_all(session=session, region=stack.region)]
    assert "sdk-reads" in [e.endpoint_name for e in Endpoint.get_all(session=session, region=stack.region)]
    listed_configs = EndpointConfig.get_all(session=session, region=stack.region)
    assert config.endpoint_config_name in [c.endpoint_config_name for c in listed_configs]

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for binary in (False, True):
        body, content_type = encode_request({"INPUT0": x}, binary=binary)
        answer = endpoint.invoke(body=body, content_type=content_type, target_model="scale.tar.gz")
        assert answer.content_type.startswith(
            "application/vnd.sagemaker-triton.binary+json" if binary else "application/json"
        )
        np.testing.assert_array_equal(
            decode_response(answer.body.read(), answer.content_type)["OUTPUT0"], 2 * x
        )
    body, content_type = encode_request({"INPUT0": x})
    answer = endpoint.invoke(body=body, content_type=content_type, target_model="linear.tar.gz")
    assert decode_response(answer.body.read(), answer.content_type)["OUTPUT0"].shape == (2, 3)

    endpoint.delete()
    config.delete()
    model.delete()
    sagemaker = stack.client("sagemaker")
    assert "sdk-reads" not in [e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]]
    assert model.model_name not in [m["ModelName"] for m in sagemaker.list_models()["Models"]]
    assert stack.triton("sdk-reads") is None
    _assert_checked_answers(answers)


def _assert_checked_answers(answers: ResponseRecorder) -> None:
    """What the SDK and the library received is in the API's shapes, and the shape test covers each of its
    operations (tests/local/test_controlplane_shapes.py)."""
    covered = {(service, operation) for service, operations in OPERATIONS.items() for operation in operations}
    assert answers.operations() - covered == set()
    assert [problem for answer in answers.answers for problem in answer.problems()] == []


@pytest.mark.sagemaker
@pytest.mark.triton
@pytest.mark.moto
def test_sdk_resources_create_an_mme_the_library_reads_and_tears_down(core: Any, stack: Any) -> None:
    from mme_triton import MMEClient, decode_response, encode_request, teardown, upload_models
    from mme_triton.endpoint.status import endpoint_status

    resources, shapes = core.resources, core.shapes
    session = stack.boto3_session()
    answers = ResponseRecorder(session)
    url = stack.model_data_url("sdk-created/")
    upload_models([EXAMPLES / "scale", EXAMPLES / "linear"], url, boto3_session=session)
    where = {"session": session, "region": stack.region}

    resources.Model.create(
        model_name="sdk-created",
        primary_container=shapes.ContainerDefinition(
            image=_image(stack), mode="MultiModel", model_data_url=url
        ),
        execution_role_arn=stack.role_arn,
        **where,
    )
    variant = shapes.ProductionVariant(
        variant_name="AllTraffic",
        model_name="sdk-created",
        instance_type="ml.m5.xlarge",
        initial_instance_count=1,
    )
    resources.EndpointConfig.create(
        endpoint_config_name="sdk-created", production_variants=[variant], **where
    )
    endpoint = resources.Endpoint.create(
        endpoint_name="sdk-created", endpoint_config_name="sdk-created", **where
    )
    endpoint.wait_for_status("InService", poll=1, timeout=60)

    x = np.ones((2, 4), dtype=np.float32)
    body, content_type = encode_request({"INPUT0": x})
    answer = endpoint.invoke(body=body, content_type=content_type, target_model="linear.tar.gz")
    sdk_out = decode_response(answer.body.read(), answer.content_type)["OUTPUT0"]
    ours = MMEClient("sdk-created", boto3_session=session).infer("linear.tar.gz", {"INPUT0": x})["OUTPUT0"]
    np.testing.assert_array_equal(sdk_out, ours)

    status = endpoint_status("sdk-created", boto3_session=session)
    assert (status.status, status.endpoint_config_name, status.model_data_url) == (
        "InService",
        "sdk-created",
        url,
    )
    assert status.models == ("linear.tar.gz", "scale.tar.gz")
    assert [(v.name, v.instance_type, v.model_name) for v in status.variants] == [
        ("AllTraffic", "ml.m5.xlarge", "sdk-created")
    ]

    report = teardown("sdk-created", boto3_session=session)
    assert (report.names("endpoint"), report.names("endpoint-config"), report.names("model")) == (
        ["sdk-created"],
        ["sdk-created"],
        ["sdk-created"],
    )
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="Could not find"):
        resources.Endpoint.get("sdk-created", **where)
    _assert_checked_answers(answers)


@pytest.fixture
def exported(stack: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A process that exported ``stack.environment()`` (and nothing else of AWS) before its first SDK call."""
    from sagemaker.core.utils.utils import SageMakerClient

    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    empty = tmp_path / "empty-aws-file"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    environment = stack.environment()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    SageMakerClient.reset()  # the SDK keeps the first client a process makes for calls without session=
    try:
        yield environment
    finally:
        SageMakerClient.reset()


@pytest.mark.sagemaker
@pytest.mark.moto
@pytest.mark.triton
def test_sdk_resources_reach_the_stack_through_its_environment(
    core: Any, stack: Any, exported: dict[str, str]
) -> None:
    """Without ``session=``, sagemaker.core makes its clients from a default boto3 session: the endpoint URLs
    (``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``), credentials and region come from the
    environment the stack exports."""
    from sagemaker.core.utils.utils import SageMakerClient

    clients = SageMakerClient()
    assert clients.sagemaker_client.meta.endpoint_url == stack.endpoint_url
    assert clients.sagemaker_runtime_client.meta.endpoint_url == stack.runtime_url
    assert clients.sagemaker_client.meta.region_name == exported["AWS_DEFAULT_REGION"]

    Model = core.resources.Model
    Model.create(
        model_name="sdk-exported",
        primary_container=core.shapes.ContainerDefinition(
            image=_image(stack), mode="MultiModel", model_data_url=stack.model_data_url("sdk-exported/")
        ),
        execution_role_arn=stack.role_arn,
    )
    model = Model.get("sdk-exported")
    assert model.model_arn == stack.client("sagemaker").describe_model(ModelName="sdk-exported")["ModelArn"]
    assert "sdk-exported" in [m.model_name for m in Model.get_all()]
    model.delete()


@pytest.mark.sagemaker
@pytest.mark.triton
@pytest.mark.moto
def test_sdk_inference_component_resources_on_components_the_library_deployed_and_the_reverse(
    core: Any, stack: Any
) -> None:
    """``sagemaker.core.resources.InferenceComponent`` gets, lists and waits for a component
    ``deploy_inference_components`` made, and ``Endpoint.invoke(inference_component_name=...)`` reaches it;
    a component the SDK creates on that endpoint is invoked by the library's client, read by
    ``endpoint_status`` and removed by ``teardown``."""
    from botocore.exceptions import ClientError

    from mme_triton import (
        InferenceComponent,
        decode_response,
        deploy_inference_components,
        encode_request,
        teardown,
    )
    from mme_triton.endpoint.status import endpoint_status

    resources, shapes = core.resources, core.shapes
    session = stack.boto3_session()
    answers = ResponseRecorder(session)
    where = {"session": session, "region": stack.region}
    endpoint = deploy_inference_components(
        "sdk-ic",
        [InferenceComponent("sdk-linear", EXAMPLES / "linear", memory="256MiB", cpus=0.5)],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        model_data_url=stack.model_data_url("sdk-ic/"),
        boto3_session=session,
        poll_interval=0.2,
    )
    component = resources.InferenceComponent.get("sdk-linear", **where)
    component.wait_for_status("InService", poll=1, timeout=60)
    assert (component.endpoint_name, component.runtime_config.current_copy_count) == ("sdk-ic", 1)
    assert component.specification.compute_resource_requirements.min_memory_required_in_mb == 256
    listed = resources.InferenceComponent.get_all(endpoint_name_equals="sdk-ic", **where)
    assert [c.inference_component_name for c in listed] == ["sdk-linear"]

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    body, content_type = encode_request({"INPUT0": x})
    answer = resources.Endpoint.get("sdk-ic", **where).invoke(
        body=body, content_type=content_type, inference_component_name="sdk-linear"
    )
    sdk_out = decode_response(answer.body.read(), answer.content_type)["OUTPUT0"]
    np.testing.assert_array_equal(sdk_out, endpoint.client().infer("sdk-linear", {"INPUT0": x})["OUTPUT0"])

    # the reverse: the SDK makes a component of its own on the endpoint, from the library's archive
    (library,) = endpoint_status("sdk-ic", boto3_session=session).components
    resources.Model.create(
        model_name="sdk-made",
        primary_container=shapes.ContainerDefinition(
            image=_image(stack),
            model_data_url=library.artifact_url,
            environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "linear"},
        ),
        execution_role_arn=stack.role_arn,
        **where,
    )
    made = resources.InferenceComponent.create(
        inference_component_name="sdk-made",
        endpoint_name="sdk-ic",
        variant_name="AllTraffic",
        specification=shapes.InferenceComponentSpecification(
            model_name="sdk-made",
            compute_resource_requirements=shapes.InferenceComponentComputeResourceRequirements(
                min_memory_required_in_mb=256, number_of_cpu_cores_required=0.5
            ),
        ),
        runtime_config=shapes.InferenceComponentRuntimeConfig(copy_count=1),
        **where,
    )
    made.wait_for_status("InService", poll=1, timeout=60)
    made.update_runtime_configs(desired_runtime_config=shapes.InferenceComponentRuntimeConfig(copy_count=2))
    made.wait_for_status("InService", poll=1, timeout=60)
    assert made.runtime_config.current_copy_count == 2
    np.testing.assert_array_equal(endpoint.client().infer("sdk-made", {"INPUT0": x})["OUTPUT0"], sdk_out)
    status = endpoint_status("sdk-ic", boto3_session=session)
    assert [(c.name, c.current_copy_count) for c in status.components] == [("sdk-linear", 1), ("sdk-made", 2)]

    report = teardown("sdk-ic", boto3_session=session)
    assert sorted(report.names("inference-component")) == ["sdk-linear", "sdk-made"]
    assert "sdk-made" in report.names("model") and report.names("endpoint") == ["sdk-ic"]
    with pytest.raises(ClientError, match="Could not find"):
        resources.InferenceComponent.get("sdk-made", **where)
    assert [problem for answer in answers.answers for problem in answer.problems()] == []
