"""The SageMaker SDK's habits: a ``sagemaker.Session`` wherever a boto3 session goes, and the defaults the
SDK derives (execution role, default bucket) when ``deploy_mme`` is not given them.

The tests with the SDK (marker ``sagemaker``) run on the embedded stack; CI's full suite installs the SDK
and its core run deselects them (where it is missing, they are skipped with the reason). The tests
without it hide the SDK from the import system.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import _sdk

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
