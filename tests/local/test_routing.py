"""How an endpoint's variant on the stack routes requests among its instances, and changes their number.

The instances here are stand-ins that report what routing reads of a real one (:meth:`holding`,
:meth:`room`) and count the requests they get: the rules themselves (``mme_triton._multimodel``) are the
capacity simulator's too. The real instances are exercised in ``test_stack_instances.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mme_triton._multimodel import SPILL_WAIT_S
from mme_triton.errors import LocalStackError
from mme_triton.local.route._instance_view import Room
from mme_triton.local.route.endpoint_runtime import EndpointRuntime
from mme_triton.local.route.instance import EndpointModels, Entry, InstanceRetiredError
from mme_triton.local.route.responses import RuntimeResponse, success

_UNLIMITED = 1 << 30


class _Instance:
    """What routing reads of an instance, set by the test; the requests it was given."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        self.wait: float | None = None  # loaded, with this wait
        self.asked: float | None = None  # loading since
        self.free = (_UNLIMITED, 10_000)
        self.idle_since: float | None = None
        self.available = True
        self.retired = False
        self.closed: float | None = None
        self.requests: list[str] = []

    def holding(self, target_model: str) -> tuple[bool, float] | None:
        if self.retired:
            return None
        if self.wait is not None:
            return False, self.wait
        return (True, self.asked) if self.asked is not None else None

    def room(self, need: int) -> Room:
        fits = self.free[0] >= 1 and self.free[1] >= need
        return Room(self.free, fits, self.idle_since, self.available)

    def cold_start_s(self, target_model: str) -> float | None:
        return 2.0

    def known_memory(self, target_model: str) -> int | None:
        return 100

    def typical_memory(self) -> list[int]:
        return [100]

    def enter(self, target_model: str, call: dict[str, float]) -> Entry:
        if self.retired:
            raise InstanceRetiredError(self.instance_id)
        self.requests.append(target_model)
        return Entry("hash", None)  # type: ignore[arg-type]

    def invoke(
        self, target_model: str, body: bytes, content_type: str, call: dict[str, float], entry: Entry
    ) -> RuntimeResponse:
        return success(b"{}", "application/json", "AllTraffic")

    def observe(self, target_model: str, seconds: float) -> None:
        pass

    def fast_path(self, target_model: str) -> None:
        return None  # every request takes invoke()

    def retire(self) -> None:
        self.retired = True

    def close(self, *, drain_timeout: float = 0.0) -> None:
        self.closed = drain_timeout


def _variant(tmp_path: Path, count: int, **models: Any) -> tuple[EndpointRuntime, list[_Instance]]:
    made: list[_Instance] = []

    def new_instance(instance_id: str) -> Any:
        made.append(_Instance(instance_id))
        return made[-1]

    runtime = EndpointRuntime(
        EndpointModels("routed", "s3://bucket/models/", instance_count=count, **models),
        new_instance=new_instance,
        workdir=tmp_path,
        seed=0,
    )
    return runtime.start(), made


def _send(runtime: EndpointRuntime, target_model: str = "m.tar.gz") -> None:
    assert runtime.invoke(target_model, b"{}", "application/json").status == 200


def test_routing_sends_a_request_to_the_holder_where_it_waits_least(tmp_path: Path) -> None:
    runtime, (first, second, third) = _variant(tmp_path, 3)
    first.wait, second.wait = 0.4, 0.1  # both have it loaded; the third has not

    _send(runtime)

    assert (first.requests, second.requests, third.requests) == ([], ["m.tar.gz"], [])


def test_routing_keeps_a_model_where_it_loads_while_the_wait_is_under_its_cold_start(tmp_path: Path) -> None:
    runtime, (first, second) = _variant(tmp_path, 2)
    first.asked = time.monotonic()  # loading there: its 2 s cold start is not over

    _send(runtime)

    assert (first.requests, second.requests) == (["m.tar.gz"], [])


def test_routing_spills_a_swamped_model_to_the_instance_with_most_room(tmp_path: Path) -> None:
    """The wait where the model is loaded is over its cold start (2 s) and 1 s: the request goes to the
    instance with the most free memory among those that do not hold it."""
    runtime, (busy, small, roomy) = _variant(tmp_path, 3)
    busy.wait = 2.5
    small.free, roomy.free = (_UNLIMITED, 500), (_UNLIMITED, 900)

    _send(runtime)

    assert (busy.requests, small.requests, roomy.requests) == ([], [], ["m.tar.gz"])


def test_routing_does_not_spill_when_every_instance_holds_the_model(tmp_path: Path) -> None:
    runtime, (first, second) = _variant(tmp_path, 2)
    first.wait, second.wait = 9.0, 8.0

    _send(runtime)

    assert (first.requests, second.requests) == ([], ["m.tar.gz"])


@pytest.mark.parametrize(
    ("free", "chosen"),
    [
        ([(2, 100), (1, 900), (1, 950)], 0),  # a model-count limit: free slots first
        ([(_UNLIMITED, 300), (_UNLIMITED, 900), (_UNLIMITED, 500)], 1),  # else free bytes
        ([(0, 900), (1, 50), (1, 200)], 2),  # where it fits: a slot and its 100 bytes
    ],
    ids=["slots-first", "bytes", "only-where-it-fits"],
)
def test_routing_places_a_model_no_instance_holds_on_the_most_free_memory(
    tmp_path: Path, free: list[tuple[int, int]], chosen: int
) -> None:
    runtime, instances = _variant(tmp_path, 3)
    for instance, room in zip(instances, free, strict=True):
        instance.free = room

    _send(runtime)

    assert [bool(i.requests) for i in instances] == [k == chosen for k in range(3)]


