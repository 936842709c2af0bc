"""The other targets: a live endpoint (through invoke_endpoint with TargetModel) and a Triton server the user
runs (through its repository API and KServe v2 route), with the same report."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mme_triton as mt
from mme_triton import Candidate, DynamicBatching, ProfileError

from .conftest import FAST, INIT_S, SLEEP_S

pytestmark = [pytest.mark.triton, pytest.mark.moto]


@pytest.fixture(scope="module")
def triton_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A plain Triton with its own HTTP port (explicit model control), as on a GPU box."""
    from mme_triton.local.triton.server import TritonServer

    with TritonServer(workdir=tmp_path_factory.mktemp("triton"), triton_ports=True) as server:
        yield server


def test_profile_on_a_triton_server_loads_through_the_repository_api(
    triton_server: Any, module_sleepy: Path
) -> None:
    url = triton_server.triton_ports.http_url
    report = mt.profile_model(
        module_sleepy,
        candidates=[Candidate("batching", dynamic_batching=DynamicBatching(2000))],
        concurrency=(8,),
        triton_url=url,
        progress=False,
        **FAST,
    )
    result = report.result("batching")
    assert report.target == "triton" and result.status == "ok", result.problems
    assert result.cold_start_s is not None and result.load_s is not None
    assert result.cold_start_s >= result.load_s >= INIT_S
    assert (result.download_s, result.extract_s, result.memory_bytes) == (None, None, None)
    (level,) = result.levels
    assert level.stable and level.p50_ms is not None and level.p50_ms >= SLEEP_S * 1000
    assert level.server is not None and level.server.batch_size >= 2.0  # Triton's statistics are read
    status, _ = mt.profile.transports.http_json(f"{url}/v2/models/{result.target_model}/ready")
    assert status != 200  # unloaded afterwards


def test_profile_on_a_triton_server_refuses_an_ensemble_as_a_failed_candidate(
    triton_server: Any, tmp_path: Path
) -> None:
    from tests.local.conftest import write_linear, write_pipeline, write_scale

    write_linear(tmp_path)
    write_scale(tmp_path)
    report = mt.profile_model(
        write_pipeline(tmp_path),
        concurrency=(1,),
        triton_url=triton_server.triton_ports.http_url,
        progress=False,
        **FAST,
    )
    (result,) = report.results
    assert result.status == "failed" and "an ensemble cannot be loaded" in result.problems[0]
    assert report.best is None


def test_profile_of_an_unreachable_triton_raises(module_sleepy: Path) -> None:
    from mme_triton.local.triton._process import free_port

    with pytest.raises(ProfileError, match="cannot reach Triton"):
        mt.profile_model(module_sleepy, triton_url=f"127.0.0.1:{free_port()}", progress=False)


def test_profile_on_a_live_endpoint_uploads_measures_and_removes(stack: Any, module_sleepy: Path) -> None:
    session = stack.boto3_session()
    url = stack.model_data_url("live/")
    mt.deploy_mme(
        "live",
        url,
        role=stack.role_arn,
        instance_type="ml.m5.large",
        poll_interval=0.1,
        boto3_session=session,
    )
    kept = mt.profile_model(
        module_sleepy, concurrency=(1,), endpoint="live", stack=stack, keep=True, progress=False, **FAST
    )
    (result,) = kept.results
    assert kept.target == "endpoint" and result.status == "ok", result.problems
    assert result.target_model is not None and result.target_model.startswith("sleepy-")
    assert result.cold_start_s is not None and result.load_s is not None and result.load_s >= INIT_S
    assert result.memory_bytes is not None and result.unload_s is not None  # the stack tells them
    assert mt.list_models(url, boto3_session=session) == [result.target_model]

    removed = mt.profile_model(
        module_sleepy, concurrency=(1,), endpoint="live", stack=stack, progress=False, **FAST
    )

    assert removed.results[0].target_model != result.target_model  # a fresh name: a real cold start
    assert mt.list_models(url, boto3_session=session) == [result.target_model]
    mt.teardown("live", delete_artifacts=True, boto3_session=session)


def test_endpoint_target_sends_through_the_clients_fast_path(stack: Any) -> None:
    """The endpoint target measures the endpoint, not botocore: its requests take the client's own path,
    and a failure still reads as SageMaker's status and error code."""
    from types import SimpleNamespace

    from mme_triton.profile.inputs import Request
    from mme_triton.profile.targets import EndpointTarget

    session = stack.boto3_session()
    mt.deploy_mme(
        "live-path",
        stack.model_data_url("live-path/"),
        role=stack.role_arn,
        instance_type="ml.m5.large",
        poll_interval=0.1,
        boto3_session=session,
    )
    try:
        target = EndpointTarget("live-path", run_id="path", boto3_session=session)
        target.open()
        assert target._client.fast_path
        connection = target.connect(SimpleNamespace(name="missing.tar.gz"))()
        body, content_type = mt.encode_request({"INPUT0": [[1.0]]})
        status, text = connection.exchange(Request(bytes(body), content_type, {}))
        assert status == 400
        assert text.startswith("ValidationError: ") and "missing.tar.gz" in text
    finally:
        mt.teardown("live-path", delete_artifacts=True, boto3_session=session)
