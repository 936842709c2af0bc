"""A python-based ``onnxruntime`` backend for Triton: ONNX models served with ONNX Runtime on the CPU.

Triton runs this file (placed at ``<backend-directory>/onnxruntime/model.py``) through its python backend
for every model whose config says ``platform: "onnxruntime_onnx"`` or ``backend: "onnxruntime"``. It
follows the native onnxruntime backend where it can:

- the version's ``model.onnx`` (or ``default_model_filename``) is opened with ONNX Runtime's CPU execution
  provider, one session per model instance (Triton starts one stub process per instance);
- the config must agree with the graph: input and output names, element types and ranks (with the batch
  dimension when ``max_batch_size > 0``); a mismatch refuses the load with a message naming the tensor;
- ``parameters`` ``intra_op_thread_count``, ``inter_op_thread_count``, ``execution_mode`` (0 sequential,
  1 parallel), ``enable_mem_arena``, ``enable_mem_pattern`` and ``optimization { graph { level } }``
  (-1 basic, 1 extended, 2 disabled, anything else all) are applied as the native backend applies them;
- the requests of one dynamic batch are concatenated along dimension 0 and run as one ONNX Runtime call,
  then the outputs are split back per request;
- a missing config (or one without inputs and outputs) is completed from the graph: inputs and outputs
  with their datatypes and dims; when every input and output has a dynamic first dimension the model is
  batchable, ``max_batch_size`` becomes 4 (Triton's default ``default-max-batch-size``) and
  ``dynamic_batching`` is turned on.

Self-contained on purpose: it runs inside Triton's python stub and imports only numpy, onnxruntime and
``triton_python_backend_utils``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

# ONNX Runtime's element type names -> Triton config datatypes.
_ORT_TO_CONFIG = {
    "tensor(bool)": "TYPE_BOOL",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32",
    "tensor(uint64)": "TYPE_UINT64",
    "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16",
    "tensor(float)": "TYPE_FP32",
    "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
    "tensor(bfloat16)": "TYPE_BF16",
}

# Triton's own default for backends' "default-max-batch-size" (the native backend autofills with it).
_DEFAULT_MAX_BATCH_SIZE = 4


def _log(level: str, message: str) -> None:
    logger = getattr(pb_utils, "Logger", None)
    if logger is not None:
        getattr(logger, "log_" + level)(message)


def _shape(ort_shape: list[Any] | None) -> list[int] | None:
    """ONNX Runtime's shape (ints, symbolic names or None) with every unknown dimension as -1."""
    if ort_shape is None:
        return None
    return [d if isinstance(d, int) and d >= 0 else -1 for d in ort_shape]


def _shape_str(dims: list[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _config_type(ort_type: str) -> str:
    return _ORT_TO_CONFIG.get(ort_type, "TYPE_INVALID")


def _parameter(config: dict[str, Any], key: str, default: str | None) -> str | None:
    value = config.get("parameters", {}).get(key)
    if value is None:
        return default
    if isinstance(value, dict):
        value = value.get("string_value", "")
    return str(value).strip()


def _int_parameter(config: dict[str, Any], key: str, default: int) -> int:
    text = _parameter(config, key, None)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise pb_utils.TritonModelException(
            f"model '{config.get('name')}': parameter '{key}' must be an integer, got '{text}'"
        ) from None


def _bool_parameter(config: dict[str, Any], key: str) -> bool | None:
    text = _parameter(config, key, None)
    if text is None:
        return None
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise pb_utils.TritonModelException(
        f"model '{config.get('name')}': parameter '{key}' must be true or false, got '{text}'"
    )


def _session_options(config: dict[str, Any]) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    graph = config.get("optimization", {}).get("graph")
    if graph is not None:
        value = int(graph.get("level", 0))
        if value == -1:
            level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        elif value == 1:
            level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        elif value == 2:
            level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.graph_optimization_level = level

    mode = _int_parameter(config, "execution_mode", 0)
    if mode not in (0, 1):
        raise pb_utils.TritonModelException(
            "Invalid configuration value provided. Expected values for execution_mode are 0 or 1 "
            f"but got {mode}."
        )
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL if mode == 0 else ort.ExecutionMode.ORT_PARALLEL

    intra = _int_parameter(config, "intra_op_thread_count", 0)
    if intra > 0:
        options.intra_op_num_threads = intra
    inter = _int_parameter(config, "inter_op_thread_count", 0)
    if inter > 0:
        options.inter_op_num_threads = inter
    arena = _bool_parameter(config, "enable_mem_arena")
    if arena is not None:
        options.enable_cpu_mem_arena = arena
    pattern = _bool_parameter(config, "enable_mem_pattern")
    if pattern is not None:
        options.enable_mem_pattern = pattern
    return options


def _model_file(directory: str, filename: str | None) -> str:
    path = os.path.join(directory, filename or "model.onnx")
    # The native backend also accepts a directory holding model.onnx (models with external data).
    if os.path.isdir(path):
        path = os.path.join(path, "model.onnx")
    return path


def _open_session(path: str, options: Any) -> Any:
    import onnxruntime as ort

    if not os.path.isfile(path):
        raise pb_utils.TritonModelException(f"unable to find '{path}': the ONNX model file is missing")
    return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])


