"""Config semantics, as Triton core's ``ValidateModelConfig``, ``ValidateIOShape`` and
``ValidateInstanceGroup`` check them: names, batching, tensor dims and reshapes, instance groups and the
ensemble fields."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from mme_triton.model import codes
from mme_triton.model._pb import ModelConfig, model_config_pb2
from mme_triton.model.backends import ENSEMBLE
from mme_triton.model.problems import Problem

__all__ = ["check_config"]


def check_config(
    config: ModelConfig,
    where: str,
    *,
    backend: str | None = None,
    directory: str | None = None,
    component: bool = False,
) -> list[Problem]:
    """Config semantics: name, batching, inputs/outputs, dynamic batching, instance groups, ensembles."""
    problems: list[Problem] = []
    if component and config.name and config.name != directory:
        problems.append(
            Problem(
                "error",
                codes.COMPONENT_NAME_MISMATCH,
                f"config name {config.name!r} differs from the directory name {directory!r}; Triton loads "
                "ensemble steps by directory name and refuses a model whose config names it otherwise, so "
                f'set name "{directory}" or remove the name field',
                where,
            )
        )
    elif directory is not None and config.name and config.name != directory:
        problems.append(
            Problem(
                "warning",
                codes.CONFIG_NAME_MISMATCH,
                f"config name {config.name!r} differs from the directory name {directory!r}; SageMaker "
                "serves the model under its TargetModel name whatever the config says, but a plain Triton "
                f'model repository refuses the mismatch, so set name "{directory}" or remove the name field',
                where,
            )
        )
    max_batch_size = config.max_batch_size
    if max_batch_size < 0:
        problems.append(
            Problem(
                "error",
                codes.MAX_BATCH_SIZE_INVALID,
                f"max_batch_size is {max_batch_size}; use 0 (no batching) or the largest batch allowed",
                where,
            )
        )
    # Auto-complete fills in a tensor's data_type and dims only for TensorFlow SavedModels; the other
    # backends fill in inputs or outputs only when the config lists none, and Triton core then refuses
    # a listed tensor without them ("model input 'x' must specify 'dims'").
    auto_completed = backend == "tensorflow" and config.platform in ("", "tensorflow_savedmodel")
    problems.extend(_check_tensors(config.input, "input", max_batch_size, where, auto_completed))
    problems.extend(_check_tensors(config.output, "output", max_batch_size, where, auto_completed))
    problems.extend(_check_batching(config, where))
    problems.extend(_check_instance_groups(config, where, backend))
    problems.extend(_check_ensemble_fields(config, where))
    if backend == "onnxruntime":
        problems.extend(_check_onnxruntime_threads(config, where))
    return problems


def _check_onnxruntime_threads(config: ModelConfig, where: str) -> list[Problem]:
    """ONNX Runtime runs the operators of a graph one after the other unless ``execution_mode`` is 1
    (parallel), and then ignores ``inter_op_num_threads`` ("If sequential execution is enabled this value
    is ignored, it acts as if it was set to 1": onnxruntime_c_api.h, SetInterOpNumThreads). Triton's
    onnxruntime backend passes both parameters through, sequential when ``execution_mode`` is unset."""
    parameters = config.parameters
    if "inter_op_thread_count" not in parameters:
        return []
    threads = parameters["inter_op_thread_count"].string_value.strip()
    mode = parameters["execution_mode"].string_value.strip() if "execution_mode" in parameters else ""
    if not threads.isdigit() or int(threads) <= 1 or mode not in ("", "0"):
        return []
    how = 'execution_mode "0" (sequential)' if mode else "no execution_mode (sequential, the default)"
    return [
        Problem(
            "warning",
            codes.INTER_OP_THREADS_IGNORED,
            f"inter_op_thread_count {threads} does nothing with {how}: ONNX Runtime runs one operator at a "
            "time and ignores it; set execution_mode parallel (configure_model(..., "
            'execution_mode="parallel")) for operators to run side by side, or remove inter_op_thread_count '
            "(intra_op_thread_count sets the threads inside each operator)",
            where,
        )
    ]


def _check_tensors(
    tensors: Sequence[object], kind: str, max_batch_size: int, where: str, auto_completed: bool
) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, tensor in enumerate(tensors):
        name: str = tensor.name  # type: ignore[attr-defined]
        label = f"{kind} {name!r}" if name else f"{kind} #{index + 1}"
        if not name:
            problems.append(
                Problem("error", codes.TENSOR_NAME_MISSING, f'{label} has no name; add name: "..."', where)
            )
        elif name in seen:
            problems.append(
                Problem(
                    "error",
                    codes.TENSOR_NAME_DUPLICATE,
                    f"{kind} name {name!r} appears more than once; each {kind} needs its own name",
                    where,
                )
            )
        seen.add(name)
        data_type: int = tensor.data_type  # type: ignore[attr-defined]
        if data_type == model_config_pb2().TYPE_INVALID and not auto_completed:
            problems.append(
                Problem(
                    "error",
                    codes.DATATYPE_INVALID,
                    f"{label} has no data_type; set one such as TYPE_FP32, TYPE_INT64 or TYPE_STRING",
                    where,
                )
            )
        elif data_type not in model_config_pb2().DataType.values():
            problems.append(
                Problem(
                    "error",
                    codes.DATATYPE_INVALID,
                    f"{label} has data_type {data_type}, which is no Triton datatype; use a name such as "
                    "TYPE_FP32, TYPE_INT64 or TYPE_STRING",
                    where,
                )
            )
        dims = list(tensor.dims)  # type: ignore[attr-defined]
        has_reshape: bool = tensor.HasField("reshape")  # type: ignore[attr-defined]
        reshape = list(tensor.reshape.shape) if has_reshape else None  # type: ignore[attr-defined]
        problems.extend(_check_dims(label, dims, reshape, max_batch_size, where, auto_completed))
        tensor_format = getattr(tensor, "format", 0)
        if tensor_format in (1, 2) and len(dims) != 3:  # FORMAT_NHWC, FORMAT_NCHW
            problems.append(
                Problem(
                    "error",
                    codes.DIMS_INVALID,
                    f"{label} has format NHWC/NCHW, which needs exactly 3 dims (got {len(dims)})",
                    where,
                )
            )
    return problems


def _check_dims(
    label: str,
    dims: list[int],
    reshape: list[int] | None,
    max_batch_size: int,
    where: str,
    auto_completed: bool,
) -> list[Problem]:
    if not dims:
        if auto_completed:
            return []
        batch = " (without the batch dimension, since max_batch_size > 0)" if max_batch_size > 0 else ""
        return [
            Problem(
                "error",
                codes.DIMS_INVALID,
                f"{label} has no dims; give its shape{batch}, e.g. dims: [ -1 ]",
                where,
            )
        ]
    bad = [d for d in dims if d < 1 and d != -1]
    if bad:
        return [
            Problem(
                "error",
                codes.DIMS_INVALID,
                f"{label} has dims {dims}: every dim is an integer >= 1, or -1 for a variable size",
                where,
            )
        ]
    if reshape is None:
        return []
    problems: list[Problem] = []
    if not reshape and max_batch_size == 0:
        problems.append(
            Problem(
                "error",
                codes.RESHAPE_INVALID,
                f"{label} has an empty reshape but max_batch_size is 0: that would be a scalar tensor, "
                "which Triton does not support",
                where,
            )
        )
        return problems
    if any(d < 1 and d != -1 for d in reshape):
        problems.append(
            Problem(
                "error",
                codes.RESHAPE_INVALID,
                f"{label} has reshape {reshape}: every dim is an integer >= 1, or -1 for a variable size",
                where,
            )
        )
        return problems
    if not _reshape_compatible(dims, reshape):
        problems.append(
            Problem(
                "error",
                codes.RESHAPE_INVALID,
                f"{label}: reshape {reshape} does not hold the same elements as dims {dims} (between "
                "variable-size dims the products must match)",
                where,
            )
        )
    return problems


def _reshape_compatible(dims: list[int], reshape: list[int]) -> bool:
    """Triton's rule: equal element counts; with -1 dims, equal products between the -1s."""
    if not reshape:
        return -1 not in dims and math.prod(dims) == 1
    return _chunks(dims) == _chunks(reshape)


def _chunks(shape: list[int]) -> list[int]:
    products = [1]
    for dim in shape:
        if dim == -1:
            products.append(1)
        else:
            products[-1] *= dim
    return products


def _check_batching(config: ModelConfig, where: str) -> list[Problem]:
    problems: list[Problem] = []
    max_batch_size: int = config.max_batch_size
    if config.HasField("dynamic_batching"):
        if max_batch_size == 0:
            problems.append(
                Problem(
                    "warning",
                    codes.DYNAMIC_BATCHING_WITHOUT_BATCHING,
                    "dynamic_batching has no effect with max_batch_size 0: Triton loads the model but never "
                    "batches requests; set max_batch_size (and drop the batch dim from dims) or remove "
                    "dynamic_batching",
                    where,
                )
            )
        problems.extend(
            _check_preferred(config.dynamic_batching.preferred_batch_size, max_batch_size, where, "dynamic")
        )
    if config.HasField("sequence_batching") and config.sequence_batching.HasField("oldest"):
        problems.extend(
            _check_preferred(
                config.sequence_batching.oldest.preferred_batch_size, max_batch_size, where, "sequence"
            )
        )
    return problems


def _check_preferred(sizes: Iterable[int], max_batch_size: int, where: str, kind: str) -> list[Problem]:
    bad = [size for size in sizes if size <= 0 or size > max_batch_size]
    if not bad:
        return []
    return [
        Problem(
            "error",
            codes.PREFERRED_BATCH_SIZE_INVALID,
            f"{kind} batching preferred_batch_size {bad} outside 1..max_batch_size ({max_batch_size})",
            where,
        )
    ]


def _check_instance_groups(config: ModelConfig, where: str, backend: str | None) -> list[Problem]:
    problems: list[Problem] = []
    pb2 = model_config_pb2()
    kinds = pb2.ModelInstanceGroup.Kind
    for index, group in enumerate(config.instance_group):
        label = f"instance_group {group.name!r}" if group.name else f"instance_group #{index + 1}"
        if backend == ENSEMBLE or config.platform == ENSEMBLE:
            problems.append(
                Problem(
                    "error",
                    codes.INSTANCE_GROUP_INVALID,
                    "an ensemble has no instances of its own; remove instance_group",
                    where,
                )
            )
            break
        if group.count < 0:
            problems.append(
                Problem(
                    "error", codes.INSTANCE_GROUP_INVALID, f"{label} has count {group.count}; use >= 1", where
                )
            )
        if group.kind not in kinds.values():
            problems.append(
                Problem(
                    "error", codes.INSTANCE_GROUP_INVALID, f"{label} has unknown kind {group.kind}", where
                )
            )
        elif len(group.gpus) and group.kind in (kinds.Value("KIND_CPU"), kinds.Value("KIND_MODEL")):
            problems.append(
                Problem(
                    "error",
                    codes.INSTANCE_GROUP_INVALID,
                    f"{label} has kind {kinds.Name(group.kind)} but lists gpus {list(group.gpus)}; "
                    "remove gpus or use KIND_GPU",
                    where,
                )
            )
        if len(group.profile) and config.platform != "tensorrt_plan" and backend != "tensorrt":
            problems.append(
                Problem(
                    "error",
                    codes.INSTANCE_GROUP_INVALID,
                    f"{label} sets profile, which only TensorRT models support",
                    where,
                )
            )
    return problems


def _check_ensemble_fields(config: ModelConfig, where: str) -> list[Problem]:
    has_scheduling = config.HasField("ensemble_scheduling")
    if config.platform == ENSEMBLE and (not has_scheduling or not len(config.ensemble_scheduling.step)):
        return [
            Problem(
                "error",
                codes.ENSEMBLE_SCHEDULING_MISSING,
                'platform "ensemble" needs ensemble_scheduling with at least one step',
                where,
            )
        ]
    if has_scheduling and config.platform != ENSEMBLE:
        return [
            Problem(
                "error",
                codes.ENSEMBLE_SCHEDULING_UNEXPECTED,
                'ensemble_scheduling is only for models with platform: "ensemble"; set the platform or '
                "remove ensemble_scheduling",
                where,
            )
        ]
    return []
