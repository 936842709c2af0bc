"""configure_model / read_config: typed options and presets written through Triton's ModelConfig schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mme_triton import (
    DynamicBatching,
    InstanceGroup,
    ModelValidationError,
    ModelWarmup,
    TensorRT,
    configure_model,
    new_python_model,
    read_config,
    validate_model,
)
from mme_triton.model.authoring import OPTIONS
from mme_triton.model.config import format_config, parse_config
from mme_triton.model.presets import PRESETS


def write_onnx_linear(repository: Path, name: str = "linear", *, batch: str | int = "n") -> Path:
    """An ONNX model ``OUTPUT0 = INPUT0 @ W`` ([batch, 4] -> [batch, 3]) with a complete config."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from mme_triton.export._common import graph_config
    from mme_triton.model.onnx_check import read_graph_signature

    weights = np.arange(12, dtype=np.float32).reshape(4, 3)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["INPUT0", "W"], ["OUTPUT0"])],
        name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(weights, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    directory = repository / name
    (directory / "1").mkdir(parents=True)
    onnx.save(model, str(directory / "1" / "model.onnx"))
    inputs, outputs = read_graph_signature(directory / "1" / "model.onnx")
    config = graph_config(name, "onnxruntime_onnx", 8 if batch == "n" else 0, inputs, outputs)
    (directory / "config.pbtxt").write_text(format_config(config))
    return directory


@pytest.fixture
def onnx_model(tmp_path: Path) -> Path:
    return write_onnx_linear(tmp_path / "repo")


@pytest.fixture
def python_model(tmp_path: Path) -> Path:
    return new_python_model(
        tmp_path / "repo",
        "pre",
        inputs={"TEXT": ("BYTES", [1]), "SCALE": ("FP32", [-1])},
        outputs={"OUT": ("FP32", [-1])},
        max_batch_size=4,
    )


def _text(model_dir: Path) -> str:
    return (model_dir / "config.pbtxt").read_text()


def _parameters(model_dir: Path) -> dict[str, str]:
    config = read_config(model_dir)
    return {key: value.string_value for key, value in config.parameters.items()}


# --- presets ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "fragments"),
    [
        ("onnx-gpu-throughput", ["count: 2", "kind: KIND_GPU", "max_queue_delay_microseconds: 1000"]),
        (
            "onnx-gpu-latency",
            ["count: 1", "kind: KIND_GPU", 'key: "cudnn_conv_algo_search"', 'string_value: "1"'],
        ),
        (
            "onnx-cpu",
            [
                "kind: KIND_CPU",
                "max_queue_delay_microseconds: 100",
                'key: "memory.enable_memory_arena_shrinkage"',
            ],
        ),
        (
            "onnx-tensorrt-fp16",
            [
                'name: "tensorrt"',
                'key: "precision_mode"',
                'value: "FP16"',
                'value: "1073741824"',
                'key: "trt_engine_cache_path"',
            ],
        ),
    ],
    ids=["gpu-throughput", "gpu-latency", "cpu", "tensorrt-fp16"],
)
def test_configure_model_onnx_presets_write_their_settings(
    onnx_model: Path, preset: str, fragments: list[str]
) -> None:
    before = read_config(onnx_model)
    assert configure_model(onnx_model, preset=preset) == onnx_model

    text = _text(onnx_model)
    for fragment in fragments:
        assert fragment in text
    after = read_config(onnx_model)
    # what the preset does not touch is kept
    assert list(after.input) == list(before.input) and after.max_batch_size == before.max_batch_size
    assert validate_model(onnx_model) == []
    assert parse_config(text)[1] == []


def _torchscript_model(tmp_path: Path) -> Path:
    model_dir = tmp_path / "repo" / "cnn"
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.pt").write_bytes(b"torchscript archive")
    (model_dir / "config.pbtxt").write_text(
        'platform: "pytorch_libtorch" max_batch_size: 8 '
        'input { name: "INPUT__0" data_type: TYPE_FP32 dims: [3, 16, 16] } '
        'output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [5] }'
    )
    return model_dir


