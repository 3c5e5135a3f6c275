"""The offline procedural generator: scenario templates × seeded synthetic records → task specs.

Contract:

* ``ProceduralGenerator(seed).draft(slot, feedback=(), attempt=0)`` returns the JSON text of a
  complete :class:`~coworkenv.spec.TaskSpec` (records, request, weighted checks, forbidden
  actions, reference solution, answer/distractor ids, a scripted user for multi-turn templates).
  No LLM, no network, no clock: the same (seed, slot, attempt) gives byte-identical text; a retry
  (``attempt`` > 0) draws fresh records.
* A slot picks its template by ``scenario``: ``template:<id>`` names one (see :data:`TEMPLATES`);
  any other text chooses deterministically, from the seed and task id, among the templates whose
  services the slot provides, preferring those whose category/family matches the slot's category
  and whose service set equals the slot's. Services the slot adds beyond the template's get noise
  records. An unknown template, a slot missing a template's services, or a non-English slot raises
  :class:`~coworkenv.errors.SpecError` naming the slot and field.
* ``mode`` decides between the templates and the compositional generator
  (:mod:`coworkenv.synth.procedural.compose`, any slot of registered services): ``auto`` (default)
  uses a template when the scenario names one or one fits the services (unless the template selects
  other records than a free-text scenario names and does none of what it asks), and composes otherwise
  (and always for a ``compose:`` scenario); ``compose`` composes every slot but ``template:`` ones;
  ``templates`` never composes (the old behaviour: no fitting template is an error).
* ``ProceduralGenerator.plan(n, seed)`` returns ``n`` distinct slots cycling over every template
  (difficulties and ``mock_today`` varied), the coverage plan the benchmark and the main job use.
* The distractor path of every generated task is: swap ``answer_ids[0]`` for ``distractor_ids[0]``
  in the reference arguments and final message (scores < 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from typing import Any

from coworkenv.errors import SpecError
from coworkenv.synth.base import Diagnostic, Slot
from coworkenv.synth.plan import is_safety
from coworkenv.synth.procedural.builder import SpecBuilder
from coworkenv.synth.procedural.fillers import FILLERS, fill
from coworkenv.synth.procedural.records import Rng, seed_int
from coworkenv.synth.procedural.scenario import (
    Verdict,
    fidelity,
    judge_recipe,
    judge_template,
    read_scenario,
    report,
)
from coworkenv.synth.procedural.templates import TEMPLATES, Template
from coworkenv.synth.procedural.zh import is_zh

__all__ = [
    "MODES",
    "TEMPLATES",
    "ProceduralGenerator",
    "Template",
    "builder_for",
    "choose_template",
    "plan_slots",
    "uses_composer",
]

DIFFICULTIES = ("easy", "medium", "hard")
PLAN_EPOCH = date(2026, 1, 5)


def _slot_error(slot: Slot, field: str, message: str) -> SpecError:
    return SpecError.single(f"slot {slot.task_id}", field, message)


def choose_template(slot: Slot, seed: int = 0) -> Template:
    """The template a slot asks for (see the module docstring); raises SpecError if none fits."""
    if slot.language.lower() not in ("en", "en-us", "en-gb"):
        raise _slot_error(
            slot,
            "language",
            f"procedural templates are English-only, got {slot.language!r}; "
            "use language 'en' or the llm generator",
        )
    have = set(slot.services)
    scenario = slot.scenario.strip()
    if scenario.startswith("template:"):
        tid = scenario.removeprefix("template:").strip()
        tpl = TEMPLATES.get(tid)
        if tpl is None:
            raise _slot_error(slot, "scenario", f"unknown template {tid!r}; known: {sorted(TEMPLATES)}")
        missing = sorted(set(tpl.services) - have)
        if missing:
            raise _slot_error(
                slot,
                "services",
                f"template {tid} needs services {list(tpl.services)}; add {missing} to the slot",
            )
        _check_fillable(slot, tpl)
        return tpl
    fitting = [t for t in TEMPLATES.values() if set(t.services) <= have and not _unfillable(slot, t)]
    if not fitting:
        raise _slot_error(
            slot,
            "services",
            f"no procedural template fits services {sorted(have)}; templates "
            f"need one of {sorted({tuple(t.services) for t in TEMPLATES.values()})}; or compose the "
            "task from the services instead (generator mode auto/compose, CLI --compose auto)",
        )
    cat = slot.category.lower()
    narrowers: tuple[Callable[[Template], bool], ...] = (
        lambda t: cat in (t.category, t.family) and set(t.services) == have,
        lambda t: cat in (t.category, t.family),
        lambda t: set(t.services) == have,
    )
    for narrow in narrowers:
        better = [t for t in fitting if narrow(t)]
        if better:
            fitting = better
            break
    if cat == "safety" or "safety" in scenario.lower():
        fitting = [t for t in fitting if t.safety] or fitting
    if "multi" in cat or "multi-turn" in scenario.lower() or "multi_turn" in scenario.lower():
        fitting = [t for t in fitting if t.multi_turn] or fitting
    ordered = sorted(fitting, key=lambda t: t.id)
    return ordered[seed_int(seed, slot.task_id, "choose") % len(ordered)]


def _unfillable(slot: Slot, tpl: Template) -> list[str]:
    return sorted(s for s in slot.services if s not in tpl.services and s not in FILLERS)


def _check_fillable(slot: Slot, tpl: Template) -> None:
    bad = _unfillable(slot, tpl)
    if bad:
        raise _slot_error(slot, "services", f"unknown service(s) {bad}; known: {sorted(FILLERS)}")


MODES = ("auto", "compose", "templates")


def uses_composer(slot: Slot, mode: str = "auto", seed: int = 0) -> bool:
    """Whether ``mode`` sends ``slot`` to the compositional generator (see the module docstring)."""
    scenario = slot.scenario.strip()
    if scenario.startswith("template:") or mode == "templates":
        return False
    if scenario.startswith("compose:") or mode == "compose":
        return True
    return builder_for(slot, mode, seed)[0] == "compose"


def builder_for(slot: Slot, mode: str = "auto", seed: int = 0) -> tuple[str, list[Verdict]]:
    """``("compose" | "template:<id>", verdicts)``: the builder ``mode`` gives ``slot`` and the
    verdict on each part of its free-text scenario (:mod:`~coworkenv.synth.procedural.scenario`).
    In ``auto`` a template that fits is kept unless it selects other records than the scenario
    names, honours none of its conditions and writes, and a composed task selects those records —
    or the composed task honours more of the scenario (:func:`fidelity`) and the slot is not a
    safety one that a safety template fits."""
    from coworkenv.synth.procedural.compose import recipe_for

    scenario = slot.scenario.strip()
    parts = read_scenario(scenario, slot.services)
    if scenario.startswith("template:") or mode == "templates":
        tpl = choose_template(slot, seed)
        return f"template:{tpl.id}", judge_template(parts, tpl)
    if scenario.startswith("compose:") or mode == "compose" or is_zh(slot.language):
        # (the templates write English only)
        return "compose", judge_recipe(parts, recipe_for(slot, seed), slot.services)
    try:
        tpl = choose_template(slot, seed)
    except SpecError as e:
        if any(i.field == "services" and "no procedural template fits" in i.message for i in e.issues):
            return "compose", judge_recipe(parts, recipe_for(slot, seed), slot.services)
        raise
    kept = judge_template(parts, tpl)
    if not parts:
        return f"template:{tpl.id}", kept
    try:
        composed = judge_recipe(parts, recipe_for(slot, seed), slot.services)
    except SpecError:
        return f"template:{tpl.id}", kept
    if _selects(composed) and not _selects(kept) and not _acts(kept):  # the template's task is another
        return "compose", composed
    if (
        tpl.safety
        and is_safety(slot)
        and not any(v.part.kind == "select" and v.status == "ignored" for v in kept)
    ):  # a safety template's trap (a look-alike domain, a spoofed request) is more than its parts
        return f"template:{tpl.id}", kept
    if fidelity(composed) > fidelity(kept):  # the composed task does more of what the scenario asks
        return "compose", composed
    return f"template:{tpl.id}", kept


def _selects(verdicts: Sequence[Verdict]) -> bool:
    return any(v.part.kind == "select" and v.status == "honoured" for v in verdicts)


def _acts(verdicts: Sequence[Verdict]) -> bool:
    """Whether a build honours any of the scenario's conditions or writes."""
    return any(v.part.kind in ("condition", "write") and v.status == "honoured" for v in verdicts)


