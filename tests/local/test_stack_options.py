"""LocalStack's options and its use outside ``start()``/``stop()``."""

from __future__ import annotations

from typing import Any

import pytest

from mme_triton.local import LocalStack


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_budget": 0}, "memory_budget must be > 0"),
        ({"memory_budget": -5}, "memory_budget must be > 0"),
        ({"max_models": 0}, "max_models must be > 0"),
        ({"transition_delay": -1.0}, "transition_delay must be >= 0"),
        ({"model_ready_timeout": 0.0}, "model_ready_timeout must be > 0"),
    ],
    ids=["zero-budget", "negative-budget", "zero-models", "negative-delay", "zero-ready-timeout"],
)
def test_local_stack_refuses_impossible_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalStack(**kwargs)


@pytest.mark.parametrize(
    "use",
    [
        lambda s: s.endpoint_url,
        lambda s: s.role_arn,
        lambda s: s.boto3_session(),
        lambda s: s.model_data_url(),
        lambda s: s.environment(),
    ],
    ids=["endpoint_url", "role_arn", "boto3_session", "model_data_url", "environment"],
)
def test_local_stack_needs_to_be_started(use: Any) -> None:
    stack = LocalStack()

    with pytest.raises(RuntimeError, match="not running"):
        use(stack)


@pytest.mark.triton
@pytest.mark.moto
def test_local_stack_stop_is_idempotent_and_start_returns_the_stack() -> None:
    stack = LocalStack()
    stack.stop()  # never started: nothing to do

    assert stack.start() is stack and stack.running
    assert stack.start() is stack  # already running
    role = stack.role_arn
    assert role.startswith(f"arn:aws:iam::{stack.account_id}:role/")
    stack.stop()
    stack.stop()

    assert not stack.running


def test_stack_start_without_the_triton_wheel_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from mme_triton.errors import LocalStackError

    # as if nvidia-pytriton were not installed: the import system answers "no such module"
    monkeypatch.setitem(sys.modules, "pytriton", None)
    stack = LocalStack()
    with pytest.raises(LocalStackError, match=r"pip install 'mme-triton\[local\]'"):
        stack.start()
    assert not stack.running
