"""Export a Hugging Face ``transformers`` encoder (BERT, RoBERTa, DistilBERT, ...) to a Triton ONNX model,
bare (``AutoModel``) or with a task head (``AutoModelForSequenceClassification``,
``...ForTokenClassification``, ``...ForQuestionAnswering``, ``...ForMaskedLM``): its outputs keep the
names the model returns them under.

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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mme_triton.export._outputs import ENCODER_INPUTS, chosen_inputs, named_outputs, output_axes, pick

__all__ = ["ENCODER_INPUTS", "TOKENIZER_DIR", "export_transformers"]

logger = logging.getLogger(__name__)

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
    keep_tuning: bool = True,
    dynamic_batching: bool = True,
    instance_count: int = 1,
    version: int = 1,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    **export_kwargs: Any,
) -> Path:
    """Export an encoder, bare or with a task head, to ``<model_dir>/<version>/model.onnx`` with a complete
    config.pbtxt.

    Inputs are the ones the model's forward takes among ``input_ids``, ``attention_mask`` and
    ``token_type_ids``, all ``TYPE_INT64`` with a variable batch dimension (with ``max_batch_size > 0``)
    and a variable sequence dimension, or ``sequence_length`` fixed. ``token_type_ids`` is exported
    only when it is used: the tokenizer produces it (``tokenizer.model_input_names``), or, without a
    tokenizer, the model's ``config.type_vocab_size`` is above 1 (``roberta-base``'s config has 1 and its
    tokenizer produces none, so it gets none either way; a ``RobertaConfig()`` built with its defaults
    has 2, so such a model exported without a tokenizer gets it). The
    sizes of the tables the ids index, ``vocab_size`` and (with ``token_type_ids``) ``type_vocab_size``,
    are recorded in the ONNX model's ``metadata_props``: ``profile_model``'s random inputs stay within
    them.

    Outputs are the tensors the model returns, under the names it returns them: ``last_hidden_state``
    ``[batch, sequence, hidden]`` and ``pooler_output`` ``[batch, hidden]`` for a bare encoder,
    ``logits`` ``[batch, num_labels]`` for sequence classification, ``logits`` ``[batch, sequence,
    num_labels]`` for token classification, ``start_logits`` and ``end_logits`` ``[batch, sequence]``
    for question answering, ``logits`` ``[batch, sequence, vocab_size]`` for masked LM. Which dims are
    variable is measured, not assumed: the model runs at two batch sizes and two sequence lengths, and a
    dim that follows the sequence length is the sequence axis. An output that is not one tensor (the
    tuple of ``hidden_states`` or ``attentions`` a config asks for) cannot be named and is an error, as
    is a model that returns a plain tuple without ``output_names``.

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
        model: a ``transformers`` encoder as ``AutoModel`` or an ``AutoModelFor...`` class gives it
            (``BertModel``, ``BertForSequenceClassification``, ``RobertaForQuestionAnswering`` ...); put
            in eval mode.
        model_dir: the model directory to create; its name is the model's name.
        tokenizer: the model's tokenizer (optional); decides ``token_type_ids`` and is saved.
        max_batch_size: the largest batch Triton sends (0: no batch dimension, inputs ``[sequence]``).
        sequence_length: a fixed sequence length (e.g. 512), or ``None`` for a variable one.
        opset_version: the ONNX opset (default :data:`~mme_triton.export._common.DEFAULT_OPSET`, 17,
            as for ``export_pytorch``).
        overwrite: replace an existing model directory (and ``tokenizer_dir``).
        keep_tuning: with ``overwrite``, carry the existing config's tuning over to the new one where it
            still fits (see :func:`~mme_triton.export._tuning.keep_tuning`); ``False`` starts fresh.
        dynamic_batching: with ``max_batch_size > 0``, let Triton batch concurrent requests.
        instance_count: model instances Triton creates.
        version: the version directory to write.
        input_names: which of the encoder inputs the forward takes to export, and in which order (e.g.
            ``["input_ids", "attention_mask"]`` to leave ``token_type_ids`` out); ``input_ids`` is needed.
        output_names: which of the model's outputs to export, by the names it returns them under, and
            in which order (e.g. ``["logits"]``, or ``["last_hidden_state"]`` without the pooler); for a
            model that returns a plain tuple, the names of its tensors in order.
        tokenizer_dir: save the tokenizer there instead of ``<model_dir>/tokenizer/``.
        atol / rtol: the tolerance of the ONNX Runtime check.
        export_kwargs: passed on to ``torch.onnx.export`` (``dynamo=True`` selects the newer exporter).

    The options mean what they mean for :func:`~mme_triton.export.export_pytorch` and
    :func:`~mme_triton.export.export_torchscript`. What differs has a reason: the first argument is a
    ``model`` (a ``transformers`` model, that library's word) where theirs is a ``module`` (a
    ``torch.nn.Module``, torch's); ``max_batch_size`` defaults to 8, not 0, because tokenized text always
    comes with a batch dimension, where an arbitrary module's example inputs need not;
    ``input_names``/``output_names`` choose among the tensors the model names itself instead of naming
    them (a module's tensors have no names of their own), and there is no ``dynamic_axes`` (the axes are
    measured); ``sequence_length``, ``tokenizer`` and ``tokenizer_dir`` are a text model's.

    Returns:
        ``model_dir``.

    Raises:
        ExportError: ONNX Runtime's results differ from the PyTorch model's beyond the tolerance.
        FileExistsError: the model or tokenizer directory exists and ``overwrite`` is false.
        ModelValidationError: the model directory does not validate (nothing is left behind).
        ValueError: the model takes no ``input_ids``, returns an output that is not one tensor, names
            in ``input_names``/``output_names`` it does not have, a size is out of range, or the tokenizer
            has more tokens than the model's vocabulary.

    Example::

        from transformers import BertConfig, BertForSequenceClassification
        classifier = BertForSequenceClassification(BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            vocab_size=100, num_labels=3))
        export_transformers(classifier, "repo/classifier")  # output "logits", dims [3]
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
    names = chosen_inputs(_input_names(model, tokenizer), input_names, type(model).__name__)
    limit = int(getattr(config, "max_position_embeddings", 0) or 0)
    if sequence_length is not None and limit and sequence_length > limit:
        raise ValueError(f"sequence_length {sequence_length} exceeds the model's {limit} positions")
    export_length, check_length = _sequence_lengths(sequence_length, limit)

    model.eval()
    export_batch = 2
    check_batch = 3 if max_batch_size > 0 else export_batch
    export_feeds = _dummy_inputs(names, export_batch, export_length, vocab_size, seed=0)
    check_feeds = _dummy_inputs(names, check_batch, check_length, vocab_size, seed=1)

    def unbatched(feeds: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(t[0] for t in feeds) if max_batch_size == 0 else feeds

    wrapper = _encoder(model, names)
    with torch.no_grad():
        outputs = wrapper.choose_outputs(export_feeds, output_names)
        first = wrapper(*unbatched(export_feeds))
        wanted = wrapper(*unbatched(check_feeds))

    axes: dict[str, dict[int, str]] = {}
    for name in names:
        axes[name] = {0: "batch"} if max_batch_size > 0 else {}
        if sequence_length is None:
            axes[name][1 if max_batch_size > 0 else 0] = "sequence"
    for name, early, late in zip(outputs, first, wanted, strict=True):
        axes[name] = output_axes(
            name, early, late, batched=max_batch_size > 0, rows=(export_batch, check_batch)
        )
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
        _record_sizes(onnx_path, vocab_size, _type_vocab_size(config) if "token_type_ids" in names else None)
        wrapper.eval()
        got = run_onnx(
            onnx_path,
            {name: t.numpy() for name, t in zip(names, unbatched(check_feeds), strict=True)},
            outputs,
        )
        compare_outputs(
            f"ONNX export of {type(model).__name__}",
            outputs,
            got,
            [t.numpy() for t in wanted],
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
        if tokenizer is not None:
            saved = staged / TOKENIZER_DIR if staged_tokenizer is None else staged_tokenizer
            tokenizer.save_pretrained(str(saved))
    if tokenizer is not None:
        logger.info("saved the tokenizer of %s to %s", target.name, outside or target / TOKENIZER_DIR)
    logger.info("exported %s to %s (inputs %s, outputs %s)", type(model).__name__, target, names, outputs)
    return target


def _type_vocab_size(config: Any) -> int | None:
    size = getattr(config, "type_vocab_size", None)
    return int(size) if isinstance(size, int) and size > 0 else None


def _record_sizes(onnx_path: Path, vocab_size: int, type_vocab_size: int | None) -> None:
    """Write the sizes of the model's embedding tables into the ONNX model's ``metadata_props``
    (:mod:`mme_triton.model._token_inputs`): what valid ids are, for whoever makes up inputs (the profile's
    random data). Weights stored as external data stay where they are."""
    import onnx

    from mme_triton.model._token_inputs import TYPE_VOCAB_SIZE, VOCAB_SIZE

    proto = onnx.load(str(onnx_path), load_external_data=False)
    sizes = {VOCAB_SIZE: str(vocab_size)}
    if type_vocab_size is not None:
        sizes[TYPE_VOCAB_SIZE] = str(type_vocab_size)
    onnx.helper.set_model_props(proto, sizes)
    onnx.save(proto, str(onnx_path))


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
        """The model with positional tensor inputs and a tuple of named tensor outputs, for tracing."""

        def __init__(self, model: Any, names: list[str]) -> None:
            super().__init__()
            self.model = model
            self.names = names
            self.outputs: list[str] | None = None  # names of the model's outputs, set by choose_outputs
            parameters = inspect.signature(model.forward).parameters
            self.extra = {"use_cache": False} if "use_cache" in parameters else {}

        def run(self, tensors: tuple[Any, ...]) -> Any:
            if len(tensors) == len(self.names) and tensors[0].dim() == 1:
                # max_batch_size 0: the graph takes [sequence]; the model wants a batch of one
                tensors = tuple(t.unsqueeze(0) for t in tensors)
            return self.model(**dict(zip(self.names, tensors, strict=True)), return_dict=True, **self.extra)

        def choose_outputs(self, tensors: tuple[Any, ...], chosen: Sequence[str] | None) -> list[str]:
            """Name the model's outputs (what it returns, or ``chosen`` among it) and keep them."""
            self.outputs = named_outputs(self.run(tensors), chosen, type(self.model).__name__)
            return list(self.outputs)

        def forward(self, *tensors: Any) -> tuple[Any, ...]:
            assert self.outputs is not None, "choose_outputs first"
            result = self.run(tensors)
            picked = pick(result, self.outputs)
            if len(tensors) == len(self.names) and tensors[0].dim() == 1:
                return tuple(t[0] for t in picked)
            return picked

    return Encoder


def _encoder(model: Any, names: list[str]) -> Any:
    return _encoder_class()(model, names).eval()
