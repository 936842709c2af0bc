"""``MMEClient``: numpy arrays in, numpy arrays out, through ``InvokeEndpoint`` with ``TargetModel``.

The client is the data plane only: it encodes a request with
:func:`~mme_triton.client.codec.encode_request`, sends it with boto3's ``sagemaker-runtime`` client,
decodes the answer with :func:`~mme_triton.client.codec.decode_response`, and turns AWS and Triton failures
into the typed exceptions of :mod:`mme_triton.errors` (see ``_errors_map``). It never calls the SageMaker
control plane or S3 on the request path (:meth:`MMEClient.models` is a documented shortcut to the endpoint
stage). It keeps no mutable state between calls, so one instance can serve many threads.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Collection, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

import numpy as np
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from mme_triton._sagemaker import MAX_PAYLOAD_BYTES, check_target_model, make_client, parse_s3_url
from mme_triton._sdk import boto3_session_of
from mme_triton.client._errors_map import ErrorContext, is_not_ready, is_unknown_target, map_invoke_error
from mme_triton.client._request import Inputs, Outputs, Request, input_arrays, input_rows
from mme_triton.client._split import batch_rows, chunk_bounds, join_outputs
from mme_triton.client._target_hint import with_target_model_hint
from mme_triton.client.codec import decode_response, encode_request
from mme_triton.errors import InferenceError, PayloadTooLargeError

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient

__all__ = ["MAX_PAYLOAD_BYTES", "MMEClient"]

logger = logging.getLogger(__name__)

# Chunks are sized for this share of the limit, so rows of uneven size (BYTES) rarely need a second cut.
_CHUNK_FILL = 0.9
_MAX_NOT_READY_DELAY = 30.0
# the first wait before sending again a request Triton answered "unknown model" for (it grows linearly)
_UNKNOWN_MODEL_DELAY = 0.05


def _default_config(max_concurrency: int) -> Config:
    # The container has 60 s to answer; the socket must wait longer than that (AWS suggests 70 s).
    return Config(
        connect_timeout=10,
        read_timeout=70,
        retries={"mode": "standard", "total_max_attempts": 3},
        max_pool_connections=max(10, max_concurrency),
    )


def _body_size(body: Any) -> int:
    try:
        return memoryview(body).nbytes
    except TypeError:
        return len(body)


class MMEClient:
    """Run inference on the models of a SageMaker multi-model endpoint served by Triton.

    ``infer`` sends numpy arrays as a KServe v2 / Triton request to ``InvokeEndpoint`` with
    ``TargetModel`` and returns the outputs as numpy arrays; it needs only the ``sagemaker-runtime``
    service (the data plane). ``models`` is a shortcut to the endpoint stage's listing.

    Parameters:
        endpoint_name: the SageMaker endpoint.
        boto3_session: session to create the boto3 clients from (default: ``boto3.Session()``).
        sagemaker_session: a ``sagemaker.Session`` instead of ``boto3_session`` (its ``boto_session``).
        boto_config: botocore ``Config`` merged over the client's defaults (connect timeout 10 s, read
            timeout 70 s, standard retry mode with 3 attempts, a connection pool of at least
            ``max_concurrency``).
        runtime_client: a ready ``sagemaker-runtime`` client; wins over ``boto3_session``/``boto_config``.
        sagemaker_client, s3_client: ready clients for :meth:`models` only (never used by ``infer``).
        model_data_url: the endpoint's ``s3://bucket/prefix/``; when given, :meth:`models` lists it
            without the DescribeEndpoint → DescribeEndpointConfig → DescribeModel look-up.
        max_retries_not_ready: how many times a request answered ``ModelNotReadyException`` (the model
            is still downloading or loading) is sent again before ``ModelNotReadyError`` is raised.
        not_ready_backoff: first wait in seconds before such a retry; it doubles with every retry (with
            jitter, at most 30 s).
        max_retries_unknown_model: how many times a request is sent again when Triton answers that it
            does not know the TargetModel ("Request for unknown model: '<TargetModel>' is not found",
            ``ModelError`` 400) before ``ModelNotFoundError`` is raised. SageMaker forwards a request only
            to an instance that has the model loaded, so that answer means the lookup raced a load or
            unload on the instance (Triton reads its map of model names unlocked while a load or unload
            of another model replaces it): it is transient. The retries wait 50 ms, then 100 ms, ...
        binary: send tensors in Triton's binary-tensor format (default) or as JSON; ``infer`` can
            override it per call.
        split_batches: split a request over the 6 MiB limit along dimension 0 (see :meth:`infer`).
        max_concurrency: how many split requests of one ``infer`` call are in flight at once.
        max_batch_size: the ``max_batch_size`` of models by TargetModel; with ``split_batches`` no split
            request carries more rows than that.

    Raises:
        ValueError: an option is out of range.

    Example::

        client = MMEClient("my-endpoint")
        out = client.infer("linear.tar.gz", {"INPUT0": np.ones((2, 4), np.float32)})
        out["OUTPUT0"].shape  # (2, 3)
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        boto3_session: boto3.Session | None = None,
        sagemaker_session: Any = None,
        boto_config: Config | None = None,
        runtime_client: SageMakerRuntimeClient | None = None,
        sagemaker_client: SageMakerClient | None = None,
        s3_client: S3Client | None = None,
        model_data_url: str | None = None,
        max_retries_not_ready: int = 6,
        not_ready_backoff: float = 1.0,
        max_retries_unknown_model: int = 2,
        binary: bool = True,
        split_batches: bool = False,
        max_concurrency: int = 4,
        max_batch_size: Mapping[str, int] | None = None,
    ) -> None:
        if not isinstance(endpoint_name, str) or not endpoint_name:
            raise ValueError(f"endpoint_name must be a non-empty string, got {endpoint_name!r}")
        boto3_session = boto3_session_of(boto3_session, sagemaker_session)
        if max_retries_not_ready < 0:
            raise ValueError(f"max_retries_not_ready must be >= 0, got {max_retries_not_ready}")
        if max_retries_unknown_model < 0:
            raise ValueError(f"max_retries_unknown_model must be >= 0, got {max_retries_unknown_model}")
        if not_ready_backoff < 0:
            raise ValueError(f"not_ready_backoff must be >= 0, got {not_ready_backoff}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        batch_limits = dict(max_batch_size or {})
        for name, limit in batch_limits.items():
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(f"max_batch_size[{name!r}] must be an int >= 1, got {limit!r}")
        if model_data_url is not None:
            try:
                parse_s3_url(model_data_url)
            except ValueError as exc:
                raise ValueError(f"model_data_url: {exc}") from None
        self._endpoint_name = endpoint_name
        self._session = boto3_session
        self._boto_config = boto_config
        self._model_data_url = model_data_url
        self._max_retries_not_ready = max_retries_not_ready
        self._not_ready_backoff = not_ready_backoff
        self._max_retries_unknown_model = max_retries_unknown_model
        self._binary = binary
        self._split_batches = split_batches
        self._max_concurrency = max_concurrency
        self._max_batch_size = batch_limits
        self._runtime: SageMakerRuntimeClient = make_client(
            "sagemaker-runtime",
            client=runtime_client,
            boto3_session=boto3_session,
            boto_config=boto_config,
            default_config=_default_config(max_concurrency),
        )
        self._sagemaker: SageMakerClient | None = sagemaker_client
        self._s3: S3Client | None = s3_client

    def __repr__(self) -> str:
        return f"MMEClient({self._endpoint_name!r})"

    @property
    def endpoint_name(self) -> str:
        """The SageMaker endpoint this client invokes."""
        return self._endpoint_name

    @property
    def runtime_client(self) -> SageMakerRuntimeClient:
        """The boto3 ``sagemaker-runtime`` client the requests go through."""
        return self._runtime

    # -- inference ---------------------------------------------------------------------------------

    def infer(
        self,
        target_model: str,
        inputs: Inputs,
        outputs: Outputs = None,
        *,
        binary: bool | None = None,
        binary_outputs: bool | Collection[str] | None = None,
        copy: bool = False,
        split_batches: bool | None = None,
        parameters: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        custom_attributes: str | None = None,
        inference_id: str | None = None,
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Run one inference on ``target_model`` and return its outputs by name.

        Parameters:
            target_model: the TargetModel, the artifact's name under the endpoint's prefix
                (``"linear.tar.gz"``).
            inputs: ``{name: array}`` (the datatype follows the array's dtype; ``str``/``bytes`` object
                arrays are BYTES), or a sequence of ``InferInput``.
            outputs: names (or ``InferRequestedOutput``) of the outputs to return; default: all.
            binary: binary-tensor format (``True``) or JSON (``False``); default: the client's setting.
                Tensors JSON cannot carry (FP16, BF16, non-UTF-8 BYTES) travel in binary either way.
            binary_outputs: ``True``/``False`` asks for every output in binary/JSON whatever ``binary``
                says; a collection of names asks for those outputs in binary. Triton refuses to write
                FP16 and BF16 outputs as JSON, so a JSON request to a model with such outputs needs it.
            copy: return writable arrays that own their memory; by default numeric outputs of a binary
                answer are read-only views onto the response body.
            split_batches: override the client's setting for this call. When on and the request is over
                6 MiB (or has more rows than the model's known ``max_batch_size``), the batch is cut
                along dimension 0 into requests that fit, sent concurrently, and each output is
                concatenated along dimension 0 in order. All inputs must share dimension 0, and every
                output must carry the batch on dimension 0.
            parameters: request-level parameters (KServe v2 ``parameters``).
            request_id: the request's ``id`` (every split request carries the same one).
            custom_attributes: InvokeEndpoint's ``CustomAttributes`` header.
            inference_id: InvokeEndpoint's ``InferenceId``.

        Returns:
            ``{output name: numpy array}``; BYTES outputs are object arrays of ``bytes``.

        Raises:
            PayloadTooLargeError: the request is over 6 MiB and ``split_batches`` is off, or one row
                alone is over the limit.
            EndpointNotFoundError: no such endpoint.
            ModelNotFoundError: the TargetModel is not under the endpoint's prefix (or Triton has no
                such model, after ``max_retries_unknown_model`` retries).
            InvalidInputError: Triton refused the request (input name, shape, datatype); ``message``
                is Triton's own.
            ModelOutOfMemoryError: the instance cannot load the model (507).
            ModelNotReadyError: the model was still loading after ``max_retries_not_ready`` retries.
            ThrottlingError: SageMaker throttled the request after botocore's retries.
            InferenceError: any other InvokeEndpoint failure.
            CodecError: the answer cannot be decoded.
            ValueError, TypeError: bad arguments (``target_model``, inputs that do not share dimension
                0 when splitting ...).

        Example::

            batch = np.random.rand(10_000, 4).astype(np.float32)
            out = client.infer("linear.tar.gz", {"INPUT0": batch}, split_batches=True)
        """
        check_target_model(target_model)
        use_binary = self._binary if binary is None else binary
        split = self._split_batches if split_batches is None else split_batches
        request = Request(
            target_model=target_model,
            outputs=outputs,
            binary=use_binary,
            binary_outputs=binary_outputs,
            copy=copy,
            parameters=parameters,
            request_id=request_id,
            custom_attributes=custom_attributes,
            inference_id=inference_id,
        )
        max_rows = self._max_batch_size.get(target_model)
        n_rows = 0
        if split:
            arrays = input_arrays(inputs)
            n_rows = batch_rows(arrays)
            if max_rows is not None and n_rows > max_rows:
                return self._infer_split(request, inputs, n_rows, rows_per_chunk=max_rows)
            # Binary numeric tensors travel as their raw bytes: when those alone are over the limit,
            # the whole batch need not be encoded just to learn that it has to be split.
            if use_binary and isinstance(inputs, Mapping):
                raw = sum(a.nbytes for a in arrays.values() if a.dtype.kind not in "OSU")
                if raw > MAX_PAYLOAD_BYTES:
                    rows = self._rows_per_chunk(n_rows, raw, max_rows)
                    return self._infer_split(request, inputs, n_rows, rows_per_chunk=rows)
        body, content_type = self._encode(request, inputs)
        size = _body_size(body)
        if size <= MAX_PAYLOAD_BYTES:
            return self._invoke(request, body, content_type)
        if not split:
            raise PayloadTooLargeError(
                f"the request body is {size:,} bytes, over InvokeEndpoint's limit of "
                f"{MAX_PAYLOAD_BYTES:,} bytes (6 MiB); pass split_batches=True to send the batch along "
                "dimension 0 in several requests that fit",
                endpoint_name=self._endpoint_name,
                target_model=target_model,
            )
        del body
        return self._infer_split(
            request, inputs, n_rows, rows_per_chunk=self._rows_per_chunk(n_rows, size, max_rows)
        )

    @staticmethod
    def _rows_per_chunk(n_rows: int, size: int, max_rows: int | None) -> int:
        """Rows per request so that a request of ``size`` bytes for ``n_rows`` rows is cut to fit."""
        rows = max(1, math.floor(n_rows * MAX_PAYLOAD_BYTES * _CHUNK_FILL / size))
        return rows if max_rows is None else min(rows, max_rows)

    def _encode(self, request: Request, inputs: Inputs) -> tuple[bytes | bytearray, str]:
        return encode_request(
            inputs,
            request.outputs,
            binary=request.binary,
            parameters=request.parameters,
            request_id=request.request_id,
            binary_outputs=request.binary_outputs,
        )

    def _infer_split(
        self, request: Request, inputs: Inputs, n_rows: int, *, rows_per_chunk: int
    ) -> dict[str, np.ndarray[Any, Any]]:
        chunks: list[tuple[bytes | bytearray, str]] = []
        for start, stop in chunk_bounds(n_rows, rows_per_chunk):
            chunks.extend(self._encode_fitting(request, inputs, start, stop))
        logger.debug("split %d rows for %s into %d requests", n_rows, request.target_model, len(chunks))
        if len(chunks) == 1:
            return self._invoke(request, *chunks[0])
        workers = min(self._max_concurrency, len(chunks))
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mme-triton-infer")
        try:
            futures: list[Future[dict[str, np.ndarray[Any, Any]]]] = [
                executor.submit(self._invoke, request, body, content_type) for body, content_type in chunks
            ]
            # The first failure stops the requests not yet sent; it is raised as the call's error.
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                error = future.exception() if future.done() else None
                if error is not None:
                    for other in futures:
                        other.cancel()
                    raise error
            parts = [future.result() for future in futures]
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
        try:
            return join_outputs(parts)
        except ValueError as exc:
            raise InferenceError(
                str(exc), endpoint_name=self._endpoint_name, target_model=request.target_model
            ) from exc

    def _encode_fitting(
        self, request: Request, inputs: Inputs, start: int, stop: int
    ) -> list[tuple[bytes | bytearray, str]]:
        """Encode rows ``start:stop``, halving the range until every body fits the limit."""
        body, content_type = self._encode(request, input_rows(inputs, start, stop))
        size = _body_size(body)
        if size <= MAX_PAYLOAD_BYTES:
            return [(body, content_type)]
        del body
        if stop - start == 1:
            raise PayloadTooLargeError(
                f"row {start} of the batch alone encodes to {size:,} bytes, over InvokeEndpoint's limit of "
                f"{MAX_PAYLOAD_BYTES:,} bytes (6 MiB); it cannot be split further along dimension 0",
                endpoint_name=self._endpoint_name,
                target_model=request.target_model,
            )
        middle = (start + stop) // 2
        return self._encode_fitting(request, inputs, start, middle) + self._encode_fitting(
            request, inputs, middle, stop
        )

    def _invoke(self, request: Request, body: Any, content_type: str) -> dict[str, np.ndarray[Any, Any]]:
        """One InvokeEndpoint call, retried while the model is not ready; the one error boundary."""
        kwargs: dict[str, Any] = {
            "EndpointName": self._endpoint_name,
            "TargetModel": request.target_model,
            "ContentType": content_type,
            "Body": body,
        }
        if request.custom_attributes is not None:
            kwargs["CustomAttributes"] = request.custom_attributes
        if request.inference_id is not None:
            kwargs["InferenceId"] = request.inference_id
        context = ErrorContext(self._endpoint_name, request.target_model)
        attempt = unknown = 0
        while True:
            try:
                response = self._runtime.invoke_endpoint(**kwargs)
                answer = response["Body"].read()
                break
            except ClientError as exc:
                if unknown < self._max_retries_unknown_model and is_unknown_target(exc, request.target_model):
                    unknown += 1
                    logger.info(
                        "Triton on %s did not find %s, which SageMaker routed to it as loaded (a lookup "
                        "that raced a load or unload); retry %d/%d",
                        self._endpoint_name,
                        request.target_model,
                        unknown,
                        self._max_retries_unknown_model,
                    )
                    time.sleep(_UNKNOWN_MODEL_DELAY * unknown)
                    continue
                if is_not_ready(exc) and attempt < self._max_retries_not_ready:
                    delay = self._not_ready_delay(attempt)
                    attempt += 1
                    logger.info(
                        "%s on %s is not ready yet; retry %d/%d in %.1fs",
                        request.target_model,
                        self._endpoint_name,
                        attempt,
                        self._max_retries_not_ready,
                        delay,
                    )
                    time.sleep(delay)
                    continue
                raise with_target_model_hint(
                    map_invoke_error(exc, context),
                    s3_client=self._s3,
                    boto3_session=self._session,
                    boto_config=self._boto_config,
                ) from exc
            except BotoCoreError as exc:
                raise map_invoke_error(exc, context) from exc
        response_type = response.get("ContentType") or "application/json"
        logger.debug(
            "invoked %s on %s: %d bytes sent (%s), %d bytes back (%s)",
            request.target_model,
            self._endpoint_name,
            _body_size(body),
            content_type,
            len(answer),
            response_type,
        )
        return decode_response(answer, response_type, copy=request.copy)

    def _not_ready_delay(self, attempt: int) -> float:
        # The exponent stops growing long after the cap is reached: 2.0**1024 overflows a float.
        ceiling = min(self._not_ready_backoff * 2.0 ** min(attempt, 64), _MAX_NOT_READY_DELAY)
        # Jitter keeps many threads waiting on the same loading model from retrying in lockstep.
        return ceiling * (0.5 + random.random() / 2)

    # -- the endpoint's models (control plane) ----------------------------------------------------

    def models(self) -> list[str]:
        """The TargetModels the endpoint serves: the ``*.tar.gz`` objects directly under its prefix, sorted.

        A shortcut to :func:`mme_triton.endpoint.models.endpoint_models`, for notebooks: unlike
        :meth:`infer` it calls the control plane (DescribeEndpoint → DescribeEndpointConfig →
        DescribeModel, skipped when the client was given ``model_data_url``) and S3 (ListObjectsV2),
        with the client's session and ``boto_config``. Services should call the endpoint stage, or
        :func:`mme_triton.list_models` with the prefix, themselves.

        Raises:
            EndpointNotFoundError: the endpoint does not exist.
            DeploymentError: the endpoint's model has no ModelDataUrl, or a describe call failed.
            ArtifactError: the S3 listing failed (no such bucket, access denied ...).

        Example::

            client.models()  # ['linear.tar.gz', 'pipeline.tar.gz']
        """
        from mme_triton.endpoint.models import endpoint_models

        return endpoint_models(
            self._endpoint_name,
            model_data_url=self._model_data_url,
            boto3_session=self._session,
            boto_config=self._boto_config,
            sagemaker_client=self._sagemaker,
            s3_client=self._s3,
        )
