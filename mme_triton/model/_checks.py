"""Checks on one model directory: backend resolution, layout and config semantics, as Triton does them.

The rules follow Triton core's ``model_config_utils.cc`` (auto-complete of platform/backend from file
names, ``ValidateModelConfig``, ``ValidateIOShape``, ``ValidateInstanceGroup``) and ``model_lifecycle.cc``
(which version directories load).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mme_triton.model import codes
from mme_triton.model._files import path_kind, read_regular
from mme_triton.model._pb import ModelConfig, model_config_pb2
from mme_triton.model.config import CONFIG_FILENAME
from mme_triton.model.problems import Problem

ENSEMBLE = "ensemble"

# platform -> the backend that serves it (model_config_utils.cc GetBackendTypeFromPlatform).
PLATFORM_BACKENDS: dict[str, str] = {
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "libtorch": "pytorch",
    "torch_aoti": "pytorch",
    ENSEMBLE: "",
}

# Backends that ship with Triton's images (the SageMaker Triton containers included).
KNOWN_BACKENDS = frozenset(
    {
        "onnxruntime",
        "tensorrt",
        "pytorch",
        "tensorflow",
        "python",
        "openvino",
        "fil",
        "dali",
        "identity",
        "repeat",
        "square",
        "vllm",
        "tensorrtllm",
    }
)

# The file (or directory) a backend loads from each version directory when default_model_filename is unset.
_PLATFORM_FILES: dict[str, tuple[str, ...]] = {
    "tensorflow_savedmodel": ("model.savedmodel",),
    "tensorflow_graphdef": ("model.graphdef",),
    "torch_aoti": ("model.pt2",),
}
_BACKEND_FILES: dict[str, tuple[str, ...]] = {
    "onnxruntime": ("model.onnx",),
    "tensorrt": ("model.plan",),
    "pytorch": ("model.pt",),
    "python": ("model.py",),
    "openvino": ("model.xml",),
    "dali": ("model.dali",),
    # FIL's file name follows its model_type parameter; any of these is one FIL can load.
    "fil": ("xgboost.model", "xgboost.json", "xgboost.ubj", "model.txt", "checkpoint.tl"),
    "vllm": ("model.json",),
}

_PYTORCH_PLATFORMS = ("pytorch_libtorch", "libtorch", "torch_aoti")
_DEFAULT_NUM_VERSIONS = 1


@dataclass(frozen=True)
class Layout:
    """What the directory scan found: the model directory, its numeric versions, whether a config exists."""

    path: Path
    versions: tuple[int, ...]
    config_present: bool

    @property
    def config_file(self) -> str:
        return str(self.path / CONFIG_FILENAME)


def check_model(
    layout: Layout, config: ModelConfig | None, *, component: bool = False
) -> tuple[str | None, list[Problem]]:
    """Resolve the backend and run every single-model check; returns ``(backend, problems)``.

    ``component`` marks a model loaded as an ensemble step (its config name must match its directory).
    """
    problems: list[Problem] = []
    first_version = _first_version_contents(layout)

    if config is None:
        backend, platform = _resolve(None, first_version)
        if not layout.config_present:
            problems.extend(_check_missing_config(layout, backend, platform))
    else:
        backend, platform = _resolve(config, first_version)
        problems.extend(_check_platform(layout, config, backend))

    if not layout.versions:
        problems.append(
            Problem(
                "error",
                codes.VERSION_MISSING,
                "no version directory: Triton loads models from numbered subdirectories; put the model "
                "files in 1/ (an ensemble needs an empty 1/ too)",
                str(layout.path),
            )
        )

    loaded = _versions_to_load(layout, config, problems)
    if layout.versions and not loaded:
        problems.append(
            Problem(
                "error",
                codes.VERSION_MISSING,
                f"version_policy selects none of the versions present "
                f"({', '.join(map(str, layout.versions))}); Triton needs at least one to load the model",
                layout.config_file,
            )
        )
    if backend is not None and backend != ENSEMBLE:
        problems.extend(_check_model_files(layout, config, backend, platform, loaded))
    if backend == "python":
        problems.extend(_check_python_class(layout, config, loaded))
    if backend == "python" and config is not None:
        problems.extend(_check_python_env(layout, config))
    if config is not None:
        problems.extend(
            check_config(
                config, layout.config_file, backend=backend, directory=layout.path.name, component=component
            )
        )
    if backend == "onnxruntime":
        from mme_triton.model.onnx_check import check_onnx

        for version in loaded:
            onnx_path = _onnx_file(layout.path / str(version), config)
            if onnx_path is not None:
                problems.extend(check_onnx(onnx_path, config, where=layout.config_file))
    return backend, problems


def effective_config(
    path: Path, config: ModelConfig | None, backend: str | None, versions: Sequence[int]
) -> ModelConfig | None:
    """The config Triton will run the model with: the file's, or for ONNX what auto-complete infers."""
    if backend != "onnxruntime" or (config is not None and (len(config.input) or len(config.output))):
        return config
    if not versions:
        return config
    onnx_path = _onnx_file(path / str(max(versions)), config)
    if onnx_path is None:
        return config
    from mme_triton.model.onnx_check import autocomplete_config

    return autocomplete_config(onnx_path, config) or config


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
    auto_completed = backend in {"onnxruntime", "tensorrt", "openvino"} or (
        backend == "tensorflow" and config.platform in ("", "tensorflow_savedmodel")
    )
    problems.extend(_check_tensors(config.input, "input", max_batch_size, where, auto_completed))
    problems.extend(_check_tensors(config.output, "output", max_batch_size, where, auto_completed))
    problems.extend(_check_batching(config, where))
    problems.extend(_check_instance_groups(config, where, backend))
    problems.extend(_check_ensemble_fields(config, where))
    return problems


