"""config.pbtxt parsing with Triton's ModelConfig schema: positions, suggestions, round trip, no grpc."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mme_triton.model.config import format_config, parse_config, parse_config_file

PARSE_ERRORS = [
    # (text, code, line, column, words the message must contain)
    ('name: "m"\nmax_batch_sise: 8\n', "config-unknown-field", 2, 1, ["max_batch_sise", '"max_batch_size"']),
    (
        'input [ { name: "x" dat_type: TYPE_FP32 } ]',
        "config-unknown-field",
        1,
        21,
        ["dat_type", "inference.ModelInput", '"data_type"'],
    ),
    ('input [ { name: "x" data_type: TYPE_FLOAT32 } ]', "config-invalid-value", 1, 32, ['"TYPE_FP32"']),
    ("instance_group [ { kind: KIND_GPUS } ]", "config-invalid-value", 1, 26, ['"KIND_GPU"']),
    ("max_batch_size: eight", "config-invalid-value", 1, 17, ["eight"]),
    ('name: "m\n', "config-syntax", 1, 7, ["quote"]),
    ('input [ { name: "x" ', "config-syntax", 1, 17, ['"}"']),
]


@pytest.mark.parametrize(
    ("text", "code", "line", "column", "words"),
    PARSE_ERRORS,
    ids=["unknown-top-field", "unknown-nested-field", "enum-typo", "kind-typo", "not-an-int", "quote", "eof"],
)
def test_parse_config_reports_code_line_column_and_hint(
    text: str, code: str, line: int, column: int, words: list[str]
) -> None:
    config, problems = parse_config(text, "repo/m/config.pbtxt")

    assert config is None
    [problem] = problems
    assert (problem.code, problem.severity, problem.path) == (code, "error", "repo/m/config.pbtxt")
    assert (problem.line, problem.column) == (line, column)
    for word in words:
        assert word in problem.message
    assert str(problem).startswith(f"repo/m/config.pbtxt:{line}:{column}: error {code}: ")


def test_parse_config_accepts_every_field_triton_knows() -> None:
    text = textwrap.dedent(
        """
        name: "m"
        backend: "python"
        max_batch_size: 4
        version_policy: { latest: { num_versions: 2 } }
        input [ { name: "x" data_type: TYPE_BF16 dims: [ -1 ] optional: true } ]
        output [ { name: "y" data_type: TYPE_STRING dims: [ 1 ] } ]
        dynamic_batching { max_queue_delay_microseconds: 100 priority_levels: 2 default_priority_level: 1 }
        instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0 ] } ]
        parameters: { key: "EXECUTION_ENV_PATH" value: { string_value: "/opt/env.tar.gz" } }
        model_transaction_policy { decoupled: false }
        response_cache { enable: true }
        model_warmup [ { name: "w" batch_size: 1
                         inputs { key: "x" value: { data_type: TYPE_BF16 dims: [ 4 ] zero_data: true } } } ]
        """
    )
    config, problems = parse_config(text)

    assert problems == []
    assert config is not None
    assert (config.name, config.max_batch_size, config.instance_group[0].count) == ("m", 4, 2)


def test_format_config_round_trips() -> None:
    config, _ = parse_config('name: "m" backend: "python" max_batch_size: 8 input [{name: "x" dims: [4]}]')

    again, problems = parse_config(format_config(config))

    assert problems == []
    assert again == config


def test_parse_config_file_reads_latin1_as_triton_does_and_warns(tmp_path: Path) -> None:
    # Triton 2.51 loads this file (a real server was the judge): protobuf C++ takes the bytes as they are
    path = tmp_path / "config.pbtxt"
    path.write_bytes(
        '# Modèle\nname: "m"\nparameters { key: "note" value: { string_value: "café" } }\n'.encode("latin-1")
    )

    config, [problem] = parse_config_file(path)

    assert config is not None and config.name == "m"
    assert (problem.code, problem.severity, problem.line, problem.column) == (
        "config-encoding",
        "warning",
        1,
        6,
    )
    assert "0xe8" in problem.message


def test_validating_loads_the_schema_without_importing_grpc() -> None:
    examples = Path(__file__).parents[2] / "examples" / "model_repository" / "pipeline"
    script = textwrap.dedent(
        f"""
        import sys
        import mme_triton
        problems = mme_triton.validate_model({str(examples)!r})
        assert problems == [], problems
        assert "grpc" not in sys.modules, "grpc was imported"
        assert "tritonclient.grpc" not in sys.modules
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_schema_loads_next_to_a_regular_tritonclient_grpc_import() -> None:
    script = textwrap.dedent(
        """
        from mme_triton.model.config import parse_config
        from tritonclient.grpc import model_config_pb2
        config, problems = parse_config('name: "m" max_batch_size: 2')
        assert problems == [] and isinstance(config, model_config_pb2.ModelConfig)
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
