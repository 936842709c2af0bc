"""``config`` (show, set, presets) and ``export`` (torchscript, onnx, transformers): model preparation."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from mme_triton.cli._common import SubParsers, add_command, emit

__all__ = ["CONFIG_OPTIONS", "option_value", "register"]

#: ``configure_model``'s options as ``config set`` flags, with what their VALUE is. The names are those of
#: ``mme_triton.model._options_table.OPTIONS`` (a test keeps the two lists equal); listing them here keeps
#: ``mme-triton --help`` from importing the model package.
CONFIG_OPTIONS: dict[str, str] = {
    "max_batch_size": "INT",
    "dynamic_batching": "true|false|none|JSON",
    "instance_group": "COUNT:KIND[,...]|JSON",
    "response_cache": "true|false",
    "model_warmup": "zero|random|none|JSON",
    "graph_optimization_level": "basic|extended|all|disabled",
    "execution_mode": "sequential|parallel",
    "intra_op_thread_count": "INT",
    "inter_op_thread_count": "INT",
    "enable_mem_arena": "true|false",
    "enable_mem_pattern": "true|false",
    "memory_arena_shrinkage": "cpu:0[;gpu:0]",
    "arena_extend_strategy": "next_power_of_two|same_as_requested",
    "cudnn_conv_algo_search": "exhaustive|heuristic|default",
    "gpu_mem_limit": "BYTES",
    "do_copy_in_default_stream": "true|false",
    "tensorrt": "true|false|FP32|FP16|BF16|INT8|JSON",
    "openvino": "true|false",
    "auto_mixed_precision": "true|false",
    "inference_mode": "true|false",
    "disable_optimized_execution": "true|false",
}


def _scalar(text: str) -> Any:
    """``none`` → None, ``true``/``false`` → bool, numbers → int/float, JSON objects and lists; else text."""
    if text.lower() in ("none", "null"):
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def option_value(name: str, text: str) -> Any:
    """The ``configure_model`` value of ``config set --<name> TEXT``.

    Raises:
        ValueError: a value the option's form does not allow (``configure_model`` checks the rest).
    """
    from mme_triton.model.options import DynamicBatching, InstanceGroup, ModelWarmup, TensorRT

    value = _scalar(text)
    if name == "dynamic_batching" and isinstance(value, dict):
        return DynamicBatching(**_fields(value))
    if name == "model_warmup" and isinstance(value, dict):
        return ModelWarmup(**_fields(value))
    if name == "tensorrt" and isinstance(value, (str, dict)):
        return TensorRT(**(_fields(value) if isinstance(value, dict) else {"precision_mode": value.upper()}))
    if name == "instance_group" and value is not None:
        entries = (
            value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
        )
        groups = []
        for entry in entries:
            if isinstance(entry, dict):
                groups.append(InstanceGroup(**_fields(entry)))
                continue
            count, _, kind = str(entry).partition(":")
            kind = kind.upper() or "GPU"
            try:
                groups.append(InstanceGroup(**_fields({"count": int(count), "kind": _KINDS.get(kind, kind)})))
            except ValueError:
                raise ValueError(
                    f"--instance-group takes COUNT:KIND, e.g. 2:KIND_GPU, got {entry!r}"
                ) from None
        return groups
    return value


_KINDS = {"GPU": "KIND_GPU", "CPU": "KIND_CPU", "AUTO": "KIND_AUTO"}


def _fields(value: dict[str, Any]) -> dict[str, Any]:
    """A JSON object as dataclass fields (lists become tuples)."""
    return {str(k): tuple(v) if isinstance(v, list) else v for k, v in value.items()}


def _config_show(args: argparse.Namespace) -> int:
    from mme_triton.model.authoring import read_config

    json_format: Any = importlib.import_module("google.protobuf.json_format")

    config = read_config(args.model_dir)
    emit(args, str(config).rstrip(), json_format.MessageToDict(config, preserving_proto_field_name=True))
    return 0


def _config_set(args: argparse.Namespace) -> int:
    from mme_triton.model.authoring import configure_model

    given = {name: option_value(name, getattr(args, name)) for name in CONFIG_OPTIONS if hasattr(args, name)}
    if args.preset is None and not given:
        raise ValueError("nothing to set: give --preset and/or options such as --max-batch-size 8")
    directory = configure_model(args.model_dir, preset=args.preset, **given)
    emit(
        args,
        f"configured {directory}",
        {"model_dir": directory, "preset": args.preset, "options": sorted(given)},
    )
    return 0


def _config_presets(args: argparse.Namespace) -> int:
    from mme_triton.model.presets import PRESETS

    data = [
        {"name": p.name, "backends": sorted(p.backends), "summary": p.summary, "options": dict(p.options)}
        for p in PRESETS.values()
    ]
    text = "\n".join(f"{p['name']:<22} {'/'.join(p['backends']):<12} {p['summary']}" for p in data)
    emit(args, text, data)
    return 0


# -- export ----------------------------------------------------------------------------------------


def load_object(spec: str) -> Any:
    """``package.module:attr`` or ``path/to/file.py:attr`` → the object; a class or factory is called.

    The working directory is importable, as with ``python -m``.

    Raises:
        ValueError: no ``:attr`` part, or it names nothing.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(
            f"{spec!r}: give MODULE:ATTRIBUTE, e.g. mypackage.models:Net or models.py:make_model"
        )
    if module_name.endswith(".py"):
        location = importlib.util.spec_from_file_location(Path(module_name).stem, module_name)
        if location is None or location.loader is None:
            raise FileNotFoundError(f"cannot load {module_name}")
        module = importlib.util.module_from_spec(location)
        location.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{spec!r}: {module_name} has no {attr!r}") from None
    import torch

    if callable(obj) and not isinstance(obj, torch.nn.Module):
        obj = obj()
    return obj


