"""An ensemble's archive carries its own copy of every step: updating a step with upload_models(...,
update_ensembles=True) uploads the ensemble again, and its new TargetModel serves the new step while the
old TargetModel keeps the old copy (on the embedded stack, with the SageMaker front-end loading both)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import MMEClient, MMETritonWarning, deploy_mme, upload_models

pytestmark = [pytest.mark.triton, pytest.mark.moto]

ENDPOINT = "ensemble-update"
X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


@pytest.fixture(scope="module")
def deployed(
    stack: Any, tmp_path_factory: pytest.TempPathFactory, model_writers: dict[str, Any]
) -> Iterator[Any]:
    repository = tmp_path_factory.mktemp("update") / "model_repository"
    for name in ("linear", "scale", "pipeline"):
        model_writers[name](repository)
    session = stack.boto3_session()
    url = stack.model_data_url("update/")
    deploy_mme(
        ENDPOINT,
        url,
        models=[repository / "pipeline", repository / "scale"],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        environment={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216"},
        poll_interval=0.1,
        boto3_session=session,
    )
    yield {
        "repository": repository,
        "url": url,
        "session": session,
        "client": MMEClient(ENDPOINT, boto3_session=session),
    }


def test_update_ensembles_serves_the_new_step_under_the_new_target_model(
    deployed: dict[str, Any], expected_linear: Any
) -> None:
    client: MMEClient = deployed["client"]
    repository: Path = deployed["repository"]
    before = client.infer("pipeline.tar.gz", {"INPUT0": X})["OUTPUT0"]
    np.testing.assert_allclose(before, expected_linear(2 * X), rtol=1e-6)
    model_py = repository / "scale" / "1" / "model.py"
    model_py.write_text(model_py.read_text().replace("data * 2", "data * 3"))

    # without update_ensembles the upload says which ensemble still holds the old copy
    with pytest.warns(MMETritonWarning, match="pipeline.tar.gz .* embeds an older copy of scale"):
        [scale] = upload_models(
            repository / "scale", deployed["url"], versioned=True, boto3_session=deployed["session"]
        )
    assert scale.stale_ensembles == ("pipeline.tar.gz",)
    [_, pipeline] = upload_models(
        repository / "scale",
        deployed["url"],
        versioned=True,
        update_ensembles=True,
        boto3_session=deployed["session"],
    )

    assert pipeline.supersedes == "pipeline.tar.gz"
    np.testing.assert_allclose(client.infer(scale.name, {"INPUT0": X})["OUTPUT0"], 3 * X)
    after = client.infer(pipeline.name, {"INPUT0": X})["OUTPUT0"]
    np.testing.assert_allclose(after, expected_linear(3 * X), rtol=1e-6)
    # the old TargetModel still serves the copy it was packaged with
    np.testing.assert_allclose(client.infer("pipeline.tar.gz", {"INPUT0": X})["OUTPUT0"], before)

    # run again, nothing is stale: the newer ensemble artifact embeds the current step
    again = upload_models(
        repository / "scale",
        deployed["url"],
        versioned=True,
        update_ensembles=True,
        boto3_session=deployed["session"],
    )
    assert [(r.model_name, r.status, r.stale_ensembles) for r in again] == [("scale", "unchanged", ())]
