"""What a profile sends: request bodies encoded once, from arrays, a perf_analyzer data file or random data.

Three sources, one result (:class:`Request` objects, played round-robin by the load generator):

- arrays: ``{input name: array}`` or a list of such requests, sent exactly as given (shapes are never
  changed: arrays for a batching model carry the batch dimension);
- a perf_analyzer ``--input-data`` JSON file (:func:`~mme_triton.model.perf_analyzer_data` writes them):
  its entries are per batch item for a model with ``max_batch_size > 0`` (``batch_size`` consecutive
  entries make one request), whole requests otherwise; ``content``/``shape`` objects, flat lists and
  ``b64`` contents are read as perf_analyzer reads them;
- nothing: random data that matches each candidate's config, ``batch_size`` rows for a batching model,
  variable (-1) dims from ``shapes`` or 1; floats in [0, 1), integers in [0, 100), booleans, and BYTES
  elements of 16 random letters. A text encoder's integer inputs take values it accepts
  (:func:`~mme_triton.model._token_inputs.token_value_ranges`): ``attention_mask`` all ones,
  ``token_type_ids`` below the ``type_vocab_size`` its ONNX export recorded (0 when none is recorded),
  ``input_ids`` below the recorded ``vocab_size``.

Random data and data files follow each candidate's own config, so a grid over ``max_batch_size`` is fed
right; arrays are the caller's and are sent as they are. A model with ``max_batch_size: 0`` takes one row
per request whatever ``batch_size`` says: each :class:`Request` carries the rows it really asks for, and a
profile's throughput counts those.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MAX_DATA_FILE_BYTES", "Request", "build_requests", "input_arrays", "rows_of"]

MAX_DATA_FILE_BYTES = 256 * 1024 * 1024
"""A perf_analyzer data file larger than this (256 MiB) is refused rather than read into memory."""

_JSON_HEADER_SIZE = re.compile(r"json-header-size=(\d+)")


@dataclass(frozen=True)
class Request:
    """One request body, encoded once in Triton's binary-tensor format (the SageMaker content type)."""

    body: bytes
    content_type: str
    """``application/vnd.sagemaker-triton.binary+json;json-header-size=N``, as InvokeEndpoint takes it."""
    arrays: Mapping[str, Any]
    """The inputs it carries."""
    rows: int = 1
    """Inferences it asks for: the leading (batch) dimension of a batching model's inputs, 1 for a model
    with ``max_batch_size: 0`` (its inputs have no batch dimension). Throughput counts these."""

    @property
    def json_header_size(self) -> int | None:
        """The JSON part's length: ``N`` of the content type, Triton's ``Inference-Header-Content-Length``."""
        match = _JSON_HEADER_SIZE.search(self.content_type)
        return int(match.group(1)) if match else None


def build_requests(
    model_dir: Path,
    inputs: Any = None,
    *,
    batch_size: int = 1,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    count: int = 4,
) -> list[Request]:
    """The requests to send to the model in ``model_dir`` (see the module's docstring for ``inputs``).

    Raises:
        ValueError: a data file that does not read, is empty or over :data:`MAX_DATA_FILE_BYTES`; a
            ``batch_size`` under 1 or over the model's ``max_batch_size``.
        TypeError: ``inputs`` of another kind.
    """
    from mme_triton.client.codec import encode_request
    from mme_triton.model.authoring import read_config

    batching = read_config(model_dir).max_batch_size > 0
    requests: list[Request] = []
    samples = input_arrays(model_dir, inputs, batch_size=batch_size, shapes=shapes, seed=seed, count=count)
    for arrays in samples:
        body, content_type = encode_request(arrays, binary=True)
        requests.append(Request(bytes(body), content_type, arrays, rows_of(arrays) if batching else 1))
    return requests


def rows_of(arrays: Mapping[str, Any]) -> int:
    """The batch a batching model's request carries: its inputs' leading dimension (1 for scalars).

    Raises:
        ValueError: the inputs disagree on it (Triton refuses such a request).
    """
    leading = {int(array.shape[0]) if getattr(array, "ndim", 0) else 1 for array in arrays.values()}
    if len(leading) > 1:
        raise ValueError(
            "the inputs of a request to a batching model share their first (batch) dimension; got "
            + ", ".join(f"{name}: {tuple(getattr(a, 'shape', ()))}" for name, a in arrays.items())
        )
    return leading.pop() if leading else 1


def input_arrays(
    model_dir: Path,
    inputs: Any = None,
    *,
    batch_size: int = 1,
    shapes: Mapping[str, Sequence[int]] | None = None,
    seed: int = 0,
    count: int = 4,
) -> list[dict[str, Any]]:
    """The arrays of each request (see :func:`build_requests`)."""
    from mme_triton.model.authoring import read_config

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    config = read_config(model_dir)
    batching = config.max_batch_size > 0
    if batching and batch_size > config.max_batch_size:
        raise ValueError(
            f"batch_size {batch_size} is over the max_batch_size {config.max_batch_size} of {model_dir.name}"
        )
    if inputs is None:
        from mme_triton.model._token_inputs import token_value_ranges

        ranges = token_value_ranges(model_dir, config)
        return [
            _random(config, batching, batch_size, shapes or {}, ranges, seed + index)
            for index in range(count)
        ]
    if isinstance(inputs, (str, os.PathLike)):
        return _from_data_file(Path(inputs), config, batching, batch_size)
    if isinstance(inputs, Mapping):
        return [dict(inputs)]
    if isinstance(inputs, Sequence) and inputs and all(isinstance(item, Mapping) for item in inputs):
        return [dict(item) for item in inputs]
    raise TypeError(
        "inputs takes {input name: array}, a list of them, or the path of a perf_analyzer data file; got "
        f"{type(inputs).__name__}"
    )


