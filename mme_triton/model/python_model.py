"""New python-backend models: a ``model.py`` skeleton and its config, for pre- and post-processing steps.

:func:`new_python_model` writes ``<repository>/<name>/config.pbtxt`` and ``<repository>/<name>/1/model.py``
with ``initialize``/``execute``/``finalize``. As written the model validates and serves: it passes its
inputs through to its outputs (see the generated docstring), so an ensemble built around it answers
before its real code is written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from mme_triton.model._datatypes import config_datatype
from mme_triton.model._pb import ModelConfig

__all__ = ["TensorSpec", "TensorSpecs", "new_python_model", "tensor_specs"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TensorSpec:
    """An input or output of a model: name, Triton datatype (``"FP32"``, ``"BYTES"`` ...) and dims.

    ``dims`` leave out the batch dimension when the model has ``max_batch_size > 0``; -1 marks a
    variable size.
    """

    name: str
    datatype: str
    dims: tuple[int, ...]


#: What ``inputs=``/``outputs=`` take: ``TensorSpec`` entries, or ``{name: (datatype, dims)}``.
TensorSpecs = Union[  # noqa: UP007 - a runtime alias, evaluated on Python 3.10 too
    Sequence[TensorSpec], Mapping[str, tuple[str, Sequence[int]]]
]


def tensor_specs(specs: TensorSpecs, what: str) -> list[TensorSpec]:
    """Normalise ``inputs=``/``outputs=`` into checked :class:`TensorSpec` entries.

    Raises:
        ValueError: no tensors, a duplicate or empty name, an unknown datatype, or bad dims.
        TypeError: entries of the wrong kind.
    """
    if isinstance(specs, Mapping):
        items = []
        for name, value in specs.items():
            if not isinstance(value, tuple) or len(value) != 2:
                raise TypeError(
                    f"{what} {name!r}: give (datatype, dims), e.g. ('FP32', [-1, 4]); got {value!r}"
                )
            items.append(TensorSpec(str(name), str(value[0]), tuple(int(d) for d in value[1])))
    else:
        items = []
        for item in specs:
            if not isinstance(item, TensorSpec):
                raise TypeError(f"{what} takes TensorSpec entries or a mapping, got {item!r}")
            items.append(TensorSpec(item.name, item.datatype, tuple(int(d) for d in item.dims)))
    if not items:
        raise ValueError(f"a model needs at least one {what[:-1] if what.endswith('s') else what}")
    seen: set[str] = set()
    for item in items:
        if not item.name or any(c.isspace() for c in item.name):
            raise ValueError(f"{what} name {item.name!r} must be non-empty and contain no whitespace")
        if item.name in seen:
            raise ValueError(f"{what} name {item.name!r} appears twice")
        seen.add(item.name)
        config_datatype(item.datatype)
        if not item.dims or any(d < 1 and d != -1 for d in item.dims):
            raise ValueError(
                f"{what} {item.name!r} has dims {list(item.dims)}: give at least one dim, each >= 1 or -1"
            )
    return items


def new_python_model(
    repository: str | os.PathLike[str],
    name: str,
    *,
    inputs: TensorSpecs,
    outputs: TensorSpecs,
    max_batch_size: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write a python-backend model: ``<repository>/<name>/config.pbtxt`` and ``1/model.py``.

    The config lists the inputs and outputs (``backend: "python"``, one ``KIND_CPU`` instance). The
    ``model.py`` skeleton has ``initialize`` (reads the config; the place to load a tokenizer or other
    resources, e.g. from the version directory), ``execute`` and ``finalize``. As written, ``execute``
    passes data through: output *k* answers with input *k* (the last input when there are fewer
    inputs), cast to the output's datatype, when its shape fits the output's dims; otherwise with zeros
    (empty strings for BYTES) of the output's shape, variable dims taken from the input. Replace the
    body of ``execute`` with the real pre- or post-processing.

    Parameters:
        repository: the model repository directory (created if missing).
        name: the model's name (its directory); no whitespace (the python backend starts the model
            through a shell).
        inputs / outputs: ``[TensorSpec("TEXT", "BYTES", (1,))]`` or ``{"TEXT": ("BYTES", [1])}``; dims
            without the batch dim when ``max_batch_size > 0``.
        max_batch_size: 0 for no batching, else the largest batch the model accepts.
        overwrite: replace an existing model directory.

    Returns:
        The model directory.

    Raises:
        FileExistsError: the model directory exists and ``overwrite`` is false.
        ModelValidationError: the written model does not validate (nothing is left behind).
        ValueError / TypeError: bad names, datatypes or dims.

    Example::

        new_python_model("repo", "tokenize", inputs={"TEXT": ("BYTES", [1])},
                         outputs={"input_ids": ("INT64", [-1])}, max_batch_size=8)
        # PosixPath('repo/tokenize')
    """
    from mme_triton.model._staging import check_model_name, staged_model_dir
    from mme_triton.model.config import format_config

    check_model_name(name)
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 0:
        raise ValueError(f"max_batch_size must be an integer >= 0, got {max_batch_size!r}")
    input_specs = tensor_specs(inputs, "inputs")
    output_specs = tensor_specs(outputs, "outputs")
    target = Path(repository) / name
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")

    config = _python_config(name, input_specs, output_specs, max_batch_size)
    with staged_model_dir(target) as staged:
        (staged / "1").mkdir()
        (staged / "1" / "model.py").write_text(
            _model_source(name, input_specs, output_specs), encoding="utf-8"
        )
        (staged / "config.pbtxt").write_text(format_config(config), encoding="utf-8")
    logger.info("wrote python model %s", target)
    return target


