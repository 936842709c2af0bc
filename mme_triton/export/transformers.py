"""Export a Hugging Face ``transformers`` encoder (BERT, RoBERTa, DistilBERT, ...) to a Triton ONNX model.

The route is ``torch.onnx.export`` on the model itself (``transformers`` 5 has no ``transformers.onnx``,
and ``optimum-onnx`` pins an older ``transformers``). ``transformers`` is never imported here: the model
is used through what every ``PreTrainedModel`` has (``forward``'s signature, ``config``), and nothing is
ever downloaded.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ENCODER_INPUTS", "TOKENIZER_DIR", "export_transformers"]

logger = logging.getLogger(__name__)

#: The inputs an encoder's forward may take, in the order they are exported (all INT64).
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OUTPUTS = ("last_hidden_state", "pooler_output")
_DEFAULT_SEQUENCE = 8

#: Where the tokenizer goes by default: a directory of the model directory, beside its version
#: directories (``<model_dir>/tokenizer/``).
TOKENIZER_DIR = "tokenizer"


def export_transformers(
    model: Any,
    model_dir: str | os.PathLike[str],
    *,
    tokenizer: Any = None,
    max_batch_size: int = 8,
    sequence_length: int | None = None,
    opset_version: int | None = None,
    overwrite: bool = False,
    dynamic_batching: bool = True,
    instance_count: int = 1,
    version: int = 1,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    **export_kwargs: Any,
) -> Path:
    """Export an encoder model to ``<model_dir>/<version>/model.onnx`` with a complete config.pbtxt.

    Inputs are the ones the model's forward takes among ``input_ids``, ``attention_mask`` and
    ``token_type_ids``, all ``TYPE_INT64`` with a variable batch dimension (with ``max_batch_size > 0``)
    and a variable sequence dimension, or ``sequence_length`` fixed. ``token_type_ids`` is exported
    only when it is used: the tokenizer produces it (``tokenizer.model_input_names``), or, without a
    tokenizer, the model has more than one token type (RoBERTa has one, so it gets none). Outputs are
    ``last_hidden_state`` ``[batch, sequence, hidden]`` and ``pooler_output`` ``[batch, hidden]`` when
    the model has a pooler.

    The export is checked: the ONNX graph runs in ONNX Runtime on inputs of another batch size and
    sequence length (with padding in ``attention_mask``) and is compared with the PyTorch model; the
    largest difference is logged, and one beyond ``atol + rtol * |expected|`` raises
    :class:`~mme_triton.export.ExportError`. A variable sequence axis is checked at a second length
    whenever the model has two positions or more (a model with 6 positions: exported at 5, checked at 6).

    The tokenizer, when given, is saved with ``save_pretrained`` to ``<model_dir>/tokenizer/``, inside
    the model directory beside its version directories. There it travels with the model (in its
    archive, under its content digest) and no tool that walks the repository takes it for a model:
    Triton treats every directory of a repository as a model, but loads only the numbered directories of
    a model as versions (it logs that it ignores ``tokenizer``, and ``validate_model`` says the same in a
    ``version-directory-ignored`` warning). It is saved in the staged model directory, so a failed export
    leaves the old model and tokenizer as they were. ``tokenizer_dir=`` saves it elsewhere instead
    (replaced only once the new one is saved).

    Parameters:
        model: a ``transformers`` encoder as ``AutoModel`` gives it (``BertModel``, ``RobertaModel``,
            ``DistilBertModel`` ...); put in eval mode.
        model_dir: the model directory to create; its name is the model's name.
        tokenizer: the model's tokenizer (optional); decides ``token_type_ids`` and is saved.
        max_batch_size: the largest batch Triton sends (0: no batch dimension, inputs ``[sequence]``).
        sequence_length: a fixed sequence length (e.g. 512), or ``None`` for a variable one.
        opset_version: the ONNX opset (default :data:`~mme_triton.export._common.DEFAULT_OPSET`, 17,
            as for ``export_pytorch``).
        overwrite: replace an existing model directory (and ``tokenizer_dir``).
        dynamic_batching: with ``max_batch_size > 0``, let Triton batch concurrent requests.
        instance_count: model instances Triton creates.
        version: the version directory to write.
        tokenizer_dir: save the tokenizer there instead of ``<model_dir>/tokenizer/``.
        atol / rtol: the tolerance of the ONNX Runtime check.
        export_kwargs: passed on to ``torch.onnx.export`` (``dynamo=True`` selects the newer exporter).

    The options mean what they mean for :func:`~mme_triton.export.export_pytorch` and
    :func:`~mme_triton.export.export_torchscript`. What differs has a reason: the first argument is a
    ``model`` (a ``transformers`` model, that library's word) where theirs is a ``module`` (a
    ``torch.nn.Module``, torch's); ``max_batch_size`` defaults to 8, not 0, because tokenized text always
    comes with a batch dimension, where an arbitrary module's example inputs need not; the tensors'
    names and shapes are the encoder's (no ``input_names``, ``output_names`` or ``dynamic_axes``), and
    ``sequence_length``, ``tokenizer`` and ``tokenizer_dir`` are a text model's.

    Returns:
        ``model_dir``.

    Raises:
        ExportError: ONNX Runtime's results differ from the PyTorch model's beyond the tolerance.
        FileExistsError: the model or tokenizer directory exists and ``overwrite`` is false.
        ModelValidationError: the model directory does not validate (nothing is left behind).
        ValueError: the model takes no ``input_ids``, a size is out of range, or the tokenizer has more
            tokens than the model's vocabulary.

    Example::

        from transformers import BertConfig, BertModel
        bert = BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=37, vocab_size=100))
        export_transformers(bert, "repo/bert", max_batch_size=8)  # PosixPath('repo/bert')
    """
    import torch

    from mme_triton.export._common import (
        DEFAULT_OPSET,
        check_export_options,
        compare_outputs,
        graph_config,
        prepare_target,
        quiet_legacy_export,
        run_onnx,
        staged_model_dir,
    )
    from mme_triton.model.config import format_config
    from mme_triton.model.onnx_check import read_graph_signature

    check_export_options(max_batch_size=max_batch_size, instance_count=instance_count, version=version)
    if sequence_length is not None and sequence_length < 1:
        raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
    target = prepare_target(model_dir, overwrite=overwrite)
    outside: Path | None = None  # a tokenizer_dir= outside the model directory
    if tokenizer is not None and tokenizer_dir is not None:
        outside = Path(tokenizer_dir)
        if outside.exists() and not overwrite:
            raise FileExistsError(f"{outside} exists; pass overwrite=True to replace it")

    config = getattr(model, "config", None)
    vocab_size = int(getattr(config, "vocab_size", 0) or 0)
    if vocab_size < 1:
        raise ValueError("the model has no config.vocab_size; export_transformers takes transformers models")
    if tokenizer is not None and len(tokenizer) > vocab_size:
        raise ValueError(
            f"the tokenizer has {len(tokenizer)} tokens but the model's vocabulary has {vocab_size}: ids "
            "beyond it would fail in the embedding lookup"
        )
    names = _input_names(model, tokenizer)
    limit = int(getattr(config, "max_position_embeddings", 0) or 0)
    if sequence_length is not None and limit and sequence_length > limit:
        raise ValueError(f"sequence_length {sequence_length} exceeds the model's {limit} positions")
    export_length, check_length = _sequence_lengths(sequence_length, limit)

    model.eval()
    export_batch = 2
    check_batch = 3 if max_batch_size > 0 else export_batch
    export_feeds = _dummy_inputs(names, export_batch, export_length, vocab_size, seed=0)
    check_feeds = _dummy_inputs(names, check_batch, check_length, vocab_size, seed=1)
    wrapper = _encoder(model, names)
    with torch.no_grad():
        first = wrapper(*export_feeds)
    outputs = list(_OUTPUTS[: len(first)])

    def unbatched(feeds: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(t[0] for t in feeds) if max_batch_size == 0 else feeds

    axes: dict[str, dict[int, str]] = {}
    if max_batch_size > 0 or sequence_length is None:
        offset = 1 if max_batch_size > 0 else 0
        for name in (*names, *outputs):
            axes[name] = {0: "batch"} if max_batch_size > 0 else {}
            if sequence_length is None and name != "pooler_output":
                axes[name][offset] = "sequence"
    export_args: dict[str, Any] = {
        "dynamo": False,
        **export_kwargs,
        "opset_version": DEFAULT_OPSET if opset_version is None else opset_version,
    }

    # The model moves into place first, then a tokenizer_dir= tokenizer; either failing leaves the old ones.
    with _staged_tokenizer(outside) as staged_tokenizer, staged_model_dir(target) as staged:
        onnx_path = staged / str(version) / "model.onnx"
        onnx_path.parent.mkdir(parents=True)
        quiet = quiet_legacy_export() if not export_args["dynamo"] else contextlib.nullcontext()
        with torch.no_grad(), quiet:
            torch.onnx.export(
                wrapper,
                unbatched(export_feeds),
                str(onnx_path),
                input_names=names,
                output_names=outputs,
                dynamic_axes={k: v for k, v in axes.items() if v},
                **export_args,
            )
        wrapper.eval()
        with torch.no_grad():
            wanted = wrapper(*check_feeds)
        got = run_onnx(
            onnx_path,
            {name: t.numpy() for name, t in zip(names, unbatched(check_feeds), strict=True)},
            outputs,
        )
        compare_outputs(
            f"ONNX export of {type(model).__name__}",
            outputs,
            got,
            [t.numpy() for t in unbatched(tuple(wanted))],
            atol=atol,
            rtol=rtol,
            model_dir=target,
        )
        graph_inputs, graph_outputs = read_graph_signature(onnx_path)
        triton_config = graph_config(
            target.name,
            "onnxruntime_onnx",
            max_batch_size,
            graph_inputs,
            graph_outputs,
            dynamic_batching=dynamic_batching,
            instance_count=instance_count,
        )
        (staged / "config.pbtxt").write_text(format_config(triton_config), encoding="utf-8")
        if tokenizer is not None:
            saved = staged / TOKENIZER_DIR if staged_tokenizer is None else staged_tokenizer
            tokenizer.save_pretrained(str(saved))
    if tokenizer is not None:
        logger.info("saved the tokenizer of %s to %s", target.name, outside or target / TOKENIZER_DIR)
    logger.info("exported %s to %s (inputs %s, outputs %s)", type(model).__name__, target, names, outputs)
    return target


def _sequence_lengths(sequence_length: int | None, limit: int) -> tuple[int, int]:
    """(the length to export at, the length to check at): two different lengths for a variable sequence
    axis whenever the model's ``limit`` positions leave room for two (a graph that fixed the length at
    export time fails the check), the one length when it is fixed."""
    if sequence_length is not None:
        return sequence_length, sequence_length
    if not limit or limit > _DEFAULT_SEQUENCE + 3:
        return _DEFAULT_SEQUENCE, _DEFAULT_SEQUENCE + 3
    if limit >= 3:
        return min(_DEFAULT_SEQUENCE, limit - 1), limit
    if limit == 2:
        return 2, 1
    logger.info("the model has one position: its sequence axis is checked at that length only")
    return 1, 1


@contextlib.contextmanager
def _staged_tokenizer(destination: Path | None) -> Iterator[Path | None]:
    """Where to save a tokenizer bound for ``destination`` (None: nothing to stage): a directory beside
    it that replaces it on a clean exit, the old one removed only once the new one is in its place; on
    an exception the new one is removed and the old one left as it was."""
    if destination is None:
        yield None
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.staging-", dir=destination.parent))
    try:
        fresh = staging / destination.name
        yield fresh
        previous = staging / "previous"
        if destination.exists():
            destination.rename(previous)
        try:
            fresh.rename(destination)
        except OSError:
            if previous.exists():
                previous.rename(destination)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _input_names(model: Any, tokenizer: Any) -> list[str]:
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError("the model has no inspectable forward(); pass a transformers model") from exc
    if "input_ids" not in parameters:
        raise ValueError(
            f"{type(model).__name__}.forward takes no input_ids; export_transformers exports text "
            "encoders (BERT, RoBERTa, DistilBERT ...) — use export_pytorch for other modules"
        )
    names = [name for name in ENCODER_INPUTS if name in parameters]
    if "token_type_ids" in names:
        if tokenizer is not None:
            produced = set(getattr(tokenizer, "model_input_names", ENCODER_INPUTS))
            used = "token_type_ids" in produced
        else:
            used = int(getattr(model.config, "type_vocab_size", 2) or 0) > 1
        if not used:
            names.remove("token_type_ids")
    return names


def _dummy_inputs(
    names: list[str], batch: int, length: int, vocab_size: int, *, seed: int
) -> tuple[Any, ...]:
    """Token ids, a mask with padding in every row but the first, and zero token types."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors: list[Any] = []
    for name in names:
        if name == "input_ids":
            tensors.append(torch.randint(0, vocab_size, (batch, length), generator=generator))
        elif name == "attention_mask":
            mask = torch.ones(batch, length, dtype=torch.int64)
            for row in range(1, batch):
                mask[row, max(1, length - row) :] = 0
            tensors.append(mask)
        else:
            tensors.append(torch.zeros(batch, length, dtype=torch.int64))
    return tuple(tensors)


