"""What validation reports: one :class:`Problem` per finding, errors and warnings alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Problem", "Severity"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding about a model directory.

    ``code`` is stable (tests, CI filters and docs/validation.md rely on it); ``message`` says what to
    do about it; ``path`` is the file or directory concerned; ``line``/``column`` (1-based) point into
    config.pbtxt where the finding comes from parsing it.
    """

    severity: Severity
    code: str
    message: str
    path: str
    line: int | None = None
    column: int | None = None

    @property
    def is_error(self) -> bool:
        """``True`` for an error (packaging refuses the model), ``False`` for a warning."""
        return self.severity == "error"

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.severity} {self.code}: {self.message}"
