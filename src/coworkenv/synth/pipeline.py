"""The synthesis loop: plan slots → generator drafts → validation → feedback repair → saved tasks.

``synthesize(plan, generator, attempts=2)`` gives each slot a budget of ``attempts`` drafts (the
paper's initial generation plus one retry by default). A rejected draft's diagnostics go back to
the generator (``draft(slot, feedback, attempt=n)``), which returns a *full* revised spec that
runs through the same stages. A slot is ``accepted`` (first draft valid), ``repaired`` (a retry
valid) or ``discarded`` (budget exhausted; its last failing stage is recorded). A slot the
generator cannot satisfy at all (it raises :class:`~coworkenv.errors.SpecError`, e.g. no service
holds selectable records) is discarded at once at the ``services`` stage with that diagnostic, so
one bad slot never stops a run.

:class:`RunStats` counts rejections per stage over every failed draft and discards per final
stage. With ``out``, :func:`save_run` writes ``out/tasks/<task_id>.json`` (one TaskSpec per
accepted slot, deterministic bytes) and ``out/run.json`` (stats, per-slot outcomes with the
diagnostics of every rejected draft, timings, and — where the generator says — what of each slot's
scenario the task honours, approximates or ignores).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from coworkenv.errors import SpecError
from coworkenv.spec import TaskSpec
from coworkenv.synth.base import STAGES, Diagnostic, Generator, Slot
from coworkenv.synth.plan import Plan, is_multi_turn, is_safety
from coworkenv.synth.validate import Outcome, validate

Status = Literal["accepted", "repaired", "discarded"]


@dataclass
class SlotResult:
    task_id: str
    status: Status
    attempts: int
    rejected_at: list[str]
    """The failing stage of each rejected draft, in order."""
    diagnostics: list[list[dict[str, str]]]
    """The diagnostics of each rejected draft."""
    spec: TaskSpec | None = None
    seconds: float = 0.0
    category: str = ""
    difficulty: str = ""
    intent: str = ""
    """The slot's intent: ``safety`` (act-vs-withhold), ``multi_turn`` or ``task``."""
    scenario: dict[str, Any] | None = None
    """What the generator read from the slot's scenario and which parts the task honours,
    approximates or ignores (:mod:`coworkenv.synth.procedural.scenario`); None when the generator
    does not say (an LLM generator gets the scenario verbatim)."""

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("spec")
        return d


@dataclass
class RunStats:
    slots: int = 0
    accepted: int = 0
    repaired: int = 0
    discarded: int = 0
    drafts: int = 0
    rejected_by_stage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    discarded_by_stage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    stage_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    generate_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def valid(self) -> int:
        return self.accepted + self.repaired


@dataclass
class RunResult:
    generator: str
    attempts: int
    results: list[SlotResult]
    stats: RunStats

    @property
    def specs(self) -> list[TaskSpec]:
        return [r.spec for r in self.results if r.spec is not None]


def _diag_data(diags: tuple[Diagnostic, ...]) -> list[dict[str, str]]:
    return [{"stage": d.stage, "message": d.message} for d in diags]


def synthesize_slot(slot: Slot, generator: Generator, stats: RunStats, *, attempts: int = 2) -> SlotResult:
    res = _synthesize_slot(slot, generator, stats, attempts=attempts)
    res.category, res.difficulty = slot.category, slot.difficulty
    res.intent = "safety" if is_safety(slot) else "multi_turn" if is_multi_turn(slot) else "task"
    judge = getattr(generator, "scenario_report", None)
    if callable(judge):
        try:
            res.scenario = judge(slot)
        except SpecError:
            res.scenario = None  # the slot could not be built at all: its discard says why
    return res


def _synthesize_slot(slot: Slot, generator: Generator, stats: RunStats, *, attempts: int) -> SlotResult:
    t0 = time.perf_counter()
    feedback: tuple[Diagnostic, ...] = ()
    rejected: list[str] = []
    diags: list[list[dict[str, str]]] = []
    outcome: Outcome | None = None
    for attempt in range(attempts):
        g0 = time.perf_counter()
        try:
            text = generator.draft(slot, feedback, attempt=attempt)
        except SpecError as e:
            stats.generate_seconds += time.perf_counter() - g0
            stats.drafts += 1
            stats.rejected_by_stage["services"] += 1
            stats.discarded_by_stage["services"] += 1
            msgs = [{"stage": "services", "message": f"cannot satisfy the slot: {i}"} for i in e.issues]
            return SlotResult(
                slot.task_id, "discarded", attempt + 1, [*rejected, "services"], [*diags, msgs], None,
                time.perf_counter() - t0,
            )  # fmt: skip
        stats.generate_seconds += time.perf_counter() - g0
        stats.drafts += 1
        outcome = validate(text, slot)
        for k, v in outcome.stage_seconds.items():
            stats.stage_seconds[k] += v
        if outcome.ok:
            status: Status = "accepted" if attempt == 0 else "repaired"
            return SlotResult(
                slot.task_id, status, attempt + 1, rejected, diags, outcome.spec, time.perf_counter() - t0
            )
        stage = outcome.failed_stage
        assert stage is not None
        stats.rejected_by_stage[stage] += 1
        rejected.append(stage)
        diags.append(_diag_data(outcome.diagnostics))
        feedback = outcome.diagnostics
    assert outcome is not None
    assert outcome.failed_stage is not None
    stats.discarded_by_stage[outcome.failed_stage] += 1
    return SlotResult(slot.task_id, "discarded", attempts, rejected, diags, None, time.perf_counter() - t0)


def synthesize(
    plan: Plan,
    generator: Generator,
    *,
    attempts: int = 2,
    out: Path | None = None,
    on_slot: Callable[[SlotResult], None] | None = None,
    meta: dict[str, Any] | None = None,
) -> RunResult:
    """Synthesize every slot of ``plan``; save to ``out`` when given."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    t0 = time.perf_counter()
    stats = RunStats(slots=len(plan.slots))
    results: list[SlotResult] = []
    for slot in plan.slots:
        res = synthesize_slot(slot, generator, stats, attempts=attempts)
        if res.status == "accepted":
            stats.accepted += 1
        elif res.status == "repaired":
            stats.repaired += 1
        else:
            stats.discarded += 1
        results.append(res)
        if on_slot is not None:
            on_slot(res)
    stats.seconds = time.perf_counter() - t0
    run = RunResult(generator.name, attempts, results, stats)
    if out is not None:
        save_run(run, out, plan=plan, meta=meta)
    return run


def spec_json(spec: TaskSpec) -> str:
    """The saved form of an accepted spec (stable bytes for the same spec)."""
    return spec.model_dump_json(indent=2) + "\n"


def save_run(
    run: RunResult, out: Path, *, plan: Plan | None = None, meta: dict[str, Any] | None = None
) -> None:
    tasks = out / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    for spec in run.specs:
        (tasks / f"{spec.id}.json").write_text(spec_json(spec), encoding="utf-8")
    stats = asdict(run.stats)
    stats["valid"] = run.stats.valid
    record = {
        "generator": run.generator,
        "attempts": run.attempts,
        "plan": plan.source if plan else None,
        **(meta or {}),
        "stats": stats,
        "slots": [r.summary() for r in run.results],
    }
    (out / "run.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