def _python_config(
    name: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], max_batch_size: int
) -> ModelConfig:
    from mme_triton.model._pb import model_config_pb2, new_model_config

    pb2 = model_config_pb2()
    config = new_model_config()
    config.name = name
    config.backend = "python"
    config.max_batch_size = max_batch_size
    for kind, specs in (("input", inputs), ("output", outputs)):
        for spec in specs:
            entry = getattr(config, kind).add()
            entry.name = spec.name
            entry.data_type = pb2.DataType.Value(config_datatype(spec.datatype))
            entry.dims.extend(spec.dims)
    group = config.instance_group.add()
    group.count = 1
    group.kind = pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")
    return config


def _model_source(name: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> str:
    input_list = ", ".join(repr(spec.name) for spec in inputs)
    pairs = "\n".join(
        f"    {spec.name!r}: {inputs[min(index, len(inputs) - 1)].name!r},"
        for index, spec in enumerate(outputs)
    )
    return _TEMPLATE.format(name=name, inputs=input_list, pairs=pairs)


_TEMPLATE = '''"""Python-backend model {name!r}: pre- or post-processing for Triton.

As written, this model passes data through so that it serves before its real code is written: each
output answers with the input paired with it in OUTPUT_SOURCES (output k with input k, or the last input
when there are fewer inputs), cast to the output's datatype, when the input's shape fits the output's
dims; otherwise with zeros (empty strings for BYTES outputs) of the output's shape, variable dims taken
from the input. Replace the body of execute() with the real processing; load resources (a tokenizer,
a vocabulary ...) in initialize(), e.g. from self.version_directory.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

INPUTS = [{inputs}]
# output name -> the input it passes through as written
OUTPUT_SOURCES = {{
{pairs}
}}


class TritonPythonModel:
    def initialize(self, args):
        """Called once per model instance when Triton loads the model."""
        self.model_config = json.loads(args["model_config"])
        self.version_directory = os.path.join(args["model_repository"], args["model_version"])
        self.batching = int(self.model_config.get("max_batch_size", 0)) > 0
        self.outputs = [
            (entry["name"], pb_utils.triton_string_to_numpy(entry["data_type"]), list(entry["dims"]))
            for entry in self.model_config["output"]
        ]

    def execute(self, requests):
        """Called with a list of requests; returns one response per request, in the same order."""
        responses = []
        for request in requests:
            arrays = {{}}
            for name in INPUTS:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    arrays[name] = tensor.as_numpy()
            tensors = []
            for name, dtype, dims in self.outputs:
                source = arrays.get(OUTPUT_SOURCES[name])
                tensors.append(pb_utils.Tensor(name, self._pass_through(source, dtype, dims)))
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self):
        """Called once when the model is unloaded."""

    def _pass_through(self, source, dtype, dims):
        shape = list(dims)
        if self.batching:
            shape = [source.shape[0] if source is not None and source.ndim else 1, *shape]
        fits = (
            source is not None
            and source.ndim == len(shape)
            and all(want in (-1, got) for want, got in zip(shape, source.shape))
        )
        if fits and source.dtype == dtype:
            return source
        if fits and dtype == np.object_:
            flat = [str(value).encode() for value in source.reshape(-1).tolist()]
            return np.array(flat, dtype=np.object_).reshape(source.shape)
        if fits and source.dtype != np.object_:
            return source.astype(dtype)
        concrete = [
            (source.shape[axis] if source is not None and axis < source.ndim else 1) if want == -1 else want
            for axis, want in enumerate(shape)
        ]
        if dtype == np.object_:
            return np.full(concrete, b"", dtype=np.object_)
        return np.zeros(concrete, dtype=dtype)
'''
