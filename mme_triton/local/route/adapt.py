"""Make configs written for GPU instances load on the CPU-only embedded stack.

SageMaker's Triton GPU images run ``KIND_GPU`` instance groups, TensorRT and CUDA execution accelerators and
CUDA graphs; the embedded stack has no GPU. :func:`adapt_for_cpu` rewrites the ``config.pbtxt`` files of an
*extracted copy* of an artifact (never the artifact itself) so that the same model runs on the CPU, and
returns what it changed so the caller can warn. A TensorRT plan is compiled for a GPU and cannot run on a
CPU at all: it gets :class:`GPUModelError`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from mme_triton.errors import LocalStackError

__all__ = ["GPUModelError", "adapt_for_cpu"]

logger = logging.getLogger(__name__)

_CONFIG = "config.pbtxt"
_TENSORRT_PLATFORMS = {"tensorrt_plan"}
_TENSORRT_BACKENDS = {"tensorrt"}


class GPUModelError(LocalStackError):
    """The model can only run on an NVIDIA GPU (a TensorRT plan); ``model`` names it, ``path`` its config."""

    def __init__(self, message: str, *, model: str, path: Path) -> None:
        self.model = model
        self.path = path
        super().__init__(message)


def adapt_for_cpu(model_dir: Path) -> list[str]:
    """Rewrite the GPU-only parts of every ``config.pbtxt`` under ``model_dir`` for CPU instances.

    - ``instance_group`` entries of ``kind: KIND_GPU`` (or listing ``gpus``) become ``KIND_CPU`` with no
      ``gpus``; the instance ``count`` is kept;
    - ``optimization.execution_accelerators.gpu_execution_accelerator`` (TensorRT, CUDA ...) is dropped;
    - ``optimization.cuda`` (CUDA graphs and stream settings) is dropped.

    Configs that need no change are left byte for byte as they were; changed ones are written back in
    protobuf text format (comments are not kept). Files that do not parse are left alone: Triton reports
    them when the model loads.

    Parameters:
        model_dir: an extracted copy of an artifact: the directory holding the model directory (or an
            ensemble and its steps), or a model directory itself. It is modified in place.

    Returns:
        One line per change, naming the model and the field, e.g.
        ``"linear: instance_group[0] KIND_GPU (gpus [0]) -> KIND_CPU"``; empty when nothing changed.

    Raises:
        GPUModelError: a model is a TensorRT plan (``platform: "tensorrt_plan"``, ``backend: "tensorrt"``,
            or a ``model.plan`` without a config), which needs a GPU.
        ValueError: ``model_dir`` is not a directory.

    Example::

        for change in adapt_for_cpu(Path("/tmp/extracted")):
            logger.warning("adapted for the CPU: %s", change)
    """
    from mme_triton.model.config import format_config, parse_config_file

    root = Path(model_dir)
    if not root.is_dir():
        raise ValueError(f"adapt_for_cpu needs an extracted model directory, got {root}")
    _refuse_unconfigured_plans(root)
    changes: list[str] = []
    for path in sorted(root.rglob(_CONFIG)):
        if not path.is_file() or path.is_symlink():
            continue
        config, problems = parse_config_file(path)
        if config is None:
            logger.debug(
                "not adapting %s: it does not parse (%s)", path, problems[0].message if problems else ""
            )
            continue
        name = config.name or path.parent.name
        if config.platform in _TENSORRT_PLATFORMS or config.backend in _TENSORRT_BACKENDS:
            kind = f'platform "{config.platform}"' if config.platform else f'backend "{config.backend}"'
            raise GPUModelError(
                f"model {name!r} ({path}) is a TensorRT plan ({kind}): TensorRT engines are built for and "
                "run only on NVIDIA GPUs, so the CPU-only embedded stack cannot serve it. Serve it from a "
                "GPU endpoint, or export the model to ONNX to run it here.",
                model=name,
                path=path,
            )
        found = _adapt(config, name)
        if found:
            path.write_text(format_config(config))
            changes.extend(found)
            logger.debug("adapted %s for the CPU: %s", path, "; ".join(found))
    return changes


def _adapt(config: Any, name: str) -> list[str]:
    kinds = config.DESCRIPTOR.fields_by_name["instance_group"].message_type.enum_types_by_name["Kind"]
    kind_gpu = kinds.values_by_name["KIND_GPU"].number
    kind_cpu = kinds.values_by_name["KIND_CPU"].number
    changes: list[str] = []
    for index, group in enumerate(config.instance_group):
        if group.kind == kind_gpu or len(group.gpus) > 0:
            before = kinds.values_by_number[group.kind].name
            gpus = f" (gpus [{', '.join(str(g) for g in group.gpus)}])" if len(group.gpus) else ""
            group.kind = kind_cpu
            del group.gpus[:]
            changes.append(f"{name}: instance_group[{index}] {before}{gpus} -> KIND_CPU")
    if config.HasField("optimization"):
        optimization = config.optimization
        accelerators = optimization.execution_accelerators.gpu_execution_accelerator
        if len(accelerators) > 0:
            names = ", ".join(a.name or "?" for a in accelerators)
            del accelerators[:]
            changes.append(f"{name}: GPU execution accelerators dropped ({names})")
        if optimization.HasField("cuda"):
            optimization.ClearField("cuda")
            changes.append(f"{name}: optimization.cuda (CUDA graphs, streams) dropped")
        if not optimization.execution_accelerators.ListFields():
            optimization.ClearField("execution_accelerators")
        if not optimization.ListFields():
            config.ClearField("optimization")
    return changes


def _refuse_unconfigured_plans(root: Path) -> None:
    """A ``model.plan`` without a config would be auto-completed as a TensorRT model: refuse it too."""
    for plan in sorted(root.rglob("model.plan")):
        model = plan.parent.parent
        if plan.parent.name.isdigit() and not (model / _CONFIG).exists():
            raise GPUModelError(
                f"model {model.name!r} ({plan}) is a TensorRT plan: TensorRT engines run only on NVIDIA "
                "GPUs, so the CPU-only embedded stack cannot serve it.",
                model=model.name,
                path=plan,
            )
