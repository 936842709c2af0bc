"""A python-based ``pytorch`` backend for Triton: TorchScript models served with PyTorch on the CPU.

Triton runs this file (placed at ``<backend-directory>/pytorch/model.py``) through its python backend for
every model whose config says ``platform: "pytorch_libtorch"`` or ``backend: "pytorch"``: with no
``libtriton_pytorch.so`` beside it, Triton sets ``runtime: "model.py"`` and starts one python stub per
model instance. It follows the native LibTorch backend where the CPU allows:

- the version's ``model.pt`` (or ``default_model_filename``) is loaded with ``torch.jit.load`` onto the
  CPU, one module per instance; the module runs in the mode it was saved in (no ``eval()``), as natively;
- inputs bind to ``forward``'s arguments by name, else by ``<name>__<index>``, else in config order; a
  single ``Dict[str, Tensor]`` argument receives every input keyed by its config name; ``TYPE_STRING``
  inputs are passed as ``List[str]`` (one dimension only);
- outputs bind to the returned tensor, tuple element or ``List[str]`` by ``<name>__<index>``, else in
  config order;
- with ``max_batch_size > 0`` the requests of one dynamic batch are concatenated along dimension 0, run
  in one ``forward`` call and split back; requests that cannot be stacked run one by one;
- ``parameters`` ``DISABLE_OPTIMIZED_EXECUTION``, ``INFERENCE_MODE``, ``ENABLE_JIT_EXECUTOR``,
  ``ENABLE_JIT_PROFILING``, ``ENABLE_TENSOR_FUSER``, ``INTRA_OP_THREAD_COUNT`` and
  ``INTER_OP_THREAD_COUNT`` are applied; the GPU-only ones are accepted and logged as having no effect;
- a config that disagrees with the module (inputs ``forward`` cannot take, more outputs than it returns,
  datatypes the backend has no tensor type for) refuses the load, in the native backend's words where
  it has them; what only a run can show (output datatypes and shapes) is an error response naming the
  output.

Self-contained on purpose: it runs inside Triton's python stub and imports only the standard library,
numpy, torch (when a model is loaded) and ``triton_python_backend_utils``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

# Config datatypes -> torch dtype names (resolved once torch is imported). The native backend has no
# UINT16/32/64 (torch cannot compute with them) and no BF16, so neither has this one: a model the stack
# serves must load on SageMaker too.
_TORCH_DTYPE_NAMES = {
    "TYPE_BOOL": "bool",
    "TYPE_UINT8": "uint8",
    "TYPE_INT8": "int8",
    "TYPE_INT16": "int16",
    "TYPE_INT32": "int32",
    "TYPE_INT64": "int64",
    "TYPE_FP16": "float16",
    "TYPE_FP32": "float32",
    "TYPE_FP64": "float64",
}
_STRING = "TYPE_STRING"
_SUPPORTED = ", ".join([*_TORCH_DTYPE_NAMES, _STRING])
_INDEX_DELIMITER = "__"

_INSTALL_HINT = (
    "the embedded stack serves TorchScript models with PyTorch; install it with: "
    "pip install 'mme-triton[export]' (and a CPU build of torch first, e.g. "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu, so pip skips the CUDA build)"
)
_NO_AUTOCOMPLETE = (
    "the pytorch backend does not auto-complete configurations (a TorchScript file records no tensor "
    "names, datatypes or shapes), so config.pbtxt must list every input and output, e.g. "
    'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ] '
    'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] } ]'
)
_OUTPUT_KINDS = (
    "output must be of type Tensor, List[str] or Tuple containing one of these two types. It should not "
    "be a List / Dictionary of Tensors or a Scalar"
)
# Parameters of the native backend that only act on a GPU or across instances of one process.
_IGNORED_PARAMETERS = {
    "DISABLE_CUDNN": "cuDNN is a GPU library",
    "ENABLE_CACHE_CLEANING": "it empties the CUDA cache, and the model runs on the CPU",
    "ENABLE_WEIGHT_SHARING": "each instance runs in a python stub process of its own",
}
# Parameters of Triton's python-based PyTorch 2 runtime (torch.compile of a model.py), not of TorchScript.
_PT2_PARAMETERS = ("NUM_THREADS", "NUM_INTEROP_THREADS", "TORCH_COMPILE_OPTIONAL_PARAMETERS")


class _ModelError(Exception):
    """A request-level failure: ``message`` goes back in the response with ``invalid`` deciding the code."""

    def __init__(self, message: str, *, invalid: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.invalid = invalid


def _log(level: str, message: str) -> None:
    logger = getattr(pb_utils, "Logger", None)
    if logger is not None:
        getattr(logger, "log_" + level)(message)


def _import_torch(model_name: str) -> Any:
    try:
        import torch
    except ImportError as exc:
        raise pb_utils.TritonModelException(
            f"unable to load model '{model_name}': {_INSTALL_HINT} "
            f"({sys.executable} cannot import torch: {exc})"
        ) from None
    return torch


def _shape_str(dims: list[int] | tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


# -- parameters ------------------------------------------------------------------------------------


def _parameter(config: dict[str, Any], key: str) -> str | None:
    value = config.get("parameters", {}).get(key)
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("string_value", "")
    return str(value).strip()


def _bool_parameter(config: dict[str, Any], key: str) -> bool | None:
    """The native backend's boolean values: true/on/1 and false/off/0, any case."""
    text = _parameter(config, key)
    if text is None:
        return None
    if text.lower() in ("true", "on", "1"):
        return True
    if text.lower() in ("false", "off", "0"):
        return False
    raise pb_utils.TritonModelException(
        f"unable to load model '{config.get('name')}': failed to convert '{text}' to boolean value for "
        f"parameter '{key}' (use true or false)"
    )


