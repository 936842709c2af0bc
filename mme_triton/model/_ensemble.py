"""Ensemble checks: steps, input/output maps, data flow, datatypes, shapes and batch sizes.

Mirrors what Triton checks when it loads an ensemble (model_config_utils.cc
``ValidateEnsembleSchedulingConfig`` and ensemble_utils.cc ``ValidateEnsembleConfig``): the steps form a
data-flow graph (their order in the file does not matter), every ensemble output must be reachable from
the ensemble inputs, and every tensor must be used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mme_triton._sagemaker import ENSEMBLE_CONFIG_PATTERN
from mme_triton.model import codes
from mme_triton.model._files import read_regular
from mme_triton.model._pb import ModelConfig
from mme_triton.model.config import CONFIG_FILENAME, datatype_name
from mme_triton.model.problems import Problem

__all__ = ["check_archive_ensemble", "check_ensemble"]


@dataclass(frozen=True)
class _Tensor:
    source: str  # where the tensor's type and shape come from, for messages
    data_type: int
    dims: tuple[int, ...]
    batching: bool

    @property
    def full_dims(self) -> tuple[int, ...]:
        return (-1, *self.dims) if self.batching else self.dims


def check_ensemble(
    config: ModelConfig, where: str, components: Mapping[str, ModelConfig | None]
) -> list[Problem]:
    """Check an ensemble's steps against each other and against the component configs.

    ``components`` maps step model names to their (effective) configs; a missing name, or ``None``,
    means the model could not be loaded and has been reported already, so its step is checked only for
    what the ensemble's own config says.
    """
    steps = list(config.ensemble_scheduling.step)
    if not steps:
        return []  # reported as ensemble-scheduling-missing
    problems = _check_step_fields(steps, where)
    problems.extend(_check_data_flow(config, steps, where))
    problems.extend(_check_components(config, steps, where, components))
    return problems


def _step_label(index: int, step: object) -> str:
    name: str = step.model_name  # type: ignore[attr-defined]
    return f"step {index + 1} ({name!r})" if name else f"step {index + 1}"


def _check_step_fields(steps: Sequence[object], where: str) -> list[Problem]:
    problems: list[Problem] = []
    produced: dict[str, int] = {}
    for index, step in enumerate(steps):
        label = _step_label(index, step)
        if not step.model_name:  # type: ignore[attr-defined]
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_STEP_MODEL_MISSING,
                    f"{label} has no model_name; name the model the step runs",
                    where,
                )
            )
        if not len(step.input_map):  # type: ignore[attr-defined]
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_INPUT_MAP_INVALID,
                    f"{label} has no input_map; map each of the model's inputs to an ensemble tensor",
                    where,
                )
            )
        if not len(step.output_map):  # type: ignore[attr-defined]
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_OUTPUT_MAP_INVALID,
                    f"{label} has no output_map; map the model's outputs to ensemble tensors",
                    where,
                )
            )
        for tensor in step.output_map.values():  # type: ignore[attr-defined]
            if tensor in produced:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_OUTPUT_MAP_INVALID,
                        f"ensemble tensor {tensor!r} is written by step {produced[tensor] + 1} and again by "
                        f"{label}; each tensor has one producer",
                        where,
                    )
                )
            else:
                produced[tensor] = index
    return problems


def _check_data_flow(config: ModelConfig, steps: Sequence[object], where: str) -> list[Problem]:
    problems: list[Problem] = []
    inputs = [tensor.name for tensor in config.input]
    outputs = [tensor.name for tensor in config.output]
    producers: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    for index, step in enumerate(steps):
        for tensor in step.output_map.values():  # type: ignore[attr-defined]
            producers.setdefault(tensor, index)
        for tensor in step.input_map.values():  # type: ignore[attr-defined]
            consumers.setdefault(tensor, []).append(index)

    for index, step in enumerate(steps):
        for model_input, tensor in sorted(step.input_map.items()):  # type: ignore[attr-defined]
            if tensor not in producers and tensor not in inputs:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_INPUT_MAP_INVALID,
                        f"{_step_label(index, step)} maps input {model_input!r} from {tensor!r}, which is "
                        "neither an ensemble input nor an output of any step",
                        where,
                    )
                )

    # A step runs once all of its input tensors are ready (Triton's readiness propagation).
    ready = set(inputs)
    ran: set[int] = set()
    progress = True
    while progress:
        progress = False
        for index, step in enumerate(steps):
            if index in ran:
                continue
            if all(tensor in ready for tensor in step.input_map.values()):  # type: ignore[attr-defined]
                ran.add(index)
                ready.update(step.output_map.values())  # type: ignore[attr-defined]
                progress = True

    for name in outputs:
        if name in ready:
            continue
        if name not in producers:
            detail = "no step's output_map writes it"
        else:
            detail = (
                f"step {producers[name] + 1} writes it but never runs, because one of its inputs is "
                "not produced from the ensemble inputs"
            )
        problems.append(
            Problem(
                "error",
                codes.ENSEMBLE_OUTPUT_UNPRODUCED,
                f"ensemble output {name!r} is never produced: {detail}",
                where,
            )
        )

    for name in inputs:
        if name not in consumers:
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_TENSOR_UNUSED,
                    f"ensemble input {name!r} is not mapped into any step; map it or remove it",
                    where,
                )
            )
    for name, index in producers.items():
        if name not in consumers and name not in outputs:
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_TENSOR_UNUSED,
                    f"tensor {name!r} written by step {index + 1} is neither read by a step nor an ensemble "
                    "output; Triton refuses unused ensemble tensors, so remove the mapping",
                    where,
                )
            )
    return problems


def _check_components(
    config: ModelConfig, steps: Sequence[object], where: str, components: Mapping[str, ModelConfig | None]
) -> list[Problem]:
    problems: list[Problem] = []
    batching = config.max_batch_size > 0
    tensors: dict[str, _Tensor] = {}
    for tensor in (*config.input, *config.output):
        dims = tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims
        tensors[tensor.name] = _Tensor("the ensemble config", tensor.data_type, tuple(dims), batching)

    for index, step in enumerate(steps):
        name: str = step.model_name  # type: ignore[attr-defined]
        component = components.get(name)
        if component is None:
            continue
        label = _step_label(index, step)
        if component.max_batch_size != 0 and component.max_batch_size < config.max_batch_size:
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_BATCH_SIZE_MISMATCH,
                    f"the ensemble allows max_batch_size {config.max_batch_size} but {label} allows only "
                    f"{component.max_batch_size}; lower the ensemble's or raise the model's",
                    where,
                )
            )
        if not len(component.input) and not len(component.output):
            continue  # I/O left to auto-complete we cannot see; nothing to compare against
        step_batching = component.max_batch_size > 0
        source = f"model {name!r} (step {index + 1})"
        model_inputs = {tensor.name: tensor for tensor in component.input}
        model_outputs = {tensor.name: tensor for tensor in component.output}
        input_map: Mapping[str, str] = step.input_map  # type: ignore[attr-defined]
        output_map: Mapping[str, str] = step.output_map  # type: ignore[attr-defined]

        for model_input, tensor_name in sorted(input_map.items()):
            model_tensor = model_inputs.get(model_input)
            if model_tensor is None:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_INPUT_MAP_INVALID,
                        f"{label} maps {tensor_name!r} to input {model_input!r}, but model {name!r} has "
                        f"no such input (it has {_names(model_inputs)})",
                        where,
                    )
                )
                continue
            seen = _Tensor(source, model_tensor.data_type, tuple(model_tensor.dims), step_batching)
            problems.extend(_agree(tensors, tensor_name, seen, where))
        for model_input, model_tensor in model_inputs.items():
            if model_input not in input_map and not model_tensor.optional:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_INPUT_MAP_INVALID,
                        f"{label}: input {model_input!r} of model {name!r} is not mapped to any ensemble "
                        "tensor; map it in input_map",
                        where,
                    )
                )
        for model_output, tensor_name in sorted(output_map.items()):
            model_tensor = model_outputs.get(model_output)
            if model_tensor is None:
                problems.append(
                    Problem(
                        "error",
                        codes.ENSEMBLE_OUTPUT_MAP_INVALID,
                        f"{label} maps output {model_output!r} to {tensor_name!r}, but model {name!r} has no "
                        f"such output (it has {_names(model_outputs)})",
                        where,
                    )
                )
                continue
            seen = _Tensor(source, model_tensor.data_type, tuple(model_tensor.dims), step_batching)
            problems.extend(_agree(tensors, tensor_name, seen, where))
    return problems


def _agree(tensors: dict[str, _Tensor], name: str, seen: _Tensor, where: str) -> list[Problem]:
    known = tensors.setdefault(name, seen)
    if known is seen:
        return []
    if known.data_type != seen.data_type:
        return [
            Problem(
                "error",
                codes.ENSEMBLE_DATATYPE_MISMATCH,
                f"ensemble tensor {name!r} is {datatype_name(known.data_type)} in {known.source} but "
                f"{datatype_name(seen.data_type)} in {seen.source}; make them agree",
                where,
            )
        ]
    if not _dims_match(known.dims, seen.dims) and not _dims_match(known.full_dims, seen.full_dims):
        return [
            Problem(
                "error",
                codes.ENSEMBLE_SHAPE_MISMATCH,
                f"ensemble tensor {name!r} has shape {list(known.full_dims)} in {known.source} but "
                f"{list(seen.full_dims)} in {seen.source}; make them agree",
                where,
            )
        ]
    return []


def _dims_match(left: tuple[int, ...], right: tuple[int, ...]) -> bool:
    return len(left) == len(right) and all(
        a == b or a == -1 or b == -1 for a, b in zip(left, right, strict=True)
    )


def _names(tensors: Mapping[str, object]) -> str:
    return ", ".join(repr(name) for name in sorted(tensors)) or "none"


def check_archive_ensemble(model_path: Path, members: list[Path]) -> list[Problem]:
    """SageMaker's front-end must find the ensemble of a multi-directory archive, and only that one, by
    the text of each config (:data:`mme_triton._sagemaker.ENSEMBLE_CONFIG_PATTERN`)."""
    problems: list[Problem] = []
    for member in members:
        config_path = member / CONFIG_FILENAME
        try:
            text = read_regular(config_path).decode("utf-8", errors="replace")
        except OSError:
            continue  # reported where the config is read
        detected = ENSEMBLE_CONFIG_PATTERN.search(text) is not None
        if member == model_path and not detected:
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_NOT_DETECTED,
                    'SageMaker finds the ensemble in a multi-model archive by the text platform: "ensemble" '
                    "(double quotes, no space before the colon); write the platform line exactly so, or it "
                    "may load a step model instead",
                    str(config_path),
                )
            )
        elif member != model_path and detected:
            problems.append(
                Problem(
                    "error",
                    codes.ENSEMBLE_ARCHIVE_AMBIGUOUS,
                    f'{member.name} also reads as an ensemble to SageMaker (platform: "ensemble" in its '
                    f"config), so an archive of {model_path.name} holds two ensembles and SageMaker loads "
                    "either one; flatten the nested ensemble into its parent",
                    str(config_path),
                )
            )
    return problems