# --- platform and backend ---------------------------------------------------------------------------


def _first_version_contents(layout: Layout) -> dict[str, bool]:
    """Names in the first version directory (by string order, as Triton picks it) -> is it a directory."""
    if not layout.versions:
        return {}
    first = min(str(v) for v in layout.versions)
    try:
        with os.scandir(layout.path / first) as it:
            return {entry.name: entry.is_dir(follow_symlinks=False) for entry in it}
    except OSError:
        return {}


def _resolve(config: ModelConfig | None, contents: dict[str, bool]) -> tuple[str | None, str]:
    """``(backend, platform)`` the way Triton's auto-complete fills them in (model_config_utils.cc).

    ``backend`` is ``"ensemble"`` for ensembles and ``None`` when it cannot be told.
    """
    platform = config.platform if config is not None else ""
    backend = config.backend if config is not None else ""
    filename = config.default_model_filename if config is not None else ""
    guess = not platform and not filename

    if not platform and backend in ("", "tensorflow"):
        if filename == "model.savedmodel" or (guess and contents.get("model.savedmodel") is True):
            platform = "tensorflow_savedmodel"
        elif filename == "model.graphdef" or (guess and contents.get("model.graphdef") is False):
            platform = "tensorflow_graphdef"
    if platform in ("tensorflow_savedmodel", "tensorflow_graphdef"):
        return backend or "tensorflow", platform

    if not backend:
        if (
            platform == "tensorrt_plan"
            or filename == "model.plan"
            or (guess and contents.get("model.plan") is False)
        ):
            backend = "tensorrt"
        elif (
            platform == "onnxruntime_onnx" or filename == "model.onnx" or (guess and "model.onnx" in contents)
        ):
            backend = "onnxruntime"
        elif filename == "model.xml" or (guess and "model.xml" in contents):
            backend = "openvino"
        elif platform in _PYTORCH_PLATFORMS or filename in ("model.pt", "model.pt2"):
            backend = "pytorch"
        elif guess and contents.get("model.pt") is False:
            backend, platform = "pytorch", "pytorch_libtorch"
        elif guess and contents.get("model.pt2") is False:
            backend, platform = "pytorch", "torch_aoti"
        elif filename == "model.py" or (guess and "model.py" in contents):
            backend = "python"
        elif platform == ENSEMBLE:
            return ENSEMBLE, platform
    if backend == "tensorrt" and not platform:
        platform = "tensorrt_plan"
    elif backend == "onnxruntime" and not platform:
        platform = "onnxruntime_onnx"
    elif backend == "pytorch" and not platform:
        platform = "pytorch_libtorch"
    return backend or None, platform