def _int_parameter(config: dict[str, Any], key: str) -> int | None:
    text = _parameter(config, key)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise pb_utils.TritonModelException(
            f"unable to load model '{config.get('name')}': failed to convert '{text}' to integral number "
            f"for parameter '{key}'"
        ) from None


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _apply_threads(torch: Any, config: dict[str, Any], name: str) -> None:
    """``INTRA_OP_THREAD_COUNT``/``INTER_OP_THREAD_COUNT`` when > 0, else torch's default capped at the CPUs.

    Natively the counts are process-wide and the first model to set them wins; here every instance has a
    process of its own, so each model's values apply to its own instances.
    """
    cpus = _available_cpus()
    intra = _int_parameter(config, "INTRA_OP_THREAD_COUNT")
    if intra is not None and intra > 0:
        torch.set_num_threads(intra)
    elif torch.get_num_threads() > cpus and "OMP_NUM_THREADS" not in os.environ:
        # torch counts the machine's cores; a container or taskset may give this process fewer
        torch.set_num_threads(cpus)
    inter = _int_parameter(config, "INTER_OP_THREAD_COUNT")
    wanted = inter if inter is not None and inter > 0 else None
    if wanted is None and torch.get_num_interop_threads() > cpus:
        wanted = cpus
    if wanted is not None and wanted != torch.get_num_interop_threads():
        try:
            torch.set_num_interop_threads(wanted)
        except RuntimeError as exc:  # torch allows it once, before any inter-op work
            _log("warn", f"model '{name}': inter-op thread count left at its value: {exc}")
    _log(
        "info",
        f"Intra op thread count is set to {torch.get_num_threads()} and inter op thread count to "
        f"{torch.get_num_interop_threads()} for model instance '{name}'",
    )


def _apply_jit_switches(torch: Any, config: dict[str, Any], name: str) -> None:
    """The JIT switches the native backend sets, when the config sets them (otherwise torch's defaults).

    They are process-wide in torch; natively they are set again before every run because models share a
    process, here one process serves one instance of one model so setting them once is the same.
    """
    switches = (
        ("ENABLE_JIT_EXECUTOR", "_jit_set_profiling_executor", "Jit executor"),
        ("ENABLE_JIT_PROFILING", "_jit_set_profiling_mode", "Jit profiling"),
        ("ENABLE_TENSOR_FUSER", "_jit_set_texpr_fuser_enabled", "Tensor fuser"),
    )
    for key, setter, label in switches:
        value = _bool_parameter(config, key)
        if value is None:
            continue
        function = getattr(torch._C, setter, None)
        if function is None:
            _log("warn", f"model '{name}': this torch has no {setter}; parameter {key} not applied")
            continue
        function(value)
        _log("info", f"{label} is {'enabled' if value else 'disabled'} for model instance '{name}'")


