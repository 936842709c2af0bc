"""What ``export_transformers`` exports of a model: the encoder inputs chosen, the outputs named as the model
returns them (a ``ModelOutput``'s entries: ``logits``, ``start_logits`` ...), and their variable axes,
measured from two runs at different sizes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mme_triton.model._token_inputs import ENCODER_INPUTS

__all__ = ["ENCODER_INPUTS", "chosen_inputs", "named_outputs", "output_axes", "pick"]


def chosen_inputs(available: list[str], chosen: Sequence[str] | None, model: str) -> list[str]:
    """The encoder inputs to export: ``available`` (what the forward takes and the tokenizer uses), or the
    caller's choice among the inputs the forward takes."""
    if chosen is None:
        return available
    if isinstance(chosen, str):
        raise TypeError("input_names is a sequence of names, not one str")
    picked = list(chosen)
    unknown = [name for name in picked if name not in ENCODER_INPUTS]
    if unknown:
        raise ValueError(
            f"input_names {unknown} are not encoder inputs; {model} is exported with inputs among "
            f"{', '.join(ENCODER_INPUTS)}"
        )
    if "input_ids" not in picked:
        raise ValueError("input_names must include input_ids: the encoder reads the tokens from it")
    if len(set(picked)) != len(picked):
        raise ValueError(f"input_names {picked} names an input twice")
    return picked


def output_axes(name: str, early: Any, late: Any, *, batched: bool, rows: tuple[int, int]) -> dict[int, str]:
    """The variable axes of output ``name``, measured from its shapes at two batch sizes (``rows``) and
    two sequence lengths: the batch axis first, then every dim that changed with the sequence length."""
    first, second = list(early.shape), list(late.shape)
    if len(first) != len(second):
        raise ValueError(f"output {name!r} changes rank with the input's size ({first} and {second})")
    axes: dict[int, str] = {}
    offset = 0
    if batched:
        if not first or first[0] != rows[0] or second[0] != rows[1]:
            raise ValueError(
                f"output {name!r} has shapes {first} and {second} for batches of {rows[0]} and {rows[1]}: "
                "its first dim does not follow the batch; use max_batch_size=0, or output_names to leave "
                "it out"
            )
        axes[0] = "batch"
        offset = 1
    for axis in range(offset, len(first)):
        if first[axis] != second[axis]:
            axes[axis] = "sequence"
    return axes


def named_outputs(result: Any, chosen: Sequence[str] | None, model: str) -> list[str]:
    """The names of the outputs to export from one result of the model (a ``ModelOutput`` or a dict, whose
    entries are named; a tuple, whose tensors ``chosen`` names in order)."""
    import torch

    if isinstance(chosen, str):
        raise TypeError("output_names is a sequence of names, not one str")
    if not isinstance(result, Mapping):
        items = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if chosen is None:
            raise ValueError(
                f"{model} returns {len(items)} unnamed output(s) (a tuple): pass output_names with a name "
                "for each, or a model that returns a ModelOutput (return_dict=True)"
            )
        if len(chosen) != len(items):
            raise ValueError(f"{len(chosen)} output_names for the {len(items)} outputs {model} returns")
        for name, item in zip(chosen, items, strict=True):
            if not isinstance(item, torch.Tensor):
                raise ValueError(f"output {name!r} of {model} is a {type(item).__name__}, not one tensor")
        return list(chosen)
    returned = {name: value for name, value in result.items() if value is not None}
    if chosen is None:
        names = list(returned)
    else:
        names = list(chosen)
        unknown = [name for name in names if name not in returned]
        if unknown:
            raise ValueError(
                f"output_names {unknown} are not outputs of {model}; it returns "
                f"{', '.join(returned) or 'nothing'}"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"output_names {names} names an output twice")
    if not names:
        raise ValueError(f"{model} returns no tensor to export")
    for name in names:
        value = returned[name]
        if not isinstance(value, torch.Tensor):
            what = (
                f"a {type(value).__name__} of {len(value)}"
                if isinstance(value, (tuple, list))
                else f"a {type(value).__name__}"
            )
            raise ValueError(
                f"output {name!r} of {model} is {what}, not one tensor, and a Triton output is one tensor; "
                f"pass output_names to export only the tensors (it returns {', '.join(returned)}), or turn "
                f"the option off in the model's config (e.g. output_{name}=False)"
            )
    return names


def pick(result: Any, names: list[str]) -> tuple[Any, ...]:
    if isinstance(result, Mapping):
        return tuple(result[name] for name in names)
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)
