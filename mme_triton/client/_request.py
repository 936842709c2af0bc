"""What one ``infer`` call sends: its fixed settings, and its inputs cut into rows for split requests."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from mme_triton.client._split import take_rows
from mme_triton.client._tritonclient import is_tritonclient_input, tritonclient_array, tritonclient_binary
from mme_triton.client.codec import InferInput, InferRequestedOutput

__all__ = ["Inputs", "Outputs", "Request", "input_arrays", "input_rows"]

# Sequences may hold tritonclient's own InferInput / InferRequestedOutput objects too (untyped: Any).
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
    for item in cast("Sequence[object]", inputs):
        if isinstance(item, InferInput):
            arrays[item.name()] = item.data()
        elif is_tritonclient_input(item):
            arrays[str(item.name())] = tritonclient_array(item)
        else:
            raise TypeError(f"inputs must be a mapping of name to array or InferInput objects, got {item!r}")
    return arrays


def input_rows(inputs: Inputs, start: int, stop: int) -> Inputs:
    """Rows ``start:stop`` of the inputs, in the form they were given (``InferInput`` keep their settings;
    tritonclient's become ours, with the same datatype and ``binary_data``)."""
    if isinstance(inputs, Mapping):
        return take_rows(input_arrays(inputs), start, stop)
    rows: list[InferInput] = []
    for item in cast("Sequence[object]", inputs):
        if isinstance(item, InferInput):
            data, binary = item.data(), item.binary_data()
        elif is_tritonclient_input(item):
            data, binary = tritonclient_array(item), tritonclient_binary(item)
        else:
            raise TypeError(f"inputs must be a mapping of name to array or InferInput objects, got {item!r}")
        part = data[start:stop]
        rows.append(
            InferInput(str(item.name()), list(part.shape), str(item.datatype())).set_data_from_numpy(
                part, binary_data=binary
            )
        )
    return rows
