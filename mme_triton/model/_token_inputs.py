"""The values a text encoder's token inputs may hold, from the sizes its ONNX export records.

An encoder looks its ``input_ids`` up in a table of ``vocab_size`` rows and its ``token_type_ids`` in one of
``type_vocab_size`` rows: an id outside them fails in ONNX Runtime's ``Gather`` ("indices element out of
data bounds"). ``export_transformers`` records both sizes in the ONNX model's ``metadata_props`` (ONNX
Runtime shows them as ``InferenceSession(...).get_modelmeta().custom_metadata_map``), ``type_vocab_size``
only when ``token_type_ids`` is exported. :func:`token_value_ranges` turns them into the ranges whoever
makes up inputs for the model (the profile's random data) draws from.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mme_triton.model._pb import ModelConfig

__all__ = [
    "ATTENTION_MASK",
    "ENCODER_INPUTS",
    "INPUT_IDS",
    "TOKEN_TYPE_IDS",
    "TYPE_VOCAB_SIZE",
    "VOCAB_SIZE",
    "recorded_sizes",
    "token_value_ranges",
]

logger = logging.getLogger(__name__)

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
TOKEN_TYPE_IDS = "token_type_ids"
#: The inputs an encoder's forward may take, in the order ``export_transformers`` exports them (all INT64).
ENCODER_INPUTS = (INPUT_IDS, ATTENTION_MASK, TOKEN_TYPE_IDS)

#: The ``metadata_props`` keys of the sizes, named as ``transformers`` configs name them.
VOCAB_SIZE = "vocab_size"
TYPE_VOCAB_SIZE = "type_vocab_size"


def recorded_sizes(model_dir: Path, config: ModelConfig) -> dict[str, int]:
    """``{"vocab_size": n, "type_vocab_size": m}`` as recorded in the ONNX model Triton would serve from
    ``model_dir`` (its newest version), the ones present and positive; empty for a model that is not an
    ONNX model or records neither (one exported by another tool)."""
    from mme_triton.model._layout import model_filename
    from mme_triton.model._onnx_wire import WireFormatError, read_model_metadata
    from mme_triton.model.backends import model_backend
    from mme_triton.model.repository import model_versions

    versions = model_versions(model_dir)
    filename = model_filename(config, "model.onnx")
    if model_backend(config) != "onnxruntime" or not versions or filename is None:
        return {}
    path = model_dir / str(versions[-1]) / filename
    if not path.is_file():
        return {}
    try:
        metadata = read_model_metadata(path)
    except (OSError, WireFormatError) as exc:
        logger.debug("no metadata read from %s: %s", path, exc)
        return {}
    sizes = {}
    for key in (VOCAB_SIZE, TYPE_VOCAB_SIZE):
        text = metadata.get(key, "")
        if text.isdigit() and int(text) > 0:
            sizes[key] = int(text)
    return sizes


def token_value_ranges(model_dir: Path, config: ModelConfig) -> dict[str, tuple[int, int]]:
    """``{input name: (low, high)}``: the integers in ``[low, high)`` each of the model's encoder inputs
    takes.

    ``attention_mask``: 1 (every token attended); ``token_type_ids``: below the recorded
    ``type_vocab_size``, or 0 when none is recorded (every encoder has a first token type);
    ``input_ids``: below the recorded ``vocab_size``, and no entry when none is recorded.
    """
    sizes = recorded_sizes(model_dir, config)
    names = {tensor.name for tensor in config.input}
    ranges: dict[str, tuple[int, int]] = {}
    if ATTENTION_MASK in names:
        ranges[ATTENTION_MASK] = (1, 2)
    if TOKEN_TYPE_IDS in names:
        ranges[TOKEN_TYPE_IDS] = (0, sizes.get(TYPE_VOCAB_SIZE, 1))
    if INPUT_IDS in names and VOCAB_SIZE in sizes:
        ranges[INPUT_IDS] = (0, sizes[VOCAB_SIZE])
    return ranges
