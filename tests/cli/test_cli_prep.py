"""``config`` (show, set, presets) and ``export`` (torchscript, onnx, transformers) through ``main(argv)``."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mme_triton.cli import main
from mme_triton.cli._prep import CONFIG_OPTIONS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.fixture
def linear(tmp_path: Path) -> Path:
    """A copy of the shipped ``linear`` ONNX model, to rewrite."""
    return Path(shutil.copytree(EXAMPLES / "linear", tmp_path / "linear"))


def test_cli_config_set_has_every_configure_model_option() -> None:
    from mme_triton.model._options_table import OPTIONS

    assert list(CONFIG_OPTIONS) == list(OPTIONS)


def test_cli_config_show_prints_the_config(linear: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", str(linear)]) == 0
    assert 'name: "linear"' in capsys.readouterr().out
    assert main(["config", "show", str(linear), "--json"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert (config["name"], config["max_batch_size"]) == ("linear", 8)


def test_cli_config_set_writes_options(linear: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mme_triton.model.authoring import read_config

    argv = ["config", "set", str(linear), "--max-batch-size", "16"]
    argv += ["--dynamic-batching", '{"max_queue_delay_microseconds": 250, "preferred_batch_size": [4, 8]}']
    argv += ["--instance-group", "2:cpu", "--execution-mode", "parallel"]
    assert main(argv) == 0
    assert f"configured {linear}" in capsys.readouterr().out
    config = read_config(linear)
    assert config.max_batch_size == 16
    assert config.dynamic_batching.max_queue_delay_microseconds == 250
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, 2)]  # KIND_CPU
    assert config.parameters["execution_mode"].string_value == "1"


def test_cli_config_set_preset_then_remove_a_setting(
    linear: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mme_triton.model.authoring import read_config

    assert main(["config", "set", str(linear), "--preset", "onnx-cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["preset"] == "onnx-cpu"
    assert read_config(linear).HasField("dynamic_batching")
    assert main(["config", "set", str(linear), "--dynamic-batching", "none"]) == 0
    assert not read_config(linear).HasField("dynamic_batching")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--preset", "no-such-preset"], "unknown preset 'no-such-preset'"),
        (["--instance-group", "many:cpu"], "--instance-group takes COUNT:KIND"),
        (["--max-batch-size", "-1"], "max_batch_size"),
        ([], "nothing to set: give --preset and/or options"),
    ],
    ids=["unknown-preset", "bad-instance-group", "negative", "nothing"],
)
def test_cli_config_set_bad_values_are_usage_errors(
    linear: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (linear / "config.pbtxt").read_text()
    assert main(["config", "set", str(linear), *argv]) == 2
    assert message in capsys.readouterr().err
    assert (linear / "config.pbtxt").read_text() == before


def test_cli_config_of_missing_model_is_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", str(tmp_path)]) == 4
    assert "config.pbtxt" in capsys.readouterr().err


def test_cli_config_presets_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    from mme_triton.model.presets import PRESETS

    assert main(["config", "presets"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in PRESETS)
    assert main(["config", "presets", "--json"]) == 0
    assert [p["name"] for p in json.loads(capsys.readouterr().out)] == list(PRESETS)


# -- export -----------------------------------------------------------------------------------------

NETS = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x)


def make_net():
    return Net().eval()
"""


@pytest.fixture
def nets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module of the user's own, ``cli_test_nets.py``, in the working directory."""
    path = tmp_path / "cli_test_nets.py"
    path.write_text(textwrap.dedent(NETS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(__import__("sys").modules, "cli_test_nets", raising=False)
    return path


@pytest.mark.torch
@pytest.mark.parametrize(
    ("kind", "source", "weights"),
    [
        ("torchscript", "cli_test_nets:Net", "model.pt"),
        ("onnx", "cli_test_nets.py:make_net", "model.onnx"),
    ],
    ids=["torchscript-module", "onnx-file"],
)
def test_cli_export_writes_a_valid_model_directory(
    nets: Path, kind: str, source: str, weights: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mme_triton.model.validate import validate_model

    target = nets.parent / "repo" / "net"
    argv = ["export", kind, source, str(target), "--example-input", "2x4:float32", "--max-batch-size", "8"]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"model_dir": str(target), "kind": kind}
    assert (target / "1" / weights).is_file()
    assert [p for p in validate_model(target) if p.is_error] == []
    assert main(argv) == 1  # it exists now
    assert "--overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0


@pytest.mark.torch
@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("cli_test_nets", "give MODULE:ATTRIBUTE"),
        ("cli_test_nets:Nope", "has no 'Nope'"),
    ],
    ids=["no-attribute", "unknown-attribute"],
)
def test_cli_export_bad_source_is_a_usage_error(
    nets: Path, source: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["export", "torchscript", source, str(nets.parent / "out"), "--example-input", "1x4:float32"]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.torch
def test_cli_export_transformers_from_a_saved_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tiny_models", Path(__file__).resolve().parents[1] / "export" / "tiny_models.py"
    )
    assert spec is not None and spec.loader is not None
    tiny: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    saved = tmp_path / "bert-saved"
    tiny.build_bert().save_pretrained(saved)
    tiny.build_bert_tokenizer(saved)  # vocab.txt beside the weights, as save_pretrained leaves it
    target = tmp_path / "repo" / "bert"
    argv = [
        "export",
        "transformers",
        str(saved),
        str(target),
        "--max-batch-size",
        "4",
        "--sequence-length",
        "16",
    ]
    assert main(argv) == 0
    assert f"exported {target}" in capsys.readouterr().out
    assert (target / "1" / "model.onnx").is_file()
    assert (target / "tokenizer" / "tokenizer.json").is_file()  # in the model, beside its version
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["bert"]


def test_cli_export_transformers_keeps_the_task_head_and_the_tuning(tmp_path: Path) -> None:
    """A classifier saved with save_pretrained is exported with its head (output ``logits``), as its config's
    ``architectures`` names it; a second export with --overwrite keeps the tuning, --fresh drops it."""
    import importlib.util

    from mme_triton import configure_model, read_config

    spec = importlib.util.spec_from_file_location(
        "tiny_models", Path(__file__).resolve().parents[1] / "export" / "tiny_models.py"
    )
    assert spec is not None and spec.loader is not None
    tiny: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    saved = tmp_path / "classifier-saved"
    tiny.build_bert_head("sequence-classification").save_pretrained(saved)
    target = tmp_path / "repo" / "classifier"
    export = ["export", "transformers", str(saved), str(target)]

    assert main([*export, "--output-name", "logits"]) == 0
    config = read_config(target)
    assert [(t.name, list(t.dims)) for t in config.output] == [("logits", [3])]
    configure_model(target, dynamic_batching={"max_queue_delay_microseconds": 200})

    assert main([*export, "--overwrite"]) == 0
    assert read_config(target).dynamic_batching.max_queue_delay_microseconds == 200
    assert main([*export, "--overwrite", "--fresh"]) == 0
    assert read_config(target).dynamic_batching.max_queue_delay_microseconds == 0


def test_cli_export_transformers_needs_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "transformers", str(tmp_path / "nope"), str(tmp_path / "out")]) == 4
    assert "not a saved model directory" in capsys.readouterr().err
