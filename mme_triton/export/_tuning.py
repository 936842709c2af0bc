"""A re-export keeps the tuning of the config it replaces where that tuning still fits the new graph.

``export_*(..., overwrite=True)`` writes config.pbtxt from the new graph; without this module every
:func:`~mme_triton.configure_model` setting made since the last export (dynamic batching, instances,
warm-up, backend parameters) would be lost. :func:`keep_tuning` carries each one over when it still fits
the new config, and says, for each one it drops, why. ``keep_tuning=False`` on an exporter starts fresh.
"""

from __future__ import annotations

import logging
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mme_triton.errors import MMETritonWarning
from mme_triton.model._pb import ModelConfig

__all__ = ["TUNING_FIELDS", "keep_tuning"]

logger = logging.getLogger(__name__)

#: The config fields a re-export carries over, in the order they are considered.
TUNING_FIELDS = (
    "dynamic_batching",
    "instance_group",
    "response_cache",
    "model_warmup",
    "parameters",
    "optimization",
    "version_policy",
)


def keep_tuning(
    previous: Path, config: ModelConfig, staged: Path, *, chosen: Mapping[str, bool]
) -> list[str]:
    """Carry the tuning of ``previous``'s config.pbtxt over to ``config`` (the new export's), in place.

    What fits is kept: ``dynamic_batching`` when the new model batches (preferred batch sizes above the
    new ``max_batch_size`` are left out), ``instance_group``, ``response_cache``, each ``model_warmup``
    whose inputs, datatypes, dims and batch size fit the new inputs (its sample files copied from
    ``warmup/`` into ``staged``), ``parameters`` and ``optimization`` when the backend is the same, and a
    ``version_policy`` that selects the exported version. An exporter argument given a value other than
    its default wins over the old setting (``chosen``: ``{"dynamic_batching": True}`` when
    ``dynamic_batching=False`` was passed, ``{"instance_count": True}`` for an ``instance_count`` other
    than 1); at its default, the old setting wins.

    Returns:
        One line per setting dropped, saying why; each is also logged (WARNING) and issued as an
        :class:`~mme_triton.MMETritonWarning`. What is kept is logged (INFO).
    """
    from mme_triton.model.config import CONFIG_FILENAME, parse_config_file

    config_file = previous / CONFIG_FILENAME
    if not config_file.is_file():
        return []
    try:
        old, _ = parse_config_file(config_file)
    except OSError as exc:
        old = None
        reason = f"it cannot be read ({exc.strerror or exc})"
    else:
        reason = "it does not parse"
    if old is None:
        return _report(previous, [], [f"everything: the existing config.pbtxt was not kept, {reason}"])
    kept: list[str] = []
    dropped: list[str] = []
    _batching(old, config, chosen, kept, dropped)
    _instances(old, config, chosen, kept, dropped)
    if old.HasField("response_cache"):
        config.response_cache.CopyFrom(old.response_cache)
        kept.append("response_cache")
    _warmups(old, config, previous, staged, kept, dropped)
    _backend_settings(old, config, kept, dropped)
    _version_policy(old, config, staged, kept, dropped)
    return _report(previous, kept, dropped)


def _report(previous: Path, kept: list[str], dropped: list[str]) -> list[str]:
    if kept:
        logger.info("re-export of %s keeps %s from the config it replaces", previous.name, ", ".join(kept))
    for line in dropped:
        message = f"re-export of {previous.name} drops {line}"
        logger.warning("%s", message)
        warnings.warn(message, MMETritonWarning, stacklevel=4)
    return dropped


def _batching(
    old: ModelConfig, config: ModelConfig, chosen: Mapping[str, bool], kept: list[str], dropped: list[str]
) -> None:
    if chosen.get("dynamic_batching"):
        if old.HasField("dynamic_batching"):
            dropped.append("dynamic_batching: dynamic_batching=False was passed")
        return
    if old.max_batch_size == 0:
        return  # batching was not possible before: nothing was chosen, the new default stands
    if not old.HasField("dynamic_batching"):
        if config.HasField("dynamic_batching"):
            config.ClearField("dynamic_batching")
            kept.append("dynamic_batching (off)")
        return
    if config.max_batch_size == 0:
        dropped.append("dynamic_batching: the new model has max_batch_size 0, so nothing is batched")
        return
    config.dynamic_batching.CopyFrom(old.dynamic_batching)
    sizes = list(old.dynamic_batching.preferred_batch_size)
    fitting = [size for size in sizes if size <= config.max_batch_size]
    if fitting != sizes:
        del config.dynamic_batching.preferred_batch_size[:]
        config.dynamic_batching.preferred_batch_size.extend(fitting)
        dropped.append(
            f"preferred_batch_size {[s for s in sizes if s not in fitting]}: above the new max_batch_size "
            f"{config.max_batch_size}"
        )
    kept.append("dynamic_batching")


