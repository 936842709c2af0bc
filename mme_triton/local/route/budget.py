"""How much memory an endpoint's loaded models may hold on the embedded stack.

SageMaker unloads models "when an instance's memory utilization is high and SageMaker needs to load another
model into memory" (the multi-model endpoint guide, "How multi-model endpoints work"): what models may hold
is the instance's memory less what the instance keeps for itself. The stack takes that figure for the
production variant's ``InstanceType`` from the one table of instance types,
:attr:`~mme_triton.endpoint.instance_specs.InstanceType.memory_budget_bytes` (GPU memory on a GPU type,
host memory on a CPU type, less the reasoned reserve documented there); ``reserved_memory=`` replaces that
reserve. An instance is usually larger than the machine the stack runs on, so the budget derived from it is
capped at half of this machine's memory, with a log line saying so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from mme_triton.endpoint.instance_specs import INSTANCE_TYPES
from mme_triton.local.route.limits import GiB, human_size

__all__ = [
    "FROM_INSTANCE",
    "UNKNOWN_INSTANCE_BUDGET",
    "BudgetSetting",
    "EndpointBudget",
    "endpoint_budget",
    "machine_memory_limit",
]

FROM_INSTANCE: Literal["instance"] = "instance"
"""``memory_budget="instance"``: the instance type's memory for models
(:attr:`~mme_triton.endpoint.instance_specs.InstanceType.memory_budget_bytes`)."""

UNKNOWN_INSTANCE_BUDGET = 2 * GiB
"""The budget of an endpoint whose instance type the table of instance types does not know."""

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
    reserved_memory: int | None = None,
    machine_limit: int | None = None,
) -> EndpointBudget:
    """The memory budget of an endpoint on ``instance_type`` for the stack's ``memory_budget`` setting.

    ``"instance"``: the instance type's memory for models (its reserve replaced by ``reserved_memory``
    when given, leaving at least a quarter of the memory), at most ``machine_limit``.

    Example:
        >>> endpoint_budget("instance", "ml.m5.xlarge").bytes // 1024**2  # 16 GiB less 1 GiB and 1/64
        15104
        >>> endpoint_budget("instance", "ml.m5.xlarge", reserved_memory=1024**3).bytes == 15 * 1024**3
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
            raise ValueError(f"memory_budget must be > 0 bytes, None or 'instance', got {setting!r}")
        return EndpointBudget(setting, f"the stack's memory_budget ({human_size(setting)})")
    spec = INSTANCE_TYPES.get(instance_type or "")
    if spec is None:
        return EndpointBudget(
            UNKNOWN_INSTANCE_BUDGET,
            f"{human_size(UNKNOWN_INSTANCE_BUDGET)}: the stack does not know the memory of instance type "
            f"{instance_type!r}",
        )
    memory = spec.model_memory_bytes
    if reserved_memory is not None:  # a reserve the stack's caller chose; a quarter of the memory stays
        spec = replace(spec, reserved_bytes=min(reserved_memory, memory - memory // 4))
    budget = spec.memory_budget_bytes
    source = (
        f"{spec.name}'s {human_size(memory)} of {spec.memory_kind} memory less the "
        f"{human_size(spec.reserved)} the instance keeps"
    )
    if machine_limit is not None and budget > machine_limit:
        return EndpointBudget(
            machine_limit,
            f"{human_size(machine_limit)}, half of this machine's memory ({source}: {human_size(budget)})",
        )
    return EndpointBudget(budget, source)