def test_routing_places_where_the_least_recently_used_unused_model_is_oldest_when_nothing_fits(
    tmp_path: Path,
) -> None:
    runtime, instances = _variant(tmp_path, 3)
    for instance, since in zip(instances, [50.0, 20.0, None], strict=True):
        instance.free, instance.idle_since = (0, 0), since

    _send(runtime)

    assert [bool(i.requests) for i in instances] == [False, True, False]


def test_routing_places_on_an_instance_that_is_not_restarting(tmp_path: Path) -> None:
    runtime, (restarting, running) = _variant(tmp_path, 2)
    restarting.available, restarting.free = False, (_UNLIMITED, 99_999)

    _send(runtime)

    assert (restarting.requests, running.requests) == ([], ["m.tar.gz"])


def test_routing_spill_threshold_is_the_cold_start_or_one_second() -> None:
    """The documented rule: spill once the wait is over the cold start and over 1 s."""
    from mme_triton._multimodel import spills

    assert SPILL_WAIT_S == 1.0
    assert not spills(1.0, 0.1) and spills(1.01, 0.1)
    assert not spills(2.0, 2.5) and spills(2.6, 2.5)


def test_scaling_starts_new_instances_and_retires_the_newest_once_drained(tmp_path: Path) -> None:
    runtime, made = _variant(tmp_path, 2)

    runtime.scale_to(3)
    assert [i.instance_id for i in runtime.instances] == ["i-1", "i-2", "i-3"]
    runtime.scale_to(1)

    assert [i.instance_id for i in runtime.instances] == ["i-1"]
    assert [i.retired for i in made] == [False, True, True]
    deadline = time.monotonic() + 10
    while any(i.closed is None for i in made[1:]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert made[1].closed == made[2].closed and made[2].closed is not None and made[2].closed > 60
    _send(runtime)
    assert made[0].requests == ["m.tar.gz"]
    runtime.scale_to(2)  # a new instance gets a new name
    assert [i.instance_id for i in runtime.instances] == ["i-1", "i-4"]
    with pytest.raises(LocalStackError, match="serve nothing"):
        runtime.scale_to(0)


def test_scaling_fails_as_a_whole_when_a_new_instance_does_not_start(tmp_path: Path) -> None:
    started: list[_Instance] = []

    def new_instance(instance_id: str) -> Any:
        if instance_id == "i-3":
            raise LocalStackError("tritonserver did not start")
        started.append(_Instance(instance_id))
        return started[-1]

    runtime = EndpointRuntime(
        EndpointModels("routed", "s3://bucket/models/"), new_instance=new_instance, workdir=tmp_path
    ).start(1)
    with pytest.raises(LocalStackError, match="did not start"):
        runtime.scale_to(3)

    assert [i.instance_id for i in runtime.instances] == ["i-1"]
    assert [i.closed for i in started] == [None, 0.0]  # i-2 started, then stopped with the failure


def test_a_variant_runs_at_most_max_instances_with_a_warning(tmp_path: Path) -> None:
    """Each instance is a Triton on this machine: an instance count over the stack's bound is served by
    that many instances, and says so."""
    from mme_triton.errors import MMETritonWarning

    made: list[_Instance] = []

    def new_instance(instance_id: str) -> Any:
        made.append(_Instance(instance_id))
        return made[-1]

    runtime = EndpointRuntime(
        EndpointModels("crowded", "s3://bucket/models/", instance_count=40),
        new_instance=new_instance,
        workdir=tmp_path,
        max_instances=3,
    )
    with pytest.warns(MMETritonWarning, match="asks for 40 instances; the stack runs at most 3"):
        runtime.start()
    assert len(runtime.instances) == 3
    runtime.scale_to(2)
    with pytest.warns(MMETritonWarning, match="asks for 9 instances"):
        runtime.scale_to(9)

    assert len(runtime.instances) == 3 and len(made) == 4


def test_a_request_that_chose_a_leaving_instance_is_routed_again(tmp_path: Path) -> None:
    runtime, (first, second) = _variant(tmp_path, 2)
    first.wait = 0.0
    first.retired = True  # it left between the choice and the count

    _send(runtime)

    assert second.requests == ["m.tar.gz"]


def test_a_replaced_variant_hands_its_requests_to_the_new_one(tmp_path: Path) -> None:
    old, old_instances = _variant(tmp_path / "old", 1)
    new, new_instances = _variant(tmp_path / "new", 2)

    old.retire(new)
    _send(old)

    assert old.instances == [] and old_instances[0].retired
    assert sum(len(i.requests) for i in new_instances) == 1
    assert old.fast_path("m.tar.gz") is None  # asked of the new variant, whose stand-ins have none


def test_concurrent_first_requests_for_a_model_share_one_instance(tmp_path: Path) -> None:
    """Routing and counting a request on its instance are one step: requests that arrive together for a
    model no instance holds are not spread over several instances (each would load it)."""
    runtime, instances = _variant(tmp_path, 3)

    def enter(instance: _Instance, original: Any) -> Any:
        def counted(target_model: str, call: dict[str, float]) -> Entry:
            entry = original(target_model, call)
            instance.asked = time.monotonic()  # now it loads there
            return entry

        return counted

    for instance in instances:
        instance.enter = enter(instance, instance.enter)  # type: ignore[method-assign]
    callers = [threading.Thread(target=_send, args=(runtime,)) for _ in range(12)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()

    assert sorted(len(i.requests) for i in instances) == [0, 0, 12]
