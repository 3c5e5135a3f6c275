"""Seeded, replayable fault injection for robustness tasks.

A :class:`FaultPlan` is pure configuration; :class:`FaultSchedule` is one trial's deterministic
stream of decisions: the n-th tool call of a trial with seed ``s`` always gets the same decision,
so a rollout can be replayed exactly. Faults apply to tool calls only — audit, reset and health
routes are never affected. A 429/500 fault rejects the call before it runs (no state change); a
latency fault delays a call that then runs normally.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FaultKind = Literal["rate_limit", "server_error", "latency"]


class FaultPlan(BaseModel):
    """Probability of a fault per tool call, the mix of kinds, and the latency range."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    rate_limit: float = Field(default=0.35, ge=0.0)
    server_error: float = Field(default=0.35, ge=0.0)
    latency: float = Field(default=0.30, ge=0.0)
    latency_s: tuple[float, float] = (0.05, 0.2)
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    status: int
    delay_s: float = 0.0

    def payload(self) -> dict[str, object]:
        if self.kind == "rate_limit":
            return {
                "error": "Too many requests. Please retry after a short delay.",
                "code": "rate_limit_exceeded",
                "retry_after_seconds": 1,
            }
        return {"error": "An unexpected error occurred. Please try again.", "code": "internal_server_error"}

    def claw_eval_payload(self) -> dict[str, object]:
        """The body Claw-Eval's error injection answers with (its ``mock_services/_base.py``)."""
        if self.kind == "rate_limit":
            return {
                "error": "rate_limit_exceeded",
                "message": "Too many requests. Please retry after a short delay.",
                "retry_after_seconds": 2,
            }
        message = "An unexpected error occurred. Please try again."
        return {"error": "internal_server_error", "message": message}


class FaultSchedule:
    """Deterministic per-trial fault decisions (seeded by plan seed and trial id)."""

    __slots__ = ("_plan", "_rng", "_seed_key")

    def __init__(self, plan: FaultPlan, trial_id: str) -> None:
        self._plan = plan
        self._seed_key = f"{plan.seed}:{trial_id}"
        self._rng = random.Random(self._seed_key)

    @property
    def active(self) -> bool:
        return self._plan.rate > 0

    def reset(self) -> None:
        self._rng = random.Random(self._seed_key)

    def next(self) -> Fault | None:
        plan = self._plan
        if plan.rate <= 0:
            return None
        rng = self._rng
        if rng.random() >= plan.rate:
            return None
        kinds: list[FaultKind] = ["rate_limit", "server_error", "latency"]
        (kind,) = rng.choices(kinds, weights=[plan.rate_limit, plan.server_error, plan.latency])
        if kind == "latency":
            lo, hi = plan.latency_s
            return Fault("latency", 200, rng.uniform(lo, hi))
        return Fault(kind, 429 if kind == "rate_limit" else 500)
