"""Shared test configuration. Each area keeps its own fixtures in tests/<area>/conftest.py."""

from __future__ import annotations

import importlib.util
import logging
import os
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


_SHARED_SCOPES = frozenset({"package", "module", "class"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into the nodeids' @group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n N --dist loadgroup``, as CI runs): tests that share a module- or
    class-scoped fixture (a stack, a Triton) form one group and run on one worker, so the fixture starts
    once; every other test is scheduled on its own. Groups go first: they are the long units of work, and
    the single tests fill the workers' time at the end.

    A module whose group would hold one worker for minutes sets ``XDIST_GROUPS = n``: its tests are dealt
    into ``n`` groups in turn, each starting the module's fixtures once on its own worker (for modules
    whose tests do not depend on one another's order). A module whose single tests take up to a minute each
    (a notebook, a docs page) sets ``XDIST_LONG = True``: they go right after the groups, so that no worker
    starts one of them while the others are out of work."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    grouped: set[str] = set()
    long: set[str] = set()
    dealt: dict[str, int] = {}
    for item in items:
        if getattr(getattr(item, "module", None), "XDIST_LONG", False):
            long.add(item.nodeid)
        fixture_info = getattr(item, "_fixtureinfo", None)
        if fixture_info is None:
            continue
        shared = [
            definitions[-1]
            for definitions in fixture_info.name2fixturedefs.values()
            if definitions and definitions[-1].scope in _SHARED_SCOPES
        ]
        if shared:
            group = module = item.nodeid.split("::")[0]
            parts = int(getattr(getattr(item, "module", None), "XDIST_GROUPS", 1))
            if parts > 1:
                index = dealt.get(module, 0)
                dealt[module] = index + 1
                group = f"{module}#{index % parts}"
            item.add_marker(pytest.mark.xdist_group(name=group))
            grouped.add(item.nodeid)
    items.sort(key=lambda item: (item.nodeid not in grouped, item.nodeid not in long))


# What tests report through record_property to the end-of-run summary, by property name (the docs' blocks
# that are not run say why). Read from the reports, so it works the same under pytest-xdist.
_SUMMARY_PROPERTIES = {"docs block not run": "docs blocks not run"}
_SUMMARY: dict[str, set[str]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name in _SUMMARY_PROPERTIES:
            _SUMMARY.setdefault(name, set()).add(str(value))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for name, lines in sorted(_SUMMARY.items()):
        terminalreporter.section(_SUMMARY_PROPERTIES[name])
        for line in sorted(lines):
            terminalreporter.write_line(line)


# .ci/run sets it: there a skipped test is a failure (what a run cannot test, it deselects by marker).
FORBID_SKIPS = "MME_TESTS_FORBID_SKIPS"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(FORBID_SKIPS) != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        reporter.write_line(
            f"error: {len(skipped)} test(s) skipped and {FORBID_SKIPS}=1: a run deselects what it cannot "
            "test (markers), it does not skip it",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
