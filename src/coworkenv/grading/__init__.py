"""Grading: checks over audit evidence, the grader, the consistency gate, reference replay, judge."""

from coworkenv.grading.gate import GateReport, consistency_gate
from coworkenv.grading.grader import CheckResult, Episode, GradeResult, Judge, grade
from coworkenv.grading.replay import ReplayResult, run_reference, run_steps

__all__ = [
    "CheckResult",
    "Episode",
    "GateReport",
    "GradeResult",
    "Judge",
    "ReplayResult",
    "consistency_gate",
    "grade",
    "run_reference",
    "run_steps",
]
