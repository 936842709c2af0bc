"""Exported, configured models deployed on the embedded stack answer through MMEClient like PyTorch does.

One stack and one endpoint serve the module: a tiny BERT, a tiny RoBERTa and a tiny BERT classifier
(export_transformers, the classifier in one call with nothing configured after it), a small CNN
(export_pytorch, and export_torchscript twice: the GPU and the CPU preset), a python-backend skeleton
as written, and an ensemble of a tokenizer step (new_python_model, edited) and the BERT encoder
(build_ensemble). Each model is configured with a preset plus overrides; the GPU presets run because the
stack adapts its own copy.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import (
    DynamicBatching,
    MMEClient,
    build_ensemble,
    configure_model,
    deploy_mme,
    new_python_model,
    profile_model,
    read_config,
    validate_model,
)
from mme_triton.export import export_pytorch, export_torchscript, export_transformers

sys.path.insert(0, str(Path(__file__).parent))
from tiny_models import (
    build_bert,
    build_bert_head,
    build_bert_tokenizer,
    build_cnn,
    build_roberta,
    build_roberta_tokenizer,
)

pytestmark = [
    pytest.mark.torch,
    pytest.mark.triton,
    pytest.mark.moto,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning"),
]

try:
    torch: Any = importlib.import_module("torch")
except ImportError:  # collected but deselected where torch is missing
    torch = None

ENDPOINT = "model-prep"
SERVED = ("bert", "roberta", "classifier", "cnn", "cnn_ts", "cnn_ts_cpu", "echo", "pipeline")
ATOL = 1e-4

# The tokenizer step of the ensemble: the skeleton new_python_model writes, with execute() replaced by a
# real tokenizer (the `tokenizers` library, the fast tokenizer export_transformers saved).
TOKENIZE_MODEL_PY = """\
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


class TritonPythonModel:
    def initialize(self, args):
        directory = os.path.join(args["model_repository"], args["model_version"])
        self.tokenizer = Tokenizer.from_file(os.path.join(directory, "tokenizer", "tokenizer.json"))
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            encoded = self.tokenizer.encode_batch([row[0].decode("utf-8") for row in text])
            tensors = [
                pb_utils.Tensor(name, np.array([getattr(e, field) for e in encoded], dtype=np.int64))
                for name, field in (
                    ("input_ids", "ids"),
                    ("attention_mask", "attention_mask"),
                    ("token_type_ids", "type_ids"),
                )
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses

    def finalize(self):
        pass
"""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The model repository, built with the library as a user would, and the PyTorch references."""
    root = tmp_path_factory.mktemp("prep")
    repository = root / "repo"
    bert, roberta, cnn = build_bert(), build_roberta(), build_cnn()
    classifier = build_bert_head("sequence-classification", num_labels=3)
    bert_tokenizer = build_bert_tokenizer(root / "vocab")

    # BERT: GPU throughput preset, batch size and warm-up overridden
    export_transformers(
        bert, repository / "bert", tokenizer=bert_tokenizer, tokenizer_dir=root / "bert-tokenizer"
    )
    configure_model(
        repository / "bert",
        preset="onnx-gpu-throughput",
        max_batch_size=4,
        model_warmup="zero",
        intra_op_thread_count=1,
    )
    # RoBERTa: CPU preset with a graph level and a shorter batching window
    export_transformers(
        roberta, repository / "roberta", tokenizer=build_roberta_tokenizer(), tokenizer_dir=root / "rt"
    )
    configure_model(
        repository / "roberta",
        preset="onnx-cpu",
        graph_optimization_level="extended",
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=50),
    )
    # a BERT classifier (AutoModelForSequenceClassification): one call, nothing configured after it
    export_transformers(classifier, repository / "classifier")
    # the CNN through ONNX: the TensorRT preset (dropped on the CPU stack) with one instance
    export_pytorch(cnn, torch.randn(2, 3, 16, 16), repository / "cnn", max_batch_size=8)
    configure_model(repository / "cnn", preset="onnx-tensorrt-fp16", instance_group=None)
    # the same CNN as TorchScript for Triton's PyTorch backend
    export_torchscript(cnn, torch.randn(2, 3, 16, 16), repository / "cnn_ts", max_batch_size=8)
    configure_model(repository / "cnn_ts", preset="torchscript-gpu", intra_op_thread_count=1)
    # and for a CPU endpoint, with optimized execution off
    export_torchscript(cnn, torch.randn(2, 3, 16, 16), repository / "cnn_ts_cpu", max_batch_size=8)
    configure_model(repository / "cnn_ts_cpu", preset="torchscript-cpu")
    # a python model as written
    new_python_model(
        repository,
        "echo",
        inputs={"TEXT": ("BYTES", [1]), "X": ("FP32", [3])},
        outputs={"TEXT_OUT": ("BYTES", [1]), "Y": ("FP32", [3]), "Z": ("INT64", [2])},
        max_batch_size=4,
    )
    # the ensemble: tokenizer step (skeleton, then edited) -> BERT
    tokenize = new_python_model(
        repository,
        "tokenize",
        inputs={"TEXT": ("BYTES", [1])},
        outputs={name: ("INT64", [-1]) for name in ("input_ids", "attention_mask", "token_type_ids")},
        max_batch_size=4,
    )
    shutil.copytree(root / "bert-tokenizer", tokenize / "1" / "tokenizer")
    (tokenize / "1" / "model.py").write_text(TOKENIZE_MODEL_PY)
    build_ensemble(
        repository,
        "pipeline",
        ["tokenize", "bert"],
        inputs=["TEXT"],
        outputs=["last_hidden_state", "pooler_output"],
    )
    names = ("bert", "roberta", "classifier", "cnn", "cnn_ts", "cnn_ts_cpu", "echo", "tokenize", "pipeline")
    for name in names:
        assert validate_model(repository / name) == [], name
    return {
        "repository": repository,
        "bert": bert,
        "roberta": roberta,
        "classifier": classifier,
        "cnn": cnn,
        "tokenizer": bert_tokenizer,
    }


