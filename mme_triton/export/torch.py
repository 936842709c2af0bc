"""Export a PyTorch module to a Triton ONNX model directory (``model.onnx`` + a written-out config.pbtxt).

Needs the ``export`` extra (``torch``, ``onnx`` and ``onnxruntime``); none is imported by
``import mme_triton``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
    opset_version: int | None = None,
    version: int = 1,
    overwrite: bool = False,
    keep_tuning: bool = True,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    **export_kwargs: Any,
) -> Path:
    """Export ``module`` to ``<model_dir>/<version>/model.onnx`` and write a matching config.pbtxt.

    The config is written out in full from the exported graph (names, datatypes, dims), so the model
    does not depend on Triton's auto-complete. The graph is run in ONNX Runtime on the example inputs
    (and, with batching, on a batch of another size) and compared with the module; then the model
    directory is validated and moved into place.

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
        opset_version: the ONNX opset (default :data:`~mme_triton.export._common.DEFAULT_OPSET`, 17).
        version: the version directory to write.
        overwrite: replace an existing ``model_dir``; otherwise an existing one is an error.
        keep_tuning: with ``overwrite``, carry the existing config's tuning over to the new one where it
            still fits (see :func:`~mme_triton.export._tuning.keep_tuning`); ``False`` starts fresh.
        atol / rtol: the tolerance of the ONNX Runtime check (``numpy.allclose``).
        export_kwargs: passed on to ``torch.onnx.export`` (e.g. ``dynamo=True``).

    The three exporters share one vocabulary: ``model_dir``, ``max_batch_size``, ``dynamic_batching``,
    ``instance_count``, ``version``, ``overwrite``, ``atol``/``rtol`` and (for the ONNX ones)
    ``opset_version`` and ``**export_kwargs`` mean the same everywhere. What differs has a reason: the
    first argument is a ``module`` here and in :func:`~mme_triton.export.export_torchscript` (a
    ``torch.nn.Module``, torch's word) and a ``model`` in :func:`~mme_triton.export.export_transformers`
    (a ``transformers`` model, that library's word); ``max_batch_size`` defaults to 0 here, since an
    arbitrary module's example inputs need not have a batch dimension, where a text encoder's always do
    (8 there); ``dynamic_axes`` and ``input_names``/``output_names`` exist here because a module's tensors
    are the caller's to name and shape, where an encoder's are fixed.

    Raises:
        FileExistsError: ``model_dir`` exists and ``overwrite`` is false.
        ExportError: ONNX Runtime's results differ from the module's beyond the tolerance.
        ModelValidationError: the exported model does not validate (nothing is left behind).
        ValueError: bad arguments.
        TypeError: a module output is not a tensor (a dict, a nested tuple, ``None``): it has no name.

    Example::

        export_pytorch(net, torch.randn(2, 4), "repo/classifier", max_batch_size=8)
        # PosixPath('repo/classifier')
    """
    import torch

    from mme_triton.export._common import (
        DEFAULT_OPSET,
        check_export_options,
        compare_outputs,
        prepare_target,
        quiet_legacy_export,
        run_onnx,
        staged_model_dir,
        write_graph_config,
    )
    from mme_triton.model.onnx_check import read_graph_signature

    check_export_options(max_batch_size=max_batch_size, instance_count=instance_count, version=version)
    target = prepare_target(model_dir, overwrite=overwrite)

    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    inputs = list(input_names) if input_names is not None else [f"INPUT{i}" for i in range(len(args))]
    if len(inputs) != len(args):
        raise ValueError(f"{len(inputs)} input names for {len(args)} example inputs")
    module.eval()
    with torch.no_grad():
        produced = module(*args)
    produced = produced if isinstance(produced, (tuple, list)) else (produced,)
    for index, item in enumerate(produced):
        if not isinstance(item, torch.Tensor):
            hint = (
                "; for a transformers model use export_transformers, which names its outputs"
                if isinstance(item, dict) or hasattr(item, "to_tuple")
                else ""
            )
            raise TypeError(
                f"module output {index} is {type(item).__name__}, not a tensor: an ONNX output cannot be "
                f"named for it (return a tensor or a flat tuple of tensors){hint}"
            )
    outputs = list(output_names) if output_names is not None else [f"OUTPUT{i}" for i in range(len(produced))]
    if len(outputs) != len(produced):
        raise ValueError(f"{len(outputs)} output names for {len(produced)} module outputs")

    axes: dict[str, dict[int, str]] = {name: {} for name in (*inputs, *outputs)}
    if max_batch_size > 0:
        for name in axes:
            axes[name][0] = "batch"
    for name, extra in (dynamic_axes or {}).items():
        axes.setdefault(name, {}).update(extra)

    with staged_model_dir(target) as staged:
        onnx_path = staged / str(version) / "model.onnx"
        onnx_path.parent.mkdir(parents=True)
        export_kwargs.setdefault("dynamo", False)
        quiet = quiet_legacy_export() if not export_kwargs["dynamo"] else contextlib.nullcontext()
        with torch.no_grad(), quiet:
            torch.onnx.export(
                module,
                args,
                str(onnx_path),
                input_names=inputs,
                output_names=outputs,
                dynamic_axes={k: v for k, v in axes.items() if v},
                opset_version=DEFAULT_OPSET if opset_version is None else opset_version,
                **export_kwargs,
            )
        # torch.onnx.export puts the module back into the mode it found it in; keep it in eval mode.
        module.eval()

        checks = [args]
        if max_batch_size > 0:
            checks.append(tuple(torch.cat([arg, arg[:1]]) for arg in args))
        for feeds in checks:
            with torch.no_grad():
                wanted = module(*feeds)
            wanted = wanted if isinstance(wanted, (tuple, list)) else (wanted,)
            arrays = {n: t.detach().cpu().numpy() for n, t in zip(inputs, feeds, strict=True)}
            got = run_onnx(onnx_path, arrays, outputs)
            compare_outputs(
                f"ONNX export of {type(module).__name__}",
                outputs,
                got,
                [t.detach().cpu().numpy() for t in wanted],
                atol=atol,
                rtol=rtol,
                model_dir=target,
            )

        graph_inputs, graph_outputs = read_graph_signature(onnx_path)
        write_graph_config(
            target,
            staged,
            "onnxruntime_onnx",
            max_batch_size,
            graph_inputs,
            graph_outputs,
            dynamic_batching=dynamic_batching,
            instance_count=instance_count,
            keep_previous_tuning=overwrite and keep_tuning,
        )
    logger.info("exported %s to %s", type(module).__name__, target)
    return target
