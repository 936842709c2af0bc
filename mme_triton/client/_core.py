"""The one implementation behind ``MMEClient`` and ``AsyncMMEClient``: everything but the waiting.

:class:`ClientCore` holds the configuration, builds the botocore ``sagemaker-runtime`` client, encodes and
splits requests under the 6 MiB limit, decodes and joins answers, and runs the retries of an InvokeEndpoint
call as a generator of *steps* it asks its driver to carry out (:mod:`mme_triton.client._steps`: send
over the fast path, call botocore, refresh the credentials, wait).

A driver's failure is thrown into the generator where it asked, as a botocore exception. ``MMEClient``
carries the steps out on its thread (its sockets, ``time.sleep``); ``AsyncMMEClient`` awaits them on the
event loop (its protocol, ``asyncio.sleep``). The decisions (which path, when to retry, how long to wait,
what to raise) are made here once, for both.
"""

from __future__ import annotations

import functools
import logging
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from mme_triton._inference_components import HOSTINGS, Hosting, check_component_name
from mme_triton._sagemaker import MAX_PAYLOAD_BYTES, check_target_model, make_client, parse_s3_url
from mme_triton._sdk import boto3_session_of
from mme_triton.client._errors_map import ErrorContext, is_not_ready, is_unknown_target, map_invoke_error
from mme_triton.client._request import (
    INFERENCE_COMPONENT_PARAM,
    TARGET_MODEL_PARAM,
    Inputs,
    Outputs,
    Request,
    input_arrays,
    input_rows,
)
from mme_triton.client._split import batch_rows, chunk_bounds, join_outputs
from mme_triton.client._steps import REFRESH, Blocking, Call, Raw, Send, Steps
from mme_triton.client._target_hint import needs_target_model_hint, with_target_model_hint
from mme_triton.client._wire import Answer, Wire
from mme_triton.client.codec import decode_response, encode_request
from mme_triton.errors import InferenceError, PayloadTooLargeError

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient

__all__ = ["ClientCore", "Plan"]

logger = logging.getLogger("mme_triton.client")

T = TypeVar("T")
Body = bytes | bytearray

# Chunks are sized for this share of the limit, so rows of uneven size (BYTES) rarely need a second cut.
_CHUNK_FILL = 0.9
_MAX_NOT_READY_DELAY = 30.0
# the first wait before sending again a request Triton answered "unknown model" for (it grows linearly)
_UNKNOWN_MODEL_DELAY = 0.05


@dataclass(frozen=True)
class Plan:
    """What one ``infer`` sends: the request's settings and its bodies (several when split)."""

    request: Request
    bodies: list[tuple[Body, str]]


def default_config(max_concurrency: int) -> Config:
    # The container has 60 s to answer; the socket must wait longer than that (AWS suggests 70 s).
    return Config(
        connect_timeout=10,
        read_timeout=70,
        retries={"mode": "standard", "total_max_attempts": 3},
        max_pool_connections=max(10, max_concurrency),
    )


def body_size(body: Any) -> int:
    try:
        return memoryview(body).nbytes
    except TypeError:
        return len(body)


