"""``AsyncMMEClient``: ``MMEClient`` for asyncio, many requests in flight on one event loop.

The same client as :class:`~mme_triton.client.client.MMEClient` — the same configuration, codec, retries
and errors, from the same :class:`~mme_triton.client._core.ClientCore` — whose steps are awaited on the
running event loop: the fast path's requests over the client's own keep-alive connections
(``_aio_transport.py``), the waits with ``asyncio.sleep``, a split request's parts as tasks.
What must block (botocore's ``invoke_endpoint`` where the fast path cannot go, a credentials refresh,
``models()``) runs on the loop's default executor, so the loop keeps serving other requests.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

import numpy as np
from botocore.exceptions import BotoCoreError, ClientError

from mme_triton.client._aio_transport import AsyncioTransport
from mme_triton.client._core import ClientCore, Plan
from mme_triton.client._request import Inputs, Outputs
from mme_triton.client._steps import REFRESH, Blocking, Call, Send, Stepper, Steps, call_botocore

__all__ = ["AsyncMMEClient"]

T = TypeVar("T")


class AsyncMMEClient(ClientCore):
    """Run inference on a multi-model endpoint from asyncio: ``MMEClient`` with ``async with`` and
    ``await``.

    It takes the same parameters as ``MMEClient`` and its methods are coroutines with the same
    parameters, results and exceptions. One client serves any number of concurrent tasks on the event
    loop it is first used on (make one client per loop); at most ``max_pool_connections`` (of
    ``boto_config``, by default ``max(10, max_concurrency)``) connections are open at once, and requests
    beyond them wait for a free one. Close it with ``async with`` or :meth:`close`.

    Requests go out over connections of the client's own on the event loop, built, signed and retried
    by botocore's own parts as ``MMEClient``'s are; a configuration that needs botocore's whole call (an
    event handler on :attr:`runtime_client`, ``adaptive`` retries, a proxy) sends through
    ``invoke_endpoint`` on the loop's default executor.

    Example::

        async with AsyncMMEClient("my-endpoint") as client:
            answers = await asyncio.gather(
                *(client.infer("linear.tar.gz", {"INPUT0": batch}) for batch in batches)
            )
    """

    def _init_transport(self) -> None:
        self._http = AsyncioTransport(self._wire) if self._wire is not None else None

    async def __aenter__(self) -> AsyncMMEClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the client's connections (and the ``sagemaker-runtime`` client's when the client made it
        itself); those answering a request close once answered."""
        if self._http is not None:
            await self._http.close()
        if self._own_runtime:
            self._runtime.close()

    async def infer(
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

        The parameters, the result and the exceptions are those of ``MMEClient.infer``. A request split along
        dimension 0 sends its parts as tasks, at most ``max_concurrency`` at once.

        Example::

            out = await client.infer("linear.tar.gz", {"INPUT0": np.ones((2, 4), np.float32)})
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
            return self._decoded(plan.request, await self._run(self._invoke(plan.request, *plan.bodies[0])))
        return self._joined(plan.request, await self._send_parts(plan))

    async def infer_raw(
        self,
        target_model: str,
        body: bytes | bytearray | memoryview,
        content_type: str,
        *,
        custom_attributes: str | None = None,
        inference_id: str | None = None,
    ) -> tuple[bytes, str]:
        """Send a body already encoded and return the answer's body and ``Content-Type`` undecoded, as
        ``MMEClient.infer_raw`` does.

        Example::

            answer, answer_type = await client.infer_raw("linear.tar.gz", body, content_type)
        """
        request = self._plan_raw(
            target_model,
            body,
            content_type,
            {"custom_attributes": custom_attributes, "inference_id": inference_id},
        )
        return await self._run(self._invoke(request, body, content_type))

    async def models(self) -> list[str]:
        """The TargetModels the endpoint serves, as ``MMEClient.models`` lists them (on the loop's default
        executor).

        Example::

            await client.models()  # ['linear.tar.gz', 'pipeline.tar.gz']
        """
        return await asyncio.get_running_loop().run_in_executor(None, self._list_models)

    async def _send_parts(self, plan: Plan) -> list[dict[str, np.ndarray[Any, Any]]]:
        """The split requests of ``plan`` as tasks, at most ``max_concurrency`` at once; the first failure
        is raised and cancels the others."""
        request = plan.request
        slots = asyncio.Semaphore(self._max_concurrency)

        async def one(body: Any, content_type: str) -> dict[str, np.ndarray[Any, Any]]:
            async with slots:
                return self._decoded(request, await self._run(self._invoke(request, body, content_type)))

        tasks = [asyncio.ensure_future(one(body, content_type)) for body, content_type in plan.bodies]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, steps: Steps[T]) -> T:
        """Await the steps of one call; botocore's failures go back into them."""
        stepper = Stepper(steps)
        while (step := stepper.next()) is not None:
            try:
                if isinstance(step, Send):
                    assert self._http is not None
                    stepper.resume(await self._http.send(step.request))
                elif isinstance(step, Call):
                    call = functools.partial(call_botocore, self._runtime, step.params)
                    stepper.resume(await asyncio.get_running_loop().run_in_executor(None, call))
                elif isinstance(step, Blocking):
                    stepper.resume(await asyncio.get_running_loop().run_in_executor(None, step.run))
                elif step == REFRESH:
                    assert self._wire is not None
                    await asyncio.get_running_loop().run_in_executor(None, self._wire.refresh)
                else:
                    await asyncio.sleep(float(step))
            except (BotoCoreError, ClientError) as exc:
                stepper.fail(exc)
        result: T = stepper.result
        return result
