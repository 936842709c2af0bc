"""Triton's ``ModelConfig`` protobuf schema, loaded without importing ``tritonclient.grpc``.

``tritonclient`` ships the generated module as ``tritonclient/grpc/model_config_pb2.py``; importing it the
normal way runs ``tritonclient/grpc/__init__.py``, which imports grpcio. The generated file itself needs
only ``google.protobuf``, so it is loaded straight from its file under a private module name.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["ModelConfig", "model_config_pb2", "new_model_config", "text_format"]

# The generated message class has no static type; this alias documents intent in signatures.
ModelConfig = Any

_PRIVATE_NAME = "mme_triton.model._model_config_pb2"
_PUBLIC_NAME = "tritonclient.grpc.model_config_pb2"


@cache
def model_config_pb2() -> ModuleType:
    """Return Triton's generated ``model_config_pb2`` module (loaded once, grpcio never imported)."""
    # Somebody may already have imported it the ordinary way; the descriptor pool holds it only once.
    already = sys.modules.get(_PUBLIC_NAME)
    if already is not None:
        return already
    spec = importlib.util.find_spec("tritonclient")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("tritonclient is not installed; it provides Triton's model_config_pb2 schema")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "grpc" / "model_config_pb2.py"
        if candidate.is_file():
            break
    else:
        raise ImportError("tritonclient is installed without grpc/model_config_pb2.py")
    file_spec = importlib.util.spec_from_file_location(_PRIVATE_NAME, candidate)
    if file_spec is None or file_spec.loader is None:
        raise ImportError(f"cannot load {candidate}")
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[_PRIVATE_NAME] = module
    try:
        file_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_PRIVATE_NAME]
        raise
    return module


def new_model_config() -> ModelConfig:
    """An empty ``inference.ModelConfig`` message."""
    return model_config_pb2().ModelConfig()


def text_format() -> ModuleType:
    """``google.protobuf.text_format`` (imported on first use; protobuf ships no type stubs)."""
    return importlib.import_module("google.protobuf.text_format")