class ClientCore:
    """Configuration, encoding, retries and error mapping shared by the two clients (see the module)."""

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
        fast_path: bool = True,
        hosting: Hosting = "mme",
    ) -> None:
        if not isinstance(endpoint_name, str) or not endpoint_name:
            raise ValueError(f"endpoint_name must be a non-empty string, got {endpoint_name!r}")
        if hosting not in HOSTINGS:
            raise ValueError(f"hosting must be one of {', '.join(map(repr, HOSTINGS))}, got {hosting!r}")
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
        self._hosting: Hosting = hosting
        self._target_param = TARGET_MODEL_PARAM if hosting == "mme" else INFERENCE_COMPONENT_PARAM
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
        self._own_runtime = runtime_client is None
        self._runtime: SageMakerRuntimeClient = make_client(
            "sagemaker-runtime",
            client=runtime_client,
            boto3_session=boto3_session,
            boto_config=boto_config,
            default_config=default_config(max_concurrency),
        )
        self._sagemaker: SageMakerClient | None = sagemaker_client
        self._s3: S3Client | None = s3_client
        self._wire: Wire | None = None
        self._refusal = "fast_path=False"
        if fast_path:
            self._wire, self._refusal = Wire.of(self._runtime)
        self._told: set[str] = set()
        self._init_transport()

    def _init_transport(self) -> None:
        """Set up the fast path's HTTP (each client its own), once the configuration is known."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._endpoint_name!r})"

    @property
    def endpoint_name(self) -> str:
        """The SageMaker endpoint this client invokes."""
        return self._endpoint_name

    @property
    def hosting(self) -> Hosting:
        """``"mme"``: ``infer``'s first argument is a TargetModel; ``"inference-components"``: the name of
        an inference component of the endpoint (sent as ``InferenceComponentName``)."""
        return self._hosting

    @property
    def runtime_client(self) -> SageMakerRuntimeClient:
        """The boto3 ``sagemaker-runtime`` client: the configuration the requests follow, and the path
        they take when they cannot take the client's own (see :attr:`fast_path`)."""
        return self._runtime

    @property
    def fast_path(self) -> bool:
        """Whether requests go over the client's own HTTP path now (``False``: through botocore's
        ``invoke_endpoint``, because ``fast_path=False`` was asked for or the configuration needs it, such
        as an event handler registered on :attr:`runtime_client`)."""
        return self._botocore_reason() is None

    def _botocore_reason(self) -> str | None:
        """Why the next call goes through ``invoke_endpoint``, or ``None`` for the fast path."""
        if self._wire is None:
            return self._refusal
        return self._wire.hooks.unknown()

    # -- what is sent --------------------------------------------------------------------------------

    def _check_target(self, target: str) -> None:
        """Refuse a target InvokeEndpoint would refuse: a TargetModel, or an inference component's name."""
        if self._hosting == "mme":
            check_target_model(target)
        else:
            check_component_name(target)

    def _where(self, target: str | None) -> dict[str, Any]:
        """The error attributes naming ``target``: ``target_model`` or ``inference_component``."""
        key = "target_model" if self._hosting == "mme" else "inference_component"
        return {"endpoint_name": self._endpoint_name, key: target}

    def _plan(
        self,
        target_model: str,
        inputs: Inputs,
        outputs: Outputs,
        *,
        binary: bool | None,
        split_batches: bool | None,
        **settings: Any,
    ) -> Plan:
        """Encode one ``infer`` call: one body, or the bodies of its split requests (each under 6 MiB)."""
        self._check_target(target_model)
        use_binary = self._binary if binary is None else binary
        split = self._split_batches if split_batches is None else split_batches
        request = Request(
            target=target_model,
            outputs=outputs,
            binary=use_binary,
            target_param=self._target_param,
            **settings,
        )
        max_rows = self._max_batch_size.get(target_model)
        n_rows = 0
        if split:
            arrays = input_arrays(inputs)
            n_rows = batch_rows(arrays)
            if max_rows is not None and n_rows > max_rows:
                return self._split(request, inputs, n_rows, rows_per_chunk=max_rows)
            # Binary numeric tensors travel as their raw bytes: when those alone are over the limit,
            # the whole batch need not be encoded just to learn that it has to be split.
            if use_binary and isinstance(inputs, Mapping):
                raw = sum(a.nbytes for a in arrays.values() if a.dtype.kind not in "OSU")
                if raw > MAX_PAYLOAD_BYTES:
                    rows = self._rows_per_chunk(n_rows, raw, max_rows)
                    return self._split(request, inputs, n_rows, rows_per_chunk=rows)
        body, content_type = self._encode(request, inputs)
        size = body_size(body)
        if size <= MAX_PAYLOAD_BYTES:
            return Plan(request, [(body, content_type)])
        if not split:
            raise PayloadTooLargeError(
                f"the request body is {size:,} bytes, over InvokeEndpoint's limit of "
                f"{MAX_PAYLOAD_BYTES:,} bytes (6 MiB); pass split_batches=True to send the batch along "
                "dimension 0 in several requests that fit",
                **self._where(target_model),
            )
        del body
        rows = self._rows_per_chunk(n_rows, size, max_rows)
        return self._split(request, inputs, n_rows, rows_per_chunk=rows)

    def _plan_raw(
        self, target_model: str, body: Any, content_type: str, settings: Mapping[str, Any]
    ) -> Request:
        """The request of an ``infer_raw`` call, once its body is known to fit."""
        self._check_target(target_model)
        if not isinstance(content_type, str) or not content_type:
            raise ValueError(f"content_type must be a non-empty string, got {content_type!r}")
        size = body_size(body)
        if size > MAX_PAYLOAD_BYTES:
            raise PayloadTooLargeError(
                f"the request body is {size:,} bytes, over InvokeEndpoint's limit of "
                f"{MAX_PAYLOAD_BYTES:,} bytes (6 MiB)",
                **self._where(target_model),
            )
        return Request(
            target=target_model, outputs=None, binary=True, binary_outputs=None, copy=False,
            parameters=None, request_id=None, target_param=self._target_param, **settings,
        )  # fmt: skip

    @staticmethod
    def _rows_per_chunk(n_rows: int, size: int, max_rows: int | None) -> int:
        """Rows per request so that a request of ``size`` bytes for ``n_rows`` rows is cut to fit."""
        rows = max(1, math.floor(n_rows * MAX_PAYLOAD_BYTES * _CHUNK_FILL / size))
        return rows if max_rows is None else min(rows, max_rows)

    @staticmethod
    def _encode(request: Request, inputs: Inputs) -> tuple[Body, str]:
        return encode_request(
            inputs,
            request.outputs,
            binary=request.binary,
            parameters=request.parameters,
            request_id=request.request_id,
            binary_outputs=request.binary_outputs,
        )

    def _split(self, request: Request, inputs: Inputs, n_rows: int, *, rows_per_chunk: int) -> Plan:
        bodies: list[tuple[Body, str]] = []
        for start, stop in chunk_bounds(n_rows, rows_per_chunk):
            bodies.extend(self._encode_fitting(request, inputs, start, stop))
        logger.debug("split %d rows for %s into %d requests", n_rows, request.target, len(bodies))
        return Plan(request, bodies)

    def _encode_fitting(
        self, request: Request, inputs: Inputs, start: int, stop: int
    ) -> list[tuple[Body, str]]:
        """Encode rows ``start:stop``, halving the range until every body fits the limit."""
        body, content_type = self._encode(request, input_rows(inputs, start, stop))
        size = body_size(body)
        if size <= MAX_PAYLOAD_BYTES:
            return [(body, content_type)]
        del body
        if stop - start == 1:
            raise PayloadTooLargeError(
                f"row {start} of the batch alone encodes to {size:,} bytes, over InvokeEndpoint's limit of "
                f"{MAX_PAYLOAD_BYTES:,} bytes (6 MiB); it cannot be split further along dimension 0",
                **self._where(request.target),
            )
        middle = (start + stop) // 2
        return self._encode_fitting(request, inputs, start, middle) + self._encode_fitting(
            request, inputs, middle, stop
        )

    # -- what comes back -----------------------------------------------------------------------------

    @staticmethod
    def _decoded(request: Request, raw: Raw) -> dict[str, np.ndarray[Any, Any]]:
        return decode_response(raw[0], raw[1], copy=request.copy)

    def _joined(
        self, request: Request, parts: list[dict[str, np.ndarray[Any, Any]]]
    ) -> dict[str, np.ndarray[Any, Any]]:
        try:
            return join_outputs(parts)
        except ValueError as exc:
            raise InferenceError(str(exc), **self._where(request.target)) from exc

    # -- one InvokeEndpoint call and its retries ----------------------------------------------------

    def _invoke(self, request: Request, body: Any, content_type: str) -> Steps[Raw]:
        """One InvokeEndpoint call, retried while the model is not ready; the one error boundary."""
        params = request.params(self._endpoint_name, body, content_type)
        context = ErrorContext(self._endpoint_name, request.target_model, request.inference_component)
        attempt = unknown = 0
        while True:
            reason = self._botocore_reason()
            try:
                if reason is None:
                    raw = yield from self._send(params)
                else:
                    self._tell(reason)
                    raw = yield Call(params)
                break
            except ClientError as exc:
                target = request.target_model
                if (
                    target is not None
                    and unknown < self._max_retries_unknown_model
                    and is_unknown_target(exc, target)
                ):
                    unknown += 1
                    logger.info(
                        "Triton on %s did not find %s, which SageMaker routed to it as loaded (a lookup "
                        "that raced a load or unload); retry %d/%d",
                        self._endpoint_name,
                        target,
                        unknown,
                        self._max_retries_unknown_model,
                    )
                    yield _UNKNOWN_MODEL_DELAY * unknown
                    continue
                if is_not_ready(exc) and attempt < self._max_retries_not_ready:
                    delay = self._not_ready_delay(attempt)
                    attempt += 1
                    logger.info(
                        "%s on %s is not ready yet; retry %d/%d in %.1fs",
                        request.target,
                        self._endpoint_name,
                        attempt,
                        self._max_retries_not_ready,
                        delay,
                    )
                    yield delay
                    continue
                error = map_invoke_error(exc, context)
                if needs_target_model_hint(error):  # one S3 listing, only on this error
                    error = yield Blocking(functools.partial(self._with_hint, error))
                raise error from exc
            except BotoCoreError as exc:
                raise map_invoke_error(exc, context) from exc
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "invoked %s on %s: %d bytes sent (%s), %d bytes back (%s)",
                request.target,
                self._endpoint_name,
                body_size(body),
                content_type,
                len(raw[0]),
                raw[1],
            )
        return raw

    def _send(self, params: dict[str, Any]) -> Steps[Raw]:
        """``invoke_endpoint`` on the fast path: signed, sent, and retried as the client's botocore retry
        handler decides; a failure raises what botocore would."""
        wire = self._wire
        assert wire is not None
        context: dict[str, Any] = {}
        attempts = 1
        while True:
            if wire.refresh_due():
                yield REFRESH
            answer: Answer | None = None
            try:
                answer = yield Send(wire.request(params))
                if answer.status_code < 300:
                    wire.succeeded(answer, context)
                    return answer.content, answer.headers.get("Content-Type") or "application/json"
                raise wire.error(answer)
            except (ClientError, BotoCoreError) as exc:
                failure: ClientError | BotoCoreError = exc
            delay = wire.retry_delay(attempts, answer, failure, context)
            if delay is None:
                raise failure
            yield delay
            attempts += 1

    def _tell(self, reason: str) -> None:
        if reason not in self._told:
            self._told.add(reason)
            logger.debug("%s sends InvokeEndpoint through botocore: %s", self, reason)

    def _not_ready_delay(self, attempt: int) -> float:
        # The exponent stops growing long after the cap is reached: 2.0**1024 overflows a float.
        ceiling = min(self._not_ready_backoff * 2.0 ** min(attempt, 64), _MAX_NOT_READY_DELAY)
        # Jitter keeps many callers waiting on the same loading model from retrying in lockstep.
        return ceiling * (0.5 + random.random() / 2)

    def _with_hint(self, error: Exception) -> Exception:
        return with_target_model_hint(
            error, s3_client=self._s3, boto3_session=self._session, boto_config=self._boto_config
        )

    # -- the endpoint's models (control plane) ------------------------------------------------------

    def _list_models(self) -> list[str]:
        if self._hosting == "inference-components":
            from mme_triton.endpoint.models import endpoint_components

            return endpoint_components(
                self._endpoint_name,
                boto3_session=self._session,
                boto_config=self._boto_config,
                sagemaker_client=self._sagemaker,
            )
        from mme_triton.endpoint.models import endpoint_models

        return endpoint_models(
            self._endpoint_name,
            model_data_url=self._model_data_url,
            boto3_session=self._session,
            boto_config=self._boto_config,
            sagemaker_client=self._sagemaker,
            s3_client=self._s3,
        )
