"""The embedded stack: a SageMaker multi-model endpoint on 127.0.0.1, with no AWS account.

``LocalStack`` runs moto's server (S3, SageMaker, IAM, Application Auto Scaling) with what moto lacks
added on top, answers ``InvokeEndpoint`` the way SageMaker's runtime does, and serves every in-service
endpoint's instances each from a real Triton Inference Server (the ``nvidia-pytriton`` wheel's binary) in
multi-model mode. The library's own functions run against it unchanged: pass ``stack.boto3_session()`` as
``boto3_session=``. The process environment is never changed.

Example::

    from mme_triton import MMEClient, deploy_mme, teardown, upload_models
    from mme_triton.local import LocalStack
    with LocalStack() as stack:
        session = stack.boto3_session()
        url = stack.model_data_url()
        upload_models(["model_repository/linear"], url, boto3_session=session)
        deploy_mme("demo", url, role=stack.role_arn, instance_type="ml.m5.xlarge", boto3_session=session)
        outputs = MMEClient("demo", boto3_session=session).infer("linear.tar.gz", {"INPUT0": x})
        teardown("demo", boto3_session=session)

In a notebook, ``session, role, bucket = notebook_stack()`` starts a stack that stops when the kernel
exits (:mod:`mme_triton.local.notebook`): the one line that differs from the same notebook on AWS.

Needs the ``local`` extra (``pip install 'mme-triton[local]'``) on Linux x86_64 with glibc >= 2.35.
See ``docs/local.md``.
"""

from __future__ import annotations

from mme_triton.local.notebook import NotebookAWS, notebook_stack, running_notebook_stack
from mme_triton.local.stack import LocalStack

__all__ = ["LocalStack", "NotebookAWS", "notebook_stack", "running_notebook_stack"]
