"""Capacity planning for multi-model endpoints: which instance type, how many instances.

- :class:`~mme_triton.capacity.profile.ModelProfile` — a model's memory, cold start and service time;
- :class:`~mme_triton.capacity.traffic.Traffic` — requests over time (Zipf, uniform, a recorded trace);
- :class:`~mme_triton.endpoint.instance_specs.InstanceType` and
  :data:`~mme_triton.endpoint.instance_specs.INSTANCE_TYPES` — what each instance type has and costs;
- :func:`~mme_triton.capacity.simulate.simulate` — one plan, simulated request by request;
- :func:`~mme_triton.capacity.plan.plan_capacity` → :class:`~mme_triton.capacity.plan.CapacityPlan` —
  every type × count compared against the targets;
- :func:`~mme_triton.capacity.validate.validate_plan` → :class:`~mme_triton.capacity.validate.Validation`
  — a plan's traffic replayed on an endpoint (the embedded stack's or AWS's), its metrics compared.

The model of an instance and its assumptions are in docs/capacity.md. numpy is imported when a traffic
is made or simulated, matplotlib only by ``CapacityPlan.plot()``.
"""

from __future__ import annotations

from mme_triton.capacity.plan import DEFAULT_INSTANCE_TYPES, CapacityPlan, PlanRow, plan_capacity
from mme_triton.capacity.profile import ModelProfile
from mme_triton.capacity.simulate import SimulationResult, simulate
from mme_triton.capacity.traffic import Traffic
from mme_triton.capacity.validate import Comparison, Validation, validate_plan
from mme_triton.endpoint.instance_specs import INSTANCE_TYPES, InstanceType

__all__ = [
    "DEFAULT_INSTANCE_TYPES",
    "INSTANCE_TYPES",
    "CapacityPlan",
    "Comparison",
    "InstanceType",
    "ModelProfile",
    "PlanRow",
    "SimulationResult",
    "Traffic",
    "Validation",
    "plan_capacity",
    "simulate",
    "validate_plan",
]
