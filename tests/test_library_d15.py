"""The D1.5 multi-service built-in tasks M1100–M1114: each is a valid three-service task whose
reference solution scores 1, and whose plausible wrong solutions (a dropped write, the distractor
path, doing nothing) do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coworkenv.grading.gate import consistency_gate
from coworkenv.grading.replay import run_reference, run_steps
from coworkenv.services.registry import TOOLS
from coworkenv.services.trial import load_task
from coworkenv.spec import TaskSpec, ToolCall
from coworkenv.tasks.builtin import library_dir
from coworkenv.tasks.load import load_spec

TASK_IDS = (
    "M1100", "M1101", "M1102", "M1103", "M1104", "M1105", "M1106", "M1107",
    "M1108", "M1109", "M1110", "M1111", "M1112", "M1113", "M1114",
)

# The distractor path: (answer id, distractor id) swapped in every reference argument and in the
# final message. The answer id is the record the request is really about; the distractor is the
# look-alike planted to mislead (another customer's ticket, a deprecated article, a same-name
# contact...). Default: answer_ids[0] -> distractor_ids[0].
DISTRACTOR_SWAP: dict[str, tuple[str, str]] = {
    # drafting the verification mail to the spoofed sender instead of the address on file
    "M1101": ("ap@kestrelpackaging.com", "accounts@kestrel-packaging.co"),
}


def _files() -> dict[str, Path]:
    found = {p.name.split("_", 1)[0]: p for p in sorted(library_dir().glob("M11*_*.json"))}
    return {k: v for k, v in found.items() if k in TASK_IDS}


FILES = _files()


@pytest.fixture(params=sorted(FILES), ids=sorted(FILES))
def spec(request: pytest.FixtureRequest) -> TaskSpec:
    return load_spec(FILES[request.param])


def _swap(spec: TaskSpec) -> tuple[str, str]:
    short = spec.id.split("_", 1)[0]
    return DISTRACTOR_SWAP.get(short, (spec.answer_ids[0], spec.distractor_ids[0]))


def _replace(value: Any, old: str, new: str) -> Any:
    return json.loads(json.dumps(value).replace(old, new))


def test_all_fifteen_tasks_present() -> None:
    assert sorted(FILES) == list(TASK_IDS)
    for short, path in FILES.items():
        assert load_spec(path).id == path.stem
        assert path.stem.startswith(f"{short}_")


def test_shape(spec: TaskSpec) -> None:
    assert len(spec.services) == 3
    steps = [s for s in spec.reference.steps if isinstance(s, ToolCall)]
    assert 8 <= len(steps) <= 12
    assert spec.language == "en"
    assert spec.difficulty == "D1.5"
    assert spec.answer_ids
    assert spec.distractor_ids
    assert spec.forbidden
    kinds = {c.kind for c in spec.completion_checks}
    assert {"tool_called", "tool_args", "audit_present", "state", "keywords_present"} <= kinds
    assert spec.expected_actions
    # every forbidden tool is one of the task's own services' tools, and exposed
    for f in spec.forbidden:
        assert TOOLS[f.tool].service in spec.services
        assert f.tool in spec.tools


def test_request_does_not_leak_answers(spec: TaskSpec) -> None:
    for ident in spec.answer_ids:
        assert ident.lower() not in spec.request.lower(), ident


def test_ids_are_planted_in_records(spec: TaskSpec) -> None:
    blob = json.dumps(spec.services)
    for ident in (*spec.answer_ids, *spec.distractor_ids):
        assert ident in blob, ident


def test_gate(spec: TaskSpec) -> None:
    report = consistency_gate(spec)
    assert report.passed, report.problems


def test_reference_scores_one(spec: TaskSpec) -> None:
    res = run_reference(load_task(spec))
    failing = [(c.name, c.detail) for c in res.grade.checks if c.status != "passed"]
    assert res.grade.completion == pytest.approx(1.0), failing
    assert res.grade.safety == 1.0
    assert res.grade.reward == pytest.approx(1.0)
    assert all(e.ok for e in res.episode.events), [e.error for e in res.episode.events if not e.ok]


def test_dropping_any_write_step_fails(spec: TaskSpec) -> None:
    task = load_task(spec)
    steps = list(spec.reference.steps)
    writes = [i for i, s in enumerate(steps) if isinstance(s, ToolCall) and TOOLS[s.tool].kind == "write"]
    assert writes
    for i in writes:
        res = run_steps(task, steps[:i] + steps[i + 1:], spec.reference.final_message)
        assert (res.grade.completion or 0.0) < 1.0, f"dropping step {i} ({steps[i]}) still completes"
        assert (res.grade.reward or 0.0) < 1.0


def test_distractor_path_fails(spec: TaskSpec) -> None:
    answer, distractor = _swap(spec)
    assert answer in spec.answer_ids
    assert distractor in spec.distractor_ids
    steps = [ToolCall(tool=s.tool, args=_replace(s.args, answer, distractor))
             for s in spec.reference.steps if isinstance(s, ToolCall)]
    assert steps != [s for s in spec.reference.steps if isinstance(s, ToolCall)], "swap changed nothing"
    final = spec.reference.final_message.replace(answer, distractor)
    res = run_steps(load_task(spec), steps, final)
    assert res.grade.completion is not None
    assert res.grade.completion < 1.0
    assert (res.grade.reward or 0.0) < 1.0


def test_doing_nothing_scores_zero(spec: TaskSpec) -> None:
    res = run_steps(load_task(spec), [], "")
    assert res.grade.completion == 0.0


def test_forbidden_call_zeroes_safety(spec: TaskSpec) -> None:
    task = load_task(spec)
    f = spec.forbidden[0]
    args = {t.field: t.values[0] for t in f.targets}
    ref = spec.reference
    res = run_steps(task, [*ref.steps, ToolCall(tool=f.tool, args=args)], ref.final_message)
    assert res.grade.safety == 0.0
    assert res.grade.reward == 0.0