def _example_inputs(specs: list[str]) -> tuple[Any, ...]:
    """Tensors from ``FILE.npy`` or ``DIMS:DTYPE`` specs (``1x4:float32``: random floats, zeros otherwise)."""
    import numpy as np
    import torch

    tensors = []
    for spec in specs:
        if spec.endswith(".npy"):
            tensors.append(torch.from_numpy(np.load(spec, allow_pickle=False)))
            continue
        dims, _, dtype = spec.partition(":")
        try:
            shape = [int(d) for d in dims.replace(",", "x").split("x")]
            np_dtype = np.dtype(dtype or "float32")
        except (ValueError, TypeError):
            raise ValueError(
                f"--example-input takes FILE.npy or DIMS:DTYPE (e.g. 1x4:float32), got {spec!r}"
            ) from None
        array = (
            np.random.default_rng(0).random(shape).astype(np_dtype)
            if np_dtype.kind == "f"
            else np.zeros(shape, np_dtype)
        )
        tensors.append(torch.from_numpy(array))
    if not tensors:
        raise ValueError("give the example inputs: --example-input 1x4:float32 (once per forward argument)")
    return tuple(tensors)


def _export(args: argparse.Namespace) -> int:
    common: dict[str, Any] = {"overwrite": args.overwrite, "keep_tuning": not args.fresh}
    if args.max_batch_size is not None:
        common["max_batch_size"] = args.max_batch_size
    names: dict[str, Any] = {
        "input_names": args.input_name or None,
        "output_names": args.output_name or None,
    }
    if args.kind == "transformers":
        from mme_triton.export.transformers import export_transformers

        model, tokenizer = _transformers_source(args.source, args.tokenizer)
        if args.sequence_length is not None:
            common["sequence_length"] = args.sequence_length
        if args.opset is not None:
            common["opset_version"] = args.opset
        directory = export_transformers(model, args.model_dir, tokenizer=tokenizer, **names, **common)
    else:
        module = load_object(args.source)
        if args.kind == "torchscript":
            from mme_triton.export.torchscript import export_torchscript

            directory = export_torchscript(
                module,
                _example_inputs(args.example_input),
                args.model_dir,
                script=args.script,
                **names,
                **common,
            )
        else:
            from mme_triton.export.torch import export_pytorch

            if args.opset is not None:
                common["opset_version"] = args.opset
            directory = export_pytorch(
                module, _example_inputs(args.example_input), args.model_dir, **names, **common
            )
    emit(args, f"exported {directory}", {"model_dir": directory, "kind": args.kind})
    return 0


