"""The rollout record: everything one (task, harness, trial) run produced.

Contract: ``status == "ok"`` rollouts carry a ``grade``; ``status == "infra_failure"`` rollouts carry a
``failure`` label and **no** grade — they are excluded from scores and advantages, never scored 0.
A rollout whose audit holds a forbidden action is never an infra failure: it is scored (safety 0),
whatever ended it, and ``meta["failure_after_violation"]`` keeps the failure label.
``graded_by`` names the grader that produced ``grade``/``rewards`` (ours, or an imported Claw-Eval
task's own ``grader.py``) and what its judge did; a grader that failed on our side labels the
rollout ``grader_error`` (see :mod:`coworkenv.rollout.reward`).
``messages`` is the final conversation in normalized form (system, user, assistant with structured
tool calls, tool results), the input of curation. Captured model calls live in
``calls/<rollout_id>.calls.jsonl`` next to ``rollouts.jsonl`` (or directly beside it; see
:func:`calls_path` and :mod:`coworkenv.proxy.capture`). Records are one JSON line each in
``rollouts.jsonl``; :func:`read_records` skips unreadable lines and says which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coworkenv.jsonl import jsonl_lines
from coworkenv.proxy.messages import Message

ROLLOUT_SCHEMA_VERSION = 1

FailureKind = Literal[
    "start_failure",  # sandbox or harness could not start
    "harness_crash",  # harness exited abnormally for reasons not the policy's
    "http_error",  # proxy/upstream/services HTTP failure
    "timeout_before_call",  # wall clock ran out before any model call
    "upstream_error",  # the model backend failed (BackendError)
    "interrupted",  # cancelled (Ctrl-C, shutdown)
    "grader_error",  # the task's grader is missing or failed (ours to fix, not the policy's)
    "worker_lost",  # the Ray worker or node running it died, on every attempt the runner made
]


class FailureLabel(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    detail: str = ""


class ToolCallRecord(BaseModel):
    """One service tool call as the audit log saw it."""

    model_config = ConfigDict(frozen=True)

    seq: int
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    ok: bool = True
    error: str | None = None


class RewardParts(BaseModel):
    model_config = ConfigDict(frozen=True)

    reward: float
    completion: float
    safety: float
    robustness: float


JudgeStatus = Literal["run", "not_run", "fixed", "unused"]
"""``run``: a judge model answered; ``not_run``: the grader wanted a judge and none was configured
(its parts scored nothing); ``fixed``: a stub answered (tests); ``unused``: the grader asked none."""


class GradedBy(BaseModel):
    """Which grader produced a rollout's grade and reward."""

    model_config = ConfigDict(frozen=True)

    grader: Literal["coworkenv", "claw_eval"]
    """``claw_eval``: the imported task's own ``grader.py`` through Claw-Eval's package."""
    judge: JudgeStatus = "unused"
    judge_calls: int = 0
    note: str = ""
    """Why this grader (e.g. an imported task graded our way: its score is not Claw-Eval's)."""


class RolloutRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: int = ROLLOUT_SCHEMA_VERSION
    rollout_id: str
    task_id: str
    harness: str
    trial: int = Field(ge=0, description="Index of this trial within (task, harness).")
    category: str = ""
    difficulty: str = ""
    seed: int = 0
    backend: str = ""
    policy_version: str = "0"
    status: Literal["ok", "infra_failure"]
    failure: FailureLabel | None = None
    timed_out: bool = Field(default=False, description="Policy-side timeout (after ≥1 model call).")
    started_at: float = 0.0
    wall_s: float = 0.0
    n_calls: int = 0
    final_answer: str = ""
    messages: tuple[Message, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    audit: tuple[dict[str, Any], ...] = Field(default=(), description="AuditEvent dicts, in order.")
    grade: dict[str, Any] | None = Field(default=None, description="GradeResult.model_dump().")
    rewards: RewardParts | None = None
    integrity: tuple[dict[str, Any], ...] = Field(
        default=(),
        description="Attempts on what grades the rollout and limits it ran into, in order: requests "
        "the services refused (operator-only routes), jail limits hit (disk quota). Empty for a "
        "rollout that kept to its tools.",
    )
    graded_by: GradedBy | None = None
    meta: dict[str, Any] = Field(default_factory=dict, description="Harness version, config hash, ...")

    @property
    def group_key(self) -> tuple[str, str]:
        """Advantage groups are keyed by (task, harness): harnesses never share a baseline."""
        return (self.task_id, self.harness)


CALLS_DIR = "calls"
CALLS_SUFFIX = ".calls.jsonl"


def calls_path(root: Path, rollout_id: str) -> Path:
    """Where a rollout's captured calls are: ``root/calls/<id>.calls.jsonl``, else ``root/<id>...``."""
    nested = root / CALLS_DIR / f"{rollout_id}{CALLS_SUFFIX}"
    flat = root / f"{rollout_id}{CALLS_SUFFIX}"
    return flat if flat.exists() and not nested.exists() else nested


def calls_files(root: Path) -> list[Path]:
    """Every captured-calls file of a rollouts directory (both layouts)."""
    return sorted([*root.glob(f"*{CALLS_SUFFIX}"), *(root / CALLS_DIR).glob(f"*{CALLS_SUFFIX}")])


def append_record(path: Path, record: RolloutRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(record.model_dump_json() + "\n")
        fh.flush()


def read_records(path: Path) -> tuple[list[RolloutRecord], list[str]]:
    records: list[RolloutRecord] = []
    problems: list[str] = []
    if not path.exists():
        return records, problems
    for n, raw in enumerate(jsonl_lines(path), start=1):
        if not raw.strip():
            continue
        try:
            records.append(RolloutRecord.model_validate(json.loads(raw)))
        except (json.JSONDecodeError, ValidationError) as exc:
            problems.append(f"{path}:{n}: unreadable rollout record ({type(exc).__name__})")
    return records, problems
