"""Compare an ONNX graph with its Triton config the way Triton's onnxruntime backend does at load time.

Checked: every config input/output exists in the graph and every graph input is in the config; element
types match (ONNX ``TensorProto`` type <-> ``TYPE_*``); ranks match, counting the batch dimension that
``max_batch_size > 0`` adds; fixed dims agree; with batching, the graph's first dim is variable. Without
inputs/outputs in the config, the same rules tell what Triton's auto-complete will infer.

The ``onnx`` package is imported only here and only when needed. Without it the check reports the
warning ``onnx-check-skipped`` instead of passing silently. Weights are never loaded: the file is
scanned for the graph's inputs, outputs and initializer names, skipping everything else (see
``_onnx_wire``); external-data files are only checked to exist.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from mme_triton.model import codes
from mme_triton.model._files import path_kind
from mme_triton.model._onnx_wire import read_graph_parts
from mme_triton.model._pb import ModelConfig, model_config_pb2, new_model_config
from mme_triton.model.config import datatype_name
from mme_triton.model.problems import Problem

__all__ = [
    "ONNX_TO_TRITON",
    "GraphTensor",
    "add_graph_tensors",
    "autocomplete_config",
    "check_onnx",
    "read_graph_signature",
]

logger = logging.getLogger(__name__)

# ONNX TensorProto.DataType value -> Triton DataType name (onnxruntime backend's type table).
ONNX_TO_TRITON: dict[int, str] = {
    1: "TYPE_FP32",  # FLOAT
    2: "TYPE_UINT8",
    3: "TYPE_INT8",
    4: "TYPE_UINT16",
    5: "TYPE_INT16",
    6: "TYPE_INT32",
    7: "TYPE_INT64",
    8: "TYPE_STRING",
    9: "TYPE_BOOL",
    10: "TYPE_FP16",  # FLOAT16
    11: "TYPE_FP64",  # DOUBLE
    12: "TYPE_UINT32",
    13: "TYPE_UINT64",
    16: "TYPE_BF16",  # BFLOAT16
}

# Triton's --backend-config default-max-batch-size, used when auto-complete turns batching on.
DEFAULT_MAX_BATCH_SIZE = 4


@dataclass(frozen=True)
class GraphTensor:
    """A graph input or output: name, ONNX element type, dims (-1 where variable, ``None`` if unknown)."""

    name: str
    elem_type: int
    dims: tuple[int, ...] | None

    @property
    def triton_type(self) -> str | None:
        return ONNX_TO_TRITON.get(self.elem_type)


@dataclass(frozen=True)
class _Signature:
    inputs: tuple[GraphTensor, ...]
    outputs: tuple[GraphTensor, ...]
    initializers: frozenset[str]
    external_locations: tuple[str, ...]


class _OnnxUnavailable(Exception):
    pass


class _OnnxUnreadable(Exception):
    pass


def read_graph_signature(path: str | Path) -> tuple[tuple[GraphTensor, ...], tuple[GraphTensor, ...]]:
    """The graph's (inputs, outputs) as Triton sees them (initializers are not inputs).

    Raises:
        ImportError: the ``onnx`` package is not installed.
        ValueError: the file is not a readable ONNX model.
    """
    try:
        signature = _signature(Path(path))
    except _OnnxUnavailable as exc:
        raise ImportError(str(exc)) from exc
    except _OnnxUnreadable as exc:
        raise ValueError(str(exc)) from exc
    return signature.inputs, signature.outputs


def check_onnx(path: str | Path, config: ModelConfig | None, *, where: str | None = None) -> list[Problem]:
    """Problems between the ONNX graph at ``path`` and ``config`` (``None``: no config.pbtxt).

    Parameters:
        path: the ``model.onnx`` file.
        config: the model's parsed config, or ``None`` when Triton auto-completes it.
        where: the path reported for config mismatches (default: ``config.pbtxt`` beside the version
            directory).

    Returns:
        A list of problems; ``onnx-check-skipped`` (a warning) when ``onnx`` is not installed.

    Example::

        check_onnx("repo/linear/1/model.onnx", config)  # []
    """
    onnx_path = Path(path)
    config_where = where or str(onnx_path.parent.parent / "config.pbtxt")
    try:
        signature = _signature(onnx_path)
    except _OnnxUnavailable:
        return [
            Problem(
                "warning",
                codes.ONNX_CHECK_SKIPPED,
                "the onnx package is not installed, so the graph was not compared with the config; "
                "pip install onnx (or mme-triton[onnx]) to check it",
                str(onnx_path),
            )
        ]
    except _OnnxUnreadable as exc:
        return [Problem("error", codes.ONNX_UNREADABLE, f"not a readable ONNX model: {exc}", str(onnx_path))]

    problems: list[Problem] = []
    for location in signature.external_locations:
        parts = PurePosixPath(location).parts
        if location.startswith("/") or ".." in parts or not parts:
            message = (
                f"the graph keeps weights in {location!r}, outside the model's directory, so the file "
                "would not be in the archive; save the external data beside the model file"
            )
        elif path_kind(onnx_path.parent / location) != "file":
            message = f"the graph keeps weights in {location!r}, which is not beside the model file; add it"
        else:
            continue
        problems.append(Problem("error", codes.ONNX_EXTERNAL_DATA_MISSING, message, str(onnx_path)))
    for tensor in (*signature.inputs, *signature.outputs):
        if tensor.triton_type is None:
            problems.append(
                Problem(
                    "error",
                    codes.ONNX_DATATYPE_UNSUPPORTED,
                    f"graph tensor {tensor.name!r} has ONNX element type "
                    f"{_onnx_type_name(tensor.elem_type)}, which Triton's onnxruntime backend cannot serve; "
                    "cast it in the graph",
                    str(onnx_path),
                )
            )

    mbs, batch_problems = _effective_max_batch_size(signature, config, config_where)
    problems.extend(batch_problems)
    if config is not None:
        problems.extend(_compare(signature, config, mbs, config_where))
    return problems


def autocomplete_config(path: str | Path, config: ModelConfig | None = None) -> ModelConfig | None:
    """The config Triton's onnxruntime backend builds when inputs/outputs are not given, or ``None``.

    ``None`` when ``onnx`` is missing or the file cannot be read. Fields already set in ``config`` are
    kept; inputs/outputs are filled in only where the config has none.
    """
    try:
        signature = _signature(Path(path))
    except (_OnnxUnavailable, _OnnxUnreadable):
        return None
    completed = new_model_config()
    if config is not None:
        completed.CopyFrom(config)
    if len(completed.input) and len(completed.output):
        return completed
    batching = _can_batch(signature)
    if batching and completed.max_batch_size == 0:
        completed.max_batch_size = DEFAULT_MAX_BATCH_SIZE
    for kind, tensors in (("input", signature.inputs), ("output", signature.outputs)):
        if not len(getattr(completed, kind)):
            add_graph_tensors(completed, kind, tensors)
    logger.debug("auto-completed config for %s: %s", path, completed)
    return completed


def add_graph_tensors(config: ModelConfig, kind: str, tensors: Iterable[GraphTensor]) -> None:
    """Append graph tensors to ``config.input`` or ``config.output`` (``kind``) as auto-complete writes them.

    With ``config.max_batch_size > 0`` the graph's first dimension is the batch dimension and is left out
    of ``dims``; a tensor left with no dims gets ``dims: [1]`` (with an empty ``reshape`` when batching:
    one value per batch row).
    """
    pb2 = model_config_pb2()
    target = getattr(config, kind)
    for tensor in tensors:
        entry = target.add()
        entry.name = tensor.name
        entry.data_type = pb2.DataType.Value(tensor.triton_type or "TYPE_INVALID")
        dims = list(tensor.dims or ())
        if config.max_batch_size > 0 and dims:
            dims = dims[1:]
        if not dims:
            dims = [1]
            if config.max_batch_size > 0:
                entry.reshape.SetInParent()
        entry.dims.extend(dims)


# --------------------------------------------------------------------------------------------------


def _signature(path: Path) -> _Signature:
    stat = path.stat()
    return _cached_signature(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=32)
def _cached_signature(path: str, mtime_ns: int, size: int) -> _Signature:
    del mtime_ns, size  # part of the cache key only
    try:
        import onnx
    except ImportError as exc:
        raise _OnnxUnavailable(str(exc)) from exc
    try:
        parts = read_graph_parts(path)
        if not parts.has_graph:
            raise _OnnxUnreadable("the file holds no graph")
        graph_inputs = [onnx.ValueInfoProto.FromString(data) for data in parts.inputs]
        graph_outputs = [onnx.ValueInfoProto.FromString(data) for data in parts.outputs]
    except _OnnxUnreadable:
        raise
    except Exception as exc:  # WireFormatError, protobuf's DecodeError, ... for a damaged file
        raise _OnnxUnreadable(str(exc) or type(exc).__name__) from exc
    initializers = frozenset(parts.initializers)
    inputs = tuple(_tensor(value) for value in graph_inputs if value.name not in initializers)
    outputs = tuple(_tensor(value) for value in graph_outputs)
    return _Signature(inputs, outputs, initializers, tuple(dict.fromkeys(parts.external_locations)))


def _tensor(value: Any) -> GraphTensor:
    tensor_type = value.type.tensor_type
    elem_type = int(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        return GraphTensor(value.name, elem_type, None)
    dims = tuple(int(dim.dim_value) if dim.HasField("dim_value") else -1 for dim in tensor_type.shape.dim)
    return GraphTensor(value.name, elem_type, dims)


def _onnx_type_name(elem_type: int) -> str:
    try:
        import onnx

        name: str = onnx.TensorProto.DataType.Name(elem_type)
    except (ImportError, ValueError):
        return str(elem_type)
    return name


def _can_batch(signature: _Signature) -> bool:
    """Triton's rule: batching is possible when every input and output has a variable first dim."""
    return all(
        tensor.dims is not None and len(tensor.dims) > 0 and tensor.dims[0] == -1
        for tensor in (*signature.inputs, *signature.outputs)
    )


