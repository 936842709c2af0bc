"""``AsyncMMEClient``'s own connections on the event loop: the pool's limit, requests cancelled while they
wait or while they are answered, a client used again after ``close()``, and uvloop's event loop.

Against the SageMaker-shaped front of tests/client/conftest.py, forwarding to a real Triton.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from mme_triton import AsyncMMEClient

if TYPE_CHECKING:
    from conftest import SageMakerFront

pytestmark = pytest.mark.triton


def _row(value: int) -> dict[str, np.ndarray[Any, Any]]:
    return {"IN_INT64": np.full((1, 3), value, np.int64)}


def test_async_client_opens_no_more_connections_than_its_pool(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    async def main() -> list[int]:
        runtime = runtime_factory(front.url, max_pool_connections=3)
        async with AsyncMMEClient(front.endpoint, runtime_client=runtime) as client:
            answers = await asyncio.gather(*(client.infer("echo.tar.gz", _row(i)) for i in range(40)))
        return [int(answer["OUT_INT64"][0, 0]) for answer in answers]

    assert asyncio.run(main()) == list(range(40))
    assert len(front.seen()) == 40
    assert front.accepted == 3


def test_async_client_keeps_serving_after_requests_are_cancelled(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    """Requests cancelled while the server holds them, and others cancelled while they wait for a
    connection, give their places back: the pool of two serves the next requests."""
    front.script(0.5, 0.5)  # the first two requests are answered half a second late

    async def main() -> list[int]:
        runtime = runtime_factory(front.url, max_pool_connections=2)
        async with AsyncMMEClient(front.endpoint, runtime_client=runtime) as client:
            doomed = [asyncio.ensure_future(client.infer("echo.tar.gz", _row(i))) for i in range(6)]
            await asyncio.sleep(0.2)
            for task in doomed:
                task.cancel()
            await asyncio.gather(*doomed, return_exceptions=True)
            assert all(task.cancelled() for task in doomed)
            answers = await asyncio.wait_for(
                asyncio.gather(*(client.infer("echo.tar.gz", _row(i)) for i in range(4))), timeout=30
            )
        return [int(answer["OUT_INT64"][0, 0]) for answer in answers]

    assert asyncio.run(main()) == [0, 1, 2, 3]


def test_async_client_takes_back_a_connection_handed_to_a_request_cancelled_meanwhile(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    """The only connection is handed to the request waiting for it, which is cancelled before it runs:
    the connection goes back to the pool rather than with the cancelled request."""

    async def main() -> int:
        runtime = runtime_factory(front.url, max_pool_connections=1)
        async with AsyncMMEClient(front.endpoint, runtime_client=runtime) as client:
            second: asyncio.Future[Any] | None = None

            async def first() -> None:
                await client.infer("echo.tar.gz", _row(1))  # hands the connection to the second
                assert second is not None
                second.cancel()  # before the second runs

            one = asyncio.ensure_future(first())
            await asyncio.sleep(0)
            second = asyncio.ensure_future(client.infer("echo.tar.gz", _row(2)))
            await one
            with pytest.raises(asyncio.CancelledError):
                await second
            answer = await asyncio.wait_for(client.infer("echo.tar.gz", _row(3)), timeout=30)
        return int(answer["OUT_INT64"][0, 0])

    assert asyncio.run(main()) == 3
    assert front.accepted == 1


def test_async_client_serves_another_loop_after_close(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    client = AsyncMMEClient(front.endpoint, runtime_client=runtime_factory(front.url))

    async def once(value: int) -> int:
        answer = await client.infer("echo.tar.gz", _row(value))
        await client.close()
        return int(answer["OUT_INT64"][0, 0])

    assert [asyncio.run(once(value)) for value in (1, 2)] == [1, 2]


def test_async_client_runs_on_uvloop(front: SageMakerFront, runtime_factory: Callable[..., Any]) -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[int]:
        runtime = runtime_factory(front.url, max_pool_connections=8)
        async with AsyncMMEClient(front.endpoint, runtime_client=runtime) as client:
            answers = await asyncio.gather(*(client.infer("echo.tar.gz", _row(i)) for i in range(16)))
        return [int(answer["OUT_INT64"][0, 0]) for answer in answers]

    loop = uvloop.new_event_loop()
    try:
        assert loop.run_until_complete(main()) == list(range(16))
    finally:
        loop.close()


def test_async_client_times_out_on_the_loop_it_serves_after_close(
    front: SageMakerFront, runtime_factory: Callable[..., Any]
) -> None:
    from mme_triton.errors import InferenceError

    client = AsyncMMEClient(front.endpoint, runtime_client=runtime_factory(front.url, read_timeout=0.5))

    async def first() -> None:
        await client.infer("echo.tar.gz", _row(1))
        await client.close()

    async def slow() -> str | None:
        try:
            with pytest.raises(InferenceError) as caught:
                await client.infer("echo.tar.gz", _row(2))
        finally:
            await client.close()
        return caught.value.error_code

    asyncio.run(first())
    front.script(1.5)
    assert asyncio.run(slow()) == "ReadTimeoutError"