def _encoder_class() -> Any:
    import torch

    class Encoder(torch.nn.Module):  # type: ignore[misc]
        """The model with positional tensor inputs and a tuple of tensor outputs, for tracing."""

        def __init__(self, model: Any, names: list[str]) -> None:
            super().__init__()
            self.model = model
            self.names = names
            parameters = inspect.signature(model.forward).parameters
            self.extra = {"use_cache": False} if "use_cache" in parameters else {}

        def forward(self, *tensors: Any) -> tuple[Any, ...]:
            if len(tensors) == len(self.names) and tensors[0].dim() == 1:
                # max_batch_size 0: the graph takes [sequence]; the model wants a batch of one
                batched = [t.unsqueeze(0) for t in tensors]
                result = self.model(
                    **dict(zip(self.names, batched, strict=True)), return_dict=True, **self.extra
                )
                return tuple(t[0] for t in _pick(result))
            result = self.model(**dict(zip(self.names, tensors, strict=True)), return_dict=True, **self.extra)
            return _pick(result)

    return Encoder


def _pick(result: Any) -> tuple[Any, ...]:
    hidden = result["last_hidden_state"] if "last_hidden_state" in result else result[0]
    pooled = result.get("pooler_output") if hasattr(result, "get") else None
    return (hidden,) if pooled is None else (hidden, pooled)


def _encoder(model: Any, names: list[str]) -> Any:
    return _encoder_class()(model, names).eval()
