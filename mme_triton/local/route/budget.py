"""How much memory an endpoint's loaded models may hold on the embedded stack.

SageMaker unloads models "when an instance's memory utilization is high and SageMaker needs to load another
model into memory" (the multi-model endpoint guide, "How multi-model endpoints work"): what models may hold
is the instance's memory less what the rest of the instance keeps (the OS, SageMaker's agents, the
container's own processes). The stack derives it the same way from the production variant's
``InstanceType`` (:func:`~mme_triton.endpoint.instance_memory.instance_memory_bytes`), less
:data:`DEFAULT_RESERVED_MEMORY`; AWS publishes no figure for that part, so it is the stack's assumption and
can be set (``reserved_memory=``). An instance is usually larger than the machine the stack runs on, so the
budget derived from it is capped at half of this machine's memory, with a log line saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mme_triton.endpoint.instance_memory import instance_memory_bytes
from mme_triton.local.route.limits import GiB, human_size

__all__ = [
    "DEFAULT_RESERVED_MEMORY",
    "FROM_INSTANCE",
    "UNKNOWN_INSTANCE_BUDGET",
    "BudgetSetting",
    "EndpointBudget",
    "endpoint_budget",
    "machine_memory_limit",
]

FROM_INSTANCE: Literal["instance"] = "instance"
"""``memory_budget="instance"``: the instance type's memory less :data:`DEFAULT_RESERVED_MEMORY`."""

DEFAULT_RESERVED_MEMORY = 1 * GiB
"""What the instance keeps for itself (OS, SageMaker's agents, ``tritonserver``), not for models: the
stack's assumption (AWS publishes no figure); ``tritonserver`` itself holds about 40 MB here."""

UNKNOWN_INSTANCE_BUDGET = 2 * GiB
"""The budget of an endpoint whose instance type the stack's table does not know."""

BudgetSetting = int | None | Literal["instance"]
"""Bytes, ``None`` (no byte limit) or ``"instance"``."""


@dataclass(frozen=True)
class EndpointBudget:
    """An endpoint's memory budget and where it comes from."""

    bytes: int | None
    """What the endpoint's loaded models may hold; ``None``: no byte limit."""
    source: str
    """Where the figure comes from, in words (for logs and docs)."""


def machine_memory_limit() -> int | None:
    """Half of this machine's memory (``MemTotal``), the most an endpoint's budget derived from its
    instance type may be; ``None`` when ``/proc/meminfo`` cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return None


def endpoint_budget(
    setting: BudgetSetting,
    instance_type: str | None,
    *,
    reserved_memory: int = DEFAULT_RESERVED_MEMORY,
    machine_limit: int | None = None,
) -> EndpointBudget:
    """The memory budget of an endpoint on ``instance_type`` for the stack's ``memory_budget`` setting.

    ``"instance"``: the instance's memory less ``reserved_memory`` (at least a quarter of the instance's
    memory), at most ``machine_limit``.

    Example:
        >>> endpoint_budget("instance", "ml.m5.xlarge", machine_limit=None).bytes == 15 * 1024**3
        True
        >>> endpoint_budget("instance", "ml.m5.xlarge", machine_limit=4 * 1024**3).bytes == 4 * 1024**3
        True
        >>> endpoint_budget(512 * 1024**2, "ml.m5.xlarge").source
        "the stack's memory_budget (512.0 MiB)"
    """
    if setting is None:
        return EndpointBudget(None, "no byte limit (memory_budget=None)")
    if setting != FROM_INSTANCE:
        if isinstance(setting, bool) or not isinstance(setting, int) or setting <= 0:
            raise ValueError(f"memory_budget must be bytes > 0, None or 'instance', got {setting!r}")
        return EndpointBudget(setting, f"the stack's memory_budget ({human_size(setting)})")
    memory = instance_memory_bytes(instance_type or "")
    if memory is None:
        return EndpointBudget(
            UNKNOWN_INSTANCE_BUDGET,
            f"{human_size(UNKNOWN_INSTANCE_BUDGET)}: the stack does not know the memory of instance type "
            f"{instance_type!r}",
        )
    budget = max(memory - reserved_memory, memory // 4)
    source = (
        f"{instance_type}'s {human_size(memory)} less the {human_size(memory - budget)} the instance keeps"
    )
    if machine_limit is not None and budget > machine_limit:
        return EndpointBudget(
            machine_limit,
            f"{human_size(machine_limit)}, half of this machine's memory ({source}: {human_size(budget)})",
        )
    return EndpointBudget(budget, source)
