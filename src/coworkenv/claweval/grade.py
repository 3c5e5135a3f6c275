"""Grade imported Claw-Eval tasks with their own ``grader.py``, through Claw-Eval's package.

Contract: :func:`grade_records` converts each rollout record to Claw-Eval's trace format
(:mod:`coworkenv.claweval.trace`) and grades it in one child process
(:mod:`coworkenv.claweval._child`) with Claw-Eval's package — installed, or from a checkout's
``src/`` (``checkout``, ``$COWORKENV_CLAW_EVAL_CHECKOUT`` or ``../shared/claw-eval/upstream``). The
judge is ours (:func:`judge_settings`: ``COWORKENV_JUDGE_*``), passed to Claw-Eval's ``LLMJudge``;
with none, judge calls are refused and counted (``judge="not_run"``) and the deterministic parts
still score. Per task, never a crash and never a 0 for our own failure: no ``grader.py`` or a
grader that raises is ``status="error"`` with the reason; without Claw-Eval's package the result
is ``status="not_claw_eval"``: the caller grades it our way and says that score is not Claw-Eval's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from coworkenv.claweval.trace import to_trace_events
from coworkenv.claweval.upstream import find_checkout
from coworkenv.errors import CoworkError
from coworkenv.rollout.record import RolloutRecord
from coworkenv.services.trial import LoadedTask

MARKER = "@@COWORKENV-RESULTS@@"
JudgeMode = Literal["run", "not_run", "fixed"]


class ClawGrade(BaseModel):
    """One rollout graded by its task's own Claw-Eval grader (or why not)."""

    model_config = ConfigDict(frozen=True)

    rollout_id: str
    task_id: str
    status: Literal["graded", "error", "not_claw_eval"]
    reason: str = ""
    completion: float | None = None
    robustness: float | None = None
    communication: float | None = None
    safety: float | None = None
    task_score: float | None = None
    passed: bool | None = None
    judge: JudgeMode = "not_run"
    judge_calls: int = 0


def judge_settings() -> dict[str, Any]:
    """Our judge endpoint settings (``COWORKENV_JUDGE_BASE_URL``/``_MODEL``/``_API_KEY``) as a job's
    judge, or ``{"kind": "none"}``."""
    from coworkenv.grading.judge import judge_from_env

    j = judge_from_env()
    if j is None:
        return {"kind": "none"}
    cfg = j.config
    key = cfg.api_key or os.environ.get(cfg.api_key_env, "")
    return {"kind": "endpoint", "base_url": cfg.base_url, "model": cfg.model, "api_key": key}


def package_path(checkout: Path | None = None) -> str | None:
    """Where Claw-Eval's package comes from: ``""`` when installed, a checkout's ``src`` dir, or None."""
    src = (checkout or find_checkout() or Path("/nonexistent")) / "src"
    if checkout is not None and (src / "claw_eval").is_dir():
        return str(src)
    if importlib.util.find_spec("claw_eval") is not None:
        return ""
    return str(src) if (src / "claw_eval").is_dir() else None


def find_task_dir(imported_from: str, task_id: str, checkout: Path | None) -> Path:
    """The task's Claw-Eval directory: where it was imported from, else ``tasks/<id>`` of the
    checkout (or beside it, as in ``../shared/claw-eval``). The first candidate when none has it."""
    root = checkout or find_checkout()
    candidates = [Path(imported_from)]
    if root is not None:
        candidates += [root / "tasks" / task_id, root.parent / "tasks" / task_id]
    for c in candidates:
        if (c / "grader.py").is_file():
            return c
    return candidates[0]


def judge_mode(judge: dict[str, Any]) -> JudgeMode:
    """How a job's judge answers: ``run`` (our endpoint), ``fixed`` (tests), else ``not_run``."""
    kind = judge.get("kind", "")
    return "run" if kind == "endpoint" else "fixed" if kind == "fixed" else "not_run"


def prepare(
    task: LoadedTask,
    record: RolloutRecord,
    *,
    where: str | None,
    checkout: Path | None,
    judge: dict[str, Any],
) -> dict[str, Any] | ClawGrade:
    """The child's job for (task, record), or the result already known without grading: not an
    imported task / no ``grader.py`` (``error``), no Claw-Eval package (``not_claw_eval``)."""
    origin = task.spec.claw_eval
    base = {"rollout_id": record.rollout_id, "task_id": task.spec.id}
    if origin is None or not origin.task_dir:
        why = "not an imported Claw-Eval task (no claw_eval origin)"
        return ClawGrade(**base, status="error", reason=why)
    task_dir = find_task_dir(origin.task_dir, task.spec.id, checkout)
    if not (task_dir / "grader.py").is_file():
        return ClawGrade(**base, status="error", reason=f"no grader.py in {task_dir}")
    if where is None:
        return ClawGrade(
            **base,
            status="not_claw_eval",
            reason="Claw-Eval's package not found (install it or pass a checkout): graded our way",
        )
    return {
        "trace": to_trace_events(record, task),
        "task_yaml": str(task_dir / "task.yaml"),
        "tasks_dir": str(task_dir.parent),
        "judge": judge,
    }