def _dims_problem(
    model_name: str,
    kind: str,
    name: str,
    model_dims: list[int] | None,
    config_dims: list[int],
    max_batch_size: int,
) -> str | None:
    """Compare a tensor's graph shape with its config dims the way the native backend does."""
    if model_dims is None:
        return None  # the graph leaves the shape unknown: nothing to check
    if len(model_dims) == 0:
        if any(d != 1 for d in config_dims):
            return (
                f"unable to load model '{model_name}', scalar {kind} '{name}' should only have dims [1] "
                f"in the model configuration, which specifies {_shape_str(config_dims)}"
            )
        return None
    expected = list(config_dims)
    if max_batch_size > 0:
        if model_dims[0] != -1:
            return (
                f"unable to load model '{model_name}', {kind} '{name}': for the model to support batching "
                "(max_batch_size > 0) the shape should have at least 1 dimension and the first dimension "
                f"must be -1; but shape expected by the model is {_shape_str(model_dims)}"
            )
        expected = [-1, *expected]
    full = _shape_str(expected)
    batch_note = (
        " (an initial batch dimension because max_batch_size > 0, followed by the explicit tensor shape)"
        if max_batch_size > 0
        else ""
    )
    if len(model_dims) != len(expected):
        return (
            f"unable to load model '{model_name}', {kind} '{name}': the model expects {len(model_dims)} "
            f"dimensions (shape {_shape_str(model_dims)}) but the model configuration specifies "
            f"{len(expected)} dimensions{batch_note}, making complete shape {full}"
        )
    for model_dim, config_dim in zip(model_dims, expected, strict=True):
        if model_dim != -1 and model_dim != config_dim:
            return (
                f"unable to load model '{model_name}', {kind} '{name}': the model expects shape "
                f"{_shape_str(model_dims)} but the model configuration specifies shape {full}{batch_note}"
            )
    return None


def _check_config(config: dict[str, Any], session: Any) -> None:
    """Every way the config disagrees with the graph, as the native backend words it; first one raised."""
    model_name = config.get("name", "")
    max_batch_size = int(config.get("max_batch_size", 0))
    graph_inputs = {i.name: i for i in session.get_inputs()}
    overridable = {i.name: i for i in session.get_overridable_initializers()}
    graph_outputs = {o.name: o for o in session.get_outputs()}
    inputs = config.get("input", [])
    outputs = config.get("output", [])

    required = [i for i in inputs if not i.get("optional", False)]
    if len(graph_inputs) != len(required):
        raise pb_utils.TritonModelException(
            f"unable to load model '{model_name}', configuration expects {len(required)} inputs, "
            f"model provides {len(graph_inputs)} ({', '.join(graph_inputs)})"
        )
    allowed_inputs = {**graph_inputs, **overridable}
    for kind, entries, graph in (("input", inputs, allowed_inputs), ("output", outputs, graph_outputs)):
        for entry in entries:
            name = entry["name"]
            tensor = graph.get(name)
            if tensor is None:
                raise pb_utils.TritonModelException(
                    f"unable to load model '{model_name}', unexpected inference {kind} '{name}', "
                    f"allowed {kind}s are: {', '.join(graph)}"
                )
            if kind == "input" and entry.get("optional", False) and max_batch_size != 0:
                raise pb_utils.TritonModelException(
                    f"unable to load model '{model_name}', optional input '{name}' is not supported for "
                    "models that support batching"
                )
            declared = entry.get("data_type", "TYPE_INVALID")
            provided = _config_type(tensor.type)
            if declared != provided:
                raise pb_utils.TritonModelException(
                    f"unable to load model '{model_name}', configuration expects datatype {declared} for "
                    f"{kind} '{name}', model provides {provided}"
                )
            dims = entry.get("reshape", {}).get("shape") if "reshape" in entry else entry.get("dims", [])
            problem = _dims_problem(
                model_name, kind, name, _shape(tensor.shape), [int(d) for d in dims or []], max_batch_size
            )
            if problem:
                raise pb_utils.TritonModelException(problem)


