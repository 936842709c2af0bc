"""The steps of one InvokeEndpoint call that :class:`~mme_triton.client._core.ClientCore` asks its driver
to carry out, and the :class:`Stepper` a driver walks them with.

- :class:`Send` — one HTTP exchange on the fast path (resumes with an ``Answer``);
- :class:`Call` — one botocore ``invoke_endpoint`` call (resumes with the body and its content type);
- :class:`Blocking` — a blocking call off the request path (an S3 listing for an error's hint);
- :data:`REFRESH` — refresh the credentials before signing (a provider's call: STS, IMDS ...);
- a ``float`` — wait that many seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mme_triton.client._wire import WireRequest

__all__ = ["REFRESH", "Blocking", "Call", "Raw", "Send", "Stepper", "Steps", "call_botocore"]

T = TypeVar("T")
Raw = tuple[bytes, str]
"""An answer's body and its ``Content-Type``."""


@dataclass(frozen=True, slots=True)
class Send:
    """Step: send ``request`` over the client's own HTTP path."""

    request: WireRequest


@dataclass(frozen=True, slots=True)
class Call:
    """Step: call ``invoke_endpoint(**params)`` on the botocore client."""

    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Blocking:
    """Step: call ``run()``, which blocks (an AWS call off the request path); resume with its result."""

    run: Callable[[], Any]


REFRESH = "refresh credentials"
"""Step: refresh the credentials the fast path signs with."""

Steps = Generator["Send | Call | Blocking | str | float", Any, T]


def call_botocore(runtime: Any, params: Mapping[str, Any]) -> Raw:
    """``invoke_endpoint(**params)`` with the answer read: what a :class:`Call` step does."""
    response = runtime.invoke_endpoint(**params)
    return response["Body"].read(), response.get("ContentType") or "application/json"


class Stepper:
    """Walks a generator of steps: :meth:`next` gives the next step (``None`` once it returned, its value
    in :attr:`result`), :meth:`resume` or :meth:`fail` answer the last one."""

    __slots__ = ("_error", "_sent", "_steps", "result")

    def __init__(self, steps: Steps[Any]) -> None:
        self._steps = steps
        self._sent: Any = None
        self._error: BaseException | None = None
        self.result: Any = None

    def next(self) -> Send | Call | Blocking | str | float | None:
        sent, error = self._sent, self._error
        self._sent = self._error = None
        try:
            return self._steps.throw(error) if error is not None else self._steps.send(sent)
        except StopIteration as done:
            self.result = done.value
            return None

    def resume(self, value: Any) -> None:
        self._sent = value

    def fail(self, error: BaseException) -> None:
        self._error = error
