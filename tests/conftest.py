"""Shared test configuration. Each area keeps its own fixtures in tests/<area>/conftest.py."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def _library_logs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """Library log records are captured at DEBUG so failing tests show what happened."""
    caplog.set_level(logging.DEBUG, logger="mme_triton")
