"""Synthesis core: coverage plans, the staged validator, the scripted generator's broken candidates,
the repair loop and its per-stage accounting, saved runs, and the `plan report` / `synth` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from coworkenv.errors import SpecError
from coworkenv.services.registry import SERVICES
from coworkenv.synth.base import STAGES, Slot
from coworkenv.synth.pipeline import synthesize
from coworkenv.synth.plan import Plan, coverage, load_plan, plan_from_data
from coworkenv.synth.scripted import ScriptedGenerator, ScriptError, base_spec, break_for, shift_dates
from coworkenv.synth.validate import distractor_path, required_steps, validate, validate_spec
from coworkenv.tasks.builtin import builtin_task, builtin_tasks

DEMO = Path(__file__).resolve().parents[1] / "examples" / "plans" / "demo.yaml"


def _slot(task_id: str = "t1", services: tuple[str, ...] = ("helpdesk", "kb"), **kw: object) -> Slot:
    data: dict[str, object] = {
        "task_id": task_id,
        "services": services,
        "category": "support",
        "difficulty": "medium",
        "mock_today": date(2026, 4, 1),
        "scenario": "Resolve the SSL ticket with the KB fix.",
    }
    data.update(kw)
    return Slot.model_validate(data)


def _plan(*slots: Slot) -> Plan:
    return Plan(tuple(slots), "<test>")


# ------------------------------------------------------------------ plans


def test_demo_plan_loads_with_safety_and_multi_turn() -> None:
    plan = load_plan(DEMO)
    assert len(plan.slots) == 12
    cov = coverage(plan)
    assert len(cov.safety_slots) >= 2
    assert len(cov.multi_turn_slots) >= 1
    assert sum(cov.by_category.values()) == 12


def test_plan_errors_name_slot_field_and_fix(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        """
slots:
  - {task_id: a, services: [helpdesk, mailbox], category: ops, difficulty: easy,
     mock_today: "2026-03-10", scenario: x}
  - {task_id: b, services: [kb], category: ops, difficulty: easy, mock_today: 2026-13-40, scenario: x}
  - {task_id: a, services: [kb], category: ops, difficulty: easy, mock_today: "2026-03-10", scenario: x}
  - {task_id: c, services: [kb], category: ops, difficulty: easy, mock_today: "2026-03-10",
     scenario: x, notes: extra}
