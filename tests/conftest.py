"""Shared test configuration. Each area keeps its own fixtures in tests/<area>/conftest.py."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Modules that build torch.nn.Module classes at import. A run that deselects the `torch` marker (the core
# run, which has no torch) does not import them; any other run without torch fails on them, as it should.
_TORCH_AT_IMPORT = frozenset({"test_pytorch_backend.py"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in _TORCH_AT_IMPORT and importlib.util.find_spec("torch") is None:
        markexpr = config.getoption("markexpr") or ""
        if "not torch" in markexpr:
            return True
    return None


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


@pytest.fixture
def plane() -> Iterator[Any]:
    """The embedded stack's control plane alone: moto's server with what moto lacks (no Triton)."""
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane(transition_delay=0.05) as control_plane:
        yield control_plane
