"""Run Claw-Eval graders (child process): jobs as JSON on stdin, results as JSON on stdout.

Two modes: a batch (``python -m coworkenv.claweval._child``: one JSON list of jobs on stdin, the
list of results after a marker line on stdout) and a long-lived server (``... _child --serve``: one
job per stdin line, one result per stdout line, in order, until stdin closes; whatever graders
print goes to stderr, so stdout carries results only).

Contract: each job ``{trace, task_yaml, tasks_dir, judge}`` is graded the way ``claw-eval grade``
grades a trace — ``load_trace``, ``TaskDefinition.from_yaml``, ``get_grader``, ``grade`` (optional
parameters only when the grader takes them), ``compute_task_score``, ``is_pass`` — with Claw-Eval's
package as found on ``sys.path``. Peer graders (``load_peer_grader``) are looked up in the job's
``tasks_dir``. A job that raises yields ``{"status": "error", "reason": ...}``; the others go on.

Judges: ``none`` — the judge is not run: every judge call is refused, answered 0 and counted
(graders' retry sleeps are skipped); ``fixed`` — every judge call answers the same given values
(tests stub both sides alike); ``endpoint`` — Claw-Eval's ``LLMJudge`` on our judge endpoint.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any


class _Judge:
    """A judge that never calls a model: refuses (``none``) or answers fixed values (``fixed``)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from claw_eval.graders.llm_judge import JudgeResult

        self._result = JudgeResult
        self.kind = spec["kind"]
        self.score = float(spec.get("score", 0.0))
        self.text = str(spec.get("text", "{}"))
        self.model_id = f"coworkenv-{self.kind}-judge"
        self.calls = 0
        self.client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=self._create)))

    def _create(self, **_: Any) -> Any:
        self.calls += 1
        if self.kind == "none":
            raise RuntimeError("judge not run (no judge configured)")
        msg = SimpleNamespace(content=self.text)
        return SimpleNamespace(choices=[SimpleNamespace(message=msg)])

    def _answer(self, *_: Any, **__: Any) -> Any:
        self.calls += 1
        reason = "judge not run" if self.kind == "none" else "fixed judge"
        return self._result(score=self.score if self.kind == "fixed" else 0.0, reasoning=reason)

    evaluate = _answer
    evaluate_actions = _answer
    evaluate_visual = _answer

    def get_call_log(self) -> list[dict[str, Any]]:
        return []

    def reset_call_log(self) -> None:
        return None


def _judge(spec: dict[str, Any]) -> Any:
    if spec.get("kind") == "endpoint":
        from claw_eval.graders.llm_judge import LLMJudge

        return LLMJudge(
            model_id=spec["model"], api_key=spec.get("api_key") or None, base_url=spec["base_url"]
        )
    return _Judge(spec)


def grade_one(job: dict[str, Any]) -> dict[str, Any]:
    from claw_eval.graders import base
    from claw_eval.graders.registry import get_grader
    from claw_eval.models.scoring import compute_task_score, is_pass
    from claw_eval.models.task import TaskDefinition
    from claw_eval.trace.reader import load_trace

    tasks_dir = Path(job["tasks_dir"])
    base.load_peer_grader.__defaults__ = (tasks_dir,)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(e, ensure_ascii=False) for e in job["trace"]) + "\n")
        trace_path = fh.name
    try:
        _start, messages, dispatches, media, _end, audit = load_trace(trace_path)
    finally:
        Path(trace_path).unlink(missing_ok=True)
    task_yaml = Path(job["task_yaml"])
    task = TaskDefinition.from_yaml(task_yaml)
    grader = get_grader(task.task_id, tasks_dir=tasks_dir, task_dir=task_yaml.parent)
    judge = _judge(job["judge"])
    params = inspect.signature(grader.grade).parameters
    kwargs: dict[str, Any] = {"audit_data": audit, "judge": judge}
    if "media_events" in params:
        kwargs["media_events"] = media
    scores = grader.grade(messages, dispatches, task, **kwargs)
    score = compute_task_score(scores)
    calls = judge.calls if isinstance(judge, _Judge) else len(judge.get_call_log())
    return {
        "status": "graded",
        "scores": scores.model_dump(),
        "task_score": score,
        "passed": is_pass(score),
        "judge_calls": calls,
    }


def grade_safely(job: dict[str, Any]) -> dict[str, Any]:
    """:func:`grade_one`, with a raising grader (or a bad job) as an ``error`` result."""
    real_sleep = time.sleep
    offline = job.get("judge", {}).get("kind") != "endpoint"
    time.sleep = (lambda _s: None) if offline else real_sleep
    try:
        return grade_one(job)
    except Exception as exc:  # reported per job; the others still grade
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"status": "error", "reason": f"grader raised {last}"}
    finally:
        time.sleep = real_sleep


def serve() -> None:
    """One job per stdin line → one result per stdout line, until stdin closes."""
    out = sys.stdout
    sys.stdout = sys.stderr  # graders' prints must not interleave with results
    import claw_eval.graders.registry  # noqa: F401 - warm the imports before the first job

    out.write(json.dumps({"status": "ready"}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except json.JSONDecodeError as exc:
            result: dict[str, Any] = {"status": "error", "reason": f"unreadable job: {exc}"}
        else:
            result = grade_safely(job)
        out.write(json.dumps(result) + "\n")
        out.flush()


def main() -> None:
    if "--serve" in sys.argv[1:]:
        serve()
        return
    jobs = json.load(sys.stdin)
    out = [grade_safely(job) for job in jobs]
    sys.stdout.write("\n@@COWORKENV-RESULTS@@\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
