"""BLS on the embedded stack, which loads archives with the SageMaker front-end's own code: a python model's
BLS targets are there only as steps of the ensemble the archive serves (or as a TargetModel loaded at the
moment), and validate_model says so before any upload."""

from __future__ import annotations

import io
import logging
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import (
    EnsembleStep,
    InferenceError,
    MMEClient,
    ModelValidationError,
    build_ensemble,
    deploy_mme,
    upload_models,
    validate_model,
)
from mme_triton.local.route.extract import front_end_choice, safe_extract

pytestmark = [pytest.mark.triton, pytest.mark.moto]

ENDPOINT = "bls"
X = np.ones((2, 4), dtype=np.float32)

BLS_MODEL_PY = """\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            answer = pb_utils.InferenceRequest(
                model_name="{target}", requested_output_names=["OUTPUT0"], inputs=[data]
            ).exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            doubled = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", doubled + 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def write_bls(repository: Path, name: str, target: str) -> Path:
    """A python model that calls ``target`` through BLS and adds 1 to its answer."""
    model = repository / name
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(BLS_MODEL_PY.format(target=target))
    config = (repository / "scale" / "config.pbtxt").read_text().replace('"scale"', f'"{name}"')
    (model / "config.pbtxt").write_text(config)
    return model


def _archive(*models: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for model in models:
            tar.add(model, arcname=model.name)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def deployed(
    stack: Any, tmp_path_factory: pytest.TempPathFactory, model_writers: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    repository = tmp_path_factory.mktemp("bls") / "model_repository"
    model_writers["scale"](repository)
    model_writers["linear"](repository)
    model_writers["pipeline"](repository)  # scale -> linear: another archive with a step named "scale"
    write_bls(repository, "caller", "scale")
    write_bls(repository, "caller_tm", "scale.tar.gz")
    build_ensemble(
        repository,
        "twice",
        [
            EnsembleStep("scale", outputs={"OUTPUT0": "doubled"}),
            EnsembleStep("caller", inputs={"INPUT0": "doubled"}),
        ],
        inputs=["INPUT0"],
        outputs=["OUTPUT0"],
    )
    session = stack.boto3_session()
    url = stack.model_data_url("bls/")
    deploy_mme(
        ENDPOINT,
        url,
        models=[
            repository / "twice",
            repository / "scale",
            repository / "caller_tm",
            repository / "pipeline",
        ],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        environment={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216"},
        poll_interval=0.1,
        boto3_session=session,
    )
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    s3 = session.client("s3")

    def put(name: str, *models: Path) -> None:  # as another tool would: no validation
        s3.put_object(Bucket=bucket, Key=f"{prefix}{name}", Body=_archive(*models))

    yield {
        "repository": repository,
        "client": MMEClient(ENDPOINT, boto3_session=session),
        "put": put,
        "url": url,
    }


def test_bls_target_packaged_alone_is_not_there(deployed: dict[str, Any]) -> None:
    """validate_model names file and line before any upload; the front-end loads the caller and nothing
    else, so the call fails at run time as in the container."""
    caller = deployed["repository"] / "caller"
    [problem] = validate_model(caller)
    assert (problem.code, problem.path, problem.line) == (
        "bls-target-not-loaded",
        str(caller / "1" / "model.py"),
        9,
    )
    with pytest.raises(ModelValidationError, match="bls-target-not-loaded"):
        upload_models(caller, deployed["url"])
    deployed["put"]("caller.tar.gz", caller)

    with pytest.raises(
        InferenceError, match=r"Failed for execute the inference request\. Model 'scale' is not ready"
    ):
        deployed["client"].infer("caller.tar.gz", {"INPUT0": X})


def test_bls_target_as_a_step_of_the_ensemble_is_there(deployed: dict[str, Any]) -> None:
    """scale doubles, caller calls scale again through BLS and adds 1: (1 * 2) * 2 + 1."""
    assert validate_model(deployed["repository"] / "twice") == []

    answer = deployed["client"].infer("twice.tar.gz", {"INPUT0": X})

    np.testing.assert_array_equal(answer["OUTPUT0"], 5 * X)


def test_bls_target_that_is_a_target_model_is_there_only_while_loaded(deployed: dict[str, Any]) -> None:
    client: MMEClient = deployed["client"]
    [problem] = validate_model(deployed["repository"] / "caller_tm")
    assert problem.code == "bls-target-target-model"

    with pytest.raises(InferenceError, match=r"Model 'scale\.tar\.gz' is not ready"):
        client.infer("caller_tm.tar.gz", {"INPUT0": X})
    client.infer("scale.tar.gz", {"INPUT0": X})  # SageMaker loads a TargetModel when it is invoked

    np.testing.assert_array_equal(client.infer("caller_tm.tar.gz", {"INPUT0": X})["OUTPUT0"], 3 * X)


def test_archive_of_several_models_without_ensemble_serves_the_front_ends_pick(
    deployed: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Hand-built: the caller and its target in one archive, no ensemble. The front-end loads the last
    directory it lists (here as on this file system) and never the other: the stack says which."""
    repository: Path = deployed["repository"]
    deployed["put"]("both.tar.gz", repository / "caller", repository / "scale")
    listed = safe_extract(io.BytesIO(_archive(repository / "caller", repository / "scale")), tmp_path / "x")
    picked = front_end_choice(listed.path)
    caplog.set_level(logging.WARNING, logger="mme_triton.local.route.endpoint_runtime")

    if picked == "scale":
        np.testing.assert_array_equal(
            deployed["client"].infer("both.tar.gz", {"INPUT0": X})["OUTPUT0"], 2 * X
        )
    else:
        with pytest.raises(InferenceError, match="Model 'scale' is not ready"):
            deployed["client"].infer("both.tar.gz", {"INPUT0": X})
    other = "caller" if picked == "scale" else "scale"
    assert any(
        f"loads only '{picked}'" in r.getMessage() and f"not '{other}'" in r.getMessage()
        for r in caplog.records
    )


def test_bls_by_name_is_ambiguous_once_another_archive_has_the_name(deployed: dict[str, Any]) -> None:
    """Model namespacing (the serve script's default): pipeline.tar.gz also has a step named scale; once it
    is loaded, the BLS call of twice.tar.gz by that name fails."""
    client: MMEClient = deployed["client"]
    np.testing.assert_array_equal(client.infer("twice.tar.gz", {"INPUT0": X})["OUTPUT0"], 5 * X)

    client.infer("pipeline.tar.gz", {"INPUT0": X})

    with pytest.raises(InferenceError, match="Model 'scale' is not ready"):
        client.infer("twice.tar.gz", {"INPUT0": X})
