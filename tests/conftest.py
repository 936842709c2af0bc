"""Shared test configuration. Each area keeps its own fixtures in tests/<area>/conftest.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _library_logs_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """Library log records are captured at DEBUG so failing tests show what happened."""
    caplog.set_level(logging.DEBUG, logger="mme_triton")


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """moto's plain server on 127.0.0.1 (a free port), one per test module; stopped afterwards."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


# Markers that say what a test needs, and the older run-wide markers CI's core run still deselects by:
# a test marked `triton` or `moto` is also `local`, one marked `torch` also `export`.
_IMPLIED_MARKERS = {"triton": "local", "moto": "local", "torch": "export"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for needs, implied in _IMPLIED_MARKERS.items():
            if item.get_closest_marker(needs) is not None and item.get_closest_marker(implied) is None:
                item.add_marker(implied)
