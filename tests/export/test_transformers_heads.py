"""export_transformers on task heads: the outputs keep the names the model returns them under, with the dims
the head gives them, and the graph computes what the PyTorch model does."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import read_config, validate_model
from mme_triton.export import export_pytorch, export_transformers
from mme_triton.model.config import datatype_name

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import HEADS, build_bert_head

pytestmark = pytest.mark.torch

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected where torch is missing
    torch = None


def _outputs(model_dir: Path) -> list[tuple[str, str, list[int]]]:
    return [(t.name, datatype_name(t.data_type), list(t.dims)) for t in read_config(model_dir).output]


def _feeds(batch: int, length: int) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(5).integers(5, 100, size=(batch, length), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1:, length - 2 :] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


@pytest.mark.parametrize(
    ("task", "outputs"),
    [
        ("sequence-classification", [("logits", "TYPE_FP32", [3])]),
        ("token-classification", [("logits", "TYPE_FP32", [-1, 3])]),
        (
            "question-answering",
            [("start_logits", "TYPE_FP32", [-1]), ("end_logits", "TYPE_FP32", [-1])],
        ),
        ("masked-lm", [("logits", "TYPE_FP32", [-1, 100])]),
    ],
    ids=list(HEADS),
)
def test_export_transformers_task_head_names_outputs_as_the_model_does(
    tmp_path: Path, task: str, outputs: list[tuple[str, str, list[int]]]
) -> None:
    import onnxruntime

    model = build_bert_head(task)
    model_dir = export_transformers(model, tmp_path / task.replace("-", "_"), max_batch_size=4)

    assert _outputs(model_dir) == outputs
    assert validate_model(model_dir) == []
    feeds = _feeds(batch=3, length=9)
    session = onnxruntime.InferenceSession(str(model_dir / "1" / "model.onnx"))
    got = session.run([name for name, _, _ in outputs], feeds)
    with torch.no_grad():
        want = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    for (name, _, _), array in zip(outputs, got, strict=True):
        np.testing.assert_allclose(array, want[name].numpy(), atol=1e-4)


def test_export_transformers_classifier_without_batching_has_label_dims(tmp_path: Path) -> None:
    classifier = build_bert_head("sequence-classification")
    model_dir = export_transformers(classifier, tmp_path / "c", max_batch_size=0)

    assert _outputs(model_dir) == [("logits", "TYPE_FP32", [3])]
    assert [list(t.dims) for t in read_config(model_dir).input] == [[-1], [-1], [-1]]


def test_export_transformers_output_names_choose_among_the_model_outputs(tmp_path: Path) -> None:
    transformers = importlib.import_module("transformers")
    torch.manual_seed(0)
    bert = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, vocab_size=100
        )
    ).eval()

    model_dir = export_transformers(
        bert,
        tmp_path / "pooled",
        input_names=["input_ids", "attention_mask"],
        output_names=["pooler_output"],
    )

    config = read_config(model_dir)
    assert [t.name for t in config.input] == ["input_ids", "attention_mask"]
    assert _outputs(model_dir) == [("pooler_output", "TYPE_FP32", [32])]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"output_names": ["probabilities"]}, r"\['probabilities'\] are not outputs of .*returns logits"),
        ({"output_names": ["logits", "logits"]}, "names an output twice"),
        ({"input_names": ["attention_mask"]}, "must include input_ids"),
        ({"input_names": ["input_ids", "pixel_values"]}, r"\['pixel_values'\] are not encoder inputs"),
    ],
    ids=["unknown-output", "twice", "no-input-ids", "unknown-input"],
)
def test_export_transformers_refuses_names_the_model_does_not_have(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        export_transformers(build_bert_head("sequence-classification"), tmp_path / "c", **options)
    assert list(tmp_path.iterdir()) == []


def test_export_transformers_output_that_is_not_one_tensor_is_an_error(tmp_path: Path) -> None:
    """A config asking for hidden states makes the model return a tuple of tensors as one output: it cannot
    be one Triton output, so the export names it and refuses, unless output_names leaves it out."""
    model = build_bert_head("sequence-classification")
    model.config.output_hidden_states = True

    with pytest.raises(ValueError, match=r"output 'hidden_states' .* is a tuple of 3, not one tensor"):
        export_transformers(model, tmp_path / "c")
    assert list(tmp_path.iterdir()) == []

    model_dir = export_transformers(model, tmp_path / "c", output_names=["logits"])
    assert _outputs(model_dir) == [("logits", "TYPE_FP32", [3])]


def test_export_transformers_tuple_outputs_need_names(tmp_path: Path) -> None:
    class TupleModel(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = build_bert_head("question-answering")
            self.config = self.inner.config

        def forward(self, input_ids: Any, attention_mask: Any = None, return_dict: bool = True) -> Any:
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask)
            return out.start_logits, out.end_logits

    with pytest.raises(ValueError, match="2 unnamed output"):
        export_transformers(TupleModel().eval(), tmp_path / "qa")
    model_dir = export_transformers(TupleModel().eval(), tmp_path / "qa", output_names=["start", "end"])
    assert _outputs(model_dir) == [("start", "TYPE_FP32", [-1]), ("end", "TYPE_FP32", [-1])]


def test_export_pytorch_refuses_outputs_it_cannot_name(tmp_path: Path) -> None:
    """A transformers model given to export_pytorch returns a ModelOutput: one dict, not a tensor."""
    model = build_bert_head("sequence-classification")

    with pytest.raises(TypeError, match=r"module output 0 is SequenceClassifierOutput.*export_transformers"):
        export_pytorch(model, torch.randint(0, 100, (2, 5)), tmp_path / "c")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("head", "config_kwargs", "outputs"),
    [
        (
            "RobertaForSequenceClassification",
            {"type_vocab_size": 1, "pad_token_id": 1, "max_position_embeddings": 40, "num_labels": 4},
            [("logits", [4])],
        ),
        ("DistilBertForQuestionAnswering", {}, [("start_logits", [-1]), ("end_logits", [-1])]),
        ("DistilBertForTokenClassification", {"num_labels": 5}, [("logits", [-1, 5])]),
    ],
    ids=["roberta-classifier", "distilbert-qa", "distilbert-ner"],
)
def test_export_transformers_heads_of_other_encoders(
    tmp_path: Path, head: str, config_kwargs: dict[str, Any], outputs: list[tuple[str, list[int]]]
) -> None:
    transformers = importlib.import_module("transformers")
    torch.manual_seed(0)
    if head.startswith("Roberta"):
        config = transformers.RobertaConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            vocab_size=100,
            **config_kwargs,
        )
    else:
        config = transformers.DistilBertConfig(
            dim=32, n_layers=1, n_heads=2, hidden_dim=37, vocab_size=100, **config_kwargs
        )
    model = getattr(transformers, head)(config).eval()

    model_dir = export_transformers(model, tmp_path / "m", max_batch_size=4)

    assert [(t.name, list(t.dims)) for t in read_config(model_dir).output] == outputs
    assert validate_model(model_dir) == []