def _log_unused_parameters(config: dict[str, Any], name: str) -> None:
    for key, reason in _IGNORED_PARAMETERS.items():
        if _bool_parameter(config, key) is not None:
            _log("info", f"model '{name}': parameter {key} has no effect on the embedded stack: {reason}")
    for key in _PT2_PARAMETERS:
        if _parameter(config, key) is not None:
            _log(
                "warn",
                f"model '{name}': parameter {key} belongs to Triton's python-based PyTorch 2 runtime "
                "(torch.compile of a model.py) and is ignored for TorchScript; thread counts are "
                "INTRA_OP_THREAD_COUNT and INTER_OP_THREAD_COUNT",
            )


# -- config and module ---------------------------------------------------------------------------------


def _index_of(name: str) -> int | None:
    """The ``<index>`` of a ``<name>__<index>`` tensor name (after the first ``__``, digits only)."""
    start = name.find(_INDEX_DELIMITER)
    if start < 0:
        return None
    digits = name[start + len(_INDEX_DELIMITER) :]
    return int(digits) if digits.isdigit() else None


def _config_dims(entry: dict[str, Any]) -> list[int]:
    """The dims the model sees: ``reshape.shape`` when the config reshapes the tensor, else ``dims``."""
    if "reshape" in entry:
        return [int(d) for d in entry["reshape"].get("shape", [])]
    return [int(d) for d in entry.get("dims", [])]


def _check_datatypes(config: dict[str, Any], name: str, max_batch_size: int) -> None:
    for kind in ("input", "output"):
        for entry in config.get(kind, []):
            datatype = entry.get("data_type", "TYPE_INVALID")
            if datatype != _STRING and datatype not in _TORCH_DTYPE_NAMES:
                raise pb_utils.TritonModelException(
                    f"unsupported datatype {datatype} for {kind} '{entry['name']}' for model '{name}' "
                    f"(the pytorch backend takes {_SUPPORTED})"
                )
            if datatype == _STRING and len(_config_dims(entry)) + (1 if max_batch_size > 0 else 0) > 1:
                hint = "dims: [ 1 ] with reshape: { shape: [ ] }" if max_batch_size > 0 else "dims: [ -1 ]"
                raise pb_utils.TritonModelException(
                    f"Triton only supports 1 dimensional List of String as {kind} for '{entry['name']}' "
                    f"for model '{name}' (use {hint})"
                )
            if kind == "input" and entry.get("optional", False):
                raise pb_utils.TritonModelException(
                    f"unable to load model '{name}': input '{entry['name']}' is optional, and TorchScript "
                    "forward arguments cannot be left out"
                )


def _type_kind(argument_type: Any) -> str:
    return str(argument_type.kind())


def _is_string_list(argument_type: Any) -> bool:
    return _type_kind(argument_type) == "ListType" and str(argument_type.getElementType()) == "str"


def _warn_strict_order(kind: str, names: list[str], name: str) -> None:
    """Natively only a name that looks like ``<name>__<index>`` but is not one is worth a warning."""
    odd = [n for n in names if _INDEX_DELIMITER in n and _index_of(n) is None]
    if odd:
        _log(
            "warn",
            f"{kind} '{odd[0]}' of model '{name}' does not follow the <name>__<index> naming convention: "
            f"{kind}s are bound in the order of the model configuration",
        )


