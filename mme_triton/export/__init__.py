"""Export helpers: framework models to Triton model directories (the ``export`` extra).

- :func:`export_pytorch` — a ``torch.nn.Module`` to ``<model_dir>/<version>/model.onnx`` (ONNX Runtime);
- :func:`export_torchscript` — a ``torch.nn.Module`` to ``<model_dir>/<version>/model.pt`` (Triton's
  PyTorch backend, ``INPUT__0``/``OUTPUT__0`` names);
- :func:`export_transformers` — a Hugging Face encoder (BERT, RoBERTa, DistilBERT ...), bare or with a task
  head (``logits``, ``start_logits`` ... named as the model returns them), to ONNX, with its tokenizer
  saved in the model directory (``<model_dir>/tokenizer/``).

Each writes a complete config.pbtxt from the exported graph, checks the export numerically against the
PyTorch model, validates the directory and returns it. torch is imported only when one is called. They
share one vocabulary of options (``max_batch_size``, ``dynamic_batching``, ``instance_count``,
``version``, ``overwrite`` and ``keep_tuning``, ``input_names``/``output_names``, ``atol``/``rtol``;
``opset_version`` and ``**export_kwargs`` for the ONNX ones); each docstring says where and why it
differs. A re-export with ``overwrite=True`` keeps the replaced config's tuning where it still fits.
"""

from __future__ import annotations

from mme_triton.errors import ExportError
from mme_triton.export.torch import export_pytorch
from mme_triton.export.torchscript import export_torchscript
from mme_triton.export.transformers import export_transformers

__all__ = ["ExportError", "export_pytorch", "export_torchscript", "export_transformers"]
