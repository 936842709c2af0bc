"""``engine="perf_analyzer"``: NVIDIA's perf_analyzer measures the load levels on the stack's own Triton port.

These tests need the binary on PATH (``.ci/install-perf-analyzer DIR`` and DIR/bin on PATH, or
``MME_TRITON_PERF_ANALYZER``); without it they fail, they do not skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mme_triton as mt
from mme_triton import Candidate, DynamicBatching, ProfileError

from .conftest import FAST, INIT_S, SLEEP_S


@pytest.mark.triton
@pytest.mark.moto
@pytest.mark.perf_analyzer
def test_profile_with_perf_analyzer_on_a_stack_of_its_own(module_sleepy: Path) -> None:
    report = mt.profile_model(
        module_sleepy,
        candidates=[Candidate("one"), Candidate("batching", dynamic_batching=DynamicBatching(2000))],
        concurrency=(1, 8),
        engine="perf_analyzer",
        progress=False,
        **FAST,
    )
    assert report.engine == "perf_analyzer" and report.target == "stack"
    one, batching = report.result("one"), report.result("batching")
    for result in (one, batching):
        assert result.status == "ok", result.problems
        assert result.load_s is not None and result.load_s >= INIT_S  # measured as with the built-in engine
        assert [(level.load, level.stable) for level in result.levels] == [("c=1", True), ("c=8", True)]
        for level in result.levels:
            assert level.p50_ms is not None and level.p50_ms >= SLEEP_S * 1000
            assert level.p99_ms is not None and level.p99_ms >= level.p50_ms
            assert level.server is not None and level.server.compute_infer_ms >= 0.9 * SLEEP_S * 1000
    capped = one.levels[1].throughput_per_s
    assert capped is not None and 0.5 / SLEEP_S <= capped <= 1.1 / SLEEP_S
    multiplied = batching.levels[1].throughput_per_s
    assert multiplied is not None and multiplied >= 2.5 * capped
    assert report.best is batching


@pytest.mark.perf_analyzer
def test_profile_with_perf_analyzer_on_an_endpoint_says_it_needs_tritons_port(module_sleepy: Path) -> None:
    with pytest.raises(ProfileError, match="it cannot drive InvokeEndpoint"):
        mt.profile_model(module_sleepy, endpoint="anywhere", engine="perf_analyzer", progress=False)


def test_profile_with_a_missing_perf_analyzer_says_how_to_install_it(module_sleepy: Path) -> None:
    with pytest.raises(ProfileError, match=r"needs NVIDIA's perf_analyzer.*install-perf-analyzer"):
        mt.profile_model(module_sleepy, engine="perf_analyzer", perf_analyzer="/no/such/perf_analyzer")
