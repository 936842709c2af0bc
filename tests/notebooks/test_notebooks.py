"""Every notebook in ``notebooks/`` is stored without outputs, is local only in its first cell, and runs.

A run executes the notebook with nbclient in a fresh ``python3`` kernel of this interpreter, one cell at
a time with a timeout, in a temporary working directory; any error fails the test. Then a probe cell asks
the notebook's embedded stack what is left (endpoints, S3 objects: the notebook's teardown must have
removed them), the kernel shuts down, and no process it started may remain (the kernel is started with
the ``marker`` fixture's variable in its environment, which Tritons and their stubs inherit). The
kernel's temporary directory must hold no ``mme-*`` directory either.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))

# What each notebook needs, as test markers; a new notebook gets a row here.
NEEDS: dict[str, tuple[str, ...]] = {
    "quickstart": ("triton", "moto"),
    "vision": ("triton", "moto", "torch"),
    "nlp": ("triton", "moto", "torch"),
    "ensemble": ("triton", "moto", "torch"),
    "profile": ("triton", "moto", "torch"),
    "metrics": ("triton", "moto"),
    "capacity": ("triton", "moto"),
    "inference_components": ("triton", "moto"),
}
XDIST_LONG = True  # each test takes up to a minute: scheduled early (tests/conftest.py)
CELL_TIMEOUT = 300  # seconds; the first torch import and the exports are the slow cells
EXIT_TIMEOUT = 30.0  # seconds the kernel has to run its exit hooks (the stack stops there) after shutdown

STACK_LINE = "from mme_triton.local import notebook_stack; session, role, bucket = notebook_stack()"
# the stack line may pass the stack options by keyword (metrics.ipynb: a small cache, metrics every second)
STACK_CALL = re.compile(re.escape(STACK_LINE[:-1]) + r"(?:[a-z_]+=[^,()]+(?:, [a-z_]+=[^,()]+)*)?\)")
AWS_LINE = (
    "import boto3, sagemaker; session, role, bucket = boto3.Session(), sagemaker.get_execution_role(), "
    "sagemaker.Session().default_bucket()"
)
# Outside the first cell nothing may start, reach into or stop the embedded stack.
LOCAL_ONLY = re.compile(r"notebook_stack|LocalStack|running_notebook_stack|\bstack\b|\.stop\(\)")

PROBE = """\
import json as _json
from mme_triton.local import running_notebook_stack as _running
_stack = _running()
_bucket = _stack.default_bucket
print(_json.dumps({
    "endpoints": [e["EndpointName"] for e in _stack.client("sagemaker").list_endpoints()["Endpoints"]],
    "objects": [o["Key"] for o in _stack.client("s3").list_objects_v2(Bucket=_bucket).get("Contents", [])],
}))
"""


def _document(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _notebook_params(*, run: bool) -> list[Any]:
    params = []
    for path in NOTEBOOKS:
        marks = [getattr(pytest.mark, name) for name in NEEDS.get(path.stem, ())]
        params.append(pytest.param(path, id=path.stem, marks=[*marks, pytest.mark.slow] if run else []))
    return params


def test_notebooks_are_all_known() -> None:
    assert len(NOTEBOOKS) >= 4
    assert {path.stem for path in NOTEBOOKS} == set(NEEDS)


@pytest.mark.parametrize("path", _notebook_params(run=False))
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    import nbformat

    document = _document(path)
    nbformat.validate(nbformat.reads(path.read_text(encoding="utf-8"), as_version=4))
    code = [cell for cell in document["cells"] if cell["cell_type"] == "code"]
    assert code
    assert [(cell["execution_count"], cell["outputs"]) for cell in code] == [(None, [])] * len(code)
    assert "widgets" not in document["metadata"]
    assert document["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", _notebook_params(run=False))
def test_notebook_first_cell_is_its_only_local_line(path: Path) -> None:
    first, *rest = _document(path)["cells"]
    lines = _source(first).splitlines()
    code_lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    comment_lines = [line.lstrip("# ").rstrip() for line in lines if line.lstrip().startswith("#")]

    assert first["cell_type"] == "code"
    assert len(code_lines) == 1
    assert STACK_CALL.fullmatch(code_lines[0])
    assert AWS_LINE in comment_lines
    # the AWS line binds the same three names the stack line does
    assignments = [node for node in ast.parse(AWS_LINE).body if isinstance(node, ast.Assign)]
    assert [ast.unparse(node.targets[0]) for node in assignments] == ["(session, role, bucket)"]
    local = [
        (index, match)
        for index, cell in enumerate(rest, 1)
        if cell["cell_type"] == "code"
        for match in LOCAL_ONLY.findall(_source(cell))
    ]
    assert local == []


@pytest.mark.parametrize("path", _notebook_params(run=False))
def test_notebook_ends_with_teardown(path: Path) -> None:
    code = [cell for cell in _document(path)["cells"] if cell["cell_type"] == "code"]
    last = ast.parse(_source(code[-1]))
    calls = [
        node.func.id
        for node in ast.walk(last)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]
    assert "teardown" in calls
    assert "delete_artifacts=True" in _source(code[-1])


def _run(path: Path, workdir: Path, marker: Any, *, probe: str | None) -> tuple[Any, str | None]:
    """Execute the notebook in a fresh kernel; return the executed notebook and the probe's output."""
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    notebook = nbformat.read(path, as_version=4)
    config = Config()
    config.KernelManager.shutdown_wait_time = EXIT_TIMEOUT  # the stack stops in the kernel's exit hooks
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        config=config,
    )
    tmp = workdir / "tmp"
    tmp.mkdir()
    env = marker.env(TMPDIR=str(tmp))
    probed: str | None = None
    with client.setup_kernel(env=env):
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        if probe is not None:
            notebook.cells.append(nbformat.v4.new_code_cell(probe))
            cell = client.execute_cell(notebook.cells[-1], len(notebook.cells) - 1)
            probed = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
    return notebook, probed


@pytest.mark.parametrize("path", _notebook_params(run=True))
def test_notebook_runs_top_to_bottom(path: Path, tmp_path: Path, marker: Any) -> None:
    _, probed = _run(path, tmp_path, marker, probe=PROBE)

    assert probed is not None
    assert json.loads(probed) == {"endpoints": [], "objects": []}
    assert marker.left() == []
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("mme")) == []


def test_notebook_kernel_runs_this_interpreter(tmp_path: Path, marker: Any) -> None:
    import nbformat

    path = tmp_path / "which.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import sys\nprint(sys.executable)")]
    nbformat.write(notebook, path)

    executed, _ = _run(path, tmp_path, marker, probe=None)

    (output,) = executed.cells[0].outputs
    assert Path(output["text"].strip()) == Path(sys.executable)
    assert marker.left() == []
