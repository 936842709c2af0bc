"""What one ``infer`` call sends: its fixed settings, and its inputs cut into rows for split requests."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from mme_triton.client._split import take_rows
from mme_triton.client._tritonclient import is_tritonclient_input, tritonclient_array, tritonclient_binary
from mme_triton.client.codec import InferInput, InferRequestedOutput

__all__ = [
    "INFERENCE_COMPONENT_PARAM",
    "TARGET_MODEL_PARAM",
    "Inputs",
    "Outputs",
    "Request",
    "input_arrays",
    "input_rows",
]

# Sequences may hold tritonclient's own InferInput / InferRequestedOutput objects too (untyped: Any).
Inputs = Mapping[str, Any] | Sequence[InferInput]
Outputs = Sequence[str | InferRequestedOutput] | None

TARGET_MODEL_PARAM = "TargetModel"
"""The InvokeEndpoint parameter that names the model of a multi-model endpoint."""

INFERENCE_COMPONENT_PARAM = "InferenceComponentName"
"""The InvokeEndpoint parameter that names the inference component of an endpoint that hosts them."""


@dataclass(frozen=True, slots=True)
class Request:
    """What stays the same for every InvokeEndpoint call of one ``infer``.

    ``target`` is what the request goes to, named by the InvokeEndpoint parameter ``target_param``:
    ``TargetModel`` on a multi-model endpoint, ``InferenceComponentName`` on an endpoint of inference
    components. Both paths of the client send :meth:`params`, so a request addressed either way needs no
    other code to travel.
    """

    target: str
    outputs: Outputs
    binary: bool
    binary_outputs: bool | Collection[str] | None
    copy: bool
    parameters: Mapping[str, Any] | None
    request_id: str | None
    custom_attributes: str | None
    inference_id: str | None
    target_param: str = TARGET_MODEL_PARAM

    @property
    def target_model(self) -> str | None:
        """The TargetModel, when the request names one."""
        return self.target if self.target_param == TARGET_MODEL_PARAM else None

    @property
    def inference_component(self) -> str | None:
        """The inference component, when the request names one."""
        return self.target if self.target_param == INFERENCE_COMPONENT_PARAM else None

    def params(self, endpoint_name: str, body: Any, content_type: str) -> dict[str, Any]:
        """InvokeEndpoint's parameters for one body, as boto3's ``invoke_endpoint`` takes them."""
        params: dict[str, Any] = {
            "EndpointName": endpoint_name,
            self.target_param: self.target,
            "ContentType": content_type,
            "Body": body,
        }
        if self.custom_attributes is not None:
            params["CustomAttributes"] = self.custom_attributes
        if self.inference_id is not None:
            params["InferenceId"] = self.inference_id
        return params


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