def _bind_inputs(config: dict[str, Any], name: str, schema: Any) -> tuple[bool, list[str]]:
    """How config inputs reach ``forward``: (a single dict argument?, config input name per position)."""
    arguments = list(schema.arguments)
    if arguments and _type_kind(arguments[0].type) == "ClassType":
        arguments = arguments[1:]  # self
    inputs = config.get("input", [])
    names = [entry["name"] for entry in inputs]
    string_inputs = {entry["name"] for entry in inputs if entry.get("data_type") == _STRING}

    if len(arguments) == 1 and _type_kind(arguments[0].type) == "DictType":
        argument_type = arguments[0].type
        if str(argument_type.getKeyType()) != "str" or str(argument_type.getValueType()) != "Tensor":
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': forward argument '{arguments[0].name}' is "
                f"{argument_type}; only a single input of type Dict(str, Tensor) or input(s) of type "
                "Tensor are supported"
            )
        if string_inputs:
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': input '{sorted(string_inputs)[0]}' is TYPE_STRING but "
                "forward takes Dict(str, Tensor)"
            )
        return True, names

    for argument in arguments:
        kind = _type_kind(argument.type)
        if kind == "DictType":
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': forward argument '{argument.name}' is {argument.type}. "
                "Only a single input of type Dict(str, Tensor) is supported."
            )
        if kind != "TensorType" and not _is_string_list(argument.type):
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': an input of type '{argument.type}' was detected in the "
                f"model (forward argument '{argument.name}'). Only a single input of type "
                "Dict(str, Tensor) or input(s) of type Tensor (or List[str] for TYPE_STRING) are supported."
            )
    argument_names = [a.name for a in arguments]
    if len(arguments) != len(inputs):
        raise pb_utils.TritonModelException(
            f"unable to load model '{name}', configuration expects {len(inputs)} inputs, model provides "
            f"{len(arguments)} (forward({', '.join(argument_names)}))"
        )

    if all(n in argument_names for n in names):
        positions = {n: argument_names.index(n) for n in names}
    elif all(_index_of(n) is not None for n in names):
        positions = {}
        for n in names:
            index = _index_of(n)
            assert index is not None
            if index >= len(arguments):
                raise pb_utils.TritonModelException(
                    f"unable to load model '{name}': input '{n}' refers to forward argument {index}, but "
                    f"forward takes {len(arguments)} inputs ({', '.join(argument_names)})"
                )
            taken = [other for other, at in positions.items() if at == index]
            if taken:
                raise pb_utils.TritonModelException(
                    f"unable to load model '{name}': inputs '{taken[0]}' and '{n}' both refer to forward "
                    f"argument {index}"
                )
            positions[n] = index
    else:
        _warn_strict_order("input", names, name)
        positions = {n: i for i, n in enumerate(names)}

    order = [""] * len(arguments)
    for n, index in positions.items():
        order[index] = n
        argument = arguments[index]
        wants_strings = _is_string_list(argument.type)
        if wants_strings != (n in string_inputs):
            given = "TYPE_STRING" if n in string_inputs else "a tensor datatype"
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': input '{n}' has {given} in the model configuration but "
                f"binds to forward argument '{argument.name}' of type {argument.type} (TYPE_STRING inputs "
                "are passed as List[str], every other datatype as a Tensor)"
            )
    return False, order


def _bind_outputs(config: dict[str, Any], name: str) -> dict[str, int]:
    """Each config output's index into what ``forward`` returns."""
    names = [entry["name"] for entry in config.get("output", [])]
    if all(_index_of(n) is not None for n in names):
        indices = {n: _index_of(n) for n in names}
        return {n: i for n, i in indices.items() if i is not None}
    _warn_strict_order("output", names, name)
    return {n: i for i, n in enumerate(names)}


def _return_kinds(schema: Any) -> list[str] | None:
    """What ``forward`` returns, per output: "Tensor", "List[str]" or another type; None when not declared."""
    if len(schema.returns) != 1:
        return None
    returned = schema.returns[0].type
    kind = _type_kind(returned)
    if kind == "TupleType":
        return [str(e) if _type_kind(e) != "TensorType" else "Tensor" for e in returned.elements()]
    if kind == "TensorType":
        return ["Tensor"]
    if kind in ("AnyType", "OptionalType", "UnionType"):
        return None
    return [str(returned)]


def _check_returns(config: dict[str, Any], name: str, schema: Any, outputs: dict[str, int]) -> None:
    """Refuse, at load, output bindings that the declared return type of ``forward`` already rules out."""
    kinds = _return_kinds(schema)
    if kinds is None:
        return
    returned = str(schema.returns[0].type)
    if len(kinds) == 1 and kinds[0] not in ("Tensor", "List[str]"):
        raise pb_utils.TritonModelException(
            f"unable to load model '{name}': {_OUTPUT_KINDS}; forward returns {returned}"
        )
    datatypes = {entry["name"]: entry.get("data_type") for entry in config.get("output", [])}
    for output, index in outputs.items():
        if index >= len(kinds):
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': the output {output} in the model configuration refers to "
                f"an output index which doesn't exist. This model has {len(kinds)} outputs "
                f"(forward returns {returned})"
            )
        kind = kinds[index]
        if kind not in ("Tensor", "List[str]"):
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': output at index {index} ('{output}') must be of type "
                f"Tensor or List[str], forward returns {kind} there"
            )
        if (kind == "List[str]") != (datatypes[output] == _STRING):
            provided = "TYPE_STRING (List[str])" if kind == "List[str]" else "a Tensor"
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': configuration expects datatype {datatypes[output]} for "
                f"output '{output}', model provides {provided}"
            )