def _stub_model_path() -> str | None:
    """The model file Triton started this stub for (its first argument); used by auto-complete only.

    ``auto_complete_config`` gets no path, but Triton starts the stub with the version's model file
    (``<model>/<version>/model.onnx``) as its first argument.
    """
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return None
    if len(argv) > 1 and argv[1]:
        return os.fsdecode(argv[1])
    return None


class TritonPythonModel:
    """Serves one instance of an ONNX model with ONNX Runtime (CPU)."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        config = auto_complete_model_config.as_dict()
        inputs = config.get("input", [])
        outputs = config.get("output", [])
        if (len(inputs) + len(config.get("batch_input", []))) > 0 and len(outputs) > 0:
            return auto_complete_model_config

        model_name = config.get("name", "")
        path = _stub_model_path()
        if path is None:
            raise pb_utils.TritonModelException(
                f"autofill failed for model '{model_name}': cannot find the ONNX file; "
                "write a config.pbtxt with its inputs and outputs"
            )
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = _open_session(path, options)
        graph_inputs = [(i.name, i.type, _shape(i.shape)) for i in session.get_inputs()]
        graph_outputs = [(o.name, o.type, _shape(o.shape)) for o in session.get_outputs()]

        batchable = all(shape and shape[0] == -1 for _, _, shape in graph_inputs + graph_outputs)
        max_batch_size = int(config.get("max_batch_size", 0))
        if batchable:
            if max_batch_size == 0:
                max_batch_size = _DEFAULT_MAX_BATCH_SIZE
                auto_complete_model_config.set_max_batch_size(max_batch_size)
                _log(
                    "warn",
                    f"autofilled max_batch_size to {max_batch_size} for model '{model_name}' since batching "
                    "is supported but no max_batch_size is specified in model configuration",
                )
            if max_batch_size > 1 and "sequence_batching" not in config:
                auto_complete_model_config.set_dynamic_batching()
        elif max_batch_size != 0:
            raise pb_utils.TritonModelException(
                f"autofill failed for model '{model_name}': model does not support batching while "
                "non-zero max_batch_size is specified"
            )

        for key, tensors, filled in (("input", graph_inputs, inputs), ("output", graph_outputs, outputs)):
            if filled:
                continue
            for name, ort_type, shape in tensors:
                shape = shape or []
                dims = shape[1:] if max_batch_size > 0 else list(shape)
                entry = {"name": name, "data_type": _config_type(ort_type), "dims": dims or [1]}
                if not dims and max_batch_size > 0:
                    # a scalar per batch item: Triton needs dims [1] reshaped to []
                    entry["reshape"] = {"shape": []}
                config.setdefault(key, []).append(entry)
        return auto_complete_model_config

    def initialize(self, args: dict[str, str]) -> None:
        self.config = json.loads(args["model_config"])
        self.name = self.config.get("name", args.get("model_name", ""))
        self.max_batch_size = int(self.config.get("max_batch_size", 0))
        accelerators = self.config.get("optimization", {}).get("execution_accelerators", {})
        for key in ("gpu_execution_accelerator", "cpu_execution_accelerator"):
            for accelerator in accelerators.get(key, []):
                _log(
                    "warn",
                    f"model '{self.name}': execution accelerator '{accelerator.get('name')}' is not "
                    "available here; running on ONNX Runtime's CPU execution provider",
                )
        path = _model_file(
            os.path.join(args["model_repository"], args["model_version"]),
            self.config.get("default_model_filename"),
        )
        self.session = _open_session(path, _session_options(self.config))
        _check_config(self.config, self.session)

        self.inputs = [(i["name"], i.get("optional", False)) for i in self.config.get("input", [])]
        self.string_inputs = {
            i["name"] for i in self.config.get("input", []) if i.get("data_type") == "TYPE_STRING"
        }
        self.outputs = [o["name"] for o in self.config.get("output", [])]
        self.string_outputs = {
            o["name"] for o in self.config.get("output", []) if o.get("data_type") == "TYPE_STRING"
        }

    def execute(self, requests: list[Any]) -> list[Any]:
        feeds: list[dict[str, np.ndarray[Any, Any]]] = []
        for request in requests:
            feed: dict[str, np.ndarray[Any, Any]] = {}
            for name, _optional in self.inputs:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is None:
                    continue  # an optional input the request left out
                array = tensor.as_numpy()
                if name in self.string_inputs:
                    array = np.array(
                        [v.decode("utf-8") if isinstance(v, bytes) else v for v in array.reshape(-1)],
                        dtype=object,
                    ).reshape(array.shape)
                feed[name] = array
            feeds.append(feed)

        if len(requests) > 1 and self.max_batch_size > 0 and self._stackable(feeds):
            batch_sizes = [next(iter(feed.values())).shape[0] for feed in feeds]
            merged = {name: np.concatenate([f[name] for f in feeds], axis=0) for name in feeds[0]}
            try:
                results = self.session.run(self.outputs, merged)
            except Exception as exc:  # one bad request must not fail the others: run them one by one
                _log("verbose", f"model '{self.name}': batched run failed ({exc}); running requests singly")
            else:
                split = self._split(results, batch_sizes)
                if split is not None:
                    return [self._response(r, outs) for r, outs in zip(requests, split, strict=True)]
        return [self._run_one(request, feed) for request, feed in zip(requests, feeds, strict=True)]

    def finalize(self) -> None:
        self.session = None

    # -- helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _stackable(feeds: list[dict[str, np.ndarray[Any, Any]]]) -> bool:
        names = set(feeds[0])
        if not names:
            return False
        for feed in feeds:
            if set(feed) != names:
                return False
            for name in names:
                if feed[name].ndim == 0 or feed[name].shape[1:] != feeds[0][name].shape[1:]:
                    return False
            if len({feed[name].shape[0] for name in names}) != 1:
                return False
        return True

    @staticmethod
    def _split(
        results: list[np.ndarray[Any, Any]], batch_sizes: list[int]
    ) -> list[list[np.ndarray[Any, Any]]] | None:
        total = sum(batch_sizes)
        bounds = np.cumsum(batch_sizes)[:-1]
        per_request: list[list[np.ndarray[Any, Any]]] = [[] for _ in batch_sizes]
        for result in results:
            if result.ndim == 0 or result.shape[0] != total:
                return None  # an output that does not follow the batch: cannot be split back
            for index, part in enumerate(np.split(result, bounds, axis=0)):
                per_request[index].append(part)
        return per_request

    def _run_one(self, request: Any, feed: dict[str, np.ndarray[Any, Any]]) -> Any:
        try:
            results = self.session.run(self.outputs, feed)
        except Exception as exc:
            return pb_utils.InferenceResponse(
                output_tensors=[],
                error=pb_utils.TritonError(f"onnx runtime error for model '{self.name}': {exc}"),
            )
        return self._response(request, results)

    def _response(self, request: Any, results: list[np.ndarray[Any, Any]]) -> Any:
        try:
            requested = set(request.requested_output_names())
        except AttributeError:
            requested = set()
        tensors = []
        for name, value in zip(self.outputs, results, strict=True):
            if requested and name not in requested:
                continue
            if name in self.string_outputs:
                value = np.array(
                    [v.encode("utf-8") if isinstance(v, str) else v for v in np.asarray(value).reshape(-1)],
                    dtype=np.object_,
                ).reshape(np.shape(value))
            tensors.append(pb_utils.Tensor(name, np.ascontiguousarray(value)))
        return pb_utils.InferenceResponse(output_tensors=tensors)
