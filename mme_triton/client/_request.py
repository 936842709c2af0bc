"""What one ``infer`` call sends: its fixed settings, and its inputs cut into rows for split requests."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mme_triton.client._split import take_rows
from mme_triton.client.codec import InferInput, InferRequestedOutput

__all__ = ["Inputs", "Outputs", "Request", "input_arrays", "input_rows"]

Inputs = Mapping[str, Any] | Sequence[InferInput]
Outputs = Sequence[str | InferRequestedOutput] | None


@dataclass(frozen=True, slots=True)
class Request:
    """What stays the same for every InvokeEndpoint call of one ``infer``."""

    target_model: str
    outputs: Outputs
    binary: bool
    binary_outputs: bool | Collection[str] | None
    copy: bool
    parameters: Mapping[str, Any] | None
    request_id: str | None
    custom_attributes: str | None
    inference_id: str | None


def input_arrays(inputs: Inputs) -> dict[str, np.ndarray[Any, Any]]:
    """``{name: array}`` of the inputs, to count and cut rows."""
    if isinstance(inputs, Mapping):
        return {str(name): np.asarray(value) for name, value in inputs.items()}
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for item in inputs:
        if not isinstance(item, InferInput):
            raise TypeError(f"inputs must be a mapping of name to array or InferInput objects, got {item!r}")
        arrays[item.name()] = item.data()
    return arrays


def input_rows(inputs: Inputs, start: int, stop: int) -> Inputs:
    """Rows ``start:stop`` of the inputs, in the form they were given (``InferInput`` keep their settings)."""
    if isinstance(inputs, Mapping):
        return take_rows(input_arrays(inputs), start, stop)
    rows: list[InferInput] = []
    for item in inputs:
        part = item.data()[start:stop]
        rows.append(
            InferInput(item.name(), list(part.shape), item.datatype()).set_data_from_numpy(
                part, binary_data=item.binary_data()
            )
        )
    return rows
