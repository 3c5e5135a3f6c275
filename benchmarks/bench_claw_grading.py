"""Benchmark: the per-rollout cost of rewarding an imported Claw-Eval task by its own grader.py.

Contract: one scripted run of ``--task`` (default ``T002_email_triage``: list the inbox, answer) on
our Claw-Eval-profile services, graded ``--n`` times three ways, no judge (its calls are refused
and counted, so the figures are the grading machinery, not a model):

* ``ours`` — our grader in-process (:func:`coworkenv.grading.grader.grade`);
* ``warm child`` — :class:`coworkenv.claweval.worker.GraderPool`, the path rollouts take (one child
  started once; its start is reported apart);
* ``child per rollout`` — :func:`coworkenv.claweval.grade.grade_records` on one record, a fresh
  Python and Claw-Eval import each time (the eval-time batch path used per rollout).

Prints median and p90 milliseconds per rollout. ``python benchmarks/bench_claw_grading.py [--n 20]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from coworkenv.claweval.grade import grade_records
from coworkenv.claweval.worker import GraderPool
from coworkenv.grading.grader import Episode, grade
from coworkenv.importers.claw_eval import import_task
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.record import RolloutRecord
from coworkenv.services.trial import Host, LoadedTask

TASKS = Path(__file__).resolve().parents[2] / "shared" / "claw-eval" / "tasks"


def _run(task_dir: Path) -> tuple[LoadedTask, RolloutRecord, Episode]:
    spec, _ = import_task(task_dir)
    host = Host()
    task = host.add_task(spec)
    trial = host.open_trial(spec.id, "bench")
    res = trial.call("gmail_list_messages", {})
    answer = "needs reply: msg_001, msg_002. FYI: msg_003. spam: msg_004."
    call = ToolCall(id="c0", name="gmail_list_messages", arguments="{}")
    msgs = (
        Message(role="user", content=spec.request),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", content=json.dumps(res.body), tool_call_id="c0"),
        Message(role="assistant", content=answer),
    )
    record = RolloutRecord(
        rollout_id="bench",
        task_id=spec.id,
        harness="script",
        trial=0,
        status="ok",
        messages=msgs,
        final_answer=answer,
        audit=tuple(e.to_dict() for e in trial.audit),
    )
    episode = Episode(events=list(trial.audit), final_answer=answer, state=trial.snapshot())
    return task, record, episode


def _time(n: int, fn: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - t0))
    return out


def _row(name: str, ms: list[float]) -> str:
    p90 = sorted(ms)[max(0, int(0.9 * len(ms)) - 1)]
    return f"{name:<20} {statistics.median(ms):9.1f} {p90:9.1f}   (n={len(ms)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="T002_email_triage")
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    task, record, episode = _run(TASKS / args.task)
    none = {"kind": "none"}
    pool = GraderPool(size=1, judge=none)
    try:
        t0 = time.perf_counter()
        first = pool.grade(task, record)
        start_ms = 1000 * (time.perf_counter() - t0)
        assert first.status == "graded", first.reason
        warm = _time(args.n, lambda: pool.grade(task, record))
    finally:
        pool.close()
    ours = _time(args.n, lambda: grade(task.spec, episode))
    cold = _time(max(3, args.n // 5), lambda: grade_records([(task, record)], judge=none))
    print(f"{args.task}: Claw-Eval reward {first.task_score} ({first.judge_calls} judge calls refused)")
    print(f"{'path':<20} {'median ms':>9} {'p90 ms':>9}")
    print(_row("ours (in-process)", ours))
    print(_row("warm child", warm))
    print(_row("child per rollout", cold))
    print(f"warm child start (once per run, incl. first grade): {start_ms:.0f} ms")


if __name__ == "__main__":
    main()
