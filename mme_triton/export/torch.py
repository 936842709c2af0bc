"""Export a PyTorch module to a Triton ONNX model directory (``model.onnx`` + a written-out config.pbtxt).

Needs the ``export`` extra (``torch`` and ``onnx``); neither is imported by ``import mme_triton``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mme_triton.errors import ModelValidationError

__all__ = ["export_pytorch"]

logger = logging.getLogger(__name__)


def export_pytorch(
    module: Any,
    example_inputs: Any,
    model_dir: str | os.PathLike[str],
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    max_batch_size: int = 0,
    dynamic_batching: bool = True,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    instance_count: int = 1,
    opset_version: int = 17,
    version: int = 1,
    overwrite: bool = False,
    **export_kwargs: Any,
) -> Path:
    """Export ``module`` to ``<model_dir>/<version>/model.onnx`` and write a matching config.pbtxt.

    The config is written out in full from the exported graph (names, datatypes, dims), so the model
    does not depend on Triton's auto-complete, and it is validated before this returns.

    Parameters:
        module: a ``torch.nn.Module`` (put in eval mode for the export).
        example_inputs: a tensor or a tuple of tensors, as ``module(*example_inputs)`` takes them. With
            ``max_batch_size > 0`` their dimension 0 is the batch dimension.
        model_dir: the model directory to create, e.g. ``model_repository/resnet``; its name is the
            model's name.
        input_names / output_names: tensor names in the graph and the config (default ``INPUT0``,
            ``INPUT1``, ... and ``OUTPUT0``, ...).
        max_batch_size: 0 for a model without a batch dimension; otherwise dimension 0 of every input and
            output becomes the variable batch dimension Triton batches along.
        dynamic_batching: with ``max_batch_size > 0``, let Triton batch concurrent requests.
        dynamic_axes: further variable dimensions, as ``torch.onnx.export`` takes them.
        instance_count: model instances Triton creates.
        opset_version: the ONNX opset.
        version: the version directory to write.
        overwrite: replace an existing ``model_dir``; otherwise an existing one is an error.
        export_kwargs: passed on to ``torch.onnx.export`` (e.g. ``dynamo=True``).

    Raises:
        FileExistsError: ``model_dir`` exists and ``overwrite`` is false.
        ModelValidationError: the exported model does not validate (nothing is left behind).
        ValueError: bad arguments.

    Example:
        >>> export_pytorch(net, torch.randn(2, 4), "repo/classifier", max_batch_size=8)  # doctest: +SKIP
        PosixPath('repo/classifier')
    """
    import torch

    from mme_triton.model._pb import new_model_config
    from mme_triton.model.config import format_config
    from mme_triton.model.onnx_check import add_graph_tensors, read_graph_signature
    from mme_triton.model.validate import validate_model

    if max_batch_size < 0:
        raise ValueError(f"max_batch_size must be >= 0, got {max_batch_size}")
    if instance_count < 1:
        raise ValueError(f"instance_count must be >= 1, got {instance_count}")
    if version < 1:
        raise ValueError(f"version must be >= 1, got {version}")
    target = Path(model_dir)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")

    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    inputs = list(input_names) if input_names is not None else [f"INPUT{i}" for i in range(len(args))]
    if len(inputs) != len(args):
        raise ValueError(f"{len(inputs)} input names for {len(args)} example inputs")
    with torch.no_grad():
        produced = module.eval()(*args)
    produced = produced if isinstance(produced, (tuple, list)) else (produced,)
    outputs = list(output_names) if output_names is not None else [f"OUTPUT{i}" for i in range(len(produced))]
    if len(outputs) != len(produced):
        raise ValueError(f"{len(outputs)} output names for {len(produced)} module outputs")

    axes: dict[str, dict[int, str]] = {name: {} for name in (*inputs, *outputs)}
    if max_batch_size > 0:
        for name in axes:
            axes[name][0] = "batch"
    for name, extra in (dynamic_axes or {}).items():
        axes.setdefault(name, {}).update(extra)

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=target.parent))
    try:
        staged = staging / target.name
        onnx_path = staged / str(version) / "model.onnx"
        onnx_path.parent.mkdir(parents=True)
        export_kwargs.setdefault("dynamo", False)
        with torch.no_grad():
            torch.onnx.export(
                module,
                args,
                str(onnx_path),
                input_names=inputs,
                output_names=outputs,
                dynamic_axes={k: v for k, v in axes.items() if v},
                opset_version=opset_version,
                **export_kwargs,
            )

        graph_inputs, graph_outputs = read_graph_signature(onnx_path)
        config = new_model_config()
        config.name = target.name
        config.platform = "onnxruntime_onnx"
        config.max_batch_size = max_batch_size
        add_graph_tensors(config, "input", graph_inputs)
        add_graph_tensors(config, "output", graph_outputs)
        if max_batch_size > 0 and dynamic_batching:
            config.dynamic_batching.SetInParent()
        group = config.instance_group.add()
        group.count = instance_count
        (staged / "config.pbtxt").write_text(format_config(config), encoding="utf-8")

        problems = validate_model(staged)
        if any(p.is_error for p in problems):
            raise ModelValidationError(str(target), problems)
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("exported %s to %s", type(module).__name__, target)
    return target
