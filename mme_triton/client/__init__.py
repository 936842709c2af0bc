"""The client stage: numpy arrays in, numpy arrays out, through ``InvokeEndpoint`` with ``TargetModel``.

- ``codec.py`` — :func:`encode_request` / :func:`decode_response`: the KServe v2 JSON and binary-tensor
  formats as Triton speaks them, every Triton datatype (table in ``datatypes.py``); pure functions.
- ``client.py`` — :class:`MMEClient`: InvokeEndpoint calls, typed errors, retries while a model loads,
  batch splitting under the 6 MiB request limit; ``aio.py`` — :class:`AsyncMMEClient`, the same for
  asyncio. Both are drivers of ``_core.py`` (everything but the waiting), which builds its requests with
  botocore's parts (``_wire.py``) and sends them over ``_transports.py``.

The client needs no control plane and no packaging.
"""

from __future__ import annotations

from mme_triton.client.aio import AsyncMMEClient
from mme_triton.client.client import MAX_PAYLOAD_BYTES, MMEClient
from mme_triton.client.codec import (
    InferInput,
    InferRequestedOutput,
    decode_response,
    encode_request,
)

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "AsyncMMEClient",
    "InferInput",
    "InferRequestedOutput",
    "MMEClient",
    "decode_response",
    "encode_request",
]
