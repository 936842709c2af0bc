"""export_transformers: tiny BERT, RoBERTa and DistilBERT become valid ONNX models that compute the same."""

from __future__ import annotations

import ast
import importlib
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import read_config, validate_model
from mme_triton.export import ExportError, export_transformers
from mme_triton.model.config import format_config, parse_config_file
from mme_triton.model.validate import validate_repository
from mme_triton.profile.inputs import input_arrays

pytestmark = pytest.mark.torch

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected where torch is missing
    torch = None


def _session(model_dir: Path) -> Any:
    import onnxruntime

    return onnxruntime.InferenceSession(str(model_dir / "1" / "model.onnx"))


def _tensors(config: Any, kind: str) -> list[tuple[str, str, list[int]]]:
    from mme_triton.model.config import datatype_name

    return [(t.name, datatype_name(t.data_type), list(t.dims)) for t in getattr(config, kind)]


def test_export_transformers_bert_writes_inputs_outputs_and_tokenizer(
    tmp_path: Path, tiny_bert: Any, bert_tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mme_triton")
    model_dir = export_transformers(tiny_bert, tmp_path / "repo" / "bert", tokenizer=bert_tokenizer)

    assert model_dir == tmp_path / "repo" / "bert"
    # the tokenizer is a directory of the model, not a model of the repository: Triton (and the check)
    # say only that it is not a version directory
    assert [(p.code, Path(p.path).name) for p in validate_model(model_dir)] == [
        ("version-directory-ignored", "tokenizer")
    ]
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["bert"]
    assert list(validate_repository(tmp_path / "repo")) == ["bert"]
    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == 8
    assert _tensors(config, "input") == [
        ("input_ids", "TYPE_INT64", [-1]),
        ("attention_mask", "TYPE_INT64", [-1]),
        ("token_type_ids", "TYPE_INT64", [-1]),
    ]
    assert _tensors(config, "output") == [
        ("last_hidden_state", "TYPE_FP32", [-1, 32]),
        ("pooler_output", "TYPE_FP32", [32]),
    ]
    assert config.HasField("dynamic_batching")
    assert any("largest absolute difference" in r.getMessage() for r in caplog.records)

    # the tokenizer is saved in the model directory, beside its version, and loads back
    saved = model_dir / "tokenizer"
    transformers = importlib.import_module("transformers")
    reloaded = transformers.AutoTokenizer.from_pretrained(str(saved))
    encoded = reloaded(["hello world", "the model serves text fast"], padding=True, return_tensors="np")
    outputs = _session(model_dir).run(None, {k: v.astype(np.int64) for k, v in encoded.items()})
    with torch.no_grad():
        want = tiny_bert(**{k: torch.from_numpy(v) for k, v in encoded.items()})
    np.testing.assert_allclose(outputs[0], want.last_hidden_state.numpy(), atol=1e-4)
    np.testing.assert_allclose(outputs[1], want.pooler_output.numpy(), atol=1e-4)


def test_export_transformers_roberta_has_no_token_type_ids(
    tmp_path: Path, tiny_roberta: Any, roberta_tokenizer: Any
) -> None:
    model_dir = export_transformers(tiny_roberta, tmp_path / "roberta", tokenizer=roberta_tokenizer)

    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert [t.name for t in config.input] == ["input_ids", "attention_mask"]
    assert [t.name for t in config.output] == ["last_hidden_state", "pooler_output"]
    assert [p.code for p in validate_model(model_dir)] == ["version-directory-ignored"]
    assert (model_dir / "tokenizer" / "tokenizer.json").is_file()


def test_export_transformers_without_tokenizer_reads_token_types_from_config(
    tmp_path: Path, tiny_roberta: Any
) -> None:
    model_dir = export_transformers(tiny_roberta, tmp_path / "roberta")
    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert [t.name for t in config.input] == ["input_ids", "attention_mask"]
    assert not (model_dir / "tokenizer").exists()
    assert validate_model(model_dir) == []


# The table of docs/export.md that says which models get token_type_ids: model config, tokenizer, outcome.
_TOKEN_TYPE_ROW = re.compile(
    r"^\s*\| `(?P<config>\w+Config\([^`]*\))`[^|]*\| (?P<tokenizer>[^|]+?) "
    r"\| (?P<outcome>exported|not exported) \|$",
    re.MULTILINE,
)
_TINY = {
    "BertConfig": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 37,
    },
    "RobertaConfig": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 37,
        "max_position_embeddings": 40,
        "pad_token_id": 1,
    },
    "DistilBertConfig": {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 37},
}


