"""Which Triton backend serves a model: the platform/backend tables and the checks of those two fields.

The rules follow Triton core's ``model_config_utils.cc`` (``GetBackendTypeFromPlatform``, and the
auto-complete of platform/backend from the file names in the first version directory).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mme_triton.model import codes
from mme_triton.model._files import path_kind, read_regular
from mme_triton.model._pb import ModelConfig
from mme_triton.model.problems import Problem

if TYPE_CHECKING:
    from mme_triton.model._layout import Layout

__all__ = [
    "BACKEND_FILES",
    "EMBEDDED_STACK_BACKENDS",
    "ENSEMBLE",
    "KNOWN_BACKENDS",
    "PLATFORM_BACKENDS",
    "PLATFORM_FILES",
    "check_missing_config",
    "check_platform",
    "first_version_contents",
    "local_stack_problem",
    "model_backend",
    "resolve_backend",
]

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
PLATFORM_FILES: dict[str, tuple[str, ...]] = {
    "tensorflow_savedmodel": ("model.savedmodel",),
    "tensorflow_graphdef": ("model.graphdef",),
    "torch_aoti": ("model.pt2",),
}
BACKEND_FILES: dict[str, tuple[str, ...]] = {
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

#: Backends the embedded stack (``mme_triton.local``, CPU only) runs: the Triton wheel's python backend and
#: the stack's python-based onnxruntime and pytorch (TorchScript) backends; ensembles of them too.
EMBEDDED_STACK_BACKENDS = frozenset({"python", "onnxruntime", "pytorch"})

# Why the embedded stack cannot run a backend, and what runs instead.
_ONNX_INSTEAD = "export the model to ONNX (backend onnxruntime) or TorchScript (platform pytorch_libtorch)"
_NOT_ON_LOCAL_STACK: dict[str, str] = {
    "tensorrt": (
        "TensorRT engines are built for and run only on NVIDIA GPUs, and the embedded stack has none; "
        f"serve it from a GPU endpoint, or {_ONNX_INSTEAD} to run it on the stack"
    ),
    "tensorflow": (
        "the embedded stack has no TensorFlow runtime; export the model to ONNX (e.g. with tf2onnx, "
        "backend onnxruntime) to run it on the stack"
    ),
    "dali": (
        "the embedded stack has no NVIDIA DALI; do the pre-processing in a python model "
        '(backend: "python") to run the pipeline on the stack'
    ),
    "fil": (
        "the embedded stack has no FIL backend for tree models; convert the forest to ONNX (e.g. with "
        'onnxmltools or hummingbird) or serve it from a python model (backend: "python")'
    ),
    "openvino": f"the embedded stack has no OpenVINO runtime; {_ONNX_INSTEAD}",
    "vllm": "the embedded stack has no vLLM engine (it needs a GPU); a python model can stand in for it",
    "tensorrtllm": "TensorRT-LLM engines need an NVIDIA GPU; a python model can stand in for it on the stack",
}
_TORCH_AOTI = (
    "AOTInductor packages (model.pt2) are not served by the embedded stack's pytorch backend, which runs "
    "TorchScript; export the module with torch.jit.trace or torch.jit.script (model.pt, platform "
    "pytorch_libtorch), or to ONNX"
)


def first_version_contents(layout: Layout) -> dict[str, bool]:
    """Names in the first version directory (by string order, as Triton picks it) -> is it a directory."""
    if not layout.versions:
        return {}
    first = min(str(v) for v in layout.versions)
    try:
        with os.scandir(layout.path / first) as it:
            return {entry.name: entry.is_dir(follow_symlinks=False) for entry in it}
    except OSError:
        return {}


def resolve_backend(config: ModelConfig | None, contents: dict[str, bool]) -> tuple[str | None, str]:
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


def local_stack_problem(backend: str | None, platform: str) -> str | None:
    """Why the embedded stack cannot serve a model of ``backend``/``platform`` (naming the backend and what
    runs instead), or ``None`` when it can (or when only Triton can tell: a custom backend it carries).

    Example:
        >>> local_stack_problem("onnxruntime", "onnxruntime_onnx") is None
        True
        >>> local_stack_problem("tensorflow", "tensorflow_savedmodel").split(";")[0]
        'the embedded stack has no TensorFlow runtime'
    """
    if backend is None or backend == ENSEMBLE:
        return None
    if platform == "torch_aoti":
        return _TORCH_AOTI
    if backend in EMBEDDED_STACK_BACKENDS:
        return None
    if backend in _NOT_ON_LOCAL_STACK:
        return _NOT_ON_LOCAL_STACK[backend]
    if backend in KNOWN_BACKENDS:
        return (
            f"the embedded stack runs the {', '.join(sorted(EMBEDDED_STACK_BACKENDS))} backends, not "
            f"Triton's {backend} backend; a python model can stand in for it"
        )
    return None


def check_missing_config(layout: Layout, backend: str | None, platform: str) -> list[Problem]:
    where = layout.config_file
    if backend in ("onnxruntime", "tensorrt", "openvino") or platform == "tensorflow_savedmodel":
        return []  # Triton auto-completes the config from the model file
    if backend == "python" and _defines_auto_complete(layout):
        return []
    if backend == "python":
        return [
            Problem(
                "warning",
                codes.PYTHON_CONFIG_MISSING,
                "no config.pbtxt: Triton loads this python model with a config it fills in itself (backend "
                '"python", max_batch_size 0, one CPU instance, the latest version) but with no inputs or '
                "outputs, since model.py does not implement auto_complete_config; every request that sends "
                "a tensor is refused. Write a config.pbtxt with input and output, or implement "
                "auto_complete_config",
                where,
            )
        ]
    if backend is None:
        reason = (
            "Triton cannot tell which backend serves this model (no model.onnx, model.plan, "
            "model.savedmodel, ... in the first version directory)"
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


def check_platform(layout: Layout, config: ModelConfig, backend: str | None) -> list[Problem]:
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


def model_backend(config: ModelConfig) -> str | None:
    """The backend a config names (``backend``, else the one its ``platform`` is served by):
    ``onnxruntime``, ``pytorch``, ``python``, ``ensemble`` ...; ``None`` when it names neither."""
    backend: str = config.backend
    if backend:
        return backend
    platform: str = config.platform
    if platform == ENSEMBLE:
        return ENSEMBLE
    return PLATFORM_BACKENDS.get(platform) or None