def _model_path(args: dict[str, str], config: dict[str, Any], name: str) -> str:
    directory = os.path.join(args["model_repository"], args["model_version"])
    path = os.path.join(directory, config.get("default_model_filename") or "model.pt")
    if os.path.isfile(path):
        return path
    message = f"unable to find '{path}' for model instance '{name}'"
    if os.path.isfile(os.path.join(directory, "model.py")):
        message += (
            " (a torch.nn.Module in model.py is Triton's python-based PyTorch 2 runtime, which the embedded "
            "stack does not serve: save the model as TorchScript, torch.jit.script(module).save('model.pt'))"
        )
    raise pb_utils.TritonModelException(message)


def _load_module(torch: Any, path: str, name: str, inference_mode: bool) -> Any:
    try:
        # inference mode also guards the load, as natively
        with torch.inference_mode(mode=inference_mode):
            return torch.jit.load(path, map_location="cpu")
    except Exception as exc:
        raise pb_utils.TritonModelException(
            f"failed to load model '{name}': {exc} ({os.path.basename(path)} must be a TorchScript module "
            "saved with torch.jit.save or torch.jit.script(module).save(); a torch.save() checkpoint or "
            "state_dict is not TorchScript)"
        ) from None


def _check_inputs_and_outputs(config: dict[str, Any], name: str) -> None:
    for kind in ("input", "output"):
        if not config.get(kind):
            raise pb_utils.TritonModelException(
                f"unable to load model '{name}': model configuration must contain at least one {kind}, none "
                f"were specified; {_NO_AUTOCOMPLETE}"
            )


