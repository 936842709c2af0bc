"""Export helpers: framework models to Triton model directories (the ``export`` extra).

``export_pytorch`` turns a ``torch.nn.Module`` into ``<model_dir>/1/model.onnx`` with a complete,
validated config.pbtxt. torch is imported only when it is called.
"""

from __future__ import annotations

from mme_triton.export.torch import export_pytorch

__all__ = ["export_pytorch"]
