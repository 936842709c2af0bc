"""The flat public face: every name in ``__all__`` resolves, and importing the package stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mme_triton
from mme_triton import errors


@pytest.mark.parametrize("name", sorted(mme_triton.__all__))
def test_public_name_resolves(name: str) -> None:
    assert getattr(mme_triton, name) is not None


def test_public_all_is_sorted_and_unique() -> None:
    assert mme_triton.__all__ == sorted(set(mme_triton.__all__))


def test_public_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = mme_triton.no_such_name  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", errors.__all__)
def test_errors_derive_from_root(name: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, errors.MMETritonError)
    assert getattr(mme_triton, name) is cls


def test_import_is_light() -> None:
    code = (
        "import sys, mme_triton; "
        "heavy = [m for m in ('boto3', 'numpy', 'google.protobuf', 'onnx', 'torch', 'sagemaker', 'grpc') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_export_import_is_light() -> None:
    code = (
        "import sys, mme_triton.export; "
        "heavy = [m for m in ('torch', 'transformers', 'onnx', 'onnxruntime', 'numpy') if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