def _effective_max_batch_size(
    signature: _Signature, config: ModelConfig | None, where: str
) -> tuple[int, list[Problem]]:
    configured = config.max_batch_size if config is not None else 0
    complete = config is not None and len(config.input) > 0 and len(config.output) > 0
    if complete:
        return configured, []
    # Auto-complete runs: batching is switched on when the graph allows it, refused when it does not.
    if _can_batch(signature):
        return configured or DEFAULT_MAX_BATCH_SIZE, []
    if configured > 0:
        fixed = [
            tensor.name
            for tensor in (*signature.inputs, *signature.outputs)
            if tensor.dims is not None and (not tensor.dims or tensor.dims[0] != -1)
        ]
        return configured, [
            Problem(
                "error",
                codes.ONNX_BATCH_DIM_FIXED,
                f"max_batch_size is {configured} but the graph's first dim is not variable for "
                f"{', '.join(repr(n) for n in fixed)}; export the graph with a dynamic batch axis or set "
                "max_batch_size: 0",
                where,
            )
        ]
    return configured, []


def _compare(signature: _Signature, config: ModelConfig, max_batch_size: int, where: str) -> list[Problem]:
    problems: list[Problem] = []
    graph_inputs = {tensor.name: tensor for tensor in signature.inputs}
    graph_outputs = {tensor.name: tensor for tensor in signature.outputs}

    for tensor in config.input:
        graph = graph_inputs.get(tensor.name)
        if graph is None:
            if tensor.name in signature.initializers:
                continue  # an overridable initializer may be fed as an input
            problems.append(_missing(tensor.name, "input", graph_inputs, where))
            continue
        problems.extend(_compare_tensor(tensor, graph, "input", max_batch_size, where, exact=False))
    for tensor in config.output:
        graph = graph_outputs.get(tensor.name)
        if graph is None:
            problems.append(_missing(tensor.name, "output", graph_outputs, where))
            continue
        problems.extend(_compare_tensor(tensor, graph, "output", max_batch_size, where, exact=True))

    if len(config.input):
        fed = _config_fed_inputs(config)
        for name in graph_inputs:
            if name not in fed:
                problems.append(
                    Problem(
                        "error",
                        codes.ONNX_TENSOR_MISSING,
                        f"the graph has input {name!r} that the config does not list; Triton requires the "
                        "config to list every graph input",
                        where,
                    )
                )
    return problems