def _check_missing_config(layout: Layout, backend: str | None, platform: str) -> list[Problem]:
    where = layout.config_file
    if backend in ("onnxruntime", "tensorrt", "openvino") or platform == "tensorflow_savedmodel":
        return []  # Triton auto-completes the config from the model file
    if backend == "python" and _defines_auto_complete(layout):
        return []
    if backend is None:
        reason = (
            "Triton cannot tell which backend serves this model (no model.onnx, model.plan, "
            "model.savedmodel, ... in the first version directory)"
        )
    elif backend == "python":
        reason = (
            "model.py does not implement auto_complete_config, so the model would load without inputs "
            "or outputs and Triton would refuse every request that sends a tensor"
        )
    else:
        reason = f"the {backend} backend cannot fill in inputs and outputs from the model file"
    return [
        Problem(
            "error",
            codes.CONFIG_MISSING,
            f"no config.pbtxt: {reason}; write one with backend/platform, max_batch_size, input and output",
            where,
        )
    ]


def _defines_auto_complete(layout: Layout) -> bool:
    for version in layout.versions:
        try:
            source = read_regular(layout.path / str(version) / "model.py")
        except OSError:
            continue
        if b"def auto_complete_config" in source:
            return True
    return False


def _check_platform(layout: Layout, config: ModelConfig, backend: str | None) -> list[Problem]:
    where = layout.config_file
    platform: str = config.platform
    configured_backend: str = config.backend
    problems: list[Problem] = []
    if platform == ENSEMBLE and configured_backend:
        problems.append(
            Problem(
                "error",
                codes.PLATFORM_BACKEND_MISMATCH,
                f'an ensemble has platform "ensemble" and no backend; remove backend: "{configured_backend}"',
                where,
            )
        )
        return problems
    custom_backend = bool(configured_backend) and configured_backend not in KNOWN_BACKENDS
    if platform and platform not in PLATFORM_BACKENDS and not custom_backend:
        problems.append(
            Problem(
                "error",
                codes.PLATFORM_UNKNOWN,
                f"unknown platform {platform!r}; use one of {', '.join(sorted(PLATFORM_BACKENDS))}, or set "
                'backend instead (e.g. backend: "python")',
                where,
            )
        )
        return problems
    if (
        configured_backend in KNOWN_BACKENDS
        and platform
        and PLATFORM_BACKENDS.get(platform) != configured_backend
    ):
        problems.append(
            Problem(
                "error",
                codes.PLATFORM_BACKEND_MISMATCH,
                f"platform {platform!r} is served by the {PLATFORM_BACKENDS.get(platform) or 'ensemble'} "
                f"backend, not {configured_backend!r}; keep only one of the two fields",
                where,
            )
        )
    if custom_backend and not _ships_backend(layout, configured_backend):
        problems.append(
            Problem(
                "warning",
                codes.BACKEND_UNKNOWN,
                f"backend {configured_backend!r} is not one Triton ships "
                f"({', '.join(sorted(KNOWN_BACKENDS))}); "
                f"the container must provide it, or the model must carry libtriton_{configured_backend}.so",
                where,
            )
        )
    if backend is None:
        problems.append(
            Problem(
                "error",
                codes.PLATFORM_MISSING,
                "neither platform nor backend is set and no model file tells Triton which backend to use; "
                'set e.g. backend: "onnxruntime" or backend: "python"',
                where,
            )
        )
    return problems


def _ships_backend(layout: Layout, backend: str) -> bool:
    library = f"libtriton_{backend}.so"
    candidates = [layout.path / library] + [layout.path / str(v) / library for v in layout.versions]
    return any(path_kind(candidate) == "file" for candidate in candidates)


# --- versions and files -------------------------------------------------------------------------------


def _versions_to_load(layout: Layout, config: ModelConfig | None, problems: list[Problem]) -> list[int]:
    available = sorted(layout.versions, reverse=True)
    if config is None or not config.HasField("version_policy"):
        return available[:_DEFAULT_NUM_VERSIONS]
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return available
    if choice == "specific":
        wanted = list(policy.specific.versions)
        missing = [v for v in wanted if v not in layout.versions]
        if missing:
            problems.append(
                Problem(
                    "warning",
                    codes.VERSION_POLICY_UNSATISFIED,
                    f"version_policy asks for version(s) {', '.join(map(str, missing))} but the model has "
                    f"{', '.join(map(str, sorted(layout.versions))) or 'none'}; Triton loads only the ones "
                    "that exist, so add the directories or fix the policy",
                    layout.config_file,
                )
            )
        return [v for v in wanted if v in layout.versions]
    count = policy.latest.num_versions if choice == "latest" else _DEFAULT_NUM_VERSIONS
    return available[:count]


