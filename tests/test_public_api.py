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
    assert issubclass(cls, (errors.MMETritonError, errors.MMETritonWarning))
    assert getattr(mme_triton, name) is cls


def test_error_tree_drawing_lists_every_class() -> None:
    """The tree at the top of errors.py names every exception the package defines, wherever it lives."""
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(mme_triton.__path__, prefix="mme_triton."):
        if not info.name.startswith(
            ("mme_triton.export.", "mme_triton.local.triton.backends", "mme_triton.__main__")
        ):
            importlib.import_module(info.name)

    def subclasses(cls: type) -> set[type]:
        found = set(cls.__subclasses__())
        return found.union(*(subclasses(sub) for sub in list(found)))

    defined = {cls.__name__ for cls in subclasses(errors.MMETritonError) if not cls.__name__.startswith("_")}
    drawing = errors.__doc__ or ""
    assert sorted(name for name in defined if name not in drawing) == []


def test_import_is_light() -> None:
    code = (
        "import sys, mme_triton; "
        "heavy = [m for m in ('boto3', 'numpy', 'google.protobuf', 'onnx', 'torch', 'sagemaker', 'grpc', "
        "'aiohttp', 'urllib3') "
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
