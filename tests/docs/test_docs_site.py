"""The docs site: every public name has an API reference entry, every page is in the navigation, and the
pages link only to pages that exist. ``mkdocs build --strict`` (run by CI) checks the rest."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
from blocks import ROOT

import mme_triton

DOCS = ROOT / "docs"
API = sorted((DOCS / "api").glob("*.md"))
_DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)


def _resolve(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(path)


def _documented() -> dict[str, Any]:
    """``{directive path: object}`` of every ``::: path`` in docs/api/."""
    return {path: _resolve(path) for page in API for path in _DIRECTIVE.findall(page.read_text())}


def test_docs_reference_covers_every_public_name() -> None:
    objects = list(_documented().values())
    missing = [
        name
        for name in mme_triton.__all__
        if name != "__version__" and not any(obj is getattr(mme_triton, name) for obj in objects)
    ]
    assert missing == [], f"add a ::: entry to docs/api/ for {missing}"
    assert "__version__" in (DOCS / "api" / "errors.md").read_text()


@pytest.mark.parametrize("package", ["mme_triton.local", "mme_triton.export"])
def test_docs_reference_covers_the_optional_faces(package: str) -> None:
    module = importlib.import_module(package)
    objects = list(_documented().values())
    missing = [name for name in module.__all__ if not any(obj is getattr(module, name) for obj in objects)]
    assert missing == []


def test_docs_reference_entries_resolve() -> None:
    assert len(_documented()) >= len(mme_triton.__all__) - 1


def test_docs_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")]
    assert sorted(page for page in pages if page not in nav) == []


def test_docs_links_point_at_pages_that_exist() -> None:
    broken = []
    for page in [*DOCS.rglob("*.md"), ROOT / "README.md"]:
        for target in re.findall(r"\]\(([^)#:\s]+\.md)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).resolve().is_file():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
