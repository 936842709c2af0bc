"""Presets for :func:`~mme_triton.model.authoring.configure_model`: documented sets of options to start from.

A preset is only a starting point: ``configure_model(path, preset="onnx-gpu-throughput",
max_batch_size=16)`` applies the preset's options and then the keyword options, each replacing the
preset's value of the same option. docs/model-prep.md explains each choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from mme_triton.model.options import DynamicBatching, InstanceGroup, TensorRT

__all__ = ["PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """A named set of :func:`configure_model` options for models of ``backends``."""

    name: str
    summary: str
    backends: frozenset[str]
    options: Mapping[str, Any]


_ONNX = frozenset({"onnxruntime"})

_PRESETS = (
    Preset(
        "onnx-gpu-throughput",
        "two GPU instances and a 1 ms batching window: large batches, copy and compute overlapped",
        _ONNX,
        MappingProxyType(
            {
                "instance_group": InstanceGroup(count=2, kind="KIND_GPU"),
                "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=1000),
            }
        ),
    ),
    Preset(
        "onnx-gpu-latency",
        "one GPU instance, batching only what is already queued (no added delay), heuristic cuDNN search",
        _ONNX,
        MappingProxyType(
            {
                "instance_group": InstanceGroup(count=1, kind="KIND_GPU"),
                "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=0),
                "cudnn_conv_algo_search": "heuristic",
            }
        ),
    ),
    Preset(
        "onnx-cpu",
        "one CPU instance, a 100 µs batching window, sequential execution, arena shrinkage after each run",
        _ONNX,
        MappingProxyType(
            {
                "instance_group": InstanceGroup(count=1, kind="KIND_CPU"),
                "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=100),
                "execution_mode": "sequential",
                "memory_arena_shrinkage": "cpu:0",
            }
        ),
    ),
    Preset(
        "onnx-tensorrt-fp16",
        "onnx-gpu-throughput with TensorRT in FP16, a 1 GiB workspace and the engine cache in /tmp",
        _ONNX,
        MappingProxyType(
            {
                "instance_group": InstanceGroup(count=2, kind="KIND_GPU"),
                "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=1000),
                "tensorrt": TensorRT(
                    precision_mode="FP16", max_workspace_size_bytes=1 << 30, engine_cache_path="/tmp"
                ),
            }
        ),
    ),
    Preset(
        "torchscript-gpu",
        "one GPU instance, a 100 µs batching window, inference mode on (off by default before Triton 23.06)",
        frozenset({"pytorch"}),
        MappingProxyType(
            {
                "instance_group": InstanceGroup(count=1, kind="KIND_GPU"),
                "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=100),
                "inference_mode": True,
            }
        ),
    ),
    Preset(
        "torchscript-cpu",
        "one CPU instance, a 100 µs batching window, inference mode on, optimized execution off (no slow "
        "first calls after every load)",
        frozenset({"pytorch"}),
        MappingProxyType(
            {
                "instance_group": InstanceGroup(count=1, kind="KIND_CPU"),
                "dynamic_batching": DynamicBatching(max_queue_delay_microseconds=100),
                "inference_mode": True,
                "disable_optimized_execution": True,
            }
        ),
    ),
)

#: Every preset by name.
PRESETS: Mapping[str, Preset] = MappingProxyType({preset.name: preset for preset in _PRESETS})
