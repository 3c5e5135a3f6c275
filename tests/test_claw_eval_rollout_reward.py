"""Rollouts of imported Claw-Eval tasks are rewarded by the task's own grader.py (issue 15).

Live against ``../shared/claw-eval`` (tasks, their graders, Claw-Eval's package); under
``CI=true`` a missing checkout or package fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from coworkenv.claweval import grade as grade_mod
from coworkenv.claweval import worker
from coworkenv.claweval.grade import grade_records, package_path
from coworkenv.claweval.worker import GraderPool
from coworkenv.eval.cli import claw_eval_metrics
from coworkenv.eval.metrics import summarize
from coworkenv.importers.claw_eval import import_task
from coworkenv.proxy.backends.scripted import ScriptedBackend
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.record import RolloutRecord
from coworkenv.rollout.runner import run_rollouts
from coworkenv.services.trial import Host, LoadedTask, load_task
from coworkenv.spec import TaskSpec

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT.parent / "shared" / "claw-eval" / "tasks"
TRIAGE = "T002_email_triage"
ANSWER = "needs reply: msg_001, msg_002. FYI: msg_003. spam: msg_004."
STEPS = [("gmail_list_messages", {})]


@pytest.fixture(autouse=True)
def _no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COWORKENV_JUDGE_BASE_URL", "COWORKENV_JUDGE_MODEL", "COWORKENV_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COWORKENV_NO_PROGRESS", "1")


def _require() -> Path:
    if not (TASKS / TRIAGE).is_dir() or package_path() is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "Claw-Eval tasks or package missing (../shared/claw-eval; scripts/install_claw_eval.sh)"
            )
        pytest.skip("Claw-Eval tasks or package not found")
    return TASKS


def _spec(task_dir: Path) -> TaskSpec:
    spec, _ = import_task(task_dir)
    return spec


def _backend(_spec: TaskSpec) -> ScriptedBackend:
    return ScriptedBackend.from_steps(STEPS, ANSWER)


def _copy_with_grader(tmp_path: Path, grader: str) -> Path:
    """T002 in a directory of its own whose grader.py is ``grader``."""
    task_dir = tmp_path / "tasks" / TRIAGE
    shutil.copytree(TASKS / TRIAGE, task_dir)
    (task_dir / "grader.py").write_text(grader, encoding="utf-8")
    return task_dir


def _record(task: LoadedTask, rid: str) -> RolloutRecord:
    """The scripted run, in-process on our services (for the pool tests)."""
    host = Host()
    host.tasks[task.spec.id] = task
    trial = host.open_trial(task.spec.id, rid)
    msgs = [Message(role="user", content=task.spec.request)]
    for i, (tool, args) in enumerate(STEPS):
        res = trial.call(tool, args)
        call = ToolCall(id=f"c{i}", name=tool, arguments=json.dumps(args))
        msgs += [
            Message(role="assistant", tool_calls=(call,)),
            Message(role="tool", content=json.dumps(res.body), tool_call_id=f"c{i}"),
        ]
    msgs.append(Message(role="assistant", content=ANSWER))
    return RolloutRecord(
        rollout_id=rid,
        task_id=task.spec.id,
        harness="script",
        status="ok",
        trial=0,
        messages=tuple(msgs),
        final_answer=ANSWER,
        audit=tuple(e.to_dict() for e in trial.audit),
    )


# ---------------------------------------------------------------- the reward inside rollouts


def test_the_rollout_reward_is_claw_evals_not_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same scripted trajectory: Claw-Eval's grader and ours disagree; the reward is Claw-Eval's."""
    tasks = _require()
    spec = _spec(tasks / TRIAGE)
    (theirs,) = run_rollouts([spec], ["loop"], 1, _backend, tmp_path / "claw", 1).records
    assert theirs.status == "ok", theirs.failure
    assert theirs.graded_by is not None
    assert theirs.graded_by.grader == "claw_eval"
    assert theirs.graded_by.judge == "not_run"  # its grader asked a judge; none is configured
    assert theirs.graded_by.judge_calls > 0
    assert theirs.rewards is not None
    assert theirs.grade is not None
    assert theirs.grade["reward"] == theirs.rewards.reward  # curation and reports read the same
    # graded again, independently, at eval time's path: the same score
    (again,) = grade_records([(load_task(spec), theirs)], judge={"kind": "none"})
    assert again.status == "graded", again.reason
    assert theirs.rewards.reward == pytest.approx(again.task_score)
    assert (theirs.rewards.completion, theirs.rewards.safety) == (again.completion, again.safety)

    monkeypatch.setattr(worker, "package_path", lambda checkout=None: None)
    (ours,) = run_rollouts([spec], ["loop"], 1, _backend, tmp_path / "ours", 1).records
    assert ours.status == "ok", ours.failure
    assert ours.graded_by is not None
    assert ours.graded_by.grader == "coworkenv"
    assert "NOT by its grader.py" in ours.graded_by.note
    assert ours.grade is not None
    assert any("NOT by its grader.py" in n for n in ours.grade["notes"])
    assert ours.rewards is not None
    # the differential that makes this test able to fail: the two graders disagree on this run
    assert abs(ours.rewards.reward - theirs.rewards.reward) > 0.1


