"""Build an ensemble from its step models' own configs: the ``ensemble_scheduling`` maps are generated.

Each step's inputs are read from the ensemble tensor of the same name (an ensemble input, or another
step's output) and its outputs write tensors of their own names, unless the step renames them. The
data flow is checked before anything is written (every tensor produced once, every step input
produced with the datatype and dims it expects, no cycles, nothing unused), the ensemble's inputs and
outputs take their datatypes and dims from the steps, and the written ensemble is validated with its
steps, so ``package_model`` packs it with them in one archive, as a SageMaker multi-model endpoint needs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mme_triton.model._pb import ModelConfig

__all__ = ["EnsembleStep", "build_ensemble"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnsembleStep:
    """One step of an ensemble: the model it runs, and tensor names where they differ from the model's.

    ``inputs`` maps a model input to the ensemble tensor it reads (default: the tensor of the input's
    own name); ``outputs`` maps a model output to the ensemble tensor it writes (default: its own
    name). Model outputs nothing reads and that are not ensemble outputs are left out of the step.
    """

    model_name: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    model_version: int = -1


@dataclass
class _Tensor:
    data_type: int
    dims: tuple[int, ...]
    where: str


def build_ensemble(
    repository: str | os.PathLike[str],
    name: str,
    steps: Sequence[str | EnsembleStep],
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    overwrite: bool = False,
) -> Path:
    """Write ``<repository>/<name>``: an ensemble of ``steps`` with generated ``ensemble_scheduling``.

    Parameters:
        repository: the model repository holding the step models (``repo/tokenize``, ``repo/bert``).
        name: the ensemble's name (its directory), without whitespace.
        steps: step model names, or :class:`EnsembleStep` entries that rename tensors; in any order
            (Triton runs a step once its inputs are ready).
        inputs: names of the ensemble's inputs (tensors steps read that no step writes).
        outputs: names of the ensemble's outputs (tensors steps write).

    Returns:
        The ensemble's directory; its config has ``platform: "ensemble"``, the steps' smallest
        ``max_batch_size`` (0 when no step batches), and an empty version directory ``1/``.

    Raises:
        TypeError: ``steps``, ``inputs`` or ``outputs`` is one string instead of a sequence.
        ValueError: a step model is missing or has no inputs/outputs in its config, a tensor is written
            twice, read with another datatype or dims than it is written with, read but never written,
            written but unused, an ensemble input or output is not part of the flow, the steps form a
            cycle, or some steps batch and others do not.
        FileExistsError: the ensemble's directory exists and ``overwrite`` is false.
        ModelValidationError: the written ensemble does not validate with its steps (nothing is left).

    Example::

        build_ensemble("repo", "pipeline", ["tokenize", "bert"], inputs=["TEXT"],
                       outputs=["last_hidden_state"])  # PosixPath('repo/pipeline')
    """
    from mme_triton.model._staging import check_model_name, staged_model_dir
    from mme_triton.model.config import format_config

    root = Path(repository)
    check_model_name(name, "ensemble name")
    if isinstance(steps, str):
        raise TypeError(
            f"steps takes a sequence of step model names or EnsembleStep entries, not one string: "
            f"write [{steps!r}]"
        )
    if not steps:
        raise ValueError("an ensemble needs at least one step")
    if not inputs or not outputs:
        raise ValueError("an ensemble needs at least one input and one output")
    for label, names in (("inputs", inputs), ("outputs", outputs)):
        if isinstance(names, str):
            raise TypeError(f"{label} takes a sequence of tensor names, not one string")
        if len(set(names)) != len(names):
            raise ValueError(f"{label} names a tensor twice: {list(names)}")
    normalised = [step if isinstance(step, EnsembleStep) else EnsembleStep(str(step)) for step in steps]
    target = root / name
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass overwrite=True to replace it")
    configs = {step.model_name: _step_config(root, step.model_name, name) for step in normalised}

    config = _ensemble_config(name, normalised, configs, list(inputs), list(outputs))
    siblings = tuple(root / model for model in configs)
    with staged_model_dir(target, siblings=siblings) as staged:
        (staged / "1").mkdir()
        (staged / "config.pbtxt").write_text(format_config(config), encoding="utf-8")
    logger.info("wrote ensemble %s: %s", target, " -> ".join(step.model_name for step in normalised))
    return target


def _step_config(root: Path, model: str, ensemble: str) -> ModelConfig:
    from mme_triton.model.config import parse_config_file

    if model == ensemble:
        raise ValueError(f"ensemble {ensemble!r} cannot be a step of itself")
    path = root / model / "config.pbtxt"
    if not path.is_file():
        raise ValueError(f"step model {model!r} has no {path}; create the model first")
    config, problems = parse_config_file(path)
    if config is None:
        raise ValueError(f"step model {model!r}: {problems[0].message}")
    if not len(config.input) or not len(config.output):
        raise ValueError(
            f"step model {model!r} lists no inputs or outputs in its config.pbtxt; the ensemble is wired "
            "from them (export the model with mme_triton.export, which writes them)"
        )
    return config


def _ensemble_config(
    name: str,
    steps: Sequence[EnsembleStep],
    configs: Mapping[str, ModelConfig],
    inputs: list[str],
    outputs: list[str],
) -> ModelConfig:
    from mme_triton.model._pb import new_model_config
    from mme_triton.model.config import datatype_name

    batch_sizes = {model: int(config.max_batch_size) for model, config in configs.items()}
    batching = [model for model, size in batch_sizes.items() if size > 0]
    if batching and len(batching) != len(batch_sizes):
        flat = sorted(set(batch_sizes) - set(batching))
        raise ValueError(
            f"steps {', '.join(map(repr, batching))} batch (max_batch_size > 0) but "
            f"{', '.join(map(repr, flat))} do not: an ensemble's steps all batch or none does; give every "
            "step a max_batch_size > 0, or all 0"
        )

    # What each step reads and writes: ensemble tensor name -> (step index, model tensor).
    produced: dict[str, _Tensor] = {}
    producer: dict[str, int] = {}
    wiring: list[tuple[dict[str, str], dict[str, str]]] = []
    for index, step in enumerate(steps):
        config = configs[step.model_name]
        model_inputs = {tensor.name: tensor for tensor in config.input}
        model_outputs = {tensor.name: tensor for tensor in config.output}
        label = f"step {index + 1} ({step.model_name!r})"
        for mapping, names, kind in (
            (step.inputs, model_inputs, "input"),
            (step.outputs, model_outputs, "output"),
        ):
            unknown = sorted(set(mapping) - set(names))
            if unknown:
                raise ValueError(
                    f"{label} renames {kind}(s) {', '.join(map(repr, unknown))}, which model "
                    f"{step.model_name!r} does not have (it has {', '.join(map(repr, names))})"
                )
        reads = {model_input: step.inputs.get(model_input, model_input) for model_input in model_inputs}
        writes = {
            model_output: step.outputs.get(model_output, model_output) for model_output in model_outputs
        }
        for model_output, tensor_name in writes.items():
            if tensor_name in producer:
                raise ValueError(
                    f"ensemble tensor {tensor_name!r} is written by step {producer[tensor_name] + 1} and by "
                    f"{label}; each tensor has one producer: rename one in EnsembleStep(outputs=...)"
                )
            if tensor_name in inputs:
                raise ValueError(f"{label} writes {tensor_name!r}, which is an ensemble input")
            tensor = model_outputs[model_output]
            producer[tensor_name] = index
            produced[tensor_name] = _Tensor(
                tensor.data_type, tuple(tensor.dims), f"{label} output {model_output!r}"
            )
        wiring.append((reads, writes))

    ensemble_inputs: dict[str, _Tensor] = {}
    consumed: set[str] = set()
    for index, (step, (reads, _writes)) in enumerate(zip(steps, wiring, strict=True)):
        config = configs[step.model_name]
        label = f"step {index + 1} ({step.model_name!r})"
        for tensor in config.input:
            tensor_name = reads[tensor.name]
            wanted = _Tensor(tensor.data_type, tuple(tensor.dims), f"{label} input {tensor.name!r}")
            if tensor_name in produced:
                _agree(tensor_name, produced[tensor_name], wanted, datatype_name)
                if producer[tensor_name] == index:
                    raise ValueError(f"{label} reads {tensor_name!r}, which it writes itself")
            elif tensor_name in inputs:
                known = ensemble_inputs.setdefault(tensor_name, wanted)
                if known is not wanted:
                    _agree(tensor_name, known, wanted, datatype_name)
            else:
                hint = (
                    "; add it to inputs=[...] if callers send it"
                    if not tensor.optional
                    else "; it is optional, but an ensemble must still map it"
                )
                raise ValueError(
                    f"{label} reads {tensor_name!r}, which is neither an ensemble input nor written by a "
                    f"step{hint}"
                )
            consumed.add(tensor_name)

    for tensor_name in inputs:
        if tensor_name not in ensemble_inputs:
            raise ValueError(f"ensemble input {tensor_name!r} is read by no step")
    for tensor_name in outputs:
        if tensor_name not in produced:
            raise ValueError(
                f"ensemble output {tensor_name!r} is written by no step (step outputs are "
                f"{', '.join(map(repr, produced))})"
            )
    _check_acyclic(steps, wiring, set(inputs))

    config = new_model_config()
    config.name = name
    config.platform = "ensemble"
    config.max_batch_size = min((batch_sizes[m] for m in batching), default=0)
    sections: tuple[tuple[str, list[str], dict[str, _Tensor]], ...] = (
        ("input", inputs, ensemble_inputs),
        ("output", outputs, produced),
    )
    for kind, tensor_names, tensors in sections:
        for tensor_name in tensor_names:
            entry = getattr(config, kind).add()
            entry.name = tensor_name
            entry.data_type = tensors[tensor_name].data_type
            entry.dims.extend(tensors[tensor_name].dims)
    scheduling = config.ensemble_scheduling
    for step, (reads, writes) in zip(steps, wiring, strict=True):
        entry = scheduling.step.add()
        entry.model_name = step.model_name
        entry.model_version = step.model_version
        for model_input, tensor_name in reads.items():
            entry.input_map[model_input] = tensor_name
        for model_output, tensor_name in writes.items():
            if tensor_name in consumed or tensor_name in outputs:
                entry.output_map[model_output] = tensor_name
        if not len(entry.output_map):
            raise ValueError(
                f"step {step.model_name!r} writes nothing that a later step reads or the ensemble returns "
                f"(it writes {', '.join(map(repr, writes.values()))}); add one to outputs=[...] or drop "
                "the step"
            )
    return config


def _agree(name: str, written: _Tensor, read: _Tensor, datatype_name: Any) -> None:
    if written.data_type != read.data_type:
        raise ValueError(
            f"ensemble tensor {name!r} is {datatype_name(written.data_type)} as {written.where} but "
            f"{datatype_name(read.data_type)} as {read.where}; make the datatypes agree"
        )
    compatible = len(written.dims) == len(read.dims) and all(
        a == b or -1 in (a, b) for a, b in zip(written.dims, read.dims, strict=True)
    )
    if not compatible:
        raise ValueError(
            f"ensemble tensor {name!r} has dims {list(written.dims)} as {written.where} but "
            f"{list(read.dims)} as {read.where}; make the shapes agree"
        )


def _check_acyclic(
    steps: Sequence[EnsembleStep], wiring: Sequence[tuple[dict[str, str], dict[str, str]]], inputs: set[str]
) -> None:
    ready = set(inputs)
    pending = set(range(len(steps)))
    while pending:
        runnable = [index for index in sorted(pending) if set(wiring[index][0].values()) <= ready]
        if not runnable:
            names = ", ".join(repr(steps[index].model_name) for index in sorted(pending))
            raise ValueError(f"steps {names} wait for each other's outputs (a cycle); no order runs them")
        for index in runnable:
            pending.discard(index)
            ready.update(wiring[index][1].values())
