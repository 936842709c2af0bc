"""The boto3 sessions the library creates: one botocore data loader per process, settings per session."""

from __future__ import annotations

from typing import Any

from mme_triton._sagemaker import endpoint_session, new_boto3_session


def _loader(session: Any) -> Any:
    return session._session.get_component("data_loader")


def test_new_boto3_session_shares_the_service_models_and_keeps_its_own_settings() -> None:
    first = new_boto3_session(region_name="eu-west-1", aws_access_key_id="a1", aws_secret_access_key="s1")
    second = new_boto3_session(region_name="us-east-2", aws_access_key_id="a2", aws_secret_access_key="s2")

    assert _loader(first) is _loader(second)
    assert first.region_name == "eu-west-1" and second.region_name == "us-east-2"
    assert first.get_credentials().access_key == "a1"  # type: ignore[union-attr]
    assert second.get_credentials().access_key == "a2"  # type: ignore[union-attr]
    model = first.client("sagemaker").meta.service_model
    assert second.client("sagemaker").meta.service_model.operation_names == model.operation_names


def test_new_boto3_sessions_do_not_grow_the_loaders_search_paths() -> None:
    new_boto3_session(region_name="us-east-1")
    paths = list(_loader(new_boto3_session(region_name="us-east-1")).search_paths)

    for _ in range(5):
        new_boto3_session(region_name="us-east-1")

    assert _loader(new_boto3_session(region_name="us-east-1")).search_paths == paths
    assert len(paths) == len(set(paths))


def test_endpoint_session_shares_the_loader_and_defaults_to_its_urls() -> None:
    session = endpoint_session(
        "http://127.0.0.1:1", {"sagemaker-runtime": "http://127.0.0.1:2"}, region_name="us-east-1"
    )

    assert _loader(session) is _loader(new_boto3_session(region_name="us-east-1"))
    assert session.client("sagemaker").meta.endpoint_url == "http://127.0.0.1:1"
    assert session.client("sagemaker-runtime").meta.endpoint_url == "http://127.0.0.1:2"
    assert session.client("s3").meta.config.s3 == {"addressing_style": "path"}