class TritonPythonModel:
    """Serves one instance of a TorchScript model with PyTorch (CPU)."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        """As natively: nothing is completed; a config without inputs or outputs is refused clearly."""
        config = auto_complete_model_config.as_dict()
        name = config.get("name", "")
        _log(
            "warn",
            f"skipping model configuration auto-complete for '{name}': not supported for pytorch backend",
        )
        _check_inputs_and_outputs(config, name)
        return auto_complete_model_config

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.name = args.get("model_name") or config.get("name", "")
        config.setdefault("name", self.name)
        self.max_batch_size = int(config.get("max_batch_size", 0))
        _check_inputs_and_outputs(config, self.name)
        _check_datatypes(config, self.name, self.max_batch_size)
        torch = _import_torch(self.name)
        self.torch = torch

        self.optimized_execution = not _bool_parameter(config, "DISABLE_OPTIMIZED_EXECUTION")
        inference_mode = _bool_parameter(config, "INFERENCE_MODE")
        self.inference_mode = True if inference_mode is None else inference_mode
        _log(
            "info",
            f"Optimized execution is {'enabled' if self.optimized_execution else 'disabled'}, Inference Mode "
            f"is {'enabled' if self.inference_mode else 'disabled'} for model instance '{self.name}'",
        )
        _apply_threads(torch, config, self.name)
        _apply_jit_switches(torch, config, self.name)
        _log_unused_parameters(config, self.name)

        path = _model_path(args, config, self.name)
        self.module = _load_module(torch, path, self.name, self.inference_mode)
        try:
            schema = self.module.forward.schema
        except (AttributeError, RuntimeError) as exc:
            raise pb_utils.TritonModelException(
                f"unable to load model '{self.name}': the TorchScript module has no forward method ({exc})"
            ) from None
        self.dict_input, self.input_order = _bind_inputs(config, self.name, schema)
        self.output_index = _bind_outputs(config, self.name)
        _check_returns(config, self.name, schema, self.output_index)

        self.input_types = {e["name"]: e["data_type"] for e in config["input"]}
        # (name, datatype, the dims the module must return, whether they come from a reshape)
        self.outputs = [
            (e["name"], e["data_type"], _config_dims(e), "reshape" in e) for e in config["output"]
        ]
        self.torch_dtypes = {
            datatype: getattr(torch, dtype_name) for datatype, dtype_name in _TORCH_DTYPE_NAMES.items()
        }
        self.datatypes = {dtype: datatype for datatype, dtype in self.torch_dtypes.items()}

    def execute(self, requests: list[Any]) -> list[Any]:
        """Run the requests of one batch; each gets its own response, success or error."""
        # natively the input tensors are made under the inference-mode guard too: inference tensors
        with self.torch.inference_mode(mode=self.inference_mode), self.torch.no_grad():
            return self._execute(requests)

    def _execute(self, requests: list[Any]) -> list[Any]:
        feeds: list[dict[str, Any] | _ModelError] = []
        for request in requests:
            try:
                feeds.append(self._feed(request))
            except _ModelError as exc:
                feeds.append(exc)

        good = [f for f in feeds if isinstance(f, dict)]
        if self.max_batch_size > 0 and len(good) > 1 and self._stackable(good):
            split = self._run_batched(good)
            if split is not None:
                answers = iter(split)
                return [
                    self._error(f) if isinstance(f, _ModelError) else self._response(r, next(answers))
                    for r, f in zip(requests, feeds, strict=True)
                ]
        return [
            self._error(f) if isinstance(f, _ModelError) else self._run_one(r, f)
            for r, f in zip(requests, feeds, strict=True)
        ]

    def finalize(self) -> None:
        self.module = None

    # -- inputs ----------------------------------------------------------------------------------------

    def _feed(self, request: Any) -> dict[str, Any]:
        """The request's inputs as torch tensors (or lists of str), keyed by config name."""
        torch = self.torch
        feed: dict[str, Any] = {}
        for input_name, datatype in self.input_types.items():
            tensor = pb_utils.get_input_tensor_by_name(request, input_name)
            if tensor is None:
                raise _ModelError(f"input '{input_name}' is missing from the request")
            if datatype == _STRING:
                feed[input_name] = self._strings(input_name, tensor.as_numpy())
            else:
                array = tensor.as_numpy()
                if not array.flags.writeable:
                    array = array.copy()  # torch.from_numpy wants memory it may write to
                feed[input_name] = torch.from_numpy(array)
        return feed

    @staticmethod
    def _strings(input_name: str, array: np.ndarray[Any, Any]) -> list[str]:
        texts = []
        for index, value in enumerate(array.reshape(-1)):
            if isinstance(value, bytes):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    raise _ModelError(
                        f"input '{input_name}': element {index} is not UTF-8 text, which a TorchScript "
                        "List[str] needs"
                    ) from None
            texts.append(str(value))
        return texts

    @staticmethod
    def _batch_size(feed: dict[str, Any]) -> int:
        first = next(iter(feed.values()))
        return len(first) if isinstance(first, list) else int(first.shape[0])

    def _stackable(self, feeds: list[dict[str, Any]]) -> bool:
        """Requests can be concatenated when every tensor input has the same non-batch shape."""
        for input_name in self.input_types:
            values = [feed[input_name] for feed in feeds]
            if isinstance(values[0], list):
                continue
            if any(v.dim() == 0 or v.shape[1:] != values[0].shape[1:] for v in values):
                return False
        return True

    # -- running -------------------------------------------------------------------------------------

    def _forward(self, feed: dict[str, Any]) -> list[Any]:
        """``forward`` on one feed, its result as the list of values outputs index into."""
        torch = self.torch
        with torch.jit.optimized_execution(self.optimized_execution):
            if self.dict_input:
                result = self.module.forward(feed)
            else:
                result = self.module.forward(*[feed[input_name] for input_name in self.input_order])
        if isinstance(result, tuple):
            values = list(result)
        elif isinstance(result, torch.Tensor) or (
            isinstance(result, list) and all(isinstance(v, str) for v in result)
        ):
            values = [result]
        else:
            raise _ModelError(f"{_OUTPUT_KINDS}; forward returned {type(result).__name__}")
        for index, value in enumerate(values):
            if isinstance(value, torch.Tensor):
                continue
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise _ModelError(
                    f"output at index {index} must be of type Tensor or List[str], received "
                    f"{type(value).__name__}"
                )
        return values

    def _run_batched(self, feeds: list[dict[str, Any]]) -> list[list[Any]] | None:
        """One forward over the concatenated feeds, split back per feed; None when that cannot be done."""
        torch = self.torch
        sizes = [self._batch_size(feed) for feed in feeds]
        merged: dict[str, Any] = {}
        for input_name in self.input_types:
            values = [feed[input_name] for feed in feeds]
            if isinstance(values[0], list):
                merged[input_name] = [text for value in values for text in value]
            else:
                merged[input_name] = torch.cat(values, dim=0)
        try:
            results = self._forward(merged)
        except Exception as exc:  # one bad request must not fail the others: they run one by one
            _log("verbose", f"model '{self.name}': batched run failed ({exc}); running requests singly")
            return None
        total = sum(sizes)
        per_feed: list[list[Any]] = [[] for _ in feeds]
        for value in results:
            rows = len(value) if isinstance(value, list) else (value.shape[0] if value.dim() > 0 else None)
            if rows != total:
                return None  # an output that does not follow the batch: cannot be split back
            start = 0
            for index, size in enumerate(sizes):
                per_feed[index].append(value[start : start + size])
                start += size
        return per_feed

    def _run_one(self, request: Any, feed: dict[str, Any]) -> Any:
        try:
            results = self._forward(feed)
        except _ModelError as exc:
            return self._error(exc)
        except Exception as exc:
            return self._error(_ModelError(f"PyTorch execute failure: {exc}", invalid=False))
        return self._response(request, results)

    # -- outputs -------------------------------------------------------------------------------------

    def _response(self, request: Any, results: list[Any]) -> Any:
        try:
            requested = set(request.requested_output_names())
        except AttributeError:
            requested = set()
        tensors = []
        try:
            for output_name, datatype, dims, reshaped in self.outputs:
                index = self.output_index[output_name]
                if index >= len(results):
                    raise _ModelError(
                        f"The output {output_name} in the model configuration refers to an output index "
                        f"which doesn't exist. This model has {len(results)} outputs"
                    )
                if requested and output_name not in requested:
                    continue
                tensors.append(self._output(output_name, datatype, dims, reshaped, results[index]))
        except _ModelError as exc:
            return self._error(exc)
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _output(self, output_name: str, datatype: str, dims: list[int], reshaped: bool, value: Any) -> Any:
        if isinstance(value, list):
            if datatype != _STRING:
                raise _ModelError(
                    f"configuration expects datatype {datatype} for output '{output_name}', model provides "
                    "TYPE_STRING (List[str])"
                )
            self._check_shape(output_name, (len(value),), dims, reshaped)
            return pb_utils.Tensor(
                output_name, np.array([text.encode("utf-8") for text in value], dtype=np.object_)
            )
        provided = self.datatypes.get(value.dtype, f"{value.dtype} (no Triton datatype)")
        if provided != datatype:
            raise _ModelError(
                f"configuration expects datatype {datatype} for output '{output_name}', model provides "
                f"{provided}"
            )
        if value.dim() == 0:
            raise _ModelError(f"output '{output_name}' is a scalar which is not supported.")
        self._check_shape(output_name, tuple(value.shape), dims, reshaped)
        value = value.detach().cpu().contiguous()
        return pb_utils.Tensor(output_name, value.numpy())

    def _check_shape(self, output_name: str, shape: tuple[int, ...], dims: list[int], reshaped: bool) -> None:
        """The returned shape must have the config's rank (with the batch dimension) and its fixed dims."""
        expected = [-1, *dims] if self.max_batch_size > 0 else list(dims)
        if len(shape) == len(expected) and all(e in (-1, s) for e, s in zip(expected, shape, strict=True)):
            return
        batch = (
            " (a batch dimension because max_batch_size > 0, then the dims)" if self.max_batch_size else ""
        )
        what = "reshape" if reshaped else "dims"
        raise _ModelError(
            f"output '{output_name}' of model '{self.name}' has shape {_shape_str(shape)} but the model "
            f"configuration's {what} {_shape_str(dims)} make it {_shape_str(expected)}{batch}"
        )

    @staticmethod
    def _error(exc: _ModelError) -> Any:
        code = pb_utils.TritonError.INVALID_ARG if exc.invalid else pb_utils.TritonError.INTERNAL
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(exc.message, code))
