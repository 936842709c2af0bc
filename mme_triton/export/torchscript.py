"""Export a PyTorch module as TorchScript: a ``pytorch_libtorch`` model directory (``model.pt`` + config).

Triton's PyTorch backend serves TorchScript files. A TorchScript file carries no tensor names, so the
config names them by position (``INPUT__0``, ``OUTPUT__0``, the backend's ordinal convention) unless names
are given (the backend then matches inputs to the forward arguments' names, or takes the config's order).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["export_torchscript"]

logger = logging.getLogger(__name__)


def export_torchscript(
    module: Any,
    example_inputs: Any,
    model_dir: str | os.PathLike[str],
    *,
    max_batch_size: int = 0,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    overwrite: bool = False,
    keep_tuning: bool = True,
    dynamic_batching: bool = True,
    instance_count: int = 1,
    version: int = 1,
    script: bool = False,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> Path:
    """Trace (or script) ``module`` to ``<model_dir>/<version>/model.pt`` and write its complete config.pbtxt.

    The config says ``platform: "pytorch_libtorch"`` and lists every input and output with the datatype
    and dims of the example run. With ``max_batch_size > 0`` dimension 0 is the batch dimension (left out
    of ``dims``) and the saved file is loaded back with ``torch.jit.load`` and run on a batch of another
    size: a trace that fixed the batch size (``x.view(2, -1)``) is refused instead of failing in Triton.
    The other dims are fixed at the example's sizes.

    Parameters:
        module: a ``torch.nn.Module`` (put in eval mode).
        example_inputs: a tensor or a tuple of tensors, as ``module(*example_inputs)`` takes them.
        model_dir: the model directory to create; its name is the model's name.
        max_batch_size: 0 for a model without a batch dimension; otherwise the largest batch Triton
            sends and dimension 0 of every input and output is the batch dimension.
        input_names / output_names: config names (default ``INPUT__0``.. / ``OUTPUT__0``..). Input names
            should be the forward arguments' names, or ``<name>__<index>``; otherwise Triton's PyTorch
            backend feeds the inputs in the config's order.
        overwrite: replace an existing ``model_dir``.
        keep_tuning: with ``overwrite``, carry the existing config's tuning over to the new one where it
            still fits (see :func:`~mme_triton.export._tuning.keep_tuning`); ``False`` starts fresh.
        dynamic_batching: with ``max_batch_size > 0``, let Triton batch concurrent requests.
        instance_count: model instances Triton creates.
        version: the version directory to write.
        script: ``torch.jit.script`` instead of ``torch.jit.trace`` (keeps data-dependent control flow).
        atol / rtol: tolerance of the check of the saved file against the module.

    The options mean what they mean for :func:`~mme_triton.export.export_pytorch` and
    :func:`~mme_triton.export.export_transformers`. What differs has a reason: the tolerance is tighter
    (``atol=1e-5``, ``rtol=1e-4`` against ``1e-4``/``1e-3``) because the TorchScript file runs PyTorch's
    own kernels, where ONNX Runtime's fused kernels sum in other orders; there is no ``opset_version``
    or ``**export_kwargs`` (no ONNX export is made), and ``script`` instead; names default to the
    PyTorch backend's ``INPUT__0``/``OUTPUT__0``, since a TorchScript file carries no tensor names.

    Returns:
        ``model_dir``.

    Raises:
        FileExistsError: ``model_dir`` exists and ``overwrite`` is false.
        ExportError: the saved TorchScript file does not reproduce the module's outputs (on another
            batch size too, with batching).
        ModelValidationError: the model directory does not validate (nothing is left behind).
        ValueError / TypeError: bad arguments, outputs that are not tensors.

    Example::

        export_torchscript(cnn, torch.randn(2, 3, 32, 32), "repo/cnn", max_batch_size=8)
        # PosixPath('repo/cnn')
    """
    import torch

    from mme_triton.export._common import (
        ExportError,
        check_export_options,
        compare_outputs,
        prepare_target,
        staged_model_dir,
        torch_elem_type,
        write_graph_config,
    )
    from mme_triton.model.onnx_check import GraphTensor

    check_export_options(max_batch_size=max_batch_size, instance_count=instance_count, version=version)
    target = prepare_target(model_dir, overwrite=overwrite)
    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    for index, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            raise TypeError(f"example input {index} is {type(arg).__name__}, not a torch.Tensor")
        if max_batch_size > 0 and arg.dim() == 0:
            raise ValueError(
                f"example input {index} is a scalar; with max_batch_size > 0 it needs a batch dim"
            )
    inputs = list(input_names) if input_names is not None else [f"INPUT__{i}" for i in range(len(args))]
    if len(inputs) != len(args):
        raise ValueError(f"{len(inputs)} input names for {len(args)} example inputs")

    module.eval()
    with torch.no_grad():
        produced = _as_tuple(module(*args))
    outputs = (
        list(output_names) if output_names is not None else [f"OUTPUT__{i}" for i in range(len(produced))]
    )
    if len(outputs) != len(produced):
        raise ValueError(f"{len(outputs)} output names for {len(produced)} module outputs")
    for name, tensor in zip(outputs, produced, strict=True):
        if max_batch_size > 0 and (tensor.dim() == 0 or tensor.shape[0] != args[0].shape[0]):
            raise ValueError(
                f"output {name!r} has shape {list(tensor.shape)}, whose first dim is not the batch size "
                f"{int(args[0].shape[0])} of the example inputs; use max_batch_size=0 for such a module"
            )

    def batched(shape: Sequence[int]) -> tuple[int, ...]:
        dims = tuple(int(d) for d in shape)
        return (-1, *dims[1:]) if max_batch_size > 0 else dims

    graph_inputs = [
        GraphTensor(name, torch_elem_type(arg.dtype), batched(arg.shape))
        for name, arg in zip(inputs, args, strict=True)
    ]
    graph_outputs = [
        GraphTensor(name, torch_elem_type(tensor.dtype), batched(tensor.shape))
        for name, tensor in zip(outputs, produced, strict=True)
    ]

    with staged_model_dir(target) as staged:
        model_path = staged / str(version) / "model.pt"
        model_path.parent.mkdir(parents=True)
        with torch.no_grad():
            compiled = torch.jit.script(module) if script else torch.jit.trace(module, args)
        compiled.save(str(model_path))
        loaded = torch.jit.load(str(model_path), map_location="cpu")
        checks = [args]
        if max_batch_size > 0:
            checks.append(tuple(torch.cat([arg, arg[:1]]) for arg in args))
        for feeds in checks:
            with torch.no_grad():
                wanted = _as_tuple(module(*feeds))
                try:
                    got = _as_tuple(loaded(*feeds))
                except RuntimeError as exc:
                    raise ExportError(
                        f"the TorchScript file of {type(module).__name__} fails on a batch of "
                        f"{int(feeds[0].shape[0])} rows: {str(exc).strip().splitlines()[-1]}; the trace "
                        "fixed a size the module computes from its input (use x.flatten(1) rather than "
                        "x.view(batch, -1), or script=True)",
                        model_dir=str(target),
                    ) from exc
            rows = int(feeds[0].shape[0])
            for name, tensor in zip(outputs, got, strict=True):
                if max_batch_size > 0 and (tensor.dim() == 0 or int(tensor.shape[0]) != rows):
                    raise ExportError(
                        f"output {name!r} of {type(module).__name__} has shape {list(tensor.shape)} for a "
                        f"batch of {rows} rows: its first dim does not follow the batch, so Triton could "
                        "not batch the model; use max_batch_size=0 or keep dim 0 the batch dim",
                        model_dir=str(target),
                    )
            compare_outputs(
                f"TorchScript export of {type(module).__name__}",
                outputs,
                [t.detach().cpu().numpy() for t in got],
                [t.detach().cpu().numpy() for t in wanted],
                atol=atol,
                rtol=rtol,
                model_dir=target,
            )
        write_graph_config(
            target,
            staged,
            "pytorch_libtorch",
            max_batch_size,
            graph_inputs,
            graph_outputs,
            dynamic_batching=dynamic_batching,
            instance_count=instance_count,
            keep_previous_tuning=overwrite and keep_tuning,
        )
    logger.info("exported %s as TorchScript to %s", type(module).__name__, target)
    return target


def _as_tuple(value: Any) -> tuple[Any, ...]:
    import torch

    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    for index, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise TypeError(
                f"module output {index} is {type(item).__name__}; Triton's PyTorch backend serves tensors "
                "(return a tensor or a tuple of tensors)"
            )
    return items