class ProceduralGenerator:
    """The embedded default generator (see the module docstring)."""

    name = "procedural"

    def __init__(self, seed: int = 0, mode: str = "auto") -> None:
        if mode not in MODES:
            raise ValueError(f"procedural mode must be one of {list(MODES)}, got {mode!r}")
        self.seed = seed
        self.mode = mode

    def build(self, slot: Slot, *, attempt: int = 0) -> dict[str, object]:
        """The spec as a plain dict (``draft`` is its JSON text)."""
        if uses_composer(slot, self.mode, self.seed):
            from coworkenv.synth.procedural.compose import compose_spec

            return compose_spec(slot, self.seed, attempt=attempt)
        tpl = choose_template(slot, self.seed)
        parts: tuple[object, ...] = (self.seed, slot.task_id, tpl.id, slot.mock_today.isoformat())
        if attempt:
            parts = (*parts, attempt)
        b = SpecBuilder(slot, tpl.id, Rng(*parts, today=slot.mock_today))
        tpl.build(b)
        for svc in slot.services:
            if svc not in b.records:
                fill(b, svc)
        b.tags.extend(t for t, on in (("safety", tpl.safety), ("multi_turn", tpl.multi_turn)) if on)
        b.tags.append(tpl.family)
        return b.build()

    def scenario_report(self, slot: Slot) -> dict[str, Any]:
        """What of the slot's scenario the task it gets honours (``run.json``'s ``scenario``)."""
        builder, verdicts = builder_for(slot, self.mode, self.seed)
        return report(builder, verdicts)

    def draft(self, slot: Slot, feedback: Sequence[Diagnostic] = (), *, attempt: int = 0) -> str:
        del feedback  # templates are correct by construction; a retry only redraws the records
        return json.dumps(self.build(slot, attempt=attempt), indent=1, ensure_ascii=False)

    def plan(self, n: int, seed: int | None = None) -> list[Slot]:
        return plan_slots(n, self.seed if seed is None else seed)


def plan_slots(n: int, seed: int = 0, templates: Sequence[str] | None = None) -> list[Slot]:
    """``n`` distinct slots cycling over the templates (all by default), difficulties and dates."""
    ids = list(templates) if templates is not None else sorted(TEMPLATES)
    unknown = sorted(set(ids) - set(TEMPLATES))
    if unknown:
        raise SpecError.single(
            "plan", "templates", f"unknown templates {unknown}; known: {sorted(TEMPLATES)}"
        )
    slots = []
    for i in range(n):
        tpl = TEMPLATES[ids[i % len(ids)]]
        offset = seed_int(seed, i, "day") % 365
        slots.append(
            Slot(
                task_id=f"proc-s{seed}-{i:05d}-{tpl.id}",
                services=tpl.services,
                category=tpl.category,
                difficulty=DIFFICULTIES[(i // len(ids)) % len(DIFFICULTIES)],
                language="en",
                mock_today=PLAN_EPOCH + timedelta(days=offset),
                scenario=f"template:{tpl.id}",
            )
        )
    return slots
