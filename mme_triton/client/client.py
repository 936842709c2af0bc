"""``MMEClient``: numpy arrays in, numpy arrays out, through ``InvokeEndpoint`` with ``TargetModel``.

The client is the data plane only: it encodes a request with
:func:`~mme_triton.client.codec.encode_request`, sends it as the ``sagemaker-runtime`` InvokeEndpoint call,
decodes the answer with :func:`~mme_triton.client.codec.decode_response`, and turns AWS and Triton failures
into the typed exceptions of :mod:`mme_triton.errors` (see ``_errors_map``). It never calls the SageMaker
control plane or S3 on the request path (:meth:`MMEClient.models` is a documented shortcut to the endpoint
stage). It keeps no mutable state between calls, so one instance can serve many threads.

Everything but the waiting is :class:`~mme_triton.client._core.ClientCore`'s, shared with
:class:`~mme_triton.client.aio.AsyncMMEClient`; this module carries its steps out on the calling thread:
the fast path's requests over sockets of the client's own (``_transports``), the others through its
``invoke_endpoint``, the waits with ``time.sleep``, a split request's parts on a thread pool.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import numpy as np
from botocore.exceptions import BotoCoreError, ClientError

from mme_triton._sagemaker import MAX_PAYLOAD_BYTES
from mme_triton.client._core import ClientCore, Plan
from mme_triton.client._request import Inputs, Outputs
from mme_triton.client._steps import REFRESH, Blocking, Call, Send, Stepper, Steps, call_botocore
from mme_triton.client._transports import SocketTransport

__all__ = ["MAX_PAYLOAD_BYTES", "MMEClient"]

T = TypeVar("T")


class MMEClient(ClientCore):
    """Run inference on the models of a SageMaker multi-model endpoint served by Triton.

    ``infer`` sends numpy arrays as a KServe v2 / Triton request to ``InvokeEndpoint`` with
    ``TargetModel`` and returns the outputs as numpy arrays; it needs only the ``sagemaker-runtime``
    service (the data plane). ``infer_raw`` sends a body already encoded. ``models`` is a shortcut to
    the endpoint stage's listing. ``AsyncMMEClient`` is the same client for asyncio.

    Requests are built, signed and retried by botocore's own parts (its serializer, SigV4 signer,
    credential providers and retry handler, all from the ``sagemaker-runtime`` client below) and sent
    over keep-alive connections of the client's own (HTTP/1.1 on its own sockets), without the rest of
    ``invoke_endpoint``'s per-call work. A configuration that needs botocore's whole call (an event
    handler registered on the client, ``adaptive`` retries, a proxy, an instrumented client; see
    docs/client.md) goes through ``invoke_endpoint``.

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
        fast_path: ``False`` sends every request through botocore's ``invoke_endpoint``.
        hosting: ``"mme"`` (default): the endpoint is a multi-model endpoint and ``infer``'s first
            argument is a TargetModel; ``"inference-components"``: the endpoint hosts inference
            components and the first argument is a component's name, sent as ``InferenceComponentName``
            (what :func:`~mme_triton.endpoint.deploy_components.deploy_inference_components`' handle
            gives: ``endpoint.client()``). Everything else is the same: the codec, the splitting, the
            retries and the errors.

    Raises:
        ValueError: an option is out of range.

    Example::

        client = MMEClient("my-endpoint")
        out = client.infer("linear.tar.gz", {"INPUT0": np.ones((2, 4), np.float32)})
        out["OUTPUT0"].shape  # (2, 3)
    """

    def __enter__(self) -> MMEClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's connections (and the ``sagemaker-runtime`` client's, when the client made it
        itself: a ready ``runtime_client`` is the caller's). Optional: they close with the process."""
        if self._http is not None:
            self._http.close()
        if self._own_runtime:
            self._runtime.close()

    def _init_transport(self) -> None:
        self._http = SocketTransport(self._wire) if self._wire is not None else None

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
                (``"linear.tar.gz"``); with ``hosting="inference-components"``, the name of the
                inference component (``"linear"``).
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
            InferenceComponentNotFoundError: the endpoint has no inference component of that name.
            NoCapacityError: the inference component has no copy to serve the request (scaled to zero,
                or its copies are not placed yet).
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
        plan = self._plan(
            target_model,
            inputs,
            outputs,
            binary=binary,
            split_batches=split_batches,
            binary_outputs=binary_outputs,
            copy=copy,
            parameters=parameters,
            request_id=request_id,
            custom_attributes=custom_attributes,
            inference_id=inference_id,
        )
        if len(plan.bodies) == 1:
            return self._decoded(plan.request, self._run(self._invoke(plan.request, *plan.bodies[0])))
        return self._joined(plan.request, self._send_parts(plan))

    def infer_raw(
        self,
        target_model: str,
        body: bytes | bytearray | memoryview,
        content_type: str,
        *,
        custom_attributes: str | None = None,
        inference_id: str | None = None,
    ) -> tuple[bytes, str]:
        """Send a body already encoded (by ``encode_request``, or for any container) to ``target_model`` and
        return the answer's body and ``Content-Type`` undecoded.

        The same call as :meth:`infer` makes, with the same retries and errors, less the codec:
        ``decode_response(*client.infer_raw(...))`` is ``infer``'s answer.

        Raises:
            PayloadTooLargeError: the body is over 6 MiB (it is sent as it is, never split).
            InferenceError: and its subclasses, as :meth:`infer` raises them.
            ValueError: a bad ``target_model`` or ``content_type``.

        Example::

            body, content_type = encode_request({"INPUT0": batch})
            answer, answer_type = client.infer_raw("linear.tar.gz", body, content_type)
        """
        request = self._plan_raw(
            target_model,
            body,
            content_type,
            {"custom_attributes": custom_attributes, "inference_id": inference_id},
        )
        return self._run(self._invoke(request, body, content_type))

    def _send_parts(self, plan: Plan) -> list[dict[str, np.ndarray[Any, Any]]]:
        """The split requests of ``plan``, at most ``max_concurrency`` at once; the first failure is raised
        and stops the requests not yet sent."""
        request = plan.request

        def one(body: Any, content_type: str) -> dict[str, np.ndarray[Any, Any]]:
            return self._decoded(request, self._run(self._invoke(request, body, content_type)))

        workers = min(self._max_concurrency, len(plan.bodies))
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mme-triton-infer")
        try:
            futures: list[Future[dict[str, np.ndarray[Any, Any]]]] = [
                executor.submit(one, body, content_type) for body, content_type in plan.bodies
            ]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                error = future.exception() if future.done() else None
                if error is not None:
                    for other in futures:
                        other.cancel()
                    raise error
            return [future.result() for future in futures]
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    def _run(self, steps: Steps[T]) -> T:
        """Carry the steps of one call out on this thread; botocore's failures go back into them."""
        stepper = Stepper(steps)
        while (step := stepper.next()) is not None:
            try:
                if isinstance(step, Send):
                    assert self._http is not None
                    stepper.resume(self._http.send(step.request))
                elif isinstance(step, Call):
                    stepper.resume(call_botocore(self._runtime, step.params))
                elif isinstance(step, Blocking):
                    stepper.resume(step.run())
                elif step == REFRESH:
                    assert self._wire is not None
                    self._wire.refresh()
                else:
                    time.sleep(float(step))
            except (BotoCoreError, ClientError) as exc:
                stepper.fail(exc)
        result: T = stepper.result
        return result

    # -- the endpoint's models (control plane) ----------------------------------------------------

    def models(self) -> list[str]:
        """The TargetModels the endpoint serves: the ``*.tar.gz`` objects directly under its prefix, sorted
        (with ``hosting="inference-components"``: the names of its inference components, sorted).

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
        return self._list_models()