def _instances(
    old: ModelConfig, config: ModelConfig, chosen: Mapping[str, bool], kept: list[str], dropped: list[str]
) -> None:
    if not len(old.instance_group):
        return
    if chosen.get("instance_count"):
        if [(g.count, g.kind, list(g.gpus)) for g in old.instance_group] != [
            (g.count, g.kind, list(g.gpus)) for g in config.instance_group
        ]:
            dropped.append("instance_group: instance_count was passed")
        return
    del config.instance_group[:]
    for group in old.instance_group:
        config.instance_group.add().CopyFrom(group)
    kept.append("instance_group")


def _warmups(
    old: ModelConfig, config: ModelConfig, previous: Path, staged: Path, kept: list[str], dropped: list[str]
) -> None:
    from mme_triton.model.options import WARMUP_DIR

    inputs = {tensor.name: tensor for tensor in config.input}
    for warmup in old.model_warmup:
        reason = _warmup_misfit(warmup, inputs, config.max_batch_size)
        files = [entry.input_data_file for entry in warmup.inputs.values() if entry.input_data_file]
        missing = [name for name in files if not (previous / WARMUP_DIR / name).is_file()]
        if reason is None and missing:
            reason = f"its sample file(s) {', '.join(missing)} are not in {WARMUP_DIR}/"
        if reason is not None:
            dropped.append(f"model_warmup {warmup.name!r}: {reason}")
            continue
        for name in files:
            (staged / WARMUP_DIR).mkdir(exist_ok=True)
            shutil.copyfile(previous / WARMUP_DIR / name, staged / WARMUP_DIR / name)
        config.model_warmup.add().CopyFrom(warmup)
        kept.append(f"model_warmup {warmup.name!r}")


def _warmup_misfit(warmup: Any, inputs: Mapping[str, Any], max_batch_size: int) -> str | None:
    """Why a warm-up does not fit the new inputs, or ``None`` when it does."""
    from mme_triton.model.config import datatype_name

    if max_batch_size == 0 and warmup.batch_size != 1:
        return f"batch_size {warmup.batch_size}, and the new model does not batch"
    if max_batch_size > 0 and warmup.batch_size > max_batch_size:
        return f"batch_size {warmup.batch_size} is above the new max_batch_size {max_batch_size}"
    for name, sample in warmup.inputs.items():
        tensor = inputs.get(name)
        if tensor is None:
            return f"the new model has no input {name!r}"
        if sample.data_type != tensor.data_type:
            return (
                f"input {name!r} is {datatype_name(tensor.data_type)} now, the sample "
                f"{datatype_name(sample.data_type)}"
            )
        dims, configured = list(sample.dims), list(tensor.dims)
        fits = len(dims) == len(configured) and all(
            c in (-1, d) for c, d in zip(configured, dims, strict=True)
        )
        if not fits:
            return f"input {name!r} has dims {configured} now, the sample {dims}"
    absent = [name for name, tensor in inputs.items() if name not in warmup.inputs and not tensor.optional]
    if absent:
        return f"it has no sample for the new input(s) {', '.join(absent)}"
    return None


def _backend_settings(old: ModelConfig, config: ModelConfig, kept: list[str], dropped: list[str]) -> None:
    from mme_triton.model.backends import model_backend

    settings = [key for key in old.parameters if key not in config.parameters]
    has_optimization = old.HasField("optimization")
    if not settings and not has_optimization:
        return
    before, now = model_backend(old), model_backend(config)
    if before != now:
        parts = [f"parameter {key!r}" for key in settings] + ["optimization"] * has_optimization
        what = ", ".join(parts)
        dropped.append(f"{what}: written for the {before} backend, and the new model is served by {now}")
        return
    for key in settings:
        config.parameters[key].CopyFrom(old.parameters[key])
    if settings:
        kept.append(f"parameters {', '.join(settings)}")
    if has_optimization:
        config.optimization.CopyFrom(old.optimization)
        kept.append("optimization")


def _version_policy(
    old: ModelConfig, config: ModelConfig, staged: Path, kept: list[str], dropped: list[str]
) -> None:
    if not old.HasField("version_policy"):
        return
    versions = sorted(int(p.name) for p in staged.iterdir() if p.is_dir() and p.name.isdigit())
    policy = old.version_policy
    if policy.WhichOneof("policy_choice") == "specific" and not set(policy.specific.versions) & set(versions):
        dropped.append(
            f"version_policy: it selects version(s) {list(policy.specific.versions)} and the export "
            f"writes {versions}"
        )
        return
    config.version_policy.CopyFrom(policy)
    kept.append("version_policy")
