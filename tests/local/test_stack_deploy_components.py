"""deploy_inference_components() and the client on the embedded stack: each component's copies are real
Tritons serving one model (the container's single-model mode), requests go by InferenceComponentName, the
components publish their own metrics, and their autoscaling takes them to zero copies and back.

One stack for the module, started with ``metrics_period=1`` (the shared ``stack`` fixture publishes every
minute: the metrics and the autoscaling below read one-second datapoints instead). Each test deploys its
own endpoint and tears it down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import (
    AsyncMMEClient,
    ComponentAutoScaling,
    InferenceComponent,
    InferenceComponentNotFoundError,
    InferenceError,
    MMEClient,
    NoCapacityError,
    deploy_inference_components,
    deploy_mme,
    endpoint_metrics,
    teardown,
)

pytestmark = [pytest.mark.triton, pytest.mark.moto]


@pytest.fixture(scope="module")
def ic_stack() -> Iterator[Any]:
    """The module's stack, publishing its metrics every second (see the module's docstring)."""
    from mme_triton.local import LocalStack

    with LocalStack(metrics_period=1) as running:
        yield running


def _kwargs(stack: Any, prefix: str, **extra: Any) -> dict[str, Any]:
    return {
        "role": stack.role_arn,
        "instance_type": "ml.m5.xlarge",
        "model_data_url": stack.model_data_url(prefix),
        "boto3_session": stack.boto3_session(),
        "poll_interval": 0.2,
        "timeout": 180,
        **extra,
    }


def _small(name: str, model: Any, **kwargs: Any) -> InferenceComponent:
    return InferenceComponent(name, model, memory="256MiB", cpus=0.5, **kwargs)


def _until(check: Callable[[], Any], timeout: float = 120.0) -> Any:
    """Poll ``check`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def served(ic_stack: Any, repository: Path) -> Iterator[Any]:
    """An endpoint of two components, ``linear`` (ONNX) and ``scale`` (python), for the client tests."""
    endpoint = deploy_inference_components(
        "ic-served",
        [_small("linear", repository / "linear"), _small("scale", repository / "scale")],
        **_kwargs(ic_stack, "ic-served/"),
    )
    yield endpoint
    teardown("ic-served", boto3_session=ic_stack.boto3_session())


def test_stack_components_client_infers_by_component_name(
    served: Any, expected_linear: Any, repository: Path
) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with served.client() as client:
        assert client.hosting == "inference-components"
        for binary in (True, False):
            out = client.infer("linear", {"INPUT0": x}, binary=binary)
            np.testing.assert_allclose(out["OUTPUT0"], expected_linear(x), rtol=1e-6)
            np.testing.assert_array_equal(
                client.infer("scale", {"INPUT0": x}, binary=binary)["OUTPUT0"], 2 * x
            )
        # a batch over the model's max_batch_size goes as several requests to the component
        batch = np.random.default_rng(0).random((40, 4), dtype=np.float32)
        client_split = MMEClient(
            served.name,
            hosting="inference-components",
            boto3_session=served._session,
            max_batch_size={"linear": 16},
            split_batches=True,
        )
        out = client_split.infer("linear", {"INPUT0": batch})
        np.testing.assert_allclose(out["OUTPUT0"], expected_linear(batch), rtol=1e-5)
        assert out["ROWS"].max() <= 16  # no request carried more rows than the model takes
        assert client.models() == ["linear", "scale"]


def test_stack_components_async_client_infers_concurrently(served: Any, expected_linear: Any) -> None:
    batches = [np.full((2, 4), i, dtype=np.float32) for i in range(8)]

    async def run() -> list[dict[str, Any]]:
        async with AsyncMMEClient(
            served.name, hosting="inference-components", boto3_session=served._session
        ) as client:
            return list(await asyncio.gather(*(client.infer("linear", {"INPUT0": b}) for b in batches)))

    for batch, out in zip(batches, asyncio.run(run()), strict=True):
        np.testing.assert_allclose(out["OUTPUT0"], expected_linear(batch), rtol=1e-6)


def test_stack_components_client_errors_say_what_to_do(ic_stack: Any, served: Any, repository: Path) -> None:
    x = np.ones((1, 4), dtype=np.float32)
    with pytest.raises(InferenceComponentNotFoundError) as unknown:
        served.client().infer("nope", {"INPUT0": x})
    assert (unknown.value.inference_component, unknown.value.status, unknown.value.target_model) == (
        "nope",
        400,
        None,
    )
    # The stack answers a TargetModel on an endpoint of components as SageMaker answers one on a
    # single-model endpoint; SageMaker's "Inference Component Name header is required" gets the client's
    # hint (tests/client/test_errors_map.py)
    with pytest.raises(InferenceError, match="not a multi-model endpoint") as by_model:
        MMEClient(served.name, boto3_session=served._session).infer("linear.tar.gz", {"INPUT0": x})
    assert not isinstance(by_model.value, InferenceComponentNotFoundError)
    with pytest.raises(ValueError, match="cannot name an inference component"):
        served.client().infer("linear.tar.gz", {"INPUT0": x})

    deploy_mme(
        "ic-an-mme",
        ic_stack.model_data_url("ic-an-mme/"),
        models=[repository / "scale"],
        **{k: v for k, v in _kwargs(ic_stack, "").items() if k != "model_data_url"},
    )
    try:
        with pytest.raises(InferenceError, match="hosts no inference components: it is a multi-model"):
            MMEClient("ic-an-mme", hosting="inference-components", boto3_session=served._session).infer(
                "scale", {"INPUT0": x}
            )
    finally:
        teardown("ic-an-mme", boto3_session=ic_stack.boto3_session())


def test_stack_components_parked_at_zero_copies_answer_no_capacity_and_count_it(
    ic_stack: Any, repository: Path
) -> None:
    kwargs = _kwargs(ic_stack, "ic-parked/")
    components = [_small("parked-linear", repository / "linear")]
    endpoint = deploy_inference_components("ic-parked", components, **kwargs)
    x = np.ones((1, 4), dtype=np.float32)
    try:
        endpoint.client().infer("parked-linear", {"INPUT0": x})
        deploy_inference_components(
            "ic-parked", [_small("parked-linear", repository / "linear", copies=0)], **kwargs
        )
        with pytest.raises(NoCapacityError, match="no capacity") as caught:
            endpoint.client().infer("parked-linear", {"INPUT0": x})
        assert caught.value.inference_component == "parked-linear"

        def counted() -> Any:
            session = kwargs["boto3_session"]
            metrics = endpoint_metrics(
                "ic-parked", start=timedelta(minutes=5), period=1, boto3_session=session
            )
            figures = metrics.component_summary("parked-linear")
            return figures if figures["no_capacity_failures"] == 1 and figures["invocations"] == 1 else None

        figures = _until(counted)
        assert figures["errors_4xx"] == figures["errors_5xx"] == 0
        assert figures["model_latency_mean_ms"] is not None and figures["model_latency_mean_ms"] > 0

        deploy_inference_components("ic-parked", components, **kwargs)  # back to one copy
        assert endpoint.client().infer("parked-linear", {"INPUT0": x})["OUTPUT0"].shape == (1, 3)
    finally:
        teardown("ic-parked", boto3_session=kwargs["boto3_session"])


def test_stack_components_scale_to_zero_when_idle_and_back_on_the_next_request(
    ic_stack: Any, repository: Path
) -> None:
    """The library's registration as AWS's scale-to-zero guide makes it: target tracking takes the idle
    component to zero copies (on the stack, 15 one-second datapoints below target), a request then fails
    with NoCapacityError and sets off the NoCapacityInvocationFailures alarm (a 10-second period here), whose
    step policy brings one copy back."""
    kwargs = _kwargs(ic_stack, "ic-zero/", managed_instance_scaling=(0, 1))
    scaling = ComponentAutoScaling(
        min_copies=0, max_copies=2, target_invocations_per_copy=5, scale_in_cooldown=1, scale_out_cooldown=1,
        alarm_period=10,
    )  # fmt: skip
    endpoint = deploy_inference_components(
        "ic-zero", [_small("zero-scale", repository / "scale", autoscaling=scaling)], **kwargs
    )
    sm = ic_stack.client("sagemaker")

    def copies() -> int:
        described = sm.describe_inference_component(InferenceComponentName="zero-scale")
        return int(described["RuntimeConfig"]["CurrentCopyCount"])

    x = np.ones((1, 4), dtype=np.float32)
    try:
        assert copies() == 1
        _until(lambda: copies() == 0)
        with pytest.raises(NoCapacityError):
            endpoint.client().infer("zero-scale", {"INPUT0": x})
        _until(lambda: copies() == 1)
        np.testing.assert_array_equal(endpoint.client().infer("zero-scale", {"INPUT0": x})["OUTPUT0"], 2 * x)
    finally:
        teardown("ic-zero", boto3_session=kwargs["boto3_session"])


def test_stack_components_cli_invokes_a_component(
    served: Any,
    ic_stack: Any,
    expected_linear: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from mme_triton.cli import main

    for name, value in ic_stack.environment().items():
        monkeypatch.setenv(name, value)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    argv = [
        "invoke",
        served.name,
        "linear",
        "--component",
        "--input",
        f"INPUT0={tmp_path / 'x.npy'}",
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)["outputs"]["OUTPUT0"]
    np.testing.assert_allclose(np.array(out["data"], dtype=np.float32), expected_linear(x), rtol=1e-6)
    assert (
        main(["invoke", served.name, "nope", "--component", "--input", f"INPUT0={tmp_path / 'x.npy'}"]) == 4
    )
    assert "Inference Component nope" in capsys.readouterr().err