def _config_fed_inputs(config: ModelConfig) -> set[str]:
    names = {tensor.name for tensor in config.input}
    for batch_input in config.batch_input:
        names.update(batch_input.target_name)
    if config.HasField("sequence_batching"):
        names.update(control.name for control in config.sequence_batching.control_input)
        names.update(state.input_name for state in config.sequence_batching.state)
    return names


def _missing(name: str, kind: str, graph: dict[str, GraphTensor], where: str) -> Problem:
    import difflib

    close = difflib.get_close_matches(name, list(graph), n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    available = ", ".join(repr(n) for n in graph) or "none"
    return Problem(
        "error",
        codes.ONNX_TENSOR_MISSING,
        f"config {kind} {name!r} is not a graph {kind} (the graph has {available}){hint}",
        where,
    )


def _compare_tensor(
    tensor: Any, graph: GraphTensor, kind: str, max_batch_size: int, where: str, *, exact: bool
) -> list[Problem]:
    problems: list[Problem] = []
    label = f"{kind} {tensor.name!r}"
    expected = graph.triton_type
    if expected is not None and tensor.data_type != model_config_pb2().TYPE_INVALID:
        configured = datatype_name(tensor.data_type)
        if configured != expected:
            problems.append(
                Problem(
                    "error",
                    codes.ONNX_DATATYPE_MISMATCH,
                    f"{label} is {configured} in the config but {expected} in the graph "
                    f"({_onnx_type_name(graph.elem_type)}); set data_type: {expected}",
                    where,
                )
            )
    if graph.dims is None:
        return problems
    dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
    if not dims and not tensor.HasField("reshape"):
        return problems  # left for auto-complete / reported as dims-invalid
    model_shape = list(graph.dims)
    if not model_shape:
        # A scalar graph tensor: Triton accepts only 1s in the config.
        if any(dim != 1 for dim in dims):
            problems.append(
                Problem(
                    "error",
                    codes.ONNX_DIM_MISMATCH,
                    f"{label} is a scalar in the graph; the config may only give dims of 1, not {dims}",
                    where,
                )
            )
        return problems
    full = dims
    if max_batch_size > 0:
        if model_shape[0] != -1:
            problems.append(
                Problem(
                    "error",
                    codes.ONNX_BATCH_DIM_FIXED,
                    f"{label}: max_batch_size is {max_batch_size} but the graph's first dim is "
                    f"{model_shape[0]}, not variable (graph shape {model_shape}); export the graph with a "
                    "dynamic batch axis or set max_batch_size: 0",
                    where,
                )
            )
            return problems
        full = [-1, *dims]
    if len(full) != len(model_shape):
        batch_note = " (the batch dim max_batch_size > 0 adds, then dims)" if max_batch_size > 0 else ""
        problems.append(
            Problem(
                "error",
                codes.ONNX_RANK_MISMATCH,
                f"{label}: the graph has rank {len(model_shape)} (shape {model_shape}) but the config gives "
                f"rank {len(full)}{batch_note}: {full}",
                where,
            )
        )
        return problems
    offset = 1 if max_batch_size > 0 else 0
    mismatched = [
        index
        for index in range(offset, len(full))
        if (exact or model_shape[index] != -1) and model_shape[index] != full[index]
    ]
    if mismatched:
        problems.append(
            Problem(
                "error",
                codes.ONNX_DIM_MISMATCH,
                f"{label}: config shape {full} disagrees with the graph's {model_shape} at "
                f"{_positions(mismatched)}; fixed graph dims must be repeated exactly"
                + ("" if not exact else ", and variable output dims must be -1"),
                where,
            )
        )
    return problems


def _positions(indexes: Iterable[int]) -> str:
    items = list(indexes)
    return ("dim " if len(items) == 1 else "dims ") + ", ".join(str(i) for i in items)