def test_configure_model_torchscript_preset_sets_inference_mode(tmp_path: Path) -> None:
    model_dir = _torchscript_model(tmp_path)
    configure_model(model_dir, preset="torchscript-gpu", intra_op_thread_count=2)

    assert _parameters(model_dir) == {"INFERENCE_MODE": "true", "INTRA_OP_THREAD_COUNT": "2"}
    config = read_config(model_dir)
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    assert validate_model(model_dir) == []


def test_configure_model_torchscript_cpu_preset_turns_optimized_execution_off(tmp_path: Path) -> None:
    model_dir = _torchscript_model(tmp_path)
    configure_model(model_dir, preset="torchscript-cpu")

    assert _parameters(model_dir) == {"INFERENCE_MODE": "true", "DISABLE_OPTIMIZED_EXECUTION": "true"}
    config = read_config(model_dir)
    assert [(g.count, g.kind) for g in config.instance_group] == [(1, 2)]  # KIND_CPU is 2
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    assert validate_model(model_dir) == []


def test_configure_model_options_override_the_preset(onnx_model: Path) -> None:
    configure_model(
        onnx_model,
        preset="onnx-gpu-throughput",
        instance_group=InstanceGroup(count=3, kind="KIND_CPU"),
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=50, preferred_batch_size=(4, 8)),
    )
    config = read_config(onnx_model)
    assert [(g.count, g.kind) for g in config.instance_group] == [(3, 2)]  # KIND_CPU is 2
    assert config.dynamic_batching.max_queue_delay_microseconds == 50
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]


# --- options ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "parameters"),
    [
        ({"execution_mode": "parallel"}, {"execution_mode": "1"}),
        (
            {"intra_op_thread_count": 2, "inter_op_thread_count": 1},
            {"intra_op_thread_count": "2", "inter_op_thread_count": "1"},
        ),
        (
            {"enable_mem_arena": False, "enable_mem_pattern": True},
            {"enable_mem_arena": "0", "enable_mem_pattern": "1"},
        ),
        ({"memory_arena_shrinkage": "cpu:0;gpu:0"}, {"memory.enable_memory_arena_shrinkage": "cpu:0;gpu:0"}),
        ({"arena_extend_strategy": "same_as_requested"}, {"arena_extend_strategy": "1"}),
        ({"cudnn_conv_algo_search": "default"}, {"cudnn_conv_algo_search": "2"}),
        ({"gpu_mem_limit": 4294967296}, {"gpu_mem_limit": "4294967296"}),
        ({"do_copy_in_default_stream": False}, {"do_copy_in_default_stream": "0"}),
    ],
    ids=[
        "execution-mode",
        "threads",
        "arena-pattern",
        "shrinkage",
        "arena-extend",
        "cudnn",
        "gpu-mem",
        "copy-stream",
    ],
)
def test_configure_model_onnxruntime_parameters(
    onnx_model: Path, options: dict[str, Any], parameters: dict[str, str]
) -> None:
    configure_model(onnx_model, **options)
    assert _parameters(onnx_model) == parameters
    assert 'string_value: "' in _text(onnx_model)


