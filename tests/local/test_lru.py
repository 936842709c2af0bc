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
        ModelLRU(**kwargs)  # type: ignore[arg-type]


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
