"""The documentation's code runs in CI: ``blocks.py`` reads it; tests/conftest.py lists what was not run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