def _model_filename(config: ModelConfig | None, default: str) -> str | None:
    """``default_model_filename`` if set, else ``default``; ``None`` when the name points outside."""
    name: str = config.default_model_filename if config is not None else ""
    if not name:
        return default
    return name if _inside_version_directory(name) else None


def _inside_version_directory(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and "\0" not in name and not name.startswith("/") and ".." not in parts


def _expected_files(config: ModelConfig | None, backend: str, platform: str) -> tuple[str, ...]:
    if config is not None and config.default_model_filename:
        names: tuple[str, ...] = (config.default_model_filename,)
    else:
        names = _PLATFORM_FILES.get(platform) or _BACKEND_FILES.get(backend, ())
    if names and config is not None:
        names += tuple(config.cc_model_filenames.values())
    return names


def _check_model_files(
    layout: Layout, config: ModelConfig | None, backend: str, platform: str, versions: Iterable[int]
) -> list[Problem]:
    names = _expected_files(config, backend, platform)
    if not names:
        return []
    outside = [name for name in names if not _inside_version_directory(name)]
    if outside:
        return [
            Problem(
                "error",
                codes.MODEL_FILE_MISSING,
                f"model file name {outside[0]!r} (default_model_filename or cc_model_filenames) is not a "
                "relative path inside the version directory; Triton looks for it in each version "
                "directory and only the model directory goes into the archive, so name a file there",
                layout.config_file,
            )
        ]
    problems: list[Problem] = []
    for version in versions:
        directory = layout.path / str(version)
        if any(_is_model_file(directory / name, backend) for name in names):
            continue
        wanted = " or ".join(names)
        problems.append(
            Problem(
                "error",
                codes.MODEL_FILE_MISSING,
                f"version {version} has no {wanted}, the file the {backend} backend loads; add it or set "
                "default_model_filename to the file's name",
                str(directory),
            )
        )
    return problems


def _is_model_file(path: Path, backend: str) -> bool:
    kind = path_kind(path)
    if backend == "onnxruntime" and kind == "dir":
        # A large ONNX model can be a directory holding model.onnx and its external data.
        return path_kind(path / "model.onnx") == "file"
    if backend == "python":
        return kind == "file"
    return kind is not None


def _onnx_file(version_dir: Path, config: ModelConfig | None) -> Path | None:
    name = _model_filename(config, "model.onnx")
    if name is None:
        return None
    candidate = version_dir / name
    if path_kind(candidate) == "dir":
        candidate = candidate / "model.onnx"
    if path_kind(candidate) == "file" and not candidate.is_symlink():
        return candidate
    return None


def _check_python_class(layout: Layout, config: ModelConfig | None, versions: Iterable[int]) -> list[Problem]:
    filename = _model_filename(config, "model.py")
    if filename is None:
        return []  # reported as model-file-missing
    problems: list[Problem] = []
    for version in versions:
        path = layout.path / str(version) / filename
        try:
            source = read_regular(path)
        except OSError:
            continue  # not a file: reported as model-file-missing (or special-file, symlink)
        if b"TritonPythonModel" not in source:
            problems.append(
                Problem(
                    "error",
                    codes.PYTHON_MODEL_CLASS_MISSING,
                    f"{filename} does not define class TritonPythonModel, which the python backend "
                    "instantiates; define it with an execute(self, requests) method",
                    str(path),
                )
            )
    return problems


def _check_python_env(layout: Layout, config: ModelConfig) -> list[Problem]:
    parameter = config.parameters.get("EXECUTION_ENV_PATH")
    if parameter is None:
        return []
    value: str = parameter.string_value
    prefix = "$$TRITON_MODEL_DIRECTORY"
    if not value.startswith(prefix):
        return []
    relative = value[len(prefix) :].lstrip("/")
    if path_kind(layout.path / relative) == "file":
        return []
    return [
        Problem(
            "error",
            codes.PYTHON_ENV_MISSING,
            f"EXECUTION_ENV_PATH is {value!r} but {relative!r} is not in the model directory; add the "
            "conda-pack archive or remove the parameter",
            layout.config_file,
        )
    ]


# --- config semantics ------------------------------------------------------------------------------


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
