"""Tiny models for the export tests, built from configs with random weights (no model hub is reached).

- ``build_bert`` / ``build_roberta``: 2-layer encoders, hidden size 32, vocabulary 100;
- ``build_bert_head``: the same BERT with a task head (``AutoModelFor...`` classes by their task);
- ``build_bert_tokenizer`` / ``build_roberta_tokenizer``: fast tokenizers over a word list written here;
- ``build_cnn``: a 2-convolution image classifier for 3x16x16 inputs.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

WORDS = [
    "the",
    "a",
    "model",
    "serves",
    "triton",
    "endpoint",
    "answers",
    "fast",
    "text",
    "hello",
    "world",
    "deploy",
]


def _transformers() -> Any:
    return importlib.import_module("transformers")


def build_bert(seed: int = 0) -> Any:
    """A randomly initialised 2-layer BERT (hidden 32, 2 heads, vocabulary 100), in eval mode."""
    import torch

    t = _transformers()
    torch.manual_seed(seed)
    config = t.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=100
    )
    return t.BertModel(config).eval()


#: The task heads ``build_bert_head`` builds, by the ``AutoModelFor...`` class that gives them.
HEADS = {
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
    "masked-lm": "AutoModelForMaskedLM",
}


def build_bert_head(task: str, seed: int = 0, num_labels: int = 3) -> Any:
    """The tiny BERT of :func:`build_bert` with a task head (``num_labels`` labels for the classifiers; a
    question-answering head has two, start and end), built from its config by the ``AutoModelFor...``
    class of :data:`HEADS`, in eval mode."""
    import torch

    t = _transformers()
    torch.manual_seed(seed)
    config = t.BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=100,
        num_labels=2 if task == "question-answering" else num_labels,
    )
    return getattr(t, HEADS[task]).from_config(config).eval()


def build_roberta(seed: int = 0) -> Any:
    """A randomly initialised 2-layer RoBERTa (one token type, padding id 1), in eval mode."""
    import torch

    t = _transformers()
    torch.manual_seed(seed)
    config = t.RobertaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=100,
        max_position_embeddings=40,
        type_vocab_size=1,
        pad_token_id=1,
    )
    return t.RobertaModel(config).eval()


def build_bert_tokenizer(directory: Path) -> Any:
    """A ``BertTokenizerFast`` over a vocabulary file of special tokens and :data:`WORDS`."""
    t = _transformers()
    vocab = directory / "vocab.txt"
    directory.mkdir(parents=True, exist_ok=True)
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    # from_pretrained on a local directory reads vocab.txt in transformers 4 and 5 alike
    return t.BertTokenizerFast.from_pretrained(str(directory), do_lower_case=True)


def build_roberta_tokenizer() -> Any:
    """A fast tokenizer with RoBERTa's special tokens and inputs (no ``token_type_ids``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    t = _transformers()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    vocab = {token: index for index, token in enumerate([*specials, *WORDS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return t.PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_input_names=["input_ids", "attention_mask"],
    )


def build_cnn(seed: int = 0) -> Any:
    """Conv(3->4) - ReLU - Conv(4->8, stride 2) - global average pool - Linear(8->5), in eval mode."""
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(4, 8, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(1),
        torch.nn.Linear(8, 5),
    ).eval()