def _documented_token_type_rows() -> list[tuple[str, str, bool]]:
    text = (Path(__file__).parents[2] / "docs" / "export.md").read_text(encoding="utf-8")
    return [
        (m["config"], m["tokenizer"].strip(), m["outcome"] == "exported")
        for m in _TOKEN_TYPE_ROW.finditer(text)
    ]


def test_export_transformers_token_type_ids_as_docs_export_md_states(
    tmp_path: Path, roberta_tokenizer: Any
) -> None:
    """Each row of docs/export.md's table, exported as written: a RobertaConfig() has two token types by
    default, so without a tokenizer its export takes token_type_ids."""
    transformers = importlib.import_module("transformers")
    rows = _documented_token_type_rows()
    assert ("RobertaConfig()", "none", True) in rows and len(rows) >= 4
    for index, (expression, tokenizer_cell, exported) in enumerate(rows):
        call = ast.parse(expression, mode="eval").body
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name), expression
        options = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
        config = getattr(transformers, call.func.id)(vocab_size=100, **_TINY[call.func.id], **options)
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(config).eval()
        tokenizer = None if tokenizer_cell == "none" else roberta_tokenizer

        model_dir = export_transformers(model, tmp_path / f"m{index}", tokenizer=tokenizer)

        names = [t.name for t in read_config(model_dir).input]
        assert ("token_type_ids" in names) is exported, (expression, tokenizer_cell, names)


def test_export_transformers_records_the_vocabulary_the_profile_inputs_keep_to(tmp_path: Path) -> None:
    """A RoBERTa of 30 tokens and (by default) two token types: its export records both sizes, and the
    profile's default random inputs, long sequences of them, run in ONNX Runtime (ids of [0, 100) fail in
    the embedding lookup)."""
    transformers = importlib.import_module("transformers")
    torch.manual_seed(0)
    config = transformers.RobertaConfig(vocab_size=30, **_TINY["RobertaConfig"])
    model_dir = export_transformers(transformers.RobertaModel(config).eval(), tmp_path / "roberta")

    session = _session(model_dir)
    assert session.get_modelmeta().custom_metadata_map == {"vocab_size": "30", "type_vocab_size": "2"}
    shapes = {name: [24] for name in ("input_ids", "attention_mask", "token_type_ids")}
    requests = input_arrays(model_dir, batch_size=4, shapes=shapes, count=6)

    for arrays in requests:
        assert arrays["input_ids"].max() < 30 and set(np.unique(arrays["token_type_ids"])) <= {0, 1}
        assert (arrays["attention_mask"] == 1).all()
        hidden, _ = session.run(None, arrays)
        assert hidden.shape == (4, 24, 32) and np.isfinite(hidden).all()
    assert {int(t) for arrays in requests for t in np.unique(arrays["token_type_ids"])} == {0, 1}


def test_export_transformers_distilbert_has_no_pooler(tmp_path: Path) -> None:
    transformers = importlib.import_module("transformers")
    torch.manual_seed(0)
    model = transformers.DistilBertModel(
        transformers.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=37, vocab_size=100)
    )
    model_dir = export_transformers(model, tmp_path / "distil", max_batch_size=4)

    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert [t.name for t in config.input] == ["input_ids", "attention_mask"]
    assert _tensors(config, "output") == [("last_hidden_state", "TYPE_FP32", [-1, 32])]
    assert validate_model(model_dir) == []


