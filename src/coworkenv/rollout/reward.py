"""Which grader rewards a rollout: an imported Claw-Eval task's own ``grader.py``, else ours.

Contract of :func:`grade_rollout` (one finished, ungraded ``ok`` record → the fields to set on it):

* a task imported from Claw-Eval (``TaskSpec.claw_eval`` set), graded with a :class:`GraderPool`
  whose Claw-Eval package was found → Claw-Eval's grade: reward = its ``task_score``, completion,
  safety and robustness its dimensions; ``graded_by`` = ``claw_eval`` with the judge status
  (``not_run`` when the grader asked a judge and none is configured: those parts scored nothing,
  the deterministic parts still score);
* the same task without Claw-Eval's package (or with no pool) → our grader, ``graded_by`` =
  ``coworkenv`` with a note that the score is not Claw-Eval's;
* its grader missing or failing (raises, its process dies or times out) → a ``grader_error``
  failure label and no grade or reward: our failure, never a 0 reward;
* any other task → our grader (``graded_by`` = ``coworkenv``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coworkenv.claweval.worker import GraderPool
from coworkenv.grading.grader import Episode, GradeResult, Judge, grade
from coworkenv.rollout.record import FailureLabel, GradedBy, JudgeStatus, RewardParts, RolloutRecord
from coworkenv.services.trial import LoadedTask

NOT_CLAW_EVAL = "imported Claw-Eval task graded our way, NOT by its grader.py (Claw-Eval's package not found)"


@dataclass(frozen=True)
class RolloutGrade:
    """What grading decided: a grade and reward, or a failure label; and by whom."""

    graded_by: GradedBy
    grade: dict[str, Any] | None = None
    rewards: RewardParts | None = None
    failure: FailureLabel | None = None

    def update(self) -> dict[str, Any]:
        """The record fields to set (``model_copy(update=...)``)."""
        out: dict[str, Any] = {"graded_by": self.graded_by, "grade": self.grade, "rewards": self.rewards}
        if self.failure is not None:
            out |= {"status": "infra_failure", "failure": self.failure}
        return out


def grade_rollout(
    task: LoadedTask,
    record: RolloutRecord,
    episode: Episode,
    judge: Judge | None,
    graders: GraderPool | None,
) -> RolloutGrade:
    """Grade one finished rollout (blocking: call it in a thread from async code)."""
    if task.spec.claw_eval is not None and graders is not None and graders.available:
        return _claw(task, record, graders)
    note = NOT_CLAW_EVAL if task.spec.claw_eval is not None else ""
    return ours(grade(task.spec, episode, judge), note)


def ours(graded: GradeResult, note: str = "") -> RolloutGrade:
    """Our grader's result as a rollout grade."""
    judged = [c.status for c in graded.checks if c.kind == "llm_judge"]
    status: JudgeStatus = "not_run" if "not_run" in judged else "run" if judged else "unused"
    rewards = None
    if graded.reward is not None and graded.completion is not None:
        rewards = RewardParts(
            reward=graded.reward,
            completion=graded.completion,
            safety=graded.safety,
            robustness=graded.robustness,
        )
    notes = [*graded.notes, note] if note else graded.notes
    return RolloutGrade(
        graded_by=GradedBy(grader="coworkenv", judge=status, judge_calls=len(judged), note=note),
        grade=graded.model_copy(update={"notes": notes}).model_dump(mode="json"),
        rewards=rewards,
    )


def _claw(task: LoadedTask, record: RolloutRecord, graders: GraderPool) -> RolloutGrade:
    g = graders.grade(task, record)
    if g.status != "graded" or g.task_score is None:
        return RolloutGrade(
            graded_by=GradedBy(grader="claw_eval", note=g.reason),
            failure=FailureLabel(kind="grader_error", detail=f"Claw-Eval grader: {g.reason}"[:500]),
        )
    # a judge model's calls are counted only where Claw-Eval logs them: with one, say ``run``
    judge: JudgeStatus = g.judge if g.judge == "run" or g.judge_calls else "unused"
    completion, safety, robustness = g.completion or 0.0, g.safety or 0.0, g.robustness or 0.0
    note = "graded by the task's own grader.py (Claw-Eval's package)"
    if judge == "not_run":
        note += f"; {g.judge_calls} judge call(s) not run (no judge configured): those parts scored 0"
    grade_dict = {
        "task_id": task.spec.id,
        "completion": completion,
        "safety": safety,
        "robustness": robustness,
        "communication": g.communication,
        "reward": g.task_score,
        "passed": g.passed,
        "checks": [],
        "notes": [note],
    }
    return RolloutGrade(
        graded_by=GradedBy(grader="claw_eval", judge=judge, judge_calls=g.judge_calls, note=note),
        grade=grade_dict,
        rewards=RewardParts(reward=g.task_score, completion=completion, safety=safety, robustness=robustness),
    )