def from_result(task: LoadedTask, record: RolloutRecord, raw: dict[str, Any], mode: JudgeMode) -> ClawGrade:
    """The child's answer for (task, record) as a :class:`ClawGrade`."""
    base = {"rollout_id": record.rollout_id, "task_id": task.spec.id, "judge": mode}
    if raw.get("status") != "graded":
        return ClawGrade(**base, status="error", reason=str(raw.get("reason", "grader failed")))
    s = raw["scores"]
    return ClawGrade(
        **base,
        status="graded",
        completion=s["completion"],
        robustness=s["robustness"],
        communication=s["communication"],
        safety=s["safety"],
        task_score=raw["task_score"],
        passed=raw["passed"],
        judge_calls=int(raw.get("judge_calls", 0)),
    )


def recorded(record: RolloutRecord) -> ClawGrade | None:
    """The Claw-Eval grade a rollout already got when it ran (its reward; see
    :mod:`coworkenv.rollout.reward`), a ``grader_error`` label as an ``error``, else None (graded
    our way, or recorded before rollouts were graded by Claw-Eval: grade it now)."""
    base = {"rollout_id": record.rollout_id, "task_id": record.task_id}
    if record.failure is not None and record.failure.kind == "grader_error":
        return ClawGrade(**base, status="error", reason=record.failure.detail)
    by, g = record.graded_by, record.grade
    if record.status != "ok" or by is None or by.grader != "claw_eval" or g is None:
        return None
    return ClawGrade(
        **base,
        status="graded",
        completion=g.get("completion"),
        robustness=g.get("robustness"),
        communication=g.get("communication"),
        safety=g.get("safety"),
        task_score=g.get("reward"),
        passed=g.get("passed"),
        judge="not_run" if by.judge == "unused" else by.judge,
        judge_calls=by.judge_calls,
    )


def grade_records(
    items: Sequence[tuple[LoadedTask, RolloutRecord]],
    *,
    checkout: Path | None = None,
    judge: dict[str, Any] | None = None,
    timeout_s: float = 1800.0,
) -> list[ClawGrade]:
    """Grade each (task, record) with the task's ``grader.py``; one result per item, in order."""
    judge = judge if judge is not None else judge_settings()
    where = package_path(checkout)
    results: list[ClawGrade | None] = [None] * len(items)
    jobs: list[dict[str, Any]] = []
    slots: list[int] = []
    for i, (task, record) in enumerate(items):
        job = prepare(task, record, where=where, checkout=checkout, judge=judge)
        if isinstance(job, ClawGrade):
            results[i] = job
            continue
        jobs.append(job)
        slots.append(i)
    if jobs:
        for i, raw in zip(slots, _run_child(jobs, where or "", timeout_s), strict=True):
            results[i] = from_result(*items[i], raw, judge_mode(judge))
    return [r for r in results if r is not None]


def child_env(src: str) -> dict[str, str]:
    """The environment of a grader child: ours, with the checkout's ``src`` first on its path."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.setdefault("OPENAI_API_KEY", "unused")
    return env


def grade_traces(
    jobs: list[dict[str, Any]], *, checkout: Path | None = None, timeout_s: float = 1800.0
) -> list[dict[str, Any]]:
    """Grade prepared jobs (``{trace, task_yaml, tasks_dir, judge}``; see :mod:`._child`) in one
    child process; raises :class:`CoworkError` when Claw-Eval's package cannot be found."""
    where = package_path(checkout)
    if where is None:
        raise CoworkError("Claw-Eval's package not found: install it or give a checkout (its src/claw_eval)")
    return _run_child(jobs, where, timeout_s) if jobs else []


def _run_child(jobs: list[dict[str, Any]], src: str, timeout_s: float) -> list[dict[str, Any]]:
    env = child_env(src)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "coworkenv.claweval._child"],
            input=json.dumps(jobs),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [{"status": "error", "reason": f"graders timed out after {timeout_s:.0f}s"}] * len(jobs)
    _, marker, tail = proc.stdout.rpartition(MARKER)
    if not marker:
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"status": "error", "reason": f"grader process failed ({proc.returncode}): {why}"}] * len(
            jobs
        )
    out: list[dict[str, Any]] = json.loads(tail)
    return out
