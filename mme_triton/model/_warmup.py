"""Warm-up samples for ``model_warmup``: generated or given, checked against every input's name,
datatype and dims, and written as raw files under the model's ``warmup/`` directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mme_triton.model._options_table import require_int
from mme_triton.model._pb import ModelConfig
from mme_triton.model.options import ModelWarmup

__all__ = ["apply_warmup"]


# --------------------------------------------------------------------------------------------------
# model warm-up


def apply_warmup(config: ModelConfig, value: Any) -> dict[str, bytes]:
    """Replace ``model_warmup`` from ``value``; returns the sample files to write under ``warmup/``."""
    del config.model_warmup[:]
    if value is None or value is False:
        return {}
    if isinstance(value, str):
        settings = ModelWarmup(data=value)  # type: ignore[arg-type]
    elif isinstance(value, ModelWarmup):
        settings = value
    elif isinstance(value, Mapping):
        settings = ModelWarmup(data=value)
    else:
        raise TypeError(
            f"model_warmup must be 'zero', 'random', a ModelWarmup or sample arrays, got {value!r}"
        )
    require_int(settings.batch_size, "model_warmup batch_size", minimum=1)
    require_int(settings.count, "model_warmup count", minimum=1)
    if not settings.name or "/" in settings.name or settings.name.startswith("."):
        raise ValueError(f"model_warmup name {settings.name!r} must be a plain file-name-safe word")
    inputs = {tensor.name: tensor for tensor in config.input}
    if not inputs:
        raise ValueError("model_warmup needs the config to list the model's inputs")
    unknown = sorted(set(settings.dims) - set(inputs))
    if unknown:
        raise ValueError(f"model_warmup dims name(s) {', '.join(map(repr, unknown))}, which are not inputs")

    warmup = config.model_warmup.add()
    warmup.name = settings.name
    warmup.batch_size = settings.batch_size
    warmup.count = settings.count
    files: dict[str, bytes] = {}
    samples: Mapping[str, Any] | None = None
    if isinstance(settings.data, str):
        if settings.data not in ("zero", "random"):
            raise ValueError(
                f"model_warmup data must be 'zero', 'random' or sample arrays, got {settings.data!r}"
            )
    else:
        samples = settings.data
        extra = sorted(set(samples) - set(inputs))
        if extra:
            raise ValueError(
                f"model_warmup samples name {', '.join(map(repr, extra))}, which the model does not have as "
                f"inputs (it has {', '.join(map(repr, inputs))})"
            )
    batching = config.max_batch_size > 0
    for name, tensor in inputs.items():
        entry = warmup.inputs[name]
        entry.data_type = tensor.data_type
        configured = list(tensor.dims)
        if samples is None:
            entry.dims.extend(_warmup_dims(name, configured, settings.dims.get(name)))
            if settings.data == "zero":
                entry.zero_data = True
            else:
                entry.random_data = True
            continue
        if name not in samples:
            if tensor.optional:
                del warmup.inputs[name]
                continue
            raise ValueError(f"model_warmup samples lack input {name!r}; give one array for every input")
        dims, payload = _warmup_sample(name, samples[name], tensor.data_type, configured, batching)
        entry.dims.extend(dims)
        filename = f"{settings.name}.{name}"
        entry.input_data_file = filename
        files[filename] = payload
    return files


def _warmup_dims(name: str, configured: list[int], given: Sequence[int] | None) -> list[int]:
    if given is None:
        return [1 if dim == -1 else dim for dim in configured]
    dims = [int(d) for d in given]
    if len(dims) != len(configured) or any(
        d < 1 or (c != -1 and c != d) for c, d in zip(configured, dims, strict=True)
    ):
        raise ValueError(
            f"model_warmup dims {dims} for input {name!r} do not fit its dims {configured} (give every dim, "
            "without the batch dim, as a size >= 1; fixed dims as they are)"
        )
    return dims


def _warmup_sample(
    name: str, sample: Any, data_type: int, configured: list[int], batching: bool
) -> tuple[list[int], bytes]:
    import numpy as np

    from mme_triton.client.datatypes import triton_datatype
    from mme_triton.model._datatypes import kserve_datatype
    from mme_triton.model.config import datatype_name

    array = np.asarray(sample)
    wanted = kserve_datatype(datatype_name(data_type))
    try:
        got = triton_datatype(array.dtype)
    except TypeError as exc:
        raise ValueError(f"model_warmup sample for input {name!r}: {exc}") from None
    if got != wanted:
        raise ValueError(
            f"model_warmup sample for input {name!r} is {got} (numpy {array.dtype}) but the input is {wanted}"
        )
    shape = list(array.shape)
    if batching and len(shape) == len(configured) + 1 and shape[0] == 1:
        shape = shape[1:]  # one batch item given with its batch dim
        array = array.reshape(shape)
    if len(shape) != len(configured) or any(
        c != -1 and c != s for c, s in zip(configured, shape, strict=True)
    ):
        batch = " (one batch item, without the batch dim)" if batching else ""
        raise ValueError(
            f"model_warmup sample for input {name!r} has shape {list(np.shape(sample))} but the input's dims "
            f"are {configured}{batch}"
        )
    if any(s == 0 for s in shape):
        raise ValueError(f"model_warmup sample for input {name!r} is empty (shape {shape})")
    return shape, _raw_bytes(name, array, wanted)


def _raw_bytes(name: str, array: Any, datatype: str) -> bytes:
    """Row-major little-endian bytes; BYTES elements as 4-byte length + bytes (warm-up file format)."""
    import numpy as np

    from mme_triton.client._tensors import bytes_elements, serialize_bytes
    from mme_triton.client.datatypes import numpy_dtype

    if datatype == "BYTES":
        try:
            return serialize_bytes(bytes_elements(name, array))
        except TypeError as exc:
            raise ValueError(f"model_warmup sample for input {name!r}: {exc}") from None
    return bytes(np.ascontiguousarray(array, dtype=numpy_dtype(datatype)).tobytes())
