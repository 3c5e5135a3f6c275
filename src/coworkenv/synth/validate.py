"""Validation of a candidate spec: the paper's six stages in order, then replay and mutation.

``validate(text, slot)`` runs :data:`~coworkenv.synth.base.STAGES` in order and stops at the first
stage that finds problems; the :class:`Outcome` holds the parsed spec (when every stage passed) or
that stage's diagnostics, each naming the stage and saying what to fix. Stages:

1. ``json_parse`` — JSON text → TaskSpec structure; ``id``/``mock_today``/``language`` match the
   slot; check names unique. (The spec model's own weight/conflict rules are left to stages 2–3.)
2. ``tool_conflict`` — no tool required (by a tool check or a reference step) and blanket-forbidden.
3. ``weights`` — at least one completion check; weights sum to 1.
4. ``services`` — registry rules (:func:`coworkenv.tasks.load.check_references`), every service has
   initial records (or is one the reference writes to, e.g. an outbox), the services are exactly
   the slot's, tools are exposed.
5. ``leakage`` — answer ids declared, none in the request, each discoverable in the records
   (multi-turn tasks: the user may supply them).
6. ``gate`` — :func:`coworkenv.grading.gate.consistency_gate`.
7. ``replay`` — the reference against live services: every call succeeds, completion 1, safety 1.
8. ``mutation`` — :func:`mutation_problems`: dropping any required step lowers completion, the
   distractor path scores below 1, doing nothing scores 0, and every exposed tool that produces a
   forbidden call's effect is caught by the gate (the alternate-route mutant,
   :mod:`coworkenv.synth.alternates`).

The mutation helpers (:func:`required_steps`, :func:`distractor_path`) are the library's single
definition of those wrong solutions; tests reuse them.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from coworkenv.errors import SpecError
from coworkenv.spec import (
    WEIGHT_TOLERANCE,
    Check,
    Forbidden,
    TaskSpec,
    ToolArgs,
    ToolCall,
    ToolCalled,
    UserTurn,
)
from coworkenv.synth.base import STAGES, Diagnostic, Slot, Stage

_CHECKS: TypeAdapter[tuple[Check, ...]] = TypeAdapter(tuple[Check, ...])
_FORBIDDEN: TypeAdapter[tuple[Forbidden, ...]] = TypeAdapter(tuple[Forbidden, ...])
_STEPS: TypeAdapter[tuple[ToolCall | UserTurn, ...]] = TypeAdapter(tuple[ToolCall | UserTurn, ...])
_EPS = 1e-9


@dataclass
class Outcome:
    """The result of validating one candidate."""

    spec: TaskSpec | None
    diagnostics: tuple[Diagnostic, ...] = ()
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.spec is not None and not self.diagnostics

    @property
    def failed_stage(self) -> Stage | None:
        return self.diagnostics[0].stage if self.diagnostics else None


@dataclass
class _Ctx:
    text: str
    slot: Slot | None
    data: dict[str, Any] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    forbidden: tuple[Forbidden, ...] = ()
    steps: tuple[ToolCall | UserTurn, ...] = ()
    spec: TaskSpec | None = None


# ---------------------------------------------------------------- stages 1-5: static


def _json_parse(ctx: _Ctx) -> list[str]:
    from coworkenv.tasks.load import issues_from_validation

    try:
        data = json.loads(ctx.text)
    except json.JSONDecodeError as e:
        return [
            f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}; reply with one complete JSON object"
        ]
    if not isinstance(data, dict):
        return [f"the top level must be a JSON object (a TaskSpec), got {type(data).__name__}"]
    ctx.data = data
    try:
        ctx.spec = TaskSpec.model_validate(data)
    except ValidationError as e:
        field_errors = [err for err in e.errors() if err["loc"]]
        if field_errors:
            return [str(i) for i in issues_from_validation(e) if i.field]
    # structure is valid (only the spec's semantic rules may have failed): parse the parts
    ctx.checks = _CHECKS.validate_python(data.get("completion_checks", ()))
    ctx.forbidden = _FORBIDDEN.validate_python(data.get("forbidden", ()))
    ctx.steps = _STEPS.validate_python((data.get("reference") or {}).get("steps", ()))
    problems: list[str] = []
    names = [c.name for c in ctx.checks]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(f"completion_checks: names must be unique; repeated: {dupes}")
    slot = ctx.slot
    if slot is not None:
        if data.get("id") != slot.task_id:
            problems.append(f"id: must be the slot's task_id {slot.task_id!r}, got {data.get('id')!r}")
        if str(data.get("mock_today")) != slot.mock_today.isoformat():
            problems.append(
                f"mock_today: must be the slot's {slot.mock_today.isoformat()}, "
                f"got {data.get('mock_today')!r}"
            )
        if data.get("language", "en") != slot.language:
            problems.append(f"language: must be the slot's {slot.language!r}, got {data.get('language')!r}")
    return problems


def _tool_conflict(ctx: _Ctx) -> list[str]:
    blanket = {f.tool: i for i, f in enumerate(ctx.forbidden) if not f.targets}
    problems = []
    for c in ctx.checks:
        if isinstance(c, ToolCalled | ToolArgs) and c.tool in blanket:
            problems.append(
                f"{c.tool} is required by check {c.name!r} and forbidden (forbidden[{blanket[c.tool]}]); "
                "drop one, or give the forbidden entry targets the required call does not match"
            )
    for i, s in enumerate(ctx.steps):
        if isinstance(s, ToolCall) and s.tool in blanket:
            problems.append(
                f"reference.steps[{i}] calls {s.tool}, which is forbidden (forbidden[{blanket[s.tool]}]); "
                "the reference must not take a forbidden action"
            )
    return problems


def _weights(ctx: _Ctx) -> list[str]:
    if not ctx.checks:
        return ["completion_checks is empty; give weighted checks whose weights sum to 1"]
    total = sum(c.weight for c in ctx.checks)
    if not math.isclose(total, 1.0, abs_tol=WEIGHT_TOLERANCE):
        listing = ", ".join(f"{c.name}={c.weight:g}" for c in ctx.checks)
        return [f"completion weights sum to {total:.4f}, not 1 ({listing}); rescale them to sum to 1"]
    if ctx.spec is None:
        try:
            ctx.spec = TaskSpec.model_validate(ctx.data)
        except ValidationError as e:  # a spec rule the stages above do not name
            return [f"spec rule: {err['msg']}" for err in e.errors()]
    return []


def _services(ctx: _Ctx) -> list[str]:
    from coworkenv.tasks.load import check_references

    spec = ctx.spec
    assert spec is not None
    problems: list[str] = []
    if not spec.services:
        problems.append("services is empty; give each of the task's services its initial records")
    written = _written_services(spec)
    for name, records in spec.services.items():
        if not any(rows for rows in records.values()) and name not in written:
            problems.append(
                f"services.{name}: no initial records and no reference write uses it; "
                "give it the records that hold its part of the evidence"
            )
    if ctx.slot is not None and set(spec.services) != set(ctx.slot.services):
        problems.append(
            f"services {sorted(spec.services)} differ from the slot's {sorted(ctx.slot.services)}; "
            "use exactly the slot's services"
        )
    if not spec.tools:
        problems.append("tools is empty; expose the tools the agent may call")
    try:
        check_references(spec, "<candidate>")
    except SpecError as e:
        problems.extend(str(i) for i in e.issues)
    return problems


def _written_services(spec: TaskSpec) -> set[str]:
    from coworkenv.services.registry import TOOLS

    out = set()
    for s in spec.reference.steps:
        tdef = TOOLS.get(s.tool) if isinstance(s, ToolCall) else None
        if tdef is not None and tdef.kind == "write":
            out.add(tdef.service)
    return out


def _leakage(ctx: _Ctx) -> list[str]:
    spec = ctx.spec
    assert spec is not None
    if not spec.answer_ids:
        return ["answer_ids is empty; list the identifiers the agent must discover through tools"]
    request = spec.request.lower()
    problems = [
        f"the request names answer id {a!r}; describe it by its properties so the agent must discover it"
        for a in spec.answer_ids
        if a.lower() in request
    ]
    if spec.user_sim is not None:  # the user may supply values in their own words
        return problems
    visible = json.dumps(spec.services, ensure_ascii=False).lower()
    problems.extend(
        f"answer id {a!r} appears in no initial record or user reply; the agent cannot discover it"
        for a in spec.answer_ids
        if a.lower() not in visible
    )
    return problems


def _gate(ctx: _Ctx) -> list[str]:
    from coworkenv.grading.gate import consistency_gate

    assert ctx.spec is not None
    report = consistency_gate(ctx.spec)
    return [] if report.passed else list(report.problems)


# ---------------------------------------------------------------- stages 7-8: executable


def _step_text(step: ToolCall) -> str:
    args = json.dumps(step.args, ensure_ascii=False)
    return f"{step.tool}({args if len(args) <= 120 else args[:117] + '...'})"


def _failing(res: Any) -> str:
    bad = [c for c in res.grade.checks if c.status != "passed"]
    return ", ".join(f"{c.name} ({c.detail})" if c.detail else c.name for c in bad)


@contextmanager
def _shared_workspace(spec: TaskSpec) -> Iterator[Path | None]:
    """One empty workspace for every replay of a task that has no files and no workspace steps
    (a fresh temporary directory per replay dominates the cost otherwise); None means "fresh"."""
    touches = spec.workspace or any(
        isinstance(s, ToolCall) and s.tool.startswith("workspace.") for s in spec.reference.steps
    )
    if touches:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="coworkenv-synth-") as d:
        yield Path(d)


def _replay(ctx: _Ctx) -> list[str]:
    from coworkenv.grading.replay import run_reference
    from coworkenv.services.trial import load_task

    spec = ctx.spec
    assert spec is not None
    with _shared_workspace(spec) as ws:
        res = run_reference(load_task(spec, "<candidate>"), workspace=ws)
    problems = []
    calls = [
        s for s in spec.reference.steps if isinstance(s, ToolCall) and not s.tool.startswith("workspace.")
    ]
    for ev in res.episode.events:
        if not ev.ok:
            problems.append(f"reference call {ev.tool}({json.dumps(ev.args)}) failed: {ev.error}")
    completion = res.grade.completion
    if completion is None:
        problems.append("the reference's completion could not be graded (no deterministic check ran)")
    elif abs(completion - 1.0) > _EPS:
        problems.append(
            f"the reference scores completion {completion:.3f}, expected 1; failing: {_failing(res)}"
        )
    if res.grade.safety != 1.0:
        bad = [_step_text(calls[i]) for i in res.grade.forbidden_calls if i < len(calls)]
        problems.append(f"the reference scores safety {res.grade.safety}, expected 1; forbidden calls: {bad}")
    return problems


def required_steps(spec: TaskSpec) -> list[int]:
    """Indices of reference steps that must matter: write calls (and workspace writes), and the
    only call of a tool that a ``tool_called``/``tool_args`` check names."""
    from coworkenv.services.registry import TOOLS

    named = {c.tool for c in spec.completion_checks if isinstance(c, ToolCalled | ToolArgs)}
    calls = [s.tool for s in spec.reference.steps if isinstance(s, ToolCall)]
    out = []
    for i, s in enumerate(spec.reference.steps):
        if not isinstance(s, ToolCall):
            continue
        tdef = TOOLS.get(s.tool)
        write = s.tool == "workspace.write_file" or (tdef is not None and tdef.kind == "write")
        if write or (s.tool in named and calls.count(s.tool) == 1):
            out.append(i)
    return out


def distractor_swap(spec: TaskSpec) -> dict[str, str]:
    """answer_ids[i] → distractor_ids[i] for the aligned pairs."""
    return dict(zip(spec.answer_ids, spec.distractor_ids, strict=False))


def distractor_path(spec: TaskSpec) -> tuple[list[ToolCall | UserTurn], str] | None:
    """The reference with every answer id replaced by its distractor (steps and final message), or
    None when the swap changes nothing (or there are no distractors)."""
    swap = distractor_swap(spec)
    if not swap:
        return None
    pattern = re.compile("|".join(re.escape(a) for a in sorted(swap, key=len, reverse=True)))

    def sub(text: str) -> str:
        return pattern.sub(lambda m: swap[m.group(0)], text)

    steps: list[ToolCall | UserTurn] = [
        ToolCall(tool=s.tool, args=json.loads(sub(json.dumps(s.args)))) if isinstance(s, ToolCall) else s
        for s in spec.reference.steps
    ]
    final = sub(spec.reference.final_message)
    if steps == list(spec.reference.steps) and final == spec.reference.final_message:
        return None
    return steps, final


def mutation_problems(spec: TaskSpec) -> list[str]:
    """Replay the plausible wrong solutions; each one scoring too high is a problem."""
    with _shared_workspace(spec) as ws:
        return _mutations(spec, ws)


def _mutations(spec: TaskSpec, ws: Path | None) -> list[str]:
    from coworkenv.grading.replay import run_steps
    from coworkenv.services.trial import load_task
    from coworkenv.synth.alternates import alternate_route_problems

    task = load_task(spec, "<candidate>")
    steps = list(spec.reference.steps)
    final = spec.reference.final_message
    problems: list[str] = []
    for i in required_steps(spec):
        res = run_steps(task, steps[:i] + steps[i + 1 :], final, workspace=ws)
        if (res.grade.completion or 0.0) >= 1.0 - _EPS:
            step = steps[i]
            assert isinstance(step, ToolCall)
            problems.append(
                f"dropping reference step {i} {_step_text(step)} still scores completion 1; "
                "add a check on its effect (audit_present on its audit key, or tool_args) or drop the step"
            )
    if not spec.distractor_ids:
        problems.append(
            "distractor_ids is empty; plant look-alike records and list them aligned with answer_ids"
        )
    else:
        path = distractor_path(spec)
        if path is None:
            problems.append(
                "the distractor path equals the reference: no answer id occurs in the reference calls "
                "or final message; align distractor_ids with answer_ids the reference acts on"
            )
        else:
            res = run_steps(task, path[0], path[1], workspace=ws)
            if (res.grade.completion or 0.0) >= 1.0 - _EPS:
                pairs = ", ".join(f"{a}->{d}" for a, d in distractor_swap(spec).items())
                problems.append(
                    f"the distractor path ({pairs}) still scores completion 1; "
                    "checks must pin the answer records (tool_args / audit targets / keywords)"
                )
    problems += alternate_route_problems(task, ws)
    res = run_steps(task, [], "", workspace=ws)
    if (res.grade.completion or 0.0) > _EPS:
        passing = [c.name for c in res.grade.checks if c.status == "passed"]
        problems.append(
            f"doing nothing scores completion {res.grade.completion:.3f}, expected 0; "
            f"checks passing without any action: {passing}"
        )
    return problems


def _mutation(ctx: _Ctx) -> list[str]:
    assert ctx.spec is not None
    return mutation_problems(ctx.spec)


_RUNNERS: dict[str, Callable[[_Ctx], list[str]]] = {
    "json_parse": _json_parse,
    "tool_conflict": _tool_conflict,
    "weights": _weights,
    "services": _services,
    "leakage": _leakage,
    "gate": _gate,
    "replay": _replay,
    "mutation": _mutation,
}
assert tuple(_RUNNERS) == STAGES


def validate(text: str, slot: Slot | None = None, *, stages: Sequence[str] = STAGES) -> Outcome:
    """Run the stages in order; stop at the first with problems."""
    ctx = _Ctx(text, slot)
    seconds: dict[str, float] = {}
    for stage in STAGES:
        if stage not in stages:
            continue
        t0 = time.perf_counter()
        try:
            problems = _RUNNERS[stage](ctx)
        except (SpecError, ValidationError, ValueError, KeyError, TypeError) as e:
            problems = [f"{type(e).__name__}: {' '.join(str(e).split())[:500]}"]
        seconds[stage] = time.perf_counter() - t0
        if problems:
            diags = tuple(Diagnostic.model_validate({"stage": stage, "message": p}) for p in problems)
            return Outcome(None, diags, seconds)
    return Outcome(ctx.spec, (), seconds)


def validate_spec(spec: TaskSpec, slot: Slot | None = None) -> Outcome:
    return validate(spec.model_dump_json(), slot)
