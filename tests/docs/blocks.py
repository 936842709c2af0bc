"""The code blocks of the documentation, read in order: what the docs tests run.

A block is a fenced code block of a page (docs/*.md and README.md) in a given language. A ```python block
whose first line is ``# not run: <reason>`` is not run (there must be few: each says why). Notebooks can
feed the same runner later: their code cells become blocks of a page named after the notebook.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"#\s*not run:\s*(?P<reason>\S.*)")
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")

#: The test property (``record_property``) that carries ``"<where>: <reason>"`` of a ``# not run:``
#: block; tests/conftest.py lists them at the end of the run (from every pytest-xdist worker).
NOT_RUN_PROPERTY = "docs block not run"


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts (1-based line of its first code line) and its code."""

    page: Path
    line: int
    language: str
    source: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def not_run_reason(self) -> str | None:
        first = self.source.lstrip("\n").splitlines()[0] if self.source.strip() else ""
        match = NOT_RUN.fullmatch(first.strip())
        return match.group("reason") if match else None


def blocks(page: Path, language: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` in order (of one ``language`` when given)."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None or (not match.group("lang") and language is not None):
            index += 1
            continue
        indent = len(match.group("indent"))
        start = index + 1
        end = start
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        code = "\n".join(line[indent:] for line in lines[start:end]) + "\n"
        if language is None or match.group("lang") == language:
            found.append(Block(page, start + 1, match.group("lang"), code))
        index = end + 1
    return found


def python_pages() -> list[Path]:
    """The pages with at least one ```python block."""
    return [page for page in PAGES if blocks(page, "python")]
