"""The documentation's code runs in CI: ``blocks.py`` reads it; the summary lists what was not run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from blocks import NOT_RUN_BLOCKS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if NOT_RUN_BLOCKS:
        terminalreporter.section("docs blocks not run")
        for where, reason in sorted(set(NOT_RUN_BLOCKS)):
            terminalreporter.write_line(f"{where}: {reason}")