@pytest.mark.parametrize(
    ("preset", "options", "warned"),
    [
        ("onnx-cpu", {"inter_op_thread_count": 4}, True),
        (None, {"inter_op_thread_count": 4}, True),
        ("onnx-cpu", {"inter_op_thread_count": 4, "execution_mode": "parallel"}, False),
        ("onnx-cpu", {"inter_op_thread_count": 1}, False),
        ("onnx-cpu", {"intra_op_thread_count": 4}, False),
    ],
    ids=["preset-sequential", "default-sequential", "parallel", "one-thread", "intra-only"],
)
def test_inter_op_threads_under_sequential_execution_are_a_warning(
    onnx_model: Path, preset: str | None, options: dict[str, Any], warned: bool
) -> None:
    """ONNX Runtime ignores inter_op_num_threads unless execution_mode is parallel; sequential is both the
    onnx-cpu preset's choice and the default."""
    configure_model(onnx_model, preset=preset, **options)

    problems = validate_model(onnx_model)

    assert [(p.severity, p.code) for p in problems] == [("warning", "inter-op-threads-ignored")] * warned
    if warned:
        assert "execution_mode" in problems[0].message and "parallel" in problems[0].message


@pytest.mark.parametrize(
    ("level", "written"),
    [("basic", -1), ("extended", 1), ("disabled", 2)],
    ids=["basic", "extended", "disabled"],
)
def test_configure_model_graph_optimization_level(onnx_model: Path, level: str, written: int) -> None:
    configure_model(onnx_model, graph_optimization_level=level)  # type: ignore[arg-type]
    assert read_config(onnx_model).optimization.graph.level == written
    configure_model(onnx_model, graph_optimization_level="all")
    assert not read_config(onnx_model).HasField("optimization")


def test_configure_model_accelerators(onnx_model: Path) -> None:
    configure_model(
        onnx_model,
        tensorrt=TensorRT(precision_mode="INT8", int8_calibration_table_name="calibration.flatbuffers"),
        openvino=True,
    )
    accelerators = read_config(onnx_model).optimization.execution_accelerators
    gpu = accelerators.gpu_execution_accelerator
    assert [(a.name, dict(a.parameters)) for a in gpu] == [
        ("tensorrt", {"precision_mode": "INT8", "int8_calibration_table_name": "calibration.flatbuffers"})
    ]
    assert [a.name for a in accelerators.cpu_execution_accelerator] == ["openvino"]

    configure_model(onnx_model, tensorrt=None, openvino=False)
    assert not read_config(onnx_model).HasField("optimization")


def test_configure_model_none_removes_settings(onnx_model: Path) -> None:
    configure_model(onnx_model, preset="onnx-cpu", response_cache=True, intra_op_thread_count=2)
    assert read_config(onnx_model).response_cache.enable
    configure_model(
        onnx_model,
        response_cache=None,
        intra_op_thread_count=None,
        dynamic_batching=False,
        instance_group=None,
    )
    config = read_config(onnx_model)
    assert not config.HasField("response_cache") and not config.HasField("dynamic_batching")
    assert not len(config.instance_group)
    assert "intra_op_thread_count" not in _parameters(onnx_model)


def test_configure_model_zero_warmup_fills_variable_dims(python_model: Path) -> None:
    configure_model(python_model, model_warmup=ModelWarmup("zero", batch_size=2, dims={"SCALE": [7]}))
    (warmup,) = read_config(python_model).model_warmup
    assert (warmup.name, warmup.batch_size, warmup.count) == ("warmup", 2, 1)
    assert {name: (list(i.dims), i.zero_data) for name, i in warmup.inputs.items()} == {
        "TEXT": ([1], True),
        "SCALE": ([7], True),
    }
    configure_model(python_model, model_warmup="random")
    (warmup,) = read_config(python_model).model_warmup
    assert warmup.inputs["SCALE"].random_data and list(warmup.inputs["SCALE"].dims) == [1]


def test_configure_model_sample_warmup_writes_input_files(python_model: Path) -> None:
    samples = {"TEXT": np.array([b"hello"], dtype=object), "SCALE": np.array([[1.5, 2.0]], dtype=np.float32)}
    configure_model(python_model, model_warmup=samples)

    (warmup,) = read_config(python_model).model_warmup
    assert warmup.inputs["TEXT"].input_data_file == "warmup.TEXT"
    assert list(warmup.inputs["SCALE"].dims) == [2]  # the sample's batch dim of 1 is not part of dims
    assert (python_model / "warmup" / "warmup.TEXT").read_bytes() == b"\x05\x00\x00\x00hello"
    assert (python_model / "warmup" / "warmup.SCALE").read_bytes() == np.array([1.5, 2.0], "<f4").tobytes()
    assert validate_model(python_model) == []


