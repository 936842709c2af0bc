"""What the embedded stack's route needs of a Triton server: :class:`TritonLike`.

:class:`~mme_triton.local.triton.server.TritonServer` is the one the stack runs; tests may pass any object
that behaves the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mme_triton.local.triton.frontend import FrontEnd
    from mme_triton.local.triton.netns import Connector
    from mme_triton.local.triton.procfs import StubProcess

__all__ = ["CopyFactory", "TritonFactory", "TritonLike"]


class TritonLike(Protocol):
    """What the runtime needs of a :class:`~mme_triton.local.triton.server.TritonServer`."""

    @property
    def port(self) -> int | None: ...
    @property
    def connector(self) -> Connector: ...
    @property
    def front_end(self) -> FrontEnd: ...
    @property
    def address(self) -> str: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def pid(self) -> int | None: ...
    def start(self) -> None: ...
    def stop(self, timeout: float = ...) -> None: ...
    def load(self, model_hash: str, model_dir: Path, target_model: str, *, timeout: float = ...) -> None: ...
    def unload(
        self, model_hash: str, *, target_model: str | None = ..., timeout: float = ...
    ) -> float | None: ...
    def invoke(
        self, model_hash: str, target_model: str, body: bytes, content_type: str, *, timeout: float = ...
    ) -> tuple[int, dict[str, str], bytes]: ...
    def invocations(
        self, body: bytes, content_type: str, *, timeout: float = ...
    ) -> tuple[int, dict[str, str], bytes]: ...
    def model_processes(self) -> list[StubProcess]: ...


TritonFactory = Callable[[str, Mapping[str, str], Path], TritonLike]
"""(endpoint name, the model's Environment, a scratch directory) -> an unstarted Triton server."""


class CopyFactory(Protocol):
    """Builds the (unstarted) single-model Triton server of a copy of an inference component."""

    def __call__(
        self,
        endpoint_name: str,
        environment: Mapping[str, str],
        workdir: Path,
        model_repository: Path | None = None,
        startup_s: float | None = None,
    ) -> TritonLike: ...
