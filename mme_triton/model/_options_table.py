"""How each :func:`~mme_triton.model.authoring.configure_model` option writes itself into a config, and
which combinations Triton refuses. :data:`OPTIONS` is the table docs/model-prep.md documents."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mme_triton.model._pb import ModelConfig
from mme_triton.model.backends import model_backend
from mme_triton.model.options import DynamicBatching, InstanceGroup, Option, TensorRT

__all__ = ["OPTIONS", "check_backend", "check_combinations", "require_int"]


# --------------------------------------------------------------------------------------------------
# option writers


def _parameter(key: str, render: Callable[[Any], str]) -> Callable[[ModelConfig, Any, Path], None]:
    def apply(config: ModelConfig, value: Any, directory: Path) -> None:
        del directory
        if value is None:
            if key in config.parameters:
                del config.parameters[key]
            return
        config.parameters[key].string_value = render(value)

    return apply


def _thread_count(onnx_key: str, torch_key: str) -> Callable[[ModelConfig, Any, Path], None]:
    def apply(config: ModelConfig, value: Any, directory: Path) -> None:
        key = torch_key if model_backend(config) == "pytorch" else onnx_key
        if value is not None:
            require_int(value, onnx_key, minimum=0)
        _parameter(key, str)(config, value, directory)

    return apply


def require_int(value: Any, name: str, *, minimum: int) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum``, else ``TypeError``/``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _choice(value: Any, name: str, choices: Mapping[str, str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return choices[value]


def _flag(name: str, key: str) -> Callable[[ModelConfig, Any, Path], None]:
    return _parameter(key, lambda value: "1" if _bool(value, name) else "0")


def _bool_text(name: str, key: str) -> Callable[[ModelConfig, Any, Path], None]:
    return _parameter(key, lambda value: "true" if _bool(value, name) else "false")


def _apply_max_batch_size(config: ModelConfig, value: Any, directory: Path) -> None:
    del directory
    config.max_batch_size = require_int(value, "max_batch_size", minimum=0)


def _apply_dynamic_batching(config: ModelConfig, value: Any, directory: Path) -> None:
    del directory
    if value is None or value is False:
        config.ClearField("dynamic_batching")
        return
    if value is True:
        settings = DynamicBatching()
    elif isinstance(value, DynamicBatching):
        settings = value
    elif isinstance(value, Mapping):
        settings = DynamicBatching(**value)
    else:
        raise TypeError(f"dynamic_batching must be a bool, a DynamicBatching or a mapping, got {value!r}")
    delay = require_int(settings.max_queue_delay_microseconds, "max_queue_delay_microseconds", minimum=0)
    preferred = [
        require_int(size, "preferred_batch_size", minimum=1) for size in settings.preferred_batch_size
    ]
    batching = config.dynamic_batching
    batching.SetInParent()
    batching.max_queue_delay_microseconds = delay
    del batching.preferred_batch_size[:]
    batching.preferred_batch_size.extend(preferred)
    batching.preserve_ordering = _bool(settings.preserve_ordering, "preserve_ordering")


def _apply_instance_group(config: ModelConfig, value: Any, directory: Path) -> None:
    del directory
    from mme_triton.model._pb import model_config_pb2

    kinds = model_config_pb2().ModelInstanceGroup.Kind
    groups = [] if value is None else [value] if isinstance(value, InstanceGroup) else list(value)
    del config.instance_group[:]
    for group in groups:
        if not isinstance(group, InstanceGroup):
            raise TypeError(f"instance_group takes InstanceGroup entries, got {group!r}")
        require_int(group.count, "instance_group count", minimum=1)
        if group.kind not in ("KIND_AUTO", "KIND_GPU", "KIND_CPU"):
            raise ValueError(
                f"instance_group kind must be KIND_GPU, KIND_CPU or KIND_AUTO, got {group.kind!r}"
            )
        if group.gpus and group.kind == "KIND_CPU":
            raise ValueError("an instance_group of KIND_CPU cannot list gpus; remove gpus or use KIND_GPU")
        entry = config.instance_group.add()
        entry.count = group.count
        entry.kind = kinds.Value(group.kind)
        entry.gpus.extend(require_int(gpu, "gpu", minimum=0) for gpu in group.gpus)


def _apply_response_cache(config: ModelConfig, value: Any, directory: Path) -> None:
    del directory
    if value is None or not _bool(value, "response_cache"):
        config.ClearField("response_cache")
        return
    config.response_cache.enable = True


_GRAPH_LEVELS = {"basic": "-1", "extended": "1", "disabled": "2", "all": ""}


def _apply_graph_level(config: ModelConfig, value: Any, directory: Path) -> None:
    del directory
    level = "" if value is None else _choice(value, "graph_optimization_level", _GRAPH_LEVELS)
    if not level:  # ONNX Runtime's default, all optimizations: no graph section
        if config.HasField("optimization"):
            config.optimization.ClearField("graph")
            _prune_optimization(config)
        return
    config.optimization.graph.level = int(level)


def _accelerators(config: ModelConfig, kind: str) -> Any:
    return getattr(config.optimization.execution_accelerators, kind)


def _set_accelerator(config: ModelConfig, kind: str, name: str, parameters: Mapping[str, str] | None) -> None:
    accelerators = _accelerators(config, kind)
    kept = [a for a in accelerators if a.name != name]
    if parameters is None and len(kept) == len(accelerators):
        _prune_optimization(config)
        return
    copies = []
    for accelerator in kept:
        copy = type(accelerator)()
        copy.CopyFrom(accelerator)
        copies.append(copy)
    del accelerators[:]
    for accelerator in copies:
        accelerators.add().CopyFrom(accelerator)
    if parameters is not None:
        entry = accelerators.add()
        entry.name = name
        for key, text in parameters.items():
            entry.parameters[key] = text
    _prune_optimization(config)


def _prune_optimization(config: ModelConfig) -> None:
    if not config.HasField("optimization"):
        return
    optimization = config.optimization
    if (
        optimization.HasField("execution_accelerators")
        and not optimization.execution_accelerators.ListFields()
    ):
        optimization.ClearField("execution_accelerators")
    if not optimization.ListFields():
        config.ClearField("optimization")


def _apply_tensorrt(config: ModelConfig, value: Any, directory: Path) -> None:
    del directory
    if value is None or value is False:
        _set_accelerator(config, "gpu_execution_accelerator", "tensorrt", None)
        return
    settings = TensorRT() if value is True else value
    if not isinstance(settings, TensorRT):
        raise TypeError(f"tensorrt must be a bool or a TensorRT, got {value!r}")
    parameters = {"precision_mode": _choice(settings.precision_mode, "precision_mode", _PRECISIONS)}
    if settings.max_workspace_size_bytes is not None:
        size = require_int(settings.max_workspace_size_bytes, "max_workspace_size_bytes", minimum=1)
        parameters["max_workspace_size_bytes"] = str(size)
    if settings.engine_cache_path is not None:
        if not settings.engine_cache_path:
            raise ValueError("engine_cache_path must name a directory")
        parameters["trt_engine_cache_enable"] = "1"
        parameters["trt_engine_cache_path"] = settings.engine_cache_path
    if settings.int8_calibration_table_name is not None:
        if settings.precision_mode != "INT8":
            raise ValueError("int8_calibration_table_name applies to precision_mode 'INT8' only")
        parameters["int8_calibration_table_name"] = settings.int8_calibration_table_name
    _set_accelerator(config, "gpu_execution_accelerator", "tensorrt", parameters)


_PRECISIONS = {"FP32": "FP32", "FP16": "FP16", "BF16": "BF16", "INT8": "INT8"}


def _accelerator_switch(option: str, kind: str, name: str) -> Callable[[ModelConfig, Any, Path], None]:
    def apply(config: ModelConfig, value: Any, directory: Path) -> None:
        del directory
        on = value is not None and _bool(value, option)
        _set_accelerator(config, kind, name, {} if on else None)

    return apply


_SHRINKAGE = re.compile(r"(cpu|gpu):\d+(;(cpu|gpu):\d+)*")


def _shrinkage(value: Any) -> str:
    if not isinstance(value, str) or not _SHRINKAGE.fullmatch(value):
        raise ValueError(
            f"memory_arena_shrinkage is a list of devices such as 'cpu:0' or 'cpu:0;gpu:0', got {value!r}"
        )
    return value


def _positive(name: str) -> Callable[[Any], str]:
    return lambda value: str(require_int(value, name, minimum=1))


_ORT = frozenset({"onnxruntime"})

#: Every option of :func:`configure_model`, in the order they are applied and documented.
OPTIONS: Mapping[str, Option] = {
    option.name: option
    for option in (
        Option("max_batch_size", None, "max_batch_size", _apply_max_batch_size),
        Option(
            "dynamic_batching",
            None,
            "dynamic_batching { max_queue_delay_microseconds preferred_batch_size preserve_ordering }",
            _apply_dynamic_batching,
        ),
        Option("instance_group", None, "instance_group [ { count kind gpus } ]", _apply_instance_group),
        Option("response_cache", None, "response_cache { enable: true }", _apply_response_cache),
        Option(
            "model_warmup",
            None,
            "model_warmup [ { name batch_size count inputs { key: <input> value: { data_type dims "
            "zero_data | random_data | input_data_file } } } ] (+ files in warmup/)",
            lambda config, value, directory: None,
        ),
        Option(
            "graph_optimization_level",
            _ORT,
            "optimization { graph { level: -1 | 1 | 2 } }",
            _apply_graph_level,
        ),
        Option(
            "execution_mode",
            _ORT,
            'parameters { key: "execution_mode" value: { string_value: "0" | "1" } }',
            _parameter(
                "execution_mode",
                lambda v: _choice(v, "execution_mode", {"sequential": "0", "parallel": "1"}),
            ),
        ),
        Option(
            "intra_op_thread_count",
            frozenset({"onnxruntime", "pytorch"}),
            'parameters { key: "intra_op_thread_count" value: { string_value } } '
            '(PyTorch: "INTRA_OP_THREAD_COUNT")',
            _thread_count("intra_op_thread_count", "INTRA_OP_THREAD_COUNT"),
        ),
        Option(
            "inter_op_thread_count",
            frozenset({"onnxruntime", "pytorch"}),
            'parameters { key: "inter_op_thread_count" value: { string_value } } '
            '(PyTorch: "INTER_OP_THREAD_COUNT")',
            _thread_count("inter_op_thread_count", "INTER_OP_THREAD_COUNT"),
        ),
        Option(
            "enable_mem_arena",
            _ORT,
            'parameters { key: "enable_mem_arena" value: { string_value: "1" | "0" } }',
            _flag("enable_mem_arena", "enable_mem_arena"),
        ),
        Option(
            "enable_mem_pattern",
            _ORT,
            'parameters { key: "enable_mem_pattern" value: { string_value: "1" | "0" } }',
            _flag("enable_mem_pattern", "enable_mem_pattern"),
        ),
        Option(
            "memory_arena_shrinkage",
            _ORT,
            'parameters { key: "memory.enable_memory_arena_shrinkage" '
            'value: { string_value: "cpu:0;gpu:0" } }',
            _parameter("memory.enable_memory_arena_shrinkage", _shrinkage),
        ),
        Option(
            "arena_extend_strategy",
            _ORT,
            'parameters { key: "arena_extend_strategy" value: { string_value: "0" | "1" } }',
            _parameter(
                "arena_extend_strategy",
                lambda v: _choice(
                    v, "arena_extend_strategy", {"next_power_of_two": "0", "same_as_requested": "1"}
                ),
            ),
        ),
        Option(
            "cudnn_conv_algo_search",
            _ORT,
            'parameters { key: "cudnn_conv_algo_search" value: { string_value: "0" | "1" | "2" } }',
            _parameter(
                "cudnn_conv_algo_search",
                lambda v: _choice(
                    v, "cudnn_conv_algo_search", {"exhaustive": "0", "heuristic": "1", "default": "2"}
                ),
            ),
        ),
        Option(
            "gpu_mem_limit",
            _ORT,
            'parameters { key: "gpu_mem_limit" value: { string_value: "<bytes>" } }',
            _parameter("gpu_mem_limit", _positive("gpu_mem_limit")),
        ),
        Option(
            "do_copy_in_default_stream",
            _ORT,
            'parameters { key: "do_copy_in_default_stream" value: { string_value: "1" | "0" } }',
            _flag("do_copy_in_default_stream", "do_copy_in_default_stream"),
        ),
        Option(
            "tensorrt",
            _ORT,
            'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" '
            "parameters { precision_mode max_workspace_size_bytes trt_engine_cache_enable "
            "trt_engine_cache_path } } ] } }",
            _apply_tensorrt,
        ),
        Option(
            "openvino",
            _ORT,
            'optimization { execution_accelerators { cpu_execution_accelerator [ { name: "openvino" } ] } }',
            _accelerator_switch("openvino", "cpu_execution_accelerator", "openvino"),
        ),
        Option(
            "auto_mixed_precision",
            frozenset({"tensorflow"}),
            "optimization { execution_accelerators { gpu_execution_accelerator "
            '[ { name: "auto_mixed_precision" } ] } }',
            _accelerator_switch("auto_mixed_precision", "gpu_execution_accelerator", "auto_mixed_precision"),
        ),
        Option(
            "inference_mode",
            frozenset({"pytorch"}),
            'parameters { key: "INFERENCE_MODE" value: { string_value: "true" | "false" } }',
            _bool_text("inference_mode", "INFERENCE_MODE"),
        ),
        Option(
            "disable_optimized_execution",
            frozenset({"pytorch"}),
            'parameters { key: "DISABLE_OPTIMIZED_EXECUTION" value: { string_value: "true" | "false" } }',
            _bool_text("disable_optimized_execution", "DISABLE_OPTIMIZED_EXECUTION"),
        ),
    )
}

# Options an ensemble cannot take: it has no instances, its scheduling is ensemble_scheduling, and Triton
# does not warm it up.
_NOT_FOR_ENSEMBLES = frozenset({"dynamic_batching", "instance_group", "model_warmup"})


def check_backend(option: Option, backend: str | None, model: str) -> None:
    if backend == "ensemble" and option.name in _NOT_FOR_ENSEMBLES:
        raise ValueError(
            f"{option.name} does not apply to ensemble {model!r}: set it on the ensemble's step models"
        )
    if option.backends is not None and backend not in option.backends:
        raise ValueError(
            f"{option.name} is read by the {' and '.join(sorted(option.backends))} backend(s) only; "
            f"model {model!r} is served by {backend or 'an unknown backend'}"
        )


def check_combinations(config: ModelConfig, model: str) -> None:
    max_batch_size: int = config.max_batch_size
    if config.HasField("dynamic_batching"):
        if max_batch_size == 0:
            raise ValueError(
                f"dynamic_batching needs max_batch_size > 0, but {model!r} has max_batch_size 0: set "
                "max_batch_size (the model must have a batch dimension) or dynamic_batching=False"
            )
        bad = [s for s in config.dynamic_batching.preferred_batch_size if s > max_batch_size]
        if bad:
            raise ValueError(
                f"preferred_batch_size {bad} exceeds max_batch_size {max_batch_size} of {model!r}; Triton "
                "refuses such a config"
            )
    for warmup in config.model_warmup:
        if max_batch_size == 0 and warmup.batch_size != 1:
            raise ValueError(
                f"model_warmup batch_size is {warmup.batch_size} but {model!r} has max_batch_size 0: a model "
                "without batching is warmed up with batch_size 1"
            )
        if max_batch_size > 0 and warmup.batch_size > max_batch_size:
            raise ValueError(
                f"model_warmup batch_size {warmup.batch_size} exceeds max_batch_size {max_batch_size} of "
                f"{model!r}"
            )