def _tensor_specs(config: Any) -> list[tuple[str, str, list[int]]]:
    from mme_triton.model._datatypes import kserve_datatype
    from mme_triton.model.config import datatype_name

    return [
        (tensor.name, kserve_datatype(datatype_name(tensor.data_type)), [int(d) for d in tensor.dims])
        for tensor in config.input
        if not tensor.optional
    ]


def _random(
    config: Any,
    batching: bool,
    batch_size: int,
    shapes: Mapping[str, Sequence[int]],
    ranges: Mapping[str, tuple[int, int]],
    seed: int,
) -> dict[str, Any]:
    import numpy as np

    from mme_triton.client.datatypes import numpy_dtype

    rng = np.random.default_rng(seed)
    arrays: dict[str, Any] = {}
    for name, datatype, dims in _tensor_specs(config):
        given = shapes.get(name)
        if given is not None:
            dims = [int(d) for d in given]
        dims = [1 if d < 0 else d for d in dims]
        shape = [batch_size, *dims] if batching else dims
        if datatype == "BYTES":
            letters = rng.integers(97, 123, size=(*shape, 16), dtype=np.uint8)
            flat = [bytes(row) for row in letters.reshape(-1, 16)]
            arrays[name] = np.array(flat, dtype=object).reshape(shape)
        elif datatype == "BOOL":
            arrays[name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            dtype = numpy_dtype(datatype)
            if dtype.kind == "f" or datatype in ("FP16", "BF16"):
                arrays[name] = rng.random(size=shape, dtype=np.float32).astype(dtype)
            else:
                low, high = ranges.get(name, (0, 100))
                high = min(high, int(np.iinfo(dtype).max) + 1)
                arrays[name] = rng.integers(low, high, size=shape).astype(dtype)
    return arrays


def _from_data_file(path: Path, config: Any, batching: bool, batch_size: int) -> list[dict[str, Any]]:
    import numpy as np

    size = path.stat().st_size
    if size > MAX_DATA_FILE_BYTES:
        raise ValueError(
            f"{path} is {size} bytes, over the {MAX_DATA_FILE_BYTES} a profile reads into memory; use fewer "
            "entries (they are played round-robin)"
        )
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read perf_analyzer data {path}: {exc}") from exc
    entries = document.get("data") if isinstance(document, Mapping) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f'{path}: perf_analyzer data is {{"data": [entry, ...]}} with at least one entry')
    specs = {name: (datatype, dims) for name, datatype, dims in _tensor_specs(config)}
    items = [_entry(index, entry, specs, path) for index, entry in enumerate(entries)]
    if not batching:
        return items
    requests = []
    for start in range(0, len(items), batch_size):
        rows = [items[(start + offset) % len(items)] for offset in range(batch_size)]
        requests.append({name: np.stack([row[name] for row in rows]) for name in rows[0]})
    return requests


def _entry(index: int, entry: Any, specs: Mapping[str, tuple[str, list[int]]], path: Path) -> dict[str, Any]:
    import numpy as np

    from mme_triton.client.datatypes import numpy_dtype

    if not isinstance(entry, Mapping):
        raise ValueError(f"{path}: entry {index} is not an object of input name -> data")
    arrays: dict[str, Any] = {}
    for name, value in entry.items():
        if name not in specs:
            raise ValueError(f"{path}: entry {index} has input {name!r}, which the model does not have")
        datatype, dims = specs[name]
        if isinstance(value, Mapping):
            content, shape = value.get("content"), value.get("shape")
        else:
            content, shape = value, None
        if shape is None:
            if any(d < 0 for d in dims):
                raise ValueError(f"{path}: entry {index}, input {name!r} has variable dims: give its shape")
            shape = dims
        if isinstance(content, Mapping) and "b64" in content:
            raw = base64.b64decode(content["b64"])
            if datatype == "BYTES":
                array = np.array(_split_bytes(raw), dtype=object)
            else:
                array = np.frombuffer(raw, dtype=numpy_dtype(datatype)).copy()
        elif not isinstance(content, list):
            raise ValueError(f"{path}: entry {index}, input {name!r} has no content list")
        elif datatype == "BYTES":
            array = np.array([str(item).encode() for item in content], dtype=object)
        else:
            array = np.asarray(content, dtype=numpy_dtype(datatype))
        try:
            arrays[name] = array.reshape([int(d) for d in shape])
        except ValueError as exc:
            raise ValueError(f"{path}: entry {index}, input {name!r}: {exc}") from exc
    return arrays


def _split_bytes(raw: bytes) -> list[bytes]:
    items, at = [], 0
    while at + 4 <= len(raw):
        length = int.from_bytes(raw[at : at + 4], "little")
        items.append(raw[at + 4 : at + 4 + length])
        at += 4 + length
    return items