def test_export_transformers_fixed_sequence_length(tmp_path: Path, tiny_roberta: Any) -> None:
    model_dir = export_transformers(tiny_roberta, tmp_path / "fixed", sequence_length=16, max_batch_size=2)

    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert [list(t.dims) for t in config.input] == [[16], [16]]
    # the config repeats the graph, which leaves the traced output's sequence dim symbolic
    assert [list(t.dims) for t in config.output] == [[-1, 32], [32]]
    session = _session(model_dir)
    assert [i.shape for i in session.get_inputs()] == [["batch", 16], ["batch", 16]]
    ids = np.full((1, 16), 5, dtype=np.int64)
    hidden, _ = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
    with torch.no_grad():
        want = tiny_roberta(
            input_ids=torch.from_numpy(ids), attention_mask=torch.ones(1, 16, dtype=torch.int64)
        )
    np.testing.assert_allclose(hidden, want.last_hidden_state.numpy(), atol=1e-4)


def test_export_transformers_without_batching_takes_one_sequence(tmp_path: Path, tiny_bert: Any) -> None:
    model_dir = export_transformers(tiny_bert, tmp_path / "single", max_batch_size=0)

    config, _ = parse_config_file(model_dir / "config.pbtxt")
    assert config is not None
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert [list(t.dims) for t in config.input] == [[-1], [-1], [-1]]
    assert [list(t.dims) for t in config.output] == [[-1, 32], [32]]
    assert validate_model(model_dir) == []


def test_export_transformers_out_of_tolerance_is_an_error(tmp_path: Path, tiny_bert: Any) -> None:
    with pytest.raises(ExportError, match="differ from the framework model") as caught:
        export_transformers(tiny_bert, tmp_path / "strict", atol=0.0, rtol=0.0)
    assert caught.value.max_abs_diff is not None and caught.value.max_abs_diff > 0
    assert list(tmp_path.iterdir()) == []


def test_export_transformers_graph_that_differs_is_caught(tmp_path: Path) -> None:
    """A model whose traced graph computes something else than its forward cannot pass the check."""

    class Noisy(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = importlib.import_module("transformers").BertModel(
                importlib.import_module("transformers").BertConfig(
                    hidden_size=32,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    intermediate_size=37,
                    vocab_size=100,
                )
            )
            self.config = self.inner.config

        def forward(self, input_ids: Any, attention_mask: Any = None, return_dict: bool = True) -> Any:
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            out["last_hidden_state"] = out["last_hidden_state"] + float(not torch.jit.is_tracing())
            return out

    with pytest.raises(ExportError, match="last_hidden_state"):
        export_transformers(Noisy(), tmp_path / "noisy", max_batch_size=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_batch_size": -1}, "max_batch_size"),
        ({"sequence_length": 0}, "sequence_length"),
        ({"sequence_length": 600}, "exceeds the model's 512 positions"),
    ],
    ids=["negative-batch", "zero-length", "too-long"],
)
def test_export_transformers_rejects_bad_arguments(
    tmp_path: Path, tiny_bert: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        export_transformers(tiny_bert, tmp_path / "m", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_export_transformers_refuses_a_module_without_input_ids(tmp_path: Path) -> None:
    module = torch.nn.Linear(4, 2)
    module.config = type("Config", (), {"vocab_size": 10})()
    with pytest.raises(ValueError, match="takes no input_ids"):
        export_transformers(module, tmp_path / "linear")


def test_export_transformers_refuses_a_tokenizer_larger_than_the_vocabulary(
    tmp_path: Path, bert_tokenizer: Any
) -> None:
    transformers = importlib.import_module("transformers")
    small = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37, vocab_size=8
        )
    )
    with pytest.raises(ValueError, match="tokens but the model's vocabulary has 8"):
        export_transformers(small, tmp_path / "small", tokenizer=bert_tokenizer)


def test_export_transformers_refuses_existing_directories(
    tmp_path: Path, tiny_bert: Any, bert_tokenizer: Any
) -> None:
    elsewhere = tmp_path / "tokenizers" / "bert"
    elsewhere.mkdir(parents=True)
    with pytest.raises(FileExistsError, match="tokenizers/bert exists"):
        export_transformers(tiny_bert, tmp_path / "bert", tokenizer=bert_tokenizer, tokenizer_dir=elsewhere)
    assert not (tmp_path / "bert").exists()
    export_transformers(
        tiny_bert, tmp_path / "bert", tokenizer=bert_tokenizer, tokenizer_dir=elsewhere, overwrite=True
    )
    assert (elsewhere / "tokenizer.json").is_file()
    assert not (tmp_path / "bert" / "tokenizer").exists()  # it went where it was asked to
    config, _ = parse_config_file(tmp_path / "bert" / "config.pbtxt")
    assert config is not None and "pooler_output" in format_config(config)


