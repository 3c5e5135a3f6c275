"""The error model.

One base, :class:`CoworkError`; each subclass is named after the boundary that failed.

* :class:`SpecError` — a task, plan or config file is malformed. It names the file, the field
  path and what was expected, so the message alone tells the user how to fix it.
* :class:`ToolError` — a tool call was rejected (bad arguments, unknown id, tool not exposed).
  It goes back to the agent as a structured tool error; it never crashes the host and a call
  that raised it changed no state.

Everything else that escapes is a bug in coworkenv, not in the user's input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class CoworkError(Exception):
    """Base of every error coworkenv raises on purpose."""


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a file: where it is (dotted field path) and what was expected."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field or '<root>'}: {self.message}"


class SpecError(CoworkError):
    """A task/plan/config file is invalid; nothing from it was loaded."""

    def __init__(self, source: str | Path, issues: list[SpecIssue]) -> None:
        self.source = str(source)
        self.issues = issues
        lines = "\n".join(f"  - {i}" for i in issues)
        super().__init__(f"{self.source}: {len(issues)} problem(s)\n{lines}")

    @classmethod
    def single(cls, source: str | Path, field: str, message: str) -> SpecError:
        return cls(source, [SpecIssue(field, message)])


@dataclass
class ToolError(CoworkError):
    """A rejected tool call. ``code`` is stable and machine-readable; ``message`` is for the agent.

    ``status`` is the HTTP status the HTTP face answers with.
    """

    code: str
    message: str
    status: int = 400
    details: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    """A body to answer with instead of ours (a compatibility profile's own error shape)."""

    def __post_init__(self) -> None:
        super().__init__(f"{self.code}: {self.message}")

    def payload(self) -> dict[str, Any]:
        """The JSON body an agent sees. ``error`` is a string, as in Claw-Eval's services."""
        if self.body is not None:
            return dict(self.body)
        body: dict[str, Any] = {"error": self.message, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def not_found(kind: str, ident: object) -> ToolError:
    return ToolError("not_found", f"{kind} {ident} not found", status=404)


def invalid(message: str, **details: Any) -> ToolError:
    return ToolError("invalid_arguments", message, status=422, details=details)