"""
    )
    with pytest.raises(SpecError) as ei:
        load_plan(bad)
    text = str(ei.value)
    assert str(bad) in text
    fields = [i.field for i in ei.value.issues]
    assert "slots[0] (a).services[1]" in fields
    assert "registered services" in text
    assert "'mailbox'" in text
    assert any(f.startswith("slots[1] (b).mock_today") for f in fields)
    assert "ISO date" in text
    assert "slots[2] (a).task_id" in fields
    assert "duplicate task_id" in text
    assert "slots[3] (c).notes" in fields
    assert "seven fields" in text


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("helpdesk", "`slots:` list"),
        ([1, 2], "a slot must be a mapping"),  # a bare list is the slots
        ({"slots": []}, "non-empty"),
        ({"slots": [{"task_id": "a"}], "extra": 1}, "unknown top-level key"),
        (
            {
                "slots": [
                    {
                        "task_id": "a",
                        "services": "kb",
                        "category": "c",
                        "difficulty": "d",
                        "mock_today": "2026-01-01",
                        "scenario": "s",
                    }
                ]
            },
            "must be a list",
        ),
    ],
)
def test_plan_shape_errors(data: object, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        plan_from_data(data, "p.yaml")


def test_coverage_lists_tools_of_unused_services() -> None:
    cov = coverage(_plan(_slot("a"), _slot("b", ("helpdesk", "gmail"), category="safety")))
    assert cov.by_service == {"gmail": 1, "helpdesk": 2, "kb": 1}
    assert cov.service_category[("helpdesk", "support")] == 1
    assert [s.task_id for s in cov.safety_slots] == ["b"]
    assert "crm" in cov.unused_services
    assert "helpdesk" not in cov.unused_services
    assert set(cov.unused_tools["crm"]) == set(SERVICES["crm"].tool_table)
    assert cov.unused_tool_count == sum(len(SERVICES[s].tool_table) for s in cov.unused_services)


# ------------------------------------------------------------------ validation


def test_every_builtin_task_passes_all_stages() -> None:
    for spec in builtin_tasks():
        outcome = validate_spec(spec)
        assert outcome.ok, (spec.id, outcome.diagnostics)
        assert list(outcome.stage_seconds) == list(STAGES)


STAGE_NEEDLES = {
    "json_parse": "invalid JSON",
    "tool_conflict": "required by check",
    "weights": "sum to",
    "services": "payroll",
    "leakage": "request names answer id",
    "gate": "safety 0",
    "replay": "the reference scores completion",
    "mutation": "doing nothing scores completion",
}


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_rejects_its_broken_candidate(stage: str) -> None:
    slot = _slot()
    data = base_spec(slot)
    assert validate(json.dumps(data), slot).ok
    outcome = validate(break_for(stage, data), slot)
    assert outcome.failed_stage == stage
    assert outcome.spec is None
    assert all(d.stage == stage for d in outcome.diagnostics)
    assert any(STAGE_NEEDLES[stage] in d.message for d in outcome.diagnostics), outcome.diagnostics


def test_services_stage_also_reports_a_service_without_records() -> None:
    slot = _slot(services=("gmail", "finance"), category="safety")
    outcome = validate(break_for("services", base_spec(slot)), slot)
    text = " ".join(d.message for d in outcome.diagnostics)
    assert "no initial records" in text
    assert "unknown service" in text


def test_slot_mismatch_is_a_parse_stage_problem() -> None:
    slot = _slot()
    data = base_spec(slot) | {"id": "other", "mock_today": "2026-01-01"}
    outcome = validate(json.dumps(data), slot)
    assert outcome.failed_stage == "json_parse"
    assert any("task_id" in d.message for d in outcome.diagnostics)
    assert any("mock_today" in d.message for d in outcome.diagnostics)


def test_mutation_catches_a_distractor_path_that_still_scores() -> None:
    spec = builtin_task("M1003_ticket_kb_resolution")
    data = json.loads(spec.model_dump_json())
    data["distractor_ids"] = ["KB-311"]  # aligned with TK-1003: the swap only touches the ticket id
    data["answer_ids"] = ["NOT-IN-REFERENCE", *spec.answer_ids]
    data["services"]["helpdesk"]["tickets"][0]["description"] += " NOT-IN-REFERENCE"
    outcome = validate(json.dumps(data))
    assert outcome.failed_stage == "mutation"
    assert any("distractor path equals the reference" in d.message for d in outcome.diagnostics)


def test_mutation_helpers() -> None:
    spec = builtin_task("M133_safety_payment_change_refusal")
    req = required_steps(spec)
    assert req  # read-only reference: the sole calls of checked tools are required
    path = distractor_path(spec)
    assert path is not None
    assert "msg_1333" in json.dumps([s.model_dump() for s in path[0]])


def test_shift_dates_keeps_ids_and_timestamps() -> None:
    text = '{"d": "2026-03-10", "t": "2026-03-10T09:00:00Z", "id": "INV-2026-011", "x": "12026-01-01"}'
    out = json.loads(shift_dates(text, 25))
    assert out == {"d": "2026-04-04", "t": "2026-04-04T09:00:00Z", "id": "INV-2026-011", "x": "12026-01-01"}


# ------------------------------------------------------------------ repair loop and accounting


def test_repair_loop_accepts_after_one_retry() -> None:
    gen = ScriptedGenerator({"t1": "gate"})
    run = synthesize(_plan(_slot()), gen)
    (res,) = run.results
    assert res.status == "repaired"
    assert res.attempts == 2
    assert res.rejected_at == ["gate"]
    assert run.stats.rejected_by_stage["gate"] == 1
    assert run.stats.repaired == 1
    assert run.stats.accepted == 0
    # the retry received the gate diagnostics
    (_, a0, fb0), (_, a1, fb1) = gen.calls
    assert (a0, fb0) == (0, ())
    assert a1 == 1
    assert fb1
    assert all(d.stage == "gate" for d in fb1)


def test_generator_without_feedback_is_not_repaired() -> None:
    gen = ScriptedGenerator({"t1": "leakage"})
    slot = _slot()
    first = gen.draft(slot)
    assert gen.draft(slot, (), attempt=1) == first  # no diagnostics: nothing to fix


def test_budget_exhausted_discards() -> None:
    run = synthesize(_plan(_slot()), ScriptedGenerator({"t1": ["weights", "replay"]}))
    (res,) = run.results
    assert res.status == "discarded"
    assert res.spec is None
    assert res.rejected_at == ["weights", "replay"]
    assert run.stats.discarded_by_stage["replay"] == 1
    assert sum(run.stats.discarded_by_stage.values()) == 1
    # a larger budget repairs both
    run3 = synthesize(_plan(_slot()), ScriptedGenerator({"t1": ["weights", "replay"]}), attempts=3)
    assert run3.results[0].status == "repaired"


def test_counts_per_stage_over_a_run(tmp_path: Path) -> None:
    slots = [_slot(f"t{i}", mock_today=date(2026, 4, 1 + i)) for i in range(len(STAGES) + 2)]
    faults: dict[str, list[str]] = {f"t{i}": [s] for i, s in enumerate(STAGES)}
    faults[f"t{len(STAGES)}"] = ["mutation", "json_parse"]  # discarded at json_parse
    run = synthesize(_plan(*slots), ScriptedGenerator(faults), out=tmp_path)
    st = run.stats
    assert st.slots == len(slots)
    assert st.drafts == len(slots) + len(STAGES) + 1
    assert (st.accepted, st.repaired, st.discarded) == (1, len(STAGES), 1)
    expected = dict.fromkeys(STAGES, 1)
    expected["mutation"] += 1
    expected["json_parse"] += 1
    assert st.rejected_by_stage == expected
    assert st.discarded_by_stage == {s: int(s == "json_parse") for s in STAGES}
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["stats"]["rejected_by_stage"] == expected
    assert saved["stats"]["valid"] == len(slots) - 1
    assert {s["task_id"]: s["status"] for s in saved["slots"]}[f"t{len(STAGES)}"] == "discarded"
    files = sorted(p.stem for p in (tmp_path / "tasks").glob("*.json"))
    assert files == sorted(r.task_id for r in run.results if r.spec is not None)


def test_saved_specs_are_deterministic(tmp_path: Path) -> None:
    plan = load_plan(DEMO)
    synthesize(plan, ScriptedGenerator({"demo_vpn_kb_correction": "mutation"}), out=tmp_path / "a")
    synthesize(plan, ScriptedGenerator({"demo_vpn_kb_correction": "mutation"}), out=tmp_path / "b")
    a = {p.name: p.read_bytes() for p in (tmp_path / "a" / "tasks").iterdir()}
    b = {p.name: p.read_bytes() for p in (tmp_path / "b" / "tasks").iterdir()}
    assert a == b
    assert len(a) == 12


def test_scripted_generator_errors_clearly() -> None:
    with pytest.raises(ScriptError, match="no canned spec"):
        ScriptedGenerator().draft(_slot(services=("rss",)))
    with pytest.raises(ScriptError, match="unknown stage"):
        ScriptedGenerator({"t1": "nonsense"})


# ------------------------------------------------------------------ CLI


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coworkenv.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_plan_report_and_synth(tmp_path: Path) -> None:
    r = _cli("plan", "report", str(DEMO))
    assert r.returncode == 0, r.stderr
    assert "safety scenarios (2)" in r.stdout
    assert "registered tools no slot exercises" in r.stdout
    r = _cli(
        "synth",
        str(DEMO),
        "--generator",
        "scripted",
        "--out",
        str(tmp_path),
        "--fault",
        "demo_ssl_ticket_triage=gate",
    )
    assert r.returncode == 0, r.stderr
    assert "repaired" in r.stdout
    assert "valid" in r.stdout
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["stats"]["repaired"] == 1
    assert run["stats"]["valid"] == 12
    assert len(list((tmp_path / "tasks").glob("*.json"))) == 12


def test_cli_bad_plan_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("slots:\n  - {task_id: a, services: [nope]}\n")
    r = _cli("plan", "report", str(bad))
    assert r.returncode == 2
    assert "error:" in r.stderr
    assert "unknown service 'nope'" in r.stderr
    assert "Traceback" not in r.stderr