def test_a_raising_grader_labels_the_rollout_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = _require()
    good = _spec(tasks / TRIAGE)
    broken = _spec(_copy_with_grader(tmp_path, "raise RuntimeError('boom in grader')\n"))
    broken = broken.model_copy(update={"id": "T002_broken"})
    summary = run_rollouts([broken, good], ["loop"], 1, _backend, tmp_path / "out", 1)
    by_task = {r.task_id: r for r in summary.records}
    bad = by_task["T002_broken"]
    assert bad.status == "infra_failure"
    assert bad.failure is not None
    assert bad.failure.kind == "grader_error"
    assert "boom in grader" in bad.failure.detail
    assert bad.rewards is None  # never a 0 reward
    assert bad.grade is None
    assert bad.messages  # the run itself is kept, as data
    ok = by_task[TRIAGE]
    assert ok.status == "ok"
    assert ok.graded_by is not None
    assert ok.graded_by.grader == "claw_eval"
    stats = summarize(summary.records)
    assert stats.infra_failures == {"grader_error": 1}  # apart, not in any mean

    # eval's Claw-Eval metrics take the grades the rollouts got (no second grading, no judge call)
    def regrade(items: list[object], **_: object) -> list[object]:
        assert not items, "a rollout already graded by its grader.py was graded again"
        return []

    monkeypatch.setattr(grade_mod, "grade_records", regrade)
    claw = claw_eval_metrics(summary.records, [broken, good], None)
    assert claw.tasks == 1
    assert claw.avg_score == pytest.approx(ok.rewards.reward if ok.rewards else -1)
    assert list(claw.errors) == [bad.rollout_id]
    assert "boom in grader" in claw.errors[bad.rollout_id]


def test_a_missing_grader_labels_the_rollout(tmp_path: Path) -> None:
    _require()
    task_dir = _copy_with_grader(tmp_path, "")
    (task_dir / "grader.py").unlink()
    spec = _spec(task_dir).model_copy(update={"id": "T002_gone"})  # no checkout holds this id
    (rec,) = run_rollouts([spec], ["loop"], 1, _backend, tmp_path / "out", 1).records
    assert rec.status == "infra_failure"
    assert rec.failure is not None
    assert (rec.failure.kind, rec.rewards) == ("grader_error", None)
    assert "no grader.py" in rec.failure.detail


# ---------------------------------------------------------------- the warm grader children


def test_one_warm_child_grades_many_rollouts_and_a_dead_one_is_replaced(tmp_path: Path) -> None:
    tasks = _require()
    task = load_task(_spec(tasks / TRIAGE))
    dying = load_task(
        _spec(_copy_with_grader(tmp_path, "import os\nos._exit(3)\n")).model_copy(update={"id": "T002_dies"})
    )
    pool = GraderPool(size=1, judge={"kind": "none"})
    try:
        first = pool.grade(task, _record(task, "a"))
        child = pool._idle.queue[0].proc.pid
        second = pool.grade(task, _record(task, "b"))
        assert pool._idle.queue[0].proc.pid == child  # reused, not respawned
        assert first.status == second.status == "graded"
        assert first.task_score == second.task_score
        died = pool.grade(dying, _record(dying, "c"))
        assert died.status == "error"
        assert "exited" in died.reason
        after = pool.grade(task, _record(task, "d"))  # a fresh child takes over
        assert after.status == "graded"
        assert after.task_score == first.task_score
    finally:
        pool.close()
    assert pool._started == 0


def test_a_grader_that_hangs_is_timed_out_and_labelled(tmp_path: Path) -> None:
    _require()
    slow = _copy_with_grader(tmp_path, "import os\nos.read(0, 1)  # waits on a pipe nobody writes to\n")
    task = load_task(_spec(slow).model_copy(update={"id": "T002_hangs"}))
    pool = GraderPool(size=1, judge={"kind": "none"}, timeout_s=3.0)
    try:
        g = pool.grade(task, _record(task, "h"))
    finally:
        pool.close()
    assert g.status == "error"
    assert "timed out" in g.reason


def test_the_rollout_reward_uses_our_judge_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With COWORKENV_JUDGE_* set, the grader's judge calls reach our endpoint and count in the reward."""
    from fastapi import FastAPI

    from coworkenv.serve.http import background_server

    tasks = _require()
    spec = _spec(tasks / TRIAGE)
    seen: list[str] = []
    labels = {"msg_001": "needs reply", "msg_002": "needs reply", "msg_003": "FYI", "msg_004": "spam"}
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def complete(body: dict[str, object]) -> dict[str, object]:
        seen.append(str(body.get("model")))
        message = {"role": "assistant", "content": json.dumps(labels)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}

    (offline,) = run_rollouts([spec], ["loop"], 1, _backend, tmp_path / "offline", 1).records
    with background_server(app) as url:
        monkeypatch.setenv("COWORKENV_JUDGE_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("COWORKENV_JUDGE_MODEL", "our-judge")
        monkeypatch.setenv("COWORKENV_JUDGE_API_KEY", "k")
        (judged,) = run_rollouts([spec], ["loop"], 1, _backend, tmp_path / "judged", 1).records
    assert judged.status == "ok", judged.failure
    assert judged.graded_by is not None
    assert (judged.graded_by.grader, judged.graded_by.judge) == ("claw_eval", "run")
    assert seen
    assert set(seen) == {"our-judge"}
    assert judged.rewards is not None
    assert offline.rewards is not None
    assert judged.rewards.reward > offline.rewards.reward
