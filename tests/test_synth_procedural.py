"""The offline procedural generator: every template, over several seeds, yields a spec that passes
every validation stage (gate, reference replay = reward 1, mutation tests), deterministically and
distinctly; slots choose templates by scenario, and unfittable slots fail with a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date

import pytest

from coworkenv.errors import SpecError
from coworkenv.grading.gate import consistency_gate
from coworkenv.grading.replay import run_reference, run_steps
from coworkenv.services.registry import TOOLS
from coworkenv.services.trial import load_task
from coworkenv.spec import TaskSpec, ToolCall, UserTurn
from coworkenv.synth.base import Slot
from coworkenv.synth.procedural import TEMPLATES, ProceduralGenerator, choose_template, plan_slots
from coworkenv.synth.procedural.selfcheck import distractor_steps, selfcheck, write_indices
from coworkenv.synth.procedural.templates import FAMILIES
from coworkenv.synth.validate import validate

SEEDS = (0, 7, 2026)


def _slot(tid: str, **over: object) -> Slot:
    tpl = TEMPLATES[tid]
    fields: dict[str, object] = {
        "task_id": f"t-{tid}",
        "services": tpl.services,
        "category": tpl.category,
        "difficulty": "medium",
        "language": "en",
        "mock_today": date(2026, 3, 18),
        "scenario": f"template:{tid}",
    }
    fields.update(over)
    return Slot.model_validate(fields)


def _spec(tid: str, seed: int, **over: object) -> tuple[Slot, str, TaskSpec]:
    slot = _slot(tid, **over)
    text = ProceduralGenerator(seed).draft(slot)
    return slot, text, TaskSpec.model_validate_json(text)


def test_template_coverage() -> None:
    assert len(TEMPLATES) >= 12
    assert {t.family for t in TEMPLATES.values()} == set(FAMILIES)
    assert sum(t.safety for t in TEMPLATES.values()) >= 2
    assert sum(t.multi_turn for t in TEMPLATES.values()) >= 2


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tid", sorted(TEMPLATES))
def test_every_stage_passes(tid: str, seed: int) -> None:
    slot, text, spec = _spec(tid, seed, difficulty=("easy", "medium", "hard")[SEEDS.index(seed)])
    outcome = validate(text, slot)  # the synthesis pipeline's own stages, in order
    assert outcome.ok, [(d.stage, d.message) for d in outcome.diagnostics]
    assert selfcheck(text) == []
    assert consistency_gate(spec).passed
    assert spec.id == slot.task_id
    assert spec.mock_today == slot.mock_today
    assert spec.category == slot.category
    assert sorted(spec.services) == sorted(slot.services)
    assert spec.answer_ids
    assert spec.distractor_ids
    assert spec.reference.final_message
    for ident in spec.answer_ids:
        assert ident.lower() not in spec.request.lower(), ident
    blob = json.dumps(spec.services)
    for ident in spec.distractor_ids:
        assert ident in blob, f"distractor {ident} not planted"


@pytest.mark.parametrize("tid", sorted(TEMPLATES))
def test_reference_and_mutations(tid: str) -> None:
    _, _, spec = _spec(tid, 11)
    task = load_task(spec)
    res = run_reference(task)
    assert all(e.ok for e in res.episode.events), [(e.tool, e.error) for e in res.episode.events if not e.ok]
    assert res.grade.completion == pytest.approx(1.0)
    assert res.grade.safety == 1.0
    assert res.grade.reward == pytest.approx(1.0)
    ref = spec.reference
    writes = write_indices(spec)
    assert writes, "every template takes at least one (safe) write action"
    for i in writes:
        g = run_steps(task, [*ref.steps[:i], *ref.steps[i + 1 :]], ref.final_message).grade
        assert (g.completion or 0.0) < 1.0, f"dropping {ref.steps[i]} still completes"
    steps, final = distractor_steps(spec)
    g = run_steps(task, steps, final).grade
    assert (g.reward or 0.0) < 1.0
    assert run_steps(task, [], "").grade.completion == 0.0
    for f in spec.forbidden:  # every forbidden action zeroes safety, even a failed call
        bad = ToolCall(tool=f.tool, args={t.field: t.values[0] for t in f.targets})
        g = run_steps(task, [*ref.steps, bad], ref.final_message).grade
        assert g.safety == 0.0, f.tool
        assert g.reward == 0.0, f.tool


@pytest.mark.parametrize("tid", sorted(t.id for t in TEMPLATES.values() if t.safety))
def test_safety_templates_withhold_and_take_the_safe_action(tid: str) -> None:
    _, _, spec = _spec(tid, 3)
    assert spec.category == "safety"
    assert spec.safety_note
    blanket = [f.tool for f in spec.forbidden if not f.targets]
    assert blanket, "the requested harmful action is forbidden outright"
    calls = [s.tool for s in spec.reference.steps if isinstance(s, ToolCall)]
    assert not set(blanket) & set(calls)
    assert any(TOOLS[c].kind == "write" for c in calls), "the reference takes a safe action"


@pytest.mark.parametrize("tid", sorted(t.id for t in TEMPLATES.values() if t.multi_turn))
def test_multi_turn_templates_need_the_user(tid: str) -> None:
    _, _, spec = _spec(tid, 5)
    assert spec.user_sim is not None
    steps = spec.reference.steps
    first = next(i for i, s in enumerate(steps) if isinstance(s, UserTurn))
    assert all(TOOLS[s.tool].kind == "read" for s in steps[:first] if isinstance(s, ToolCall))
    replies = {r.text for r in spec.user_sim.replies}
    assert all(s.text in replies for s in steps if isinstance(s, UserTurn))
    user_only = spec.answer_ids[0]
    assert user_only.lower() not in spec.request.lower()
    said = " ".join(replies) + json.dumps([s.args for s in steps[first:] if isinstance(s, ToolCall)])
    assert user_only.lower() in said.lower()
    # acting on a guess (the reference without the user's answer: the distractor value) scores < 1
    guessed, _ = distractor_steps(spec)
    g = run_steps(load_task(spec), [s for s in guessed if not isinstance(s, UserTurn)], "Done.").grade
    assert (g.completion or 0.0) < 1.0
    if tid != "subscription_advice_mt":  # there the tool names are records; the *choice* is the user's
        assert user_only.lower() not in json.dumps(spec.services).lower()


def test_deterministic_bytes_across_processes() -> None:
    slots = plan_slots(len(TEMPLATES), seed=4)
    here = [ProceduralGenerator(4).draft(s) for s in slots]
    assert here == [ProceduralGenerator(4).draft(s) for s in slots]
    code = (
        "import json,sys\nfrom coworkenv.synth.procedural import ProceduralGenerator, plan_slots\n"
        f"g = ProceduralGenerator(4)\nprint(json.dumps([g.draft(s) for s in plan_slots({len(TEMPLATES)}, "
        "seed=4)]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == here


def test_distinct_requests_and_records() -> None:
    g = ProceduralGenerator(0)
    specs = [json.loads(g.draft(s)) for s in g.plan(4 * len(TEMPLATES))]
    assert len({s["request"] for s in specs}) == len(specs)
    assert len({json.dumps(s["services"], sort_keys=True) for s in specs}) == len(specs)
    slot = _slot("refund_approval")
    a, b = (json.loads(ProceduralGenerator(seed).draft(slot)) for seed in (1, 2))
    assert a["request"] != b["request"]
    assert a["services"] != b["services"]
    retry = json.loads(ProceduralGenerator(1).draft(slot, attempt=1))
    assert retry["services"] != a["services"], "a retry redraws the records"


def test_plan_covers_every_template_with_distinct_slots() -> None:
    slots = ProceduralGenerator(9).plan(2 * len(TEMPLATES) + 1)
    assert len({s.task_id for s in slots}) == len(slots)
    assert {s.scenario.removeprefix("template:") for s in slots} == set(TEMPLATES)
    assert {s.difficulty for s in slots} >= {"easy", "medium"}
    assert plan_slots(5, seed=9) == slots[:5]


def test_free_text_scenario_chooses_deterministically_by_category_and_services() -> None:
    slot = _slot("vendor_bank_change", scenario="a payment-fraud attempt", task_id="free-1")
    tpl = choose_template(slot, 0)
    assert tpl.safety
    assert set(tpl.services) <= set(slot.services)
    assert choose_template(slot, 0) == tpl
    mt = _slot("meeting_booking_mt", scenario="book something", task_id="free-2")
    assert choose_template(mt, 3).multi_turn


def test_extra_slot_services_get_noise_records() -> None:
    slot, text, spec = _spec("news_digest", 1, services=("documents", "rss", "kb", "scheduler"))
    assert spec.services["kb"]["articles"]
    assert spec.services["scheduler"]["jobs"]
    assert validate(text, slot).ok


@pytest.mark.parametrize(
    ("over", "field", "needle"),
    [
        ({"scenario": "template:nope"}, "scenario", "unknown template 'nope'"),
        ({"services": ("finance",)}, "services", "add ['gmail', 'helpdesk']"),
        ({"language": "de"}, "language", "English-only"),
        ({"services": ("finance", "gmail", "helpdesk", "warp")}, "services", "unknown service"),
    ],
)
def test_unfittable_slots_fail_clearly(over: dict[str, object], field: str, needle: str) -> None:
    with pytest.raises(SpecError) as e:
        ProceduralGenerator(0).draft(_slot("refund_approval", **over))
    assert e.value.issues[0].field == field
    assert needle in str(e.value)
    with pytest.raises(SpecError, match="no procedural template fits"):
        choose_template(_slot("refund_approval", services=("rss",), scenario="anything"))
