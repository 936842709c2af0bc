"""What the exporters share: a staged model directory, a config written from the graph, a numeric check.

Every exporter builds its model directory beside the destination (``.<name>.export-*``), writes the
config.pbtxt from the exported graph's tensors with the same code Triton's auto-complete rules follow
(:func:`~mme_triton.model.onnx_check.add_graph_tensors`), validates it, and only then moves it into place:
a failed export leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mme_triton.errors import ExportError
from mme_triton.model._pb import ModelConfig
from mme_triton.model._staging import check_model_name, staged_model_dir
from mme_triton.model.onnx_check import GraphTensor

__all__ = [
    "DEFAULT_OPSET",
    "ExportError",
    "check_export_options",
    "compare_outputs",
    "graph_config",
    "prepare_target",
    "quiet_legacy_export",
    "run_onnx",
    "staged_model_dir",
    "torch_elem_type",
]

logger = logging.getLogger(__name__)

# torch dtype name (str(dtype) without "torch.") -> ONNX TensorProto element type, the tensor type the
# config code reads (GraphTensor.elem_type).
_TORCH_TO_ONNX: Mapping[str, int] = {
    "float32": 1,
    "uint8": 2,
    "int8": 3,
    "uint16": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "bool": 9,
    "float16": 10,
    "float64": 11,
    "uint32": 12,
    "uint64": 13,
    "bfloat16": 16,
}


@contextmanager
def quiet_legacy_export() -> Iterator[None]:
    """Silence the warnings of the TorchScript-based ``torch.onnx.export`` these exporters choose on purpose.

    torch warns that the exporter is deprecated and, while tracing, about every Python-level shape
    computation it records; the numeric check after the export is what tells whether the graph is right.
    """
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        warnings.filterwarnings(
            "ignore", message="The feature will be removed.*", category=DeprecationWarning
        )
        warnings.filterwarnings("ignore", message="Exporting aten::index operator.*", category=UserWarning)
        yield


def torch_elem_type(dtype: Any) -> int:
    """The ONNX element type of a torch dtype (``torch.float32`` -> 1).

    Raises:
        TypeError: Triton has no datatype for it (complex numbers, quantized types ...).
    """
    name = str(dtype).removeprefix("torch.")
    try:
        return _TORCH_TO_ONNX[name]
    except KeyError:
        raise TypeError(f"torch dtype {name} has no Triton datatype") from None


#: The ONNX opset the ONNX exporters write by default: one the onnxruntime of every SageMaker Triton image
#: the library offers reads (torch's own default moves with torch releases).
DEFAULT_OPSET = 17


def check_export_options(*, max_batch_size: int, instance_count: int, version: int) -> None:
    """The exporters' shared options, refused alike.

    Raises:
        ValueError: ``max_batch_size`` < 0, ``instance_count`` < 1 or ``version`` < 1.
    """
    for name, value, least in (
        ("max_batch_size", max_batch_size, 0),
        ("instance_count", instance_count, 1),
        ("version", version, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")


def prepare_target(model_dir: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """The destination directory; refuses an existing one unless ``overwrite``.

    Raises:
        FileExistsError: ``model_dir`` exists and ``overwrite`` is false.
        ValueError: the directory name could not be a model name (the rule of
            :func:`~mme_triton.model._staging.check_model_name`).
    """
    target = Path(model_dir)
    check_model_name(target.name, "model directory name")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")
    return target


def graph_config(
    name: str,
    platform: str,
    max_batch_size: int,
    inputs: Sequence[GraphTensor],
    outputs: Sequence[GraphTensor],
    *,
    dynamic_batching: bool = True,
    instance_count: int = 1,
) -> ModelConfig:
    """A complete config for a graph's tensors: names, datatypes and dims as Triton's auto-complete has them.

    With ``max_batch_size > 0`` the first dimension of every tensor is the batch dimension and is left
    out of ``dims``; ``dynamic_batching`` then turns on Triton's dynamic batcher.
    """
    from mme_triton.model._pb import new_model_config
    from mme_triton.model.onnx_check import add_graph_tensors

    config = new_model_config()
    config.name = name
    config.platform = platform
    config.max_batch_size = max_batch_size
    add_graph_tensors(config, "input", inputs)
    add_graph_tensors(config, "output", outputs)
    if max_batch_size > 0 and dynamic_batching:
        config.dynamic_batching.SetInParent()
    group = config.instance_group.add()
    group.count = instance_count
    return config


def write_graph_config(
    target: Path,
    staged: Path,
    platform: str,
    max_batch_size: int,
    inputs: Sequence[GraphTensor],
    outputs: Sequence[GraphTensor],
    *,
    dynamic_batching: bool,
    instance_count: int,
    keep_previous_tuning: bool,
) -> ModelConfig:
    """Write the :func:`graph_config` of an export to ``staged``/config.pbtxt; with
    ``keep_previous_tuning`` (an export over ``target``), the tuning of ``target``'s config carried over
    where it still fits (what the exporter was told explicitly wins)."""
    from mme_triton.export._tuning import keep_tuning
    from mme_triton.model.config import format_config

    config = graph_config(
        target.name,
        platform,
        max_batch_size,
        inputs,
        outputs,
        dynamic_batching=dynamic_batching,
        instance_count=instance_count,
    )
    if keep_previous_tuning:
        keep_tuning(
            target,
            config,
            staged,
            chosen={"dynamic_batching": not dynamic_batching, "instance_count": instance_count != 1},
        )
    (staged / "config.pbtxt").write_text(format_config(config), encoding="utf-8")
    return config


def compare_outputs(
    what: str,
    names: Sequence[str],
    got: Sequence[Any],
    expected: Sequence[Any],
    *,
    atol: float,
    rtol: float,
    model_dir: Path,
) -> float:
    """Compare exported outputs with the framework's; returns the largest absolute difference.

    The difference is logged (INFO). Outputs must agree within ``atol + rtol * |expected|`` element-wise
    (``numpy.allclose``), with the same shapes. NaN agrees with NaN and an infinity with the same
    infinity (a model that computes NaN where the framework does is exported); NaN against a number is a
    difference, counted apart from the largest absolute difference of the numbers.

    Raises:
        ExportError: a shape differs or a value is outside the tolerance.
    """
    import numpy as np

    largest = 0.0
    worst = ""
    failed: list[str] = []
    nan_mismatches = 0
    for name, actual, wanted in zip(names, got, expected, strict=True):
        actual_array = np.asarray(actual)
        wanted_array = np.asarray(wanted)
        if actual_array.shape != wanted_array.shape:
            raise ExportError(
                f"{what}: output {name!r} has shape {list(actual_array.shape)} but the framework model "
                f"gives {list(wanted_array.shape)}",
                model_dir=str(model_dir),
            )
        if actual_array.size == 0:
            continue
        if actual_array.dtype.kind in "fc" or wanted_array.dtype.kind in "fc":
            a64 = actual_array.astype(np.float64)
            w64 = wanted_array.astype(np.float64)
            nan_a, nan_w = np.isnan(a64), np.isnan(w64)
            # positions where both hold a number; NaN against NaN agrees, NaN against a number does not
            numbers = ~(nan_a | nan_w)
            with np.errstate(invalid="ignore"):  # inf - inf is NaN: the same infinity is no difference
                gaps = np.where(a64[numbers] == w64[numbers], 0.0, np.abs(a64[numbers] - w64[numbers]))
            diff = float(gaps.max()) if gaps.size else 0.0
            mismatched = int(np.count_nonzero(nan_a != nan_w))
            nan_mismatches += mismatched
            close = mismatched == 0 and bool(np.allclose(a64, w64, atol=atol, rtol=rtol, equal_nan=True))
        else:
            diff = float(np.max(np.abs(actual_array.astype(np.int64) - wanted_array.astype(np.int64))))
            close = diff == 0
        if diff >= largest:
            largest, worst = diff, name
        if not close:
            failed.append(name)
    logger.info("%s: largest absolute difference %.3g (output %r)", what, largest, worst)
    if failed:
        how = []
        if largest > atol or not nan_mismatches:
            how.append(f"by up to {largest:.3g}, more than atol={atol:g} + rtol={rtol:g}")
        if nan_mismatches:
            how.append(f"with NaN against a number in {nan_mismatches} element(s)")
        raise ExportError(
            f"{what}: outputs {', '.join(repr(n) for n in failed)} differ from the framework model "
            f"{' and '.join(how)}; the exported graph does not compute the same thing (data-dependent "
            "control flow, a shape fixed at export time, or a module left in training mode are the usual "
            "causes)",
            model_dir=str(model_dir),
            max_abs_diff=largest,
        )
    return largest


def run_onnx(onnx_path: Path, feeds: Mapping[str, Any], outputs: Sequence[str]) -> list[Any]:
    """Run the exported graph in ONNX Runtime (CPU) on ``feeds``.

    Raises:
        ImportError: onnxruntime is not installed (the ``export`` extra brings it).
    """
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError("checking the export needs onnxruntime; pip install 'mme-triton[export]'") from exc
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return list(session.run(list(outputs), dict(feeds)))
