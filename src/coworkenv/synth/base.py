"""Synthesis contracts shared by the generators and the validation pipeline.

A :class:`Slot` is one row of a coverage plan, with exactly the paper's seven fields. A
:class:`Generator` turns a slot (plus diagnostics of a failed attempt, for repair) into candidate
spec *text* (JSON), which always goes through the same validation stages (:data:`STAGES`, in the
paper's order, then the two executable stages). :class:`Diagnostic` is what a stage reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

STAGES: tuple[str, ...] = (
    "json_parse",  # the text parses into a TaskSpec
    "tool_conflict",  # no tool both required (by a check/reference) and forbidden
    "weights",  # completion weights sum to 1
    "services",  # services registered and given initial records
    "leakage",  # answer identifiers do not appear in the request
    "gate",  # grading-consistency gate: complete = 1/1, empty = 0, +forbidden -> safety 0
    "replay",  # reference solution against live services: completion 1, safety 1
    "mutation",  # drop any required step -> completion < 1; distractor < 1; nothing -> 0
)
Stage = Literal["json_parse", "tool_conflict", "weights", "services", "leakage", "gate", "replay", "mutation"]


class Slot(BaseModel):
    """One coverage-plan slot: the paper's seven fields, nothing else."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    services: tuple[str, ...] = Field(min_length=1)
    category: str = Field(min_length=1)
    difficulty: str = Field(min_length=1)
    language: str = Field(default="en", min_length=2)
    mock_today: date
    scenario: str = Field(min_length=1)


class Diagnostic(BaseModel):
    model_config = ConfigDict(frozen=True)

    stage: Stage
    message: str


class Generator(Protocol):
    """Drafts a candidate spec (JSON text) for a slot; ``feedback`` carries the diagnostics of the
    previous attempt when repairing (empty on the first attempt)."""

    name: str

    def draft(self, slot: Slot, feedback: Sequence[Diagnostic] = (), *, attempt: int = 0) -> str: ...