@pytest.mark.parametrize("element", [7, None, 1.5], ids=["int", "none", "float"])
def test_configure_model_warmup_refuses_bytes_elements_that_are_not_text(
    python_model: Path, element: Any
) -> None:
    # bytes(7) would be seven NUL bytes: the client codec's rule (bytes or str) holds for warm-up files too
    before = _text(python_model)
    samples = {"TEXT": np.array([element], dtype=object), "SCALE": np.array([1.5], dtype=np.float32)}
    with pytest.raises(ValueError, match=r"input 'TEXT'.*elements must be bytes or str"):
        configure_model(python_model, model_warmup=samples)
    assert _text(python_model) == before
    assert not (python_model / "warmup").exists()


def test_configure_model_ensemble_takes_batch_size_and_cache_only(tmp_path: Path) -> None:
    from mme_triton import build_ensemble

    repository = tmp_path / "repo"
    new_python_model(
        repository, "first", inputs={"A": ("FP32", [2])}, outputs={"B": ("FP32", [2])}, max_batch_size=4
    )
    ensemble = build_ensemble(repository, "chain", ["first"], inputs=["A"], outputs=["B"])
    configure_model(ensemble, response_cache=True, max_batch_size=2)
    assert read_config(ensemble).response_cache.enable and read_config(ensemble).max_batch_size == 2
    with pytest.raises(ValueError, match="does not apply to ensemble 'chain'"):
        configure_model(ensemble, instance_group=InstanceGroup())


# --- refusals -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"dynamic_batching": DynamicBatching(preferred_batch_size=(16,))},
            r"preferred_batch_size \[16\] exceeds",
        ),
        ({"max_batch_size": 0}, "dynamic_batching needs max_batch_size > 0"),
        ({"preset": "onnx-gpu-fast"}, "unknown preset 'onnx-gpu-fast'"),
        ({"preset": "torchscript-gpu"}, "preset 'torchscript-gpu' is for pytorch models"),
        ({"max_batch_sise": 8}, "unknown option"),
        ({"auto_mixed_precision": True}, "read by the tensorflow backend"),
        ({"inference_mode": True}, "read by the pytorch backend"),
        ({"instance_group": InstanceGroup(kind="KIND_CPU", gpus=(0,))}, "KIND_CPU cannot list gpus"),
        ({"instance_group": InstanceGroup(count=0)}, "count must be >= 1"),
        ({"memory_arena_shrinkage": "all"}, "memory_arena_shrinkage is a list of devices"),
        ({"execution_mode": "fast"}, "execution_mode must be one of"),
        ({"intra_op_thread_count": -1}, "intra_op_thread_count must be >= 0"),
        ({"model_warmup": ModelWarmup(batch_size=9)}, "batch_size 9 exceeds max_batch_size 8"),
        ({"model_warmup": {"INPUT0": np.ones(4, np.float64)}}, "is FP64 .* but the input is FP32"),
        (
            {"model_warmup": {"INPUT0": np.ones((2, 4), np.float32)}},
            r"has shape \[2, 4\] but the input's dims are \[4\]",
        ),
        ({"model_warmup": {"INPUT1": np.ones(4, np.float32)}}, "which the model does not have"),
        ({"model_warmup": ModelWarmup(dims={"INPUT0": [5]})}, r"dims \[5\] for input 'INPUT0' do not fit"),
        ({"model_warmup": "ones"}, "must be 'zero', 'random'"),
        (
            {"tensorrt": TensorRT(precision_mode="FP16", int8_calibration_table_name="t")},
            "applies to precision_mode 'INT8' only",
        ),
    ],
    ids=[
        "preferred-over-max",
        "batching-without-batch-size",
        "unknown-preset",
        "preset-for-other-backend",
        "unknown-option",
        "tensorflow-only",
        "pytorch-only",
        "cpu-with-gpus",
        "zero-instances",
        "shrinkage-format",
        "bad-choice",
        "negative-threads",
        "warmup-batch-too-large",
        "warmup-wrong-datatype",
        "warmup-wrong-shape",
        "warmup-unknown-input",
        "warmup-dims-mismatch",
        "warmup-unknown-kind",
        "calibration-without-int8",
    ],
)
def test_configure_model_refuses_and_keeps_the_config(
    onnx_model: Path, options: dict[str, Any], message: str
) -> None:
    before = _text(onnx_model)
    with pytest.raises(ValueError, match=message):
        configure_model(onnx_model, **options)
    assert _text(onnx_model) == before
    assert sorted(p.name for p in onnx_model.parent.iterdir()) == ["linear"]


