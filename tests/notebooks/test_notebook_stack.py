"""notebook_stack(): a notebook's session, role and bucket from an embedded stack that stops at exit.

Each test runs a short script in a child process, as a kernel would run the cells, and looks at what
the process left behind once it exited.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.triton, pytest.mark.moto]

SCRIPT = textwrap.dedent(
    """
    import json, os, tempfile
    from mme_triton import deploy_mme
    from mme_triton.local import notebook_stack, running_notebook_stack

    before = running_notebook_stack()
    session, role, bucket = notebook_stack(bucket="notebook-bucket", max_models=2)
    again = notebook_stack(bucket="ignored")
    stack = running_notebook_stack()
    iam, s3 = session.client("iam"), session.client("s3")
    s3.head_bucket(Bucket=bucket)
    # an endpoint left running: the exit hook stops its Triton with the stack
    deploy_mme("left-running", f"s3://{bucket}/models/", role=role, instance_type="ml.c5.xlarge",
               poll_interval=0.1, boto3_session=session)
    print(json.dumps({
        "before": before is None,
        "bucket": bucket,
        "again": [again.role == role, again.bucket == bucket, running_notebook_stack() is stack],
        "role": iam.get_role(RoleName=role.rsplit("/", 1)[1])["Role"]["Arn"] == role,
        "endpoint_url": session.client("sagemaker").meta.endpoint_url == stack.endpoint_url,
        "max_models": stack.max_models,
        "triton": stack.triton("left-running") is not None,
        "scratch": [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("mme-triton-stack-")],
    }))
    """
)


def test_notebook_stack_gives_session_role_and_bucket_and_stops_at_exit(tmp_path: Path, marker: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=marker.env(TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["before"] is True
    assert facts["bucket"] == "notebook-bucket"
    assert facts["again"] == [True, True, True]
    assert facts["role"] is True
    assert facts["endpoint_url"] is True
    assert facts["max_models"] == 2
    assert facts["triton"] is True
    assert len(facts["scratch"]) == 1
    assert marker.left() == []
    # the stack's scratch directory (TMPDIR/mme-triton-stack-*) is removed with it
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("mme")) == []
