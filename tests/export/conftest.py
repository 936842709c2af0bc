"""Fixtures of the export tests: the tiny models of tiny_models.py, fresh for each test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import (
    build_bert,
    build_bert_tokenizer,
    build_cnn,
    build_roberta,
    build_roberta_tokenizer,
)


@pytest.fixture
def tiny_bert() -> Any:
    return build_bert()


@pytest.fixture
def tiny_roberta() -> Any:
    return build_roberta()


@pytest.fixture
def bert_tokenizer(tmp_path: Path) -> Any:
    return build_bert_tokenizer(tmp_path / "vocab")


@pytest.fixture
def roberta_tokenizer() -> Any:
    return build_roberta_tokenizer()


@pytest.fixture
def small_cnn() -> Any:
    return build_cnn()