def test_configure_model_warmup_needs_every_input(python_model: Path) -> None:
    with pytest.raises(ValueError, match="samples lack input 'SCALE'"):
        configure_model(python_model, model_warmup={"TEXT": np.array([b"x"], dtype=object)})


def test_configure_model_onnx_options_refused_for_python_models(python_model: Path) -> None:
    with pytest.raises(ValueError, match="onnxruntime backend"):
        configure_model(python_model, graph_optimization_level="basic")


def test_configure_model_validation_error_leaves_the_old_config(tmp_path: Path) -> None:
    model_dir = write_onnx_linear(tmp_path / "repo", "fixed", batch=2)
    before = _text(model_dir)
    with pytest.raises(ModelValidationError) as caught:
        configure_model(model_dir, max_batch_size=4)
    assert {p.code for p in caught.value.problems} >= {"onnx-batch-dim-fixed"}
    assert all(".configure-" not in p.path for p in caught.value.problems)
    assert _text(model_dir) == before
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["fixed"]
    assert sorted(p.name for p in model_dir.iterdir()) == ["1", "config.pbtxt"]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_batch_size": "8"}, TypeError),
        ({"response_cache": "yes"}, TypeError),
        ({"dynamic_batching": 5}, TypeError),
        ({"instance_group": ["KIND_GPU"]}, TypeError),
    ],
    ids=["batch-size-string", "cache-string", "batching-int", "group-string"],
)
def test_configure_model_type_errors(
    onnx_model: Path, options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        configure_model(onnx_model, **options)


# --- read_config ---------------------------------------------------------------------------------------


def test_read_config_returns_the_message(onnx_model: Path) -> None:
    config = read_config(onnx_model)
    assert config.name == "linear" and config.max_batch_size == 8
    assert format_config(config) == _text(onnx_model)


def test_read_config_missing_and_broken(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config\\.pbtxt"):
        read_config(tmp_path / "empty")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.pbtxt").write_text("max_batch_sise: 8\n")
    with pytest.raises(ModelValidationError) as caught:
        read_config(tmp_path / "broken")
    assert caught.value.problems[0].code == "config-unknown-field"


def test_configure_model_option_table_is_complete() -> None:
    from typing import get_type_hints

    from mme_triton.model.options import ConfigOptions

    assert list(get_type_hints(ConfigOptions)) == list(OPTIONS)
    for preset in PRESETS.values():
        assert set(preset.options) <= set(OPTIONS), preset.name


def test_configure_model_docs_table_lists_every_option_and_preset() -> None:
    page = (Path(__file__).parents[2] / "docs" / "model-prep.md").read_text()
    rows = {line.split("|")[1].strip() for line in page.splitlines() if line.startswith("| `")}
    assert {f"`{name}`" for name in OPTIONS} <= rows
    assert {f"`{name}`" for name in PRESETS} <= rows