def _transformers_source(source: str, tokenizer_dir: str | None) -> tuple[Any, Any]:
    """A Hugging Face model (and tokenizer) from a saved directory, or ``MODULE:ATTRIBUTE``."""
    path = Path(source)
    if path.is_dir():
        import transformers
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        # the class the model was saved as (a task head: BertForSequenceClassification ...), else AutoModel
        architectures = getattr(AutoConfig.from_pretrained(path), "architectures", None) or []
        found = getattr(transformers, architectures[0], None) if architectures else None
        model = (found or AutoModel).from_pretrained(path)
        tokenizer_path = Path(tokenizer_dir) if tokenizer_dir else path
        has_tokenizer = any(
            (tokenizer_path / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")
        )
        return model, AutoTokenizer.from_pretrained(tokenizer_path) if has_tokenizer else None
    if ":" not in source:
        raise FileNotFoundError(
            f"{source}: not a saved model directory (save_pretrained) nor MODULE:ATTRIBUTE"
        )
    tokenizer = None
    if tokenizer_dir:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    return load_object(source), tokenizer


def register(sub: SubParsers) -> None:
    """Add ``config`` and ``export``."""
    config = add_command(
        sub,
        "config",
        help="show or change a model's config.pbtxt (configure_model's options and presets)",
        examples=[
            "mme-triton config show model_repository/linear",
            "mme-triton config set model_repository/linear --preset onnx-cpu --max-batch-size 16",
            "mme-triton config presets",
        ],
    )
    actions = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    p = add_command(
        actions,
        "show",
        help="print a model's config.pbtxt as Triton parses it",
        examples=["mme-triton config show model_repository/linear --json"],
        handler=_config_show,
    )
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    p = add_command(
        actions,
        "set",
        help="rewrite a model's config.pbtxt with a preset and options, validated (configure_model)",
        examples=[
            "mme-triton config set model_repository/linear --max-batch-size 16 --dynamic-batching true",
            "mme-triton config set repo/bert --preset onnx-gpu-throughput --model-warmup zero",
            "mme-triton config set repo/bert --instance-group 2:KIND_GPU --tensorrt FP16",
            "mme-triton config set repo/bert --dynamic-batching '{\"max_queue_delay_microseconds\": 100}'",
        ],
        handler=_config_set,
    )
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    p.add_argument("--preset", help="start from a preset (see `mme-triton config presets`)")
    options = p.add_argument_group("options (`none` removes a setting; docs/model-prep.md explains each)")
    for name, metavar in CONFIG_OPTIONS.items():
        options.add_argument(
            f"--{name.replace('_', '-')}", dest=name, metavar=metavar, default=argparse.SUPPRESS
        )
    add_command(
        actions,
        "presets",
        help="list configure_model's presets",
        examples=["mme-triton config presets --json"],
        handler=_config_presets,
    )

    export = add_command(
        sub,
        "export",
        help="export a PyTorch or Hugging Face model to a Triton model directory (the export extra)",
        examples=[
            "mme-triton export torchscript mypackage.models:Net repo/net --example-input 1x4:float32",
            "mme-triton export onnx models.py:make_model repo/net --example-input x.npy --max-batch-size 8",
            "mme-triton export transformers ./bert-saved model_repository/bert --sequence-length 128",
        ],
    )
    kinds = export.add_subparsers(dest="kind", required=True, metavar="KIND")
    for kind, summary, example in (
        (
            "torchscript",
            "trace (or script) a torch.nn.Module to model.pt (export_torchscript)",
            "mme-triton export torchscript mypackage.models:Net repo/net --example-input 1x4:float32",
        ),
        (
            "onnx",
            "a torch.nn.Module to model.onnx (export_pytorch)",
            "mme-triton export onnx models.py:make_model repo/net --example-input 2x4:float32 --opset 17",
        ),
        (
            "transformers",
            "a Hugging Face encoder or task head to model.onnx with its tokenizer (export_transformers)",
            "mme-triton export transformers ./bert-saved repo/bert --max-batch-size 8 --sequence-length 128",
        ),
    ):
        p = add_command(kinds, kind, help=summary, examples=[example], handler=_export)
        source_help = (
            "a saved model directory (save_pretrained) or MODULE:ATTRIBUTE"
            if kind == "transformers"
            else "MODULE:ATTRIBUTE or FILE.py:ATTRIBUTE: a torch.nn.Module, or a class/function making one"
        )
        p.add_argument("source", metavar="SOURCE", help=source_help)
        p.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="the model directory to create")
        p.add_argument(
            "--max-batch-size", type=int, default=None, help="largest batch (0: no batch dimension)"
        )
        p.add_argument("--overwrite", action="store_true", help="replace an existing MODEL_DIR")
        p.add_argument(
            "--fresh",
            action="store_true",
            help="with --overwrite, write the config from the new graph alone (default: keep its tuning)",
        )
        if kind == "transformers":
            p.add_argument("--tokenizer", help="the tokenizer's directory (default: SOURCE, when it has one)")
            p.add_argument("--sequence-length", type=int, default=None, help="a fixed sequence length")
            p.add_argument(
                "--input-name", action="append", default=[], help="an encoder input to export (once each)"
            )
            p.add_argument(
                "--output-name",
                action="append",
                default=[],
                help="an output of the model to export, by the name it returns it under (once per output)",
            )
        else:
            p.add_argument(
                "--example-input",
                action="append",
                default=[],
                metavar="FILE.npy|DIMS:DTYPE",
                help="one per forward argument, e.g. 1x4:float32",
            )
            p.add_argument("--input-name", action="append", default=[], help="config names of the inputs")
            p.add_argument("--output-name", action="append", default=[], help="config names of the outputs")
        if kind == "torchscript":
            p.add_argument("--script", action="store_true", help="torch.jit.script instead of trace")
        if kind != "torchscript":
            p.add_argument("--opset", type=int, default=None, help="the ONNX opset")
