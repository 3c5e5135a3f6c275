"""Executable self-checks of one generated spec, stage by stage (used by tests and the benchmark
when the synthesis pipeline's own validator is not available).

``selfcheck(text) -> list[(stage, problem)]`` runs, in order: JSON parse + TaskSpec + registry
references, leakage of answer ids into the request, the grading-consistency gate, reference replay
(completion 1, safety 1, every call ok), and the mutation tests (drop each write step → completion
< 1; the distractor path — ``answer_ids[0]`` swapped for ``distractor_ids[0]`` — → reward < 1;
doing nothing → completion 0). It stops at the first failing stage; an empty list means valid.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from coworkenv.errors import SpecError
from coworkenv.grading.gate import consistency_gate
from coworkenv.grading.replay import run_reference, run_steps
from coworkenv.services.registry import TOOLS
from coworkenv.services.trial import LoadedTask, load_task
from coworkenv.spec import TaskSpec, ToolCall, UserTurn
from coworkenv.tasks.load import check_references

Problem = tuple[str, str]


def distractor_steps(spec: TaskSpec) -> tuple[list[ToolCall | UserTurn], str]:
    """The reference with ``answer_ids[0]`` replaced by ``distractor_ids[0]`` everywhere."""
    old, new = spec.answer_ids[0], spec.distractor_ids[0]
    steps: list[ToolCall | UserTurn] = [
        ToolCall(tool=s.tool, args=json.loads(json.dumps(s.args).replace(old, new)))
        if isinstance(s, ToolCall)
        else s
        for s in spec.reference.steps
    ]
    return steps, spec.reference.final_message.replace(old, new)


def write_indices(spec: TaskSpec) -> list[int]:
    return [
        i
        for i, s in enumerate(spec.reference.steps)
        if isinstance(s, ToolCall) and s.tool in TOOLS and TOOLS[s.tool].kind == "write"
    ]


def parse(text: str) -> TaskSpec:
    data: Any = json.loads(text)
    spec = TaskSpec.model_validate(data)
    check_references(spec, spec.id)
    return spec


def mutation_problems(spec: TaskSpec, task: LoadedTask) -> list[str]:
    problems = []
    ref = spec.reference
    for i in write_indices(spec):
        steps = [*ref.steps[:i], *ref.steps[i + 1 :]]
        g = run_steps(task, steps, ref.final_message).grade
        if (g.completion or 0.0) >= 1.0:
            problems.append(f"dropping write step {i} ({ref.steps[i]}) still completes")
    if not spec.answer_ids or not spec.distractor_ids:
        problems.append("no answer_ids/distractor_ids: no distractor path")
    else:
        steps, final = distractor_steps(spec)
        g = run_steps(task, steps, final).grade
        if (g.reward or 0.0) >= 1.0:
            problems.append(
                f"distractor path ({spec.answer_ids[0]} -> {spec.distractor_ids[0]}) scores reward 1"
            )
    g = run_steps(task, [], "").grade
    if g.completion != 0.0:
        problems.append(f"doing nothing scores completion {g.completion}")
    return problems


def selfcheck(text: str) -> list[Problem]:
    try:
        spec = parse(text)
    except (json.JSONDecodeError, ValidationError, SpecError) as e:
        return [("json_parse", str(e).splitlines()[0])]
    leaked = [a for a in spec.answer_ids if a.lower() in spec.request.lower()]
    if leaked:
        return [("leakage", f"request names answer ids {leaked}")]
    gate = consistency_gate(spec)
    if not gate.passed:
        return [("gate", p) for p in gate.problems]
    task = load_task(spec)
    res = run_reference(task)
    bad = [f"{e.tool}: {e.error}" for e in res.episode.events if not e.ok]
    g = res.grade
    if bad or g.completion != 1.0 or g.safety != 1.0:
        failing = [f"{c.name} ({c.detail})" for c in g.checks if c.status != "passed"]
        return [("replay", f"completion {g.completion} safety {g.safety}; failing {failing}; errors {bad}")]
    return [("mutation", p) for p in mutation_problems(spec, task)]
