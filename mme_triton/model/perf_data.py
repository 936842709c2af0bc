"""Load-test data: the ``--input-data`` JSON file perf_analyzer and model-analyzer read.

The format (perf_analyzer's docs/input_data.md) is ``{"data": [{<input>: {"content": [...], "shape":
[...]}}, ...]}``: one entry per request, each tensor flattened in row-major order. perf_analyzer reads
numbers for numeric tensors, JSON booleans for BOOL and strings for BYTES; FP16 and BF16 (which it
cannot read from JSON numbers) and BYTES elements that are not UTF-8 go as ``{"b64": ...}`` of the raw
little-endian bytes (BYTES: each element as a 4-byte length and its bytes).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["perf_analyzer_data"]

logger = logging.getLogger(__name__)

_B64_ONLY = frozenset({"FP16", "BF16"})


def perf_analyzer_data(
    samples: Any,
    path: str | os.PathLike[str],
    *,
    model_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Write ``samples`` as a perf_analyzer ``--input-data`` JSON file.

    Parameters:
        samples: one request's inputs, as ``MMEClient.infer`` takes them (``{name: array}`` or a
            sequence of ``InferInput``), or a sequence of such requests (played round-robin by
            perf_analyzer). Arrays are anything ``numpy.asarray`` accepts; ``str``/``bytes`` arrays are
            BYTES.
        path: the JSON file to write.
        model_dir: the model the data is for (optional). Its config then checks every request: each
            input present (optional ones may be left out), no unknown names, the datatype and dims
            right. With ``max_batch_size > 0`` the arrays carry the batch dimension (as sent to
            ``MMEClient.infer``) and every row becomes one entry, since perf_analyzer's data is per batch
            item and ``-b`` sets the batch size; without ``model_dir`` arrays are written as given.

    Returns:
        ``path``.

    Raises:
        ValueError: a sample does not fit the model's inputs, or requests list different inputs.
        TypeError: a value has no Triton datatype, or a BYTES element is neither bytes nor str (the
            client's rule: ``np.array([1, 2], dtype=object)`` is refused, not written as NUL bytes).

    Example::

        perf_analyzer_data({"INPUT0": np.ones((1, 4), np.float32)}, "data.json")  # PosixPath('data.json')
        # perf_analyzer -m linear.tar.gz --input-data data.json ...
    """
    import numpy as np

    requests = _requests(samples)
    inputs: Mapping[str, Any] | None = None
    batching = False
    if model_dir is not None:
        from mme_triton.model.authoring import read_config

        config = read_config(model_dir)
        inputs = {tensor.name: tensor for tensor in config.input}
        batching = config.max_batch_size > 0

    entries: list[dict[str, Any]] = []
    names: list[str] | None = None
    for index, request in enumerate(requests):
        arrays = {name: np.asarray(value) for name, value in request.items()}
        if names is None:
            names = sorted(arrays)
        elif sorted(arrays) != names:
            raise ValueError(
                f"request {index} has inputs {sorted(arrays)} but request 0 has {names}; every entry of "
                "the data lists the same inputs"
            )
        if inputs is not None:
            _check(index, arrays, inputs, batching)
        if batching:
            rows = {int(array.shape[0]) for array in arrays.values()}
            if len(rows) != 1:
                raise ValueError(f"request {index}: the inputs have different batch sizes {sorted(rows)}")
            for row in range(rows.pop()):
                entries.append({name: _tensor(name, array[row]) for name, array in arrays.items()})
        else:
            entries.append({name: _tensor(name, array) for name, array in arrays.items()})
    target = Path(path)
    target.write_text(json.dumps({"data": entries}, separators=(",", ":")), encoding="utf-8")
    logger.info("wrote %d perf_analyzer data entries to %s", len(entries), target)
    return target


def _requests(samples: Any) -> list[Mapping[str, Any]]:
    from mme_triton.client.codec import InferInput

    def one(request: Any) -> Mapping[str, Any]:
        if isinstance(request, Mapping):
            return {str(name): value for name, value in request.items()}
        if isinstance(request, Sequence) and request and all(isinstance(i, InferInput) for i in request):
            return {item.name(): item.data() for item in request}
        raise TypeError(
            "samples take {name: array}, a sequence of InferInput, or a sequence of either, got "
            f"{type(request).__name__}"
        )

    if isinstance(samples, Mapping):
        return [one(samples)]
    if isinstance(samples, Sequence) and not isinstance(samples, (str, bytes)):
        if not samples:
            raise ValueError("samples is empty: give at least one request")
        if all(isinstance(item, InferInput) for item in samples):
            return [one(samples)]
        return [one(item) for item in samples]
    raise TypeError(f"samples take {{name: array}} or a sequence of requests, got {type(samples).__name__}")


def _check(index: int, arrays: Mapping[str, Any], inputs: Mapping[str, Any], batching: bool) -> None:
    from mme_triton.client.datatypes import triton_datatype
    from mme_triton.model._datatypes import kserve_datatype
    from mme_triton.model.config import datatype_name

    unknown = sorted(set(arrays) - set(inputs))
    if unknown:
        raise ValueError(
            f"request {index} sends {', '.join(map(repr, unknown))}, which the model does not have as inputs "
            f"(it has {', '.join(map(repr, inputs))})"
        )
    for name, tensor in inputs.items():
        if name not in arrays:
            if tensor.optional:
                continue
            raise ValueError(f"request {index} lacks input {name!r}")
        array = arrays[name]
        wanted = kserve_datatype(datatype_name(tensor.data_type))
        got = triton_datatype(array.dtype)
        if got != wanted:
            raise ValueError(
                f"request {index}: input {name!r} is {wanted} but the array is {got} ({array.dtype})"
            )
        dims = [-1, *tensor.dims] if batching else list(tensor.dims)
        shape = list(array.shape)
        if len(shape) != len(dims) or any(d != -1 and d != s for d, s in zip(dims, shape, strict=True)):
            batch = " (the batch dimension first)" if batching else ""
            raise ValueError(
                f"request {index}: input {name!r} has shape {shape} but the model takes {dims}{batch}"
            )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _tensor(name: str, array: Any) -> dict[str, Any]:
    import numpy as np

    from mme_triton.client._tensors import bytes_elements, json_strings, serialize_bytes
    from mme_triton.client.datatypes import numpy_dtype, triton_datatype

    datatype = triton_datatype(array.dtype)
    shape = [int(d) for d in array.shape]
    flat = array.reshape(-1)
    content: Any
    if datatype == "BYTES":
        elements = bytes_elements(name, flat)
        strings = json_strings(elements)
        content = strings if strings is not None else {"b64": _b64(serialize_bytes(elements))}
    elif datatype in _B64_ONLY or (flat.dtype.kind == "f" and not bool(np.isfinite(flat).all())):
        # perf_analyzer reads no FP16/BF16 numbers, and JSON has no NaN or infinity
        content = {"b64": _b64(np.ascontiguousarray(flat, dtype=numpy_dtype(datatype)).tobytes())}
    elif datatype == "BOOL":
        content = [bool(item) for item in flat.tolist()]
    else:
        content = flat.tolist()
    return {"content": content, "shape": shape}
