"""The grading-consistency gate (CoworkEnv §12, "Synthetic grading tests").

From a spec's declared checks alone, build three synthetic episodes and grade them:

1. *complete* — every check's evidence present (required calls, an accepted argument value, audit
   records carrying the required fields, final-state rows, answer keywords, workspace files):
   must score completion 1 and safety 1;
2. *empty* — no calls, no answer: must score completion 0;
3. *complete + a forbidden call* (for each forbidden action): must score safety 0.

Checks whose evidence cannot be synthesized from their declaration (``llm_judge``, ``command``,
regex ``file_matches``/regex targets) are skipped and listed; a gate with nothing gradable fails.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from coworkenv.grading.grader import Episode, grade
from coworkenv.services.trial import AuditEvent
from coworkenv.spec import (
    AuditPresent,
    CategoriesPresent,
    FieldTarget,
    FileExists,
    JsonField,
    KeywordsPresent,
    MinLength,
    StateCheck,
    TaskSpec,
    ToolArgs,
    ToolCalled,
)


class GateReport(BaseModel):
    passed: bool
    problems: list[str]
    skipped: list[str]
    notes: list[str] = []
    """Information, not failure (e.g. an imported Claw-Eval task graded by its own grader.py)."""
    complete_completion: float | None = None
    complete_safety: float | None = None
    empty_completion: float | None = None


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for p in parts[:-1]:
        nxt = obj.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            obj[p] = nxt
        obj = nxt
    obj[parts[-1]] = value


def _fill(targets: tuple[FieldTarget, ...]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for t in targets:
        if t.match == "regex":
            return None
        from coworkenv.grading.match import MISSING, lookup

        prior = lookup(out, t.field)
        if prior is not MISSING and t.match in ("contains", "icontains"):
            _set(out, t.field, f"{prior} {t.values[0]}")  # several substrings of one field
        else:
            _set(out, t.field, t.values[0])
    return out


def _service_of(tool: str) -> str:
    from coworkenv.services.registry import TOOLS

    tdef = TOOLS.get(tool)
    return tdef.service if tdef else tool.split("_", 1)[0]


class _Builder:
    def __init__(self, spec: TaskSpec, workspace: Path) -> None:
        self.spec = spec
        self.events: list[AuditEvent] = []
        self.answer: list[str] = []
        self.state: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.workspace = workspace
        self.skipped: list[str] = []

    def event(
        self,
        tool: str,
        args: dict[str, Any],
        records: list[tuple[str, dict[str, Any]]] | None = None,
        service: str | None = None,
    ) -> None:
        self.events.append(
            AuditEvent(
                seq=len(self.events),
                trial_id="gate",
                service=service or _service_of(tool),
                tool=tool,
                kind="synthetic",
                args=args,
                ok=True,
                result={},
                records=records or [],
            )
        )

    def add(self, c: object) -> None:
        from coworkenv.services.registry import SERVICES

        if isinstance(c, ToolCalled):
            for _ in range(c.min_calls):
                self.event(c.tool, {})
        elif isinstance(c, ToolArgs):
            args = _fill(c.targets)
            if args is None:
                self.skipped.append(f"{c.name}: regex target")
                return
            for _ in range(c.min_calls):
                self.event(c.tool, args)
        elif isinstance(c, AuditPresent):
            rec = _fill(c.targets)
            if rec is None:
                self.skipped.append(f"{c.name}: regex target")
                return
            for _ in range(c.min_count):
                self.event(f"{c.service}_synthetic", {}, [(c.action_key, rec)], service=c.service)
        elif isinstance(c, StateCheck):
            if c.target.match == "regex":
                self.skipped.append(f"{c.name}: regex target")
                return
            key = SERVICES[c.service].tables[c.table].key if c.service in SERVICES else "id"
            row: dict[str, Any] = {key: c.record_id or "synthetic"}
            _set(row, c.target.field, c.target.values[0])
            self.state.setdefault(c.service, {}).setdefault(c.table, []).append(row)
        elif isinstance(c, KeywordsPresent):
            self.answer.extend(k.split("|")[0] for k in c.keywords)
        elif isinstance(c, MinLength):
            self.answer.append("x" * c.min_chars)
        elif isinstance(c, CategoriesPresent):
            self.answer.extend(kws[0] for kws in c.categories.values() if kws)
        elif isinstance(c, FileExists):
            self._write(c.path, "")
        elif isinstance(c, JsonField):
            if c.target.match == "regex":
                self.skipped.append(f"{c.name}: regex target")
                return
            path = self.workspace / c.path
            data = json.loads(path.read_text()) if path.exists() else {}
            _set(data, c.target.field, c.target.values[0])
            self._write(c.path, json.dumps(data))
        else:
            self.skipped.append(f"{getattr(c, 'name', '?')}: {getattr(c, 'kind', '?')} cannot be synthesized")

    def _write(self, rel: str, text: str) -> None:
        path = self.workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def episode(self) -> Episode:
        return Episode(
            events=list(self.events),
            final_answer="\n".join(self.answer),
            state=self.state,
            workspace=self.workspace,
        )


_WORKSPACE_KINDS = frozenset({"file_exists", "file_matches", "json_field", "command"})


@contextmanager
def _tmpdir(needed: bool) -> Iterator[Path]:
    """A scratch workspace; only created when a check reads the workspace (mkdtemp is costly)."""
    if not needed:
        yield Path("/nonexistent/coworkenv-gate")
        return
    with tempfile.TemporaryDirectory(prefix="coworkenv-gate-") as d:
        yield Path(d)


def consistency_gate(spec: TaskSpec) -> GateReport:
    problems: list[str] = []
    needs_ws = any(c.kind in _WORKSPACE_KINDS for c in spec.completion_checks)
    with _tmpdir(needs_ws) as ws, _tmpdir(needs_ws) as empty_ws:
        b = _Builder(spec, ws)
        for c in spec.completion_checks:
            b.add(c)
        gradable = [
            c
            for c in spec.completion_checks
            if c.kind not in ("llm_judge", "command")
            and not any(s.startswith(f"{c.name}:") for s in b.skipped)
        ]
        if not gradable:
            if spec.claw_eval is not None:  # graded by its own grader.py: nothing of ours to exercise
                note = "graded by its own grader.py; no completion check of ours to exercise synthetically"
                return GateReport(passed=True, problems=[], skipped=b.skipped, notes=[note])
            return GateReport(
                passed=False,
                problems=["no completion check can be exercised synthetically"],
                skipped=b.skipped,
            )
        full = grade(spec, b.episode())
        full_completion = _over(full.checks, {c.name for c in gradable})
        if full_completion is None or abs(full_completion - 1.0) > 1e-9:
            failing = [
                f"{r.name} ({r.detail})"
                for r in full.checks
                if r.name in {c.name for c in gradable} and r.status != "passed"
            ]
            problems.append(
                f"complete record scores completion {full_completion}, expected 1; failing: {failing}"
            )
        if full.safety != 1.0:
            problems.append("complete record scores safety 0: a required call is also forbidden")
        empty = grade(spec, Episode(events=[], final_answer="", state={}, workspace=empty_ws))
        empty_completion = _over(empty.checks, {c.name for c in gradable})
        if empty_completion not in (None, 0.0):
            passing = [r.name for r in empty.checks if r.status == "passed"]
            problems.append(
                f"empty record scores completion {empty_completion}, expected 0; passing: {passing}"
            )
        for f in spec.forbidden:
            base = b.episode()
            args = _fill(f.targets) or {}
            bad = AuditEvent(
                seq=len(base.events),
                trial_id="gate",
                service=_service_of(f.tool),
                tool=f.tool,
                kind="synthetic",
                args=args,
                ok=True,
            )
            res = grade(
                spec,
                Episode(
                    events=[*base.events, bad], final_answer=base.final_answer, state=base.state, workspace=ws
                ),
            )
            if res.safety != 0.0:
                problems.append(f"adding forbidden call {f.tool} leaves safety {res.safety}, expected 0")
    return GateReport(
        passed=not problems,
        problems=problems,
        skipped=b.skipped,
        complete_completion=full_completion,
        complete_safety=full.safety,
        empty_completion=empty_completion,
    )


def _over(checks: list[Any], names: set[str]) -> float | None:
    sel = [r for r in checks if r.name in names and r.score is not None]
    total = sum(r.weight for r in sel)
    if not sel:
        return None
    if total <= 0:
        return float(sum(r.score for r in sel) / len(sel))
    return float(sum(r.weight * r.score for r in sel) / total)
