"""Problem codes: one table in the source, one table in the docs, at least one test for each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mme_triton.model import codes
from mme_triton.model.codes import CODES

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs" / "validation.md"
TESTS = Path(__file__).parent


def _constants() -> dict[str, str]:
    return {name: value for name, value in vars(codes).items() if name.isupper() and isinstance(value, str)}


def _docs_table() -> dict[str, str]:
    rows = re.findall(
        r"^\| `([a-z0-9-]+)` \| (error|warning) \|", DOCS.read_text(encoding="utf-8"), re.MULTILINE
    )
    return dict(rows)


def test_codes_constants_and_table_agree() -> None:
    constants = _constants()
    assert sorted(constants.values()) == sorted(CODES)
    assert len(set(constants.values())) == len(constants)


@pytest.mark.parametrize("code", sorted(CODES))
def test_code_is_kebab_case(code: str) -> None:
    assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", code)


def test_docs_table_lists_every_code_with_its_severity() -> None:
    assert _docs_table() == {code: info.severity for code, info in CODES.items()}


def test_every_code_is_produced_by_some_test() -> None:
    sources = "\n".join(
        path.read_text(encoding="utf-8")
        for path in TESTS.glob("test_*.py")
        if path.name != Path(__file__).name
    )
    untested = [code for code in CODES if not re.search(rf"(?<![\w-]){code}(?![\w-])", sources)]
    assert untested == []


def test_every_code_used_in_the_package_is_in_the_table() -> None:
    package = ROOT / "mme_triton" / "model"
    used = set()
    for path in package.glob("*.py"):
        used.update(re.findall(r"codes\.([A-Z_]+)", path.read_text(encoding="utf-8")))
    assert used <= set(_constants())
    unused = set(_constants()) - used
    assert unused == set(), "codes defined but never reported"
