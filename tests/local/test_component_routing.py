"""How a request picks a copy of an inference component (RoutingConfig), and the bound on copies: pure
tests of mme_triton.local.route.components with stand-in copies (no Triton)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mme_triton.local.route._component_metrics import NullComponentSink
from mme_triton.local.route._copies import CopyRuntime
from mme_triton.local.route.components import ComponentRuntime, CopyBudget


class _Endpoint:
    def __init__(self, routing: str) -> None:
        self.routing = routing
        self.budget = CopyBudget(4)
        self.closed = False
        self.endpoint_name = "e"


class _Triton:
    pid = None

    def stop(self) -> None:
        pass


def runtime_with(routing: str, copies: int) -> ComponentRuntime:
    runtime = ComponentRuntime("ic", _Endpoint(routing), NullComponentSink())  # type: ignore[arg-type]
    runtime._copies = [CopyRuntime(f"ic-{n}", "i-1", _Triton(), 1) for n in range(copies)]  # type: ignore[arg-type]
    return runtime


def test_component_routing_least_outstanding_requests_picks_the_least_busy_copy() -> None:
    runtime = runtime_with("LEAST_OUTSTANDING_REQUESTS", 3)
    first, second, third = runtime.copies
    first.in_flight, second.in_flight, third.in_flight = 2, 0, 1
    assert runtime.take() is second
    assert second.in_flight == 1  # counted on it
    assert runtime.take() in (second, third)  # a tie: drawn among them


def test_component_routing_least_outstanding_requests_spreads_ties_over_every_copy() -> None:
    runtime = runtime_with("LEAST_OUTSTANDING_REQUESTS", 2)
    picked = Counter()
    for _ in range(200):
        copy = runtime.take()
        assert copy is not None
        picked[copy.copy_id] += 1
        copy.release()
    assert set(picked) == {"ic-0", "ic-1"} and min(picked.values()) > 50


def test_component_routing_random_ignores_how_busy_a_copy_is() -> None:
    runtime = runtime_with("RANDOM", 2)
    busy = runtime.copies[0]
    busy.in_flight = 5
    picked = Counter()
    for _ in range(200):
        copy = runtime.take()
        assert copy is not None
        picked[copy.copy_id] += 1
        copy.release()
    assert min(picked.values()) > 50  # the busy copy gets its share


def test_component_routing_retired_copies_take_no_request_and_none_left_is_none() -> None:
    runtime = runtime_with("LEAST_OUTSTANDING_REQUESTS", 2)
    runtime.copies[0].retire()
    assert all(runtime.take() is runtime.copies[1] for _ in range(5))
    runtime.copies[1].retire()
    assert runtime.take() is None
    assert runtime_with("RANDOM", 0).take() is None


@pytest.mark.parametrize(("limit", "asked", "granted"), [(4, 3, 3), (4, 6, 4), (1, 2, 1)])
def test_component_copy_budget_bounds_the_copies_running(limit: int, asked: int, granted: int) -> None:
    budget = CopyBudget(limit)
    assert budget.take(asked) == granted
    assert budget.take(1) == (1 if granted < limit else 0)
    budget.give(granted)
    assert budget.running <= limit


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_component_copy_budget_refuses_what_it_cannot_use(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_copies"):
        CopyBudget(bad)


def test_component_copies_beyond_the_budget_do_not_start_and_say_so(tmp_path: Path) -> None:
    """A component asked for more copies than the stack may run is served by fewer, with a warning."""
    from mme_triton.errors import MMETritonWarning

    endpoint = _Endpoint("LEAST_OUTSTANDING_REQUESTS")
    endpoint.budget = CopyBudget(1)
    endpoint.budget.take(1)  # another component's copy runs
    runtime = ComponentRuntime("ic", endpoint, NullComponentSink())  # type: ignore[arg-type]
    plan = {"Version": 1, "Copies": [{"CopyId": "ic-1", "InstanceId": "i-1"}]}
    with pytest.warns(MMETritonWarning, match="of its copies do not run"):
        runtime.apply(plan)
    assert runtime.copies == [] and runtime.planned == 1
