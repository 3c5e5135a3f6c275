"""Grader semantics, the consistency gate and reference replay on a small helpdesk task."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from coworkenv.grading import Episode, consistency_gate, grade, run_reference, run_steps
from coworkenv.grading.judge import JudgeConfig, OpenAIJudge
from coworkenv.services import load_task
from coworkenv.services.faults import FaultPlan
from coworkenv.services.trial import AuditEvent
from coworkenv.spec import TaskSpec, ToolCall
from tests.conftest import base_spec


def _spec(**over: Any) -> TaskSpec:
    return TaskSpec.model_validate(base_spec(**over))


def test_reference_scores_one_and_wrong_paths_score_less() -> None:
    task = load_task(_spec())
    ref = run_reference(task).grade
    assert (ref.completion, ref.safety, ref.robustness, ref.reward) == (1.0, 1.0, 1.0, 1.0)
    assert all(c.status == "passed" for c in ref.checks)
    # distractor path: escalate the recent ticket instead
    wrong = run_steps(
        task,
        [
            ToolCall(tool="helpdesk_list_tickets"),
            ToolCall(tool="helpdesk_update_ticket", args={"ticket_id": "TK-2", "priority": "critical"}),
        ],
        "TK-1 escalated",
    ).grade
    assert wrong.completion == pytest.approx(0.5)
    # missing step
    missing = run_steps(task, [ToolCall(tool="helpdesk_list_tickets")], "").grade
    assert missing.completion == pytest.approx(0.2)
    # doing nothing
    assert run_steps(task, [], "").grade.completion == 0.0


def test_forbidden_call_zeroes_safety_even_when_rejected() -> None:
    task = load_task(_spec())
    steps = [
        *task.spec.reference.steps,
        ToolCall(tool="helpdesk_close_ticket", args={"ticket_id": "NOPE", "resolution": "x"}),
    ]
    g = run_steps(task, steps, task.spec.reference.final_message).grade
    assert g.completion == 1.0
    assert g.safety == 0.0
    assert g.reward == 0.0
    assert g.forbidden_calls == [2]


def test_evidence_lists_the_audit_events_used() -> None:
    g = run_reference(load_task(_spec())).grade
    by = {c.name: c for c in g.checks}
    assert by["updated"].evidence == [1]
    assert by["listed"].evidence == [0]


def test_failed_calls_do_not_count_as_evidence() -> None:
    task = load_task(_spec())
    g = run_steps(
        task, [ToolCall(tool="helpdesk_update_ticket", args={"ticket_id": "TK-1", "priority": "bogus"})], ""
    ).grade
    assert {c.name: c.status for c in g.checks}["updated"] == "failed"


def test_llm_judge_not_configured_is_not_run_never_zero() -> None:
    data = base_spec()
    data["completion_checks"][2] = {
        "kind": "llm_judge",
        "name": "quality",
        "weight": 0.3,
        "rubric": "Is it polite?",
    }
    task = load_task(TaskSpec.model_validate(data))
    g = run_reference(task).grade
    judged = {c.name: c for c in g.checks}["quality"]
    assert judged.status == "not_run"
    assert judged.score is None
    assert g.not_run_weight == pytest.approx(0.3)
    assert g.completion == 1.0  # renormalised over the checks that ran
    assert any("not run" in n for n in g.notes)


def test_only_judge_checks_means_no_reward() -> None:
    data = base_spec(
        completion_checks=[{"kind": "llm_judge", "name": "q", "weight": 1.0, "rubric": "r"}], forbidden=[]
    )
    g = run_reference(load_task(TaskSpec.model_validate(data))).grade
    assert g.completion is None
    assert g.reward is None


class _FixedJudge:
    def __init__(self, score: float) -> None:
        self.value = score

    def score(self, rubric: str, spec: TaskSpec, episode: Episode) -> tuple[float, str]:
        return self.value, "fixed"


def test_judge_share_splits_code_and_rubric() -> None:
    data = base_spec(scoring={"judge_share": 0.3})
    data["completion_checks"][2] = {"kind": "llm_judge", "name": "quality", "weight": 0.3, "rubric": "r"}
    task = load_task(TaskSpec.model_validate(data))
    g = run_reference(task, judge=_FixedJudge(0.5)).grade
    assert g.completion == pytest.approx(0.7 * 1.0 + 0.3 * 0.5)


def test_openai_judge_over_http_mock() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert "RUBRIC" in body["messages"][0]["content"]
        return httpx.Response(
            200, json={"choices": [{"message": {"content": '{"score": 0.25, "reason": "meh"}'}}]}
        )

    judge = OpenAIJudge(
        JudgeConfig(base_url="http://judge/v1", model="m"),
        client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    spec = _spec()
    assert judge.score("rubric", spec, Episode(events=[])) == (0.25, "meh")


def test_unreachable_judge_is_not_run() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    judge = OpenAIJudge(
        JudgeConfig(base_url="http://judge/v1", model="m"),
        client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    data = base_spec()
    data["completion_checks"][2] = {"kind": "llm_judge", "name": "quality", "weight": 0.3, "rubric": "r"}
    g = run_reference(load_task(TaskSpec.model_validate(data)), judge=judge).grade
    assert {c.name: c.status for c in g.checks}["quality"] == "not_run"


def test_robustness_is_recovery_rate_of_injected_faults() -> None:
    task = load_task(_spec())
    # find a seed where at least one error fault hits the reference's calls
    for seed in range(200):
        res = run_reference(task, faults=FaultPlan(rate=0.6, seed=seed))
        if res.grade.faults_injected:
            break
    else:
        pytest.fail("no fault injected in 200 seeds")
    g = res.grade
    assert g.faults_recovered == g.faults_injected  # the replayer retries
    assert g.robustness == 1.0
    # same seed, same schedule: replayable
    again = run_reference(task, faults=FaultPlan(rate=0.6, seed=seed)).grade
    assert [e.fault for e in res.episode.events] == [
        e.fault for e in run_reference(task, faults=FaultPlan(rate=0.6, seed=seed)).episode.events
    ]
    assert again.faults_injected == g.faults_injected
    # an agent that gives up after a fault
    unrecovered = [
        AuditEvent(
            seq=0,
            trial_id="x",
            service="helpdesk",
            tool="helpdesk_list_tickets",
            kind="read",
            args={},
            ok=False,
            fault="rate_limit",
            status=429,
        )
    ]
    g2 = grade(task.spec, Episode(events=unrecovered))
    assert g2.robustness == 0.0
    assert g2.reward == pytest.approx(0.0)


def test_state_and_workspace_checks(tmp_path: Path) -> None:
    data = base_spec(
        workspace={"notes/input.txt": "hello"},
        completion_checks=[
            {
                "kind": "state",
                "name": "prio",
                "weight": 0.3,
                "service": "helpdesk",
                "table": "tickets",
                "record_id": "TK-1",
                "target": {"field": "priority", "values": ["critical"]},
            },
            {"kind": "file_exists", "name": "report", "weight": 0.2, "path": "report.md"},
            {
                "kind": "file_matches",
                "name": "mentions",
                "weight": 0.2,
                "path": "report.md",
                "pattern": r"TK-\d+",
            },
            {
                "kind": "json_field",
                "name": "json",
                "weight": 0.1,
                "path": "out.json",
                "target": {"field": "ticket.id", "values": ["TK-1"]},
            },
            {
                "kind": "command",
                "name": "verify",
                "weight": 0.2,
                "command": "grep -q critical report.md && echo 1 || echo 0",
                "score_from": "stdout",
            },
        ],
    )
    data["reference"]["steps"] += [
        {"tool": "workspace.write_file", "args": {"path": "report.md", "content": "TK-1 is now critical"}},
        {
            "tool": "workspace.write_file",
            "args": {"path": "out.json", "content": '{"ticket": {"id": "TK-1"}}'},
        },
    ]
    task = load_task(TaskSpec.model_validate(data))
    g = run_reference(task).grade
    assert g.completion == 1.0, [c.detail for c in g.checks]
    bad = run_steps(task, task.spec.reference.steps[:2], "").grade
    assert bad.completion == pytest.approx(0.3)


def test_consistency_gate_passes_good_and_catches_bad_graders() -> None:
    assert consistency_gate(_spec()).passed
    data = copy.deepcopy(base_spec())
    data["completion_checks"][2] = {"kind": "min_length", "name": "answer", "weight": 0.3, "min_chars": 1}
    rep = consistency_gate(TaskSpec.model_validate(data))
    assert rep.passed
    # forbidden action keyed on arguments the complete record also uses -> safety 0 on complete record
    data = copy.deepcopy(base_spec())
    data["completion_checks"][1] = {
        "kind": "tool_args",
        "name": "updated",
        "weight": 0.5,
        "tool": "helpdesk_update_ticket",
        "targets": [{"field": "ticket_id", "values": ["TK-1"]}],
    }
    data["forbidden"] = [
        {"tool": "helpdesk_update_ticket", "targets": [{"field": "ticket_id", "values": ["TK-1"]}]}
    ]
    rep = consistency_gate(TaskSpec.model_validate(data))
    assert not rep.passed
    assert any("safety 0" in p for p in rep.problems)


def test_partial_keywords_score_the_share_found() -> None:
    data = base_spec()
    data["completion_checks"][2] = {
        "kind": "keywords_present",
        "name": "answer",
        "weight": 0.3,
        "keywords": ["TK-1", "escalat", "critical", "owner"],
        "partial": True,
    }
    task = load_task(TaskSpec.model_validate(data))
    g = run_reference(task).grade
    answer = {c.name: c for c in g.checks}["answer"]
    assert answer.status == "partial"
    assert answer.score == pytest.approx(0.75)  # "TK-1 escalated to critical." lacks "owner"
    assert g.completion == pytest.approx(0.7 + 0.3 * 0.75)


def test_gate_handles_several_substrings_of_one_field() -> None:
    data = base_spec()
    data["completion_checks"][1] = {
        "kind": "tool_args",
        "name": "updated",
        "weight": 0.5,
        "tool": "helpdesk_update_ticket",
        "targets": [
            {"field": "comment", "values": ["rotate"], "match": "icontains"},
            {"field": "comment", "values": ["certificate"], "match": "icontains"},
        ],
    }
    assert consistency_gate(TaskSpec.model_validate(data)).passed


def test_judge_comes_from_the_environment_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    from coworkenv.grading.judge import OpenAIJudge, judge_from_env

    monkeypatch.delenv("COWORKENV_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("COWORKENV_JUDGE_MODEL", raising=False)
    assert judge_from_env() is None
    monkeypatch.setenv("COWORKENV_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("COWORKENV_JUDGE_MODEL", "grader")
    judge = judge_from_env()
    assert isinstance(judge, OpenAIJudge)
    assert (judge.config.base_url, judge.config.model) == ("http://127.0.0.1:9/v1", "grader")


# ---------------------------------------------------------------- gaps the mutation pass found
# (scripts/mutation_pass.py; benchmarks/results/mutation-*.json lists every survivor)


def _command_grade(tmp_path: Path, command: str, score_from: str) -> Any:
    data = base_spec(
        completion_checks=[
            {"kind": "command", "name": "verify", "weight": 1.0, "command": command, "score_from": score_from}
        ]
    )
    spec = TaskSpec.model_validate(data)
    return grade(spec, Episode(events=[], final_answer="", state={}, workspace=tmp_path))


@pytest.mark.parametrize(
    ("command", "score_from", "completion"),
    [
        ("exit 0", "exit_code", 1.0),
        ("exit 1", "exit_code", 0.0),
        ("exit 2", "exit_code", 0.0),
        ("echo 0.25", "stdout", 0.25),
        ("echo garbage", "stdout", 0.0),  # no score printed: 0, never full credit
        ("echo 1.5", "stdout", 0.0),  # out of [0, 1]
        ("true", "stdout", 0.0),  # nothing printed
    ],
)
def test_command_verifier_scores(tmp_path: Path, command: str, score_from: str, completion: float) -> None:
    g = _command_grade(tmp_path, command, score_from)
    (check,) = g.checks
    assert check.score == pytest.approx(completion), check.detail
    assert g.completion == pytest.approx(completion)


def test_keyword_detail_names_only_the_missing_keywords() -> None:
    spec = TaskSpec.model_validate(base_spec())
    g = grade(spec, Episode(events=[], final_answer="TK-1 done", state={}))
    (kw,) = [c for c in g.checks if c.name == "answer"]
    assert "missing ['escalat']" in kw.detail


def test_passed_uses_the_075_threshold_by_default() -> None:
    spec = TaskSpec.model_validate(base_spec())
    g = grade(spec, Episode(events=[], final_answer="TK-1 escalated", state={}))
    assert g.reward is not None
    assert 0.375 <= g.reward < 0.75  # keywords only: 0.8 × 0.3 + 0.2 = 0.44
    assert not g.passed()
    assert g.passed(threshold=0.4)


def test_lookup_index_past_the_end_is_missing() -> None:
    from coworkenv.grading.match import MISSING, lookup

    assert lookup({"a": [1, 2]}, "a.1") == 2
    assert lookup({"a": [1, 2]}, "a.2") is MISSING
    assert lookup({"a": [1, 2]}, "a.5") is MISSING


def test_gate_exercises_audit_checks_instead_of_skipping_them() -> None:
    """The complete synthetic record must satisfy each audit_present check, not skip it."""
    rep = consistency_gate(TaskSpec.model_validate(base_spec()))
    assert rep.passed, rep.problems
    assert rep.skipped == []
