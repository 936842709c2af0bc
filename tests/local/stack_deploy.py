"""Deploying test models on an embedded stack, shared by the stack's test modules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mme_triton import deploy_mme
from mme_triton.local import LocalStack


def deploy_on(
    stack: LocalStack, name: str, models: list[Path], *, prefix: str | None = None, **options: Any
) -> str:
    """Deploy ``models`` as endpoint ``name`` (an ``ml.m5.large``) on ``stack``, its artifacts under
    ``prefix`` of the stack's bucket (default ``<name>/``), polling every 0.1 s; ``options`` go to
    :func:`deploy_mme`. Returns the endpoint's model data URL."""
    url = stack.model_data_url(prefix or f"{name}/")
    deploy_mme(
        name,
        url,
        models=models,
        role=stack.role_arn,
        instance_type="ml.m5.large",
        poll_interval=0.1,
        boto3_session=stack.boto3_session(),
        **options,
    )
    return url
