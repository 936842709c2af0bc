"""``notebooks/quickstart.ipynb`` runs as it is shipped, and is shipped without outputs.

The code cells run in order in one namespace, as a kernel would run them (nbclient is not a dependency).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.triton, pytest.mark.moto]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


def _code_cells() -> list[dict[str, Any]]:
    document = json.loads(NOTEBOOK.read_text())
    return [cell for cell in document["cells"] if cell["cell_type"] == "code"]


def test_quickstart_notebook_is_stored_without_outputs() -> None:
    cells = _code_cells()

    assert cells
    assert [(c["execution_count"], c["outputs"]) for c in cells] == [(None, [])] * len(cells)


def test_quickstart_notebook_runs_top_to_bottom() -> None:
    namespace: dict[str, Any] = {"__name__": "__main__"}

    for index, cell in enumerate(_code_cells()):
        exec(compile("".join(cell["source"]), f"{NOTEBOOK.name}[{index}]", "exec"), namespace)

    stack = namespace["stack"]
    assert not stack.running
    assert not namespace["workdir"].exists()