class _DiskFull:
    """A tokenizer whose save fails halfway, as on a full disk."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.model_input_names = tokenizer.model_input_names

    def __len__(self) -> int:
        return len(self._tokenizer)

    def save_pretrained(self, directory: str) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / "tokenizer.json").write_text("{")
        raise OSError(28, "No space left on device")


def _files(directory: Path) -> dict[str, bytes]:
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {str(p.relative_to(directory)): p.read_bytes() for p in files}


@pytest.mark.parametrize("where", ["in-the-model", "tokenizer-dir"])
def test_export_transformers_tokenizer_that_fails_to_save_leaves_the_old_export(
    tmp_path: Path, tiny_bert: Any, bert_tokenizer: Any, where: str
) -> None:
    elsewhere = {"tokenizer_dir": tmp_path / "tokenizers" / "bert"} if where == "tokenizer-dir" else {}
    model_dir = export_transformers(
        tiny_bert, tmp_path / "repo" / "bert", tokenizer=bert_tokenizer, **elsewhere
    )
    saved = elsewhere.get("tokenizer_dir", model_dir / "tokenizer")
    before = {"model": _files(model_dir), "tokenizer": _files(saved)}
    assert "tokenizer.json" in before["tokenizer"]
    with pytest.raises(OSError, match="No space left on device"):
        export_transformers(
            tiny_bert,
            model_dir,
            tokenizer=_DiskFull(bert_tokenizer),
            max_batch_size=4,
            overwrite=True,
            **elsewhere,
        )
    # a failed export leaves nothing behind: the old model and tokenizer, as they were, and no staging
    assert {"model": _files(model_dir), "tokenizer": _files(saved)} == before
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["bert"]
    if where == "tokenizer-dir":
        assert sorted(p.name for p in saved.parent.iterdir()) == ["bert"]


def _fixed_length_encoder(positions: int) -> Any:
    """A BERT whose forward scales its output by a Python int computed from the sequence length: the
    trace keeps the export's length as a constant, so the graph is right at that length only."""
    transformers = importlib.import_module("transformers")

    class FixedLength(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.inner = transformers.BertModel(
                transformers.BertConfig(
                    hidden_size=32,
                    num_hidden_layers=1,
                    num_attention_heads=2,
                    intermediate_size=37,
                    vocab_size=100,
                    max_position_embeddings=positions,
                )
            )
            self.config = self.inner.config

        def forward(self, input_ids: Any, attention_mask: Any = None, return_dict: bool = True) -> Any:
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            length = int(input_ids.shape[-1])  # a Python int: a constant in the trace
            return {"last_hidden_state": out["last_hidden_state"] * length}

    return FixedLength().eval()


@pytest.mark.parametrize("positions", [3, 6, 10], ids=lambda n: f"{n}-positions")
def test_export_transformers_checks_the_sequence_axis_at_a_second_length_with_few_positions(
    tmp_path: Path, positions: int
) -> None:
    with pytest.raises(ExportError, match="last_hidden_state"):
        export_transformers(_fixed_length_encoder(positions), tmp_path / "fixed", max_batch_size=2)
    assert list(tmp_path.iterdir()) == []


def test_export_transformers_model_with_few_positions_exports_and_runs_at_every_length(
    tmp_path: Path,
) -> None:
    transformers = importlib.import_module("transformers")
    torch.manual_seed(0)
    model = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            vocab_size=100,
            max_position_embeddings=6,
        )
    ).eval()
    model_dir = export_transformers(model, tmp_path / "short", max_batch_size=2)
    session = _session(model_dir)
    for length in (1, 4, 6):
        ids = np.full((1, length), 7, dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        hidden, _ = session.run(None, feeds)
        with torch.no_grad():
            want = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
        np.testing.assert_allclose(hidden, want.last_hidden_state.numpy(), atol=1e-4)