ENVIRONMENT = {"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216"}


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from mme_triton.local import LocalStack

    with LocalStack() as running:
        yield running


@pytest.fixture(scope="module")
def client(prepared: dict[str, Any], stack: Any) -> MMEClient:
    repository: Path = prepared["repository"]
    session = stack.boto3_session()
    deploy_mme(
        ENDPOINT,
        stack.model_data_url("prep/"),
        models=[repository / name for name in SERVED],
        role=stack.role_arn,
        instance_type="ml.m5.xlarge",
        environment=ENVIRONMENT,
        poll_interval=0.1,
        boto3_session=session,
    )
    return MMEClient(ENDPOINT, boto3_session=session)


def _encoder_inputs(rng: np.random.Generator, names: list[str]) -> dict[str, np.ndarray]:
    ids = rng.integers(5, 100, size=(3, 7), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return {name: arrays[name] for name in names}


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_exported_encoder_answers_like_pytorch(
    client: MMEClient, prepared: dict[str, Any], name: str
) -> None:
    config = read_config(prepared["repository"] / name)
    inputs = _encoder_inputs(np.random.default_rng(7), [t.name for t in config.input])

    answer = client.infer(f"{name}.tar.gz", inputs)

    with torch.no_grad():
        want = prepared[name](**{k: torch.from_numpy(v) for k, v in inputs.items()})
    np.testing.assert_allclose(answer["last_hidden_state"], want.last_hidden_state.numpy(), atol=ATOL)
    np.testing.assert_allclose(answer["pooler_output"], want.pooler_output.numpy(), atol=ATOL)


def test_exported_classifier_answers_logits_like_pytorch(client: MMEClient, prepared: dict[str, Any]) -> None:
    config = read_config(prepared["repository"] / "classifier")
    assert [(t.name, list(t.dims)) for t in config.output] == [("logits", [3])]
    inputs = _encoder_inputs(np.random.default_rng(11), [t.name for t in config.input])

    answer = client.infer("classifier.tar.gz", inputs)

    with torch.no_grad():
        want = prepared["classifier"](**{k: torch.from_numpy(v) for k, v in inputs.items()}).logits
    assert list(answer) == ["logits"] and answer["logits"].shape == (3, 3)
    np.testing.assert_allclose(answer["logits"], want.numpy(), atol=ATOL)


@pytest.mark.parametrize(
    ("target", "input_name", "output_name"),
    [
        ("cnn.tar.gz", "INPUT0", "OUTPUT0"),
        ("cnn_ts.tar.gz", "INPUT__0", "OUTPUT__0"),
        ("cnn_ts_cpu.tar.gz", "INPUT__0", "OUTPUT__0"),
    ],
    ids=["onnx", "torchscript-gpu-preset", "torchscript-cpu-preset"],
)
def test_exported_cnn_answers_like_pytorch(
    client: MMEClient, prepared: dict[str, Any], target: str, input_name: str, output_name: str
) -> None:
    images = np.random.default_rng(3).standard_normal((5, 3, 16, 16), dtype=np.float32)

    answer = client.infer(target, {input_name: images})

    with torch.no_grad():
        want = prepared["cnn"](torch.from_numpy(images)).numpy()
    np.testing.assert_allclose(answer[output_name], want, atol=ATOL)


def test_python_skeleton_serves_as_written(client: MMEClient) -> None:
    text = np.array([[b"hello"], [b"world"]], dtype=object)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    answer = client.infer("echo.tar.gz", {"TEXT": text, "X": x})

    assert answer["TEXT_OUT"].tolist() == text.tolist()
    np.testing.assert_array_equal(answer["Y"], x)
    np.testing.assert_array_equal(answer["Z"], np.zeros((2, 2), dtype=np.int64))


def test_ensemble_of_tokenizer_and_encoder_serves_end_to_end(
    client: MMEClient, prepared: dict[str, Any]
) -> None:
    sentences = ["hello world", "the model serves text fast"]
    text = np.array([[s.encode()] for s in sentences], dtype=object)

    answer = client.infer("pipeline.tar.gz", {"TEXT": text})

    encoded = prepared["tokenizer"](sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        want = prepared["bert"](**encoded)
    np.testing.assert_allclose(answer["last_hidden_state"], want.last_hidden_state.numpy(), atol=ATOL)
    np.testing.assert_allclose(answer["pooler_output"], want.pooler_output.numpy(), atol=ATOL)


def test_exported_encoder_profiles_with_its_default_inputs(stack: Any, prepared: dict[str, Any]) -> None:
    """profile_model's random inputs for the exported BERT (two token types, 100 tokens) stay within the
    sizes its export recorded: the candidate is measured, not failed in the embedding lookup."""
    report = profile_model(
        prepared["repository"] / "bert",
        stack=stack,
        concurrency=(1,),
        shapes={"input_ids": [16], "attention_mask": [16], "token_type_ids": [16]},
        window=0.2,
        window_requests=5,
        warmup=0.1,
        stability=0.9,
        max_trials=3,
        environment=ENVIRONMENT,
        progress=False,
    )

    (result,) = report.results
    assert result.status == "ok", result.problems
    assert result.cold_start_s is not None and len(result.levels) == 1
    assert result.levels[0].requests > 0 and result.levels[0].errors == 0, result.levels[0].error
