"""Every ```python block of docs/*.md and README.md runs as written, after the one setup step the docs
give (getting-started.md): ``mme-triton local up --bucket my-bucket``, its exports, and ``examples/`` as
the working directory.

The stack runs in-process and its exports are set in the environment, as a shell that ran them has them;
the working directory is a fresh copy of ``examples/`` (``model_repository/linear``, ``scale``,
``pipeline``) for each page. One namespace per page, its blocks in order; after a page its endpoints are
torn down and the buckets emptied, so pages do not depend on each other. A block whose first line is
``# not run: <reason>`` is skipped and listed at the end of the run.

Every ``mme-triton ...`` line of a ```bash block must parse with the real command line.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blocks import NOT_RUN_PROPERTY, PAGES, ROOT, Block, blocks, python_pages

XDIST_LONG = True  # each test takes up to a minute: scheduled early (tests/conftest.py)
BUCKET = "my-bucket"
MAX_NOT_RUN = 6
_TORCH_HINTS = ("import torch", "mme_triton.export", "transformers")
_SDK_HINT = "from sagemaker"


def _marks(page: Path) -> list[Any]:
    marks = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]
    if any(hint in block.source for block in blocks(page, "python") for hint in _TORCH_HINTS):
        marks.append(pytest.mark.torch)
    if any(_SDK_HINT in block.source for block in blocks(page, "python")):
        marks.append(pytest.mark.sagemaker)
    return marks


@pytest.fixture
def stack() -> Iterator[Any]:
    """``mme-triton local up --bucket my-bucket``, in-process: one per page, so that pages run side by
    side under pytest-xdist (a stack with no endpoint starts in a fraction of a second)."""
    from mme_triton.local import LocalStack

    with LocalStack() as running:
        running.create_bucket(BUCKET)
        yield running


@pytest.fixture
def docs_shell(stack: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The shell the docs assume: the stack's exports, ``examples/`` as the working directory."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty-aws-file"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    for name, value in stack.environment().items():
        monkeypatch.setenv(name, value)
    workdir = Path(shutil.copytree(ROOT / "examples", tmp_path / "examples"))
    monkeypatch.chdir(workdir)
    _forget_sdk_clients()
    try:
        yield stack
    finally:
        _clean(stack)
        _forget_sdk_clients()


def _forget_sdk_clients() -> None:
    """A new shell's Python has made no SageMaker SDK client yet: the SDK keeps the first one it makes (for
    calls without ``session=``), which an earlier test may have pointed at a stack that is gone."""
    utils = sys.modules.get("sagemaker.core.utils.utils")
    if utils is not None:
        utils.SageMakerClient.reset()


def _clean(stack: Any) -> None:
    """Tear down every endpoint and empty every bucket the page left."""
    from mme_triton import teardown

    session = stack.boto3_session()
    sagemaker = session.client("sagemaker")
    for endpoint in sagemaker.list_endpoints()["Endpoints"]:
        teardown(endpoint["EndpointName"], boto3_session=session)
    s3 = session.resource("s3")
    for bucket in s3.buckets.all():
        bucket.objects.all().delete()


@pytest.mark.parametrize(
    "page",
    [pytest.param(page, marks=_marks(page), id=str(page.relative_to(ROOT))) for page in python_pages()],
)
@pytest.mark.usefixtures("docs_shell")
def test_docs_python_blocks_run_as_written(page: Path, record_property: Any) -> None:
    if any(_SDK_HINT in block.source for block in blocks(page, "python")):
        from mme_triton._sdk import _load_sdk

        if _load_sdk() is None:
            pytest.skip("the page uses the SageMaker SDK, which is not installed (the sagemaker extra)")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for block in blocks(page, "python"):
        reason = block.not_run_reason
        if reason is not None:
            record_property(NOT_RUN_PROPERTY, f"{block.where}: {reason}")
            continue
        _run(block, namespace)


def _run(block: Block, namespace: dict[str, Any]) -> None:
    code = compile(block.source, block.where, "exec")
    try:
        exec(code, namespace)
    except Exception as exc:
        first = block.source.strip().splitlines()[0]
        raise AssertionError(
            f"the block at {block.where} ({first!r}) failed: {type(exc).__name__}: {exc}"
        ) from exc


def test_docs_not_run_blocks_are_few_and_say_why(record_property: Any) -> None:
    skipped = [
        (block.where, block.not_run_reason)
        for page in PAGES
        for block in blocks(page, "python")
        if block.not_run_reason is not None
    ]
    for where, reason in skipped:
        record_property(NOT_RUN_PROPERTY, f"{where}: {reason}")
    assert len(skipped) <= MAX_NOT_RUN, skipped


_COMMANDS = [
    pytest.param(line, id=f"{block.where}:{line}")
    for page in PAGES
    for block in blocks(page, "bash")
    for line in block.source.replace("\\\n", " ").splitlines()
    if line.strip().startswith("mme-triton ")
]


@pytest.mark.parametrize("line", _COMMANDS)
def test_docs_command_lines_parse(line: str) -> None:
    from mme_triton.cli import parser

    argv = shlex.split(line.split(" #")[0], comments=False)[1:]
    if "--help" in argv:
        with pytest.raises(SystemExit) as caught:
            parser().parse_args(argv)
        assert caught.value.code == 0
        return
    args = parser().parse_args(argv)
    assert args.handler is not None
