"""The LRU of loaded models: which models are unloaded, and when."""

from __future__ import annotations

import pytest

from mme_triton.local.route.lru import ModelLRU


@pytest.mark.parametrize(
    ("budget", "max_models", "steps", "expected_evictions", "expected_held"),
    [
        (100, None, [("add", "a", 40), ("add", "b", 40), ("add", "c", 40)], [[], [], ["a"]], ["b", "c"]),
        (
            100,
            None,
            [("add", "a", 40), ("add", "b", 40), ("touch", "a", 0), ("add", "c", 40)],
            [[], [], True, ["b"]],
            ["a", "c"],
        ),
        (100, None, [("add", "a", 30), ("add", "b", 30), ("add", "big", 90)], [[], [], ["a", "b"]], ["big"]),
        (10, None, [("add", "a", 5), ("add", "huge", 500)], [[], ["a"]], ["huge"]),
        (None, 2, [("add", "a", 10**12), ("add", "b", 1), ("add", "c", 1)], [[], [], ["a"]], ["b", "c"]),
        (100, 2, [("add", "a", 1), ("add", "b", 1), ("add", "c", 1)], [[], [], ["a"]], ["b", "c"]),
        (None, None, [("add", "a", 10**12), ("add", "b", 10**12)], [[], []], ["a", "b"]),
        (100, None, [("touch", "missing", 0)], [False], []),
    ],
    ids=[
        "over-budget-evicts-oldest",
        "touch-protects-recently-used",
        "evicts-several-to-make-room",
        "single-model-over-budget-stays",
        "count-limit",
        "both-limits",
        "no-limits",
        "touch-unknown",
    ],
)
def test_model_lru_evicts_least_recently_used(
    budget: int | None,
    max_models: int | None,
    steps: list[tuple[str, str, int]],
    expected_evictions: list[object],
    expected_held: list[str],
) -> None:
    lru = ModelLRU(budget_bytes=budget, max_models=max_models)

    results: list[object] = []
    for action, name, size in steps:
        results.append(lru.add(name, size) if action == "add" else lru.touch(name))

    assert results == expected_evictions
    assert lru.names() == expected_held


def test_model_lru_readding_a_model_updates_its_size() -> None:
    lru = ModelLRU(budget_bytes=100)
    lru.add("a", 10)
    lru.add("b", 10)

    assert lru.add("a", 95) == ["b"]
    assert lru.total_bytes == 95


def test_model_lru_clear_keeps_the_named_model() -> None:
    lru = ModelLRU(budget_bytes=None)
    for name in ("a", "b", "c"):
        lru.add(name, 1)

    assert lru.clear(keep="b") == ["a", "c"]
    assert lru.names() == ["b"]
    assert lru.remove("b") and not lru.remove("b")


@pytest.mark.parametrize(
    "kwargs",
    [{"budget_bytes": 0}, {"budget_bytes": -1}, {"max_models": 0}],
    ids=["zero-budget", "negative-budget", "zero-models"],
)
def test_model_lru_rejects_impossible_limits(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        ModelLRU(**kwargs)


def test_lru_add_keeps_models_in_use_and_evicts_the_oldest_free_one() -> None:
    lru = ModelLRU(budget_bytes=None, max_models=2)
    lru.add("a", 1)
    lru.add("b", 1)

    evicted = lru.add("c", 1, keep=lambda name: name == "a")

    assert evicted == ["b"]
    assert lru.names() == ["a", "c"]


def test_lru_add_goes_over_the_budget_rather_than_evict_a_model_in_use() -> None:
    lru = ModelLRU(budget_bytes=None, max_models=1)
    lru.add("a", 1)

    assert lru.add("b", 1, keep=lambda name: True) == []
    assert lru.names() == ["a", "b"]
    assert lru.add("c", 1) == ["a", "b"]  # kept again once nothing holds them


def test_lru_resize_changes_a_size_without_marking_it_used() -> None:
    lru = ModelLRU(budget_bytes=10)
    lru.add("a", 1)
    lru.add("b", 1)

    assert lru.resize("a", 6) and not lru.resize("zz", 1)
    assert lru.names() == ["a", "b"] and lru.total_bytes == 7
    assert lru.add("c", 4) == ["a"]


@pytest.mark.parametrize(
    ("budget", "max_models", "held", "in_use", "size", "pending", "expected"),
    [
        (100, None, [("a", 40), ("b", 40)], set(), 10, (0, 0), []),
        (100, None, [("a", 40), ("b", 40)], set(), 50, (0, 0), ["a"]),
        (100, None, [("a", 40), ("b", 40)], {"a"}, 50, (0, 0), ["b"]),
        (100, None, [("a", 40), ("b", 40)], {"a", "b"}, 50, (0, 0), None),
        (100, None, [("a", 40)], set(), 30, (40, 1), ["a"]),
        (None, 2, [("a", 1), ("b", 1)], set(), 1, (0, 0), ["a"]),
        (None, 2, [("a", 1)], set(), 1, (0, 1), ["a"]),
        (None, 2, [], set(), 1, (0, 2), None),
        (100, None, [("a", 40), ("b", 40)], {"b"}, 150, (0, 0), ["a"]),
        (100, None, [], set(), 150, (0, 0), []),
        (100, None, [], set(), 150, (0, 1), None),
    ],
    ids=[
        "fits",
        "oldest-unused-goes",
        "in-use-stays",
        "all-in-use-wait",
        "pending-loads-count",
        "count-limit",
        "pending-count",
        "only-pending-wait",
        "too-big-unused-go-first",
        "too-big-alone",
        "too-big-waits-for-pending",
    ],
)
def test_model_lru_room_for_names_what_to_unload_before_a_load(
    budget: int | None,
    max_models: int | None,
    held: list[tuple[str, int]],
    in_use: set[str],
    size: int,
    pending: tuple[int, int],
    expected: list[str] | None,
) -> None:
    lru = ModelLRU(budget_bytes=budget, max_models=max_models)
    for name, bytes_held in held:
        lru.add(name, bytes_held)

    victims = lru.room_for(
        size, keep=lambda name: name in in_use, pending_bytes=pending[0], pending_count=pending[1]
    )

    assert victims == expected
    assert lru.names() == [name for name, _ in held]  # nothing is removed: the caller unloads


def test_model_lru_excess_names_unused_models_once_a_model_measured_more() -> None:
    lru = ModelLRU(budget_bytes=100)
    for name in ("a", "b", "c"):
        lru.add(name, 30)
    lru.resize("c", 70)  # measured after its load

    assert lru.excess(keep=lambda name: name == "a") == ["b"]
    assert lru.excess(keep=lambda name: True) == []
