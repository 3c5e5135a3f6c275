"""The offline generator builds what hand-written scenarios describe (issue 31).

``tests/data/scenario_suite.yaml`` holds 44 scenario slots (14 services, 10 categories, varied
phrasings), each with the parts a human reader extracts. Every slot is built, validated (replay =
1.0, mutation tests) and each part checked against the *built task* by
:mod:`coworkenv.synth.procedural.expectations` — not against the generator's own verdicts. The
second set, ``scenario_suite_heldout.yaml``, was written after the reading was frozen; it found
four general defects (recipients, status values, drawn extra conditions, "after N days"), which
were fixed, so it is no longer a clean held-out measure (see the results file).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coworkenv.synth.base import Slot
from coworkenv.synth.procedural import ProceduralGenerator
from coworkenv.synth.procedural.expectations import (
    Expect,
    check_part,
    judge_slot,
    load_suite,
    run_suite,
    summary,
)
from coworkenv.synth.validate import validate

DATA = Path(__file__).resolve().parent / "data"
RECORD_VALUES = frozenset(
    [
        "error",
        "failed",
        "warning",
        "critical",
        "high",
        "low",
        "medium",
        "risk",
        "enterprise",
        "premium",
        "platinum",
        "gold",
        "degraded",
        "watch",
        "active",
        "recheck",
        "success",
        "utc",
        "status",
        "review",
        "list",
    ]
)
"""Latin words a Chinese request may carry: the records' own field values (and UTC)."""


@pytest.mark.parametrize("name", ["scenario_suite", "scenario_suite_heldout"])
def test_the_suite_is_built_as_written_and_the_rest_is_reported(name: str) -> None:
    results = run_suite(DATA / f"{name}.yaml")
    got = summary(results)
    if name == "scenario_suite":
        assert got["slots"] >= 40
        services = {s for slot, _ in load_suite(DATA / f"{name}.yaml") for s in slot.services}
        assert len(services) == 14  # every service of the registry
    assert got["refused"] == 0  # every slot builds and validates
    assert got["full"] >= 0.9 * got["slots"], [r.as_dict() for r in results if not r.full]
    assert got["silent"] == 0, [p.__dict__ for r in results for p in r.parts if p.outcome == "silent"]
    assert got["false_honour"] == 0  # the generator never calls a part honoured that is not built


def _slot(scenario: str, services: tuple[str, ...]) -> Slot:
    return Slot.model_validate(
        {
            "task_id": "probe",
            "services": services,
            "category": "ops",
            "difficulty": "medium",
            "language": "en",
            "mock_today": "2026-03-10",
            "scenario": scenario,
        }
    )


def test_the_checker_fails_a_task_that_does_something_else() -> None:
    """The checks can fail: a task built for another scenario is judged against this one's parts,
    and an honoured verdict on a part the task lacks counts as a false honour."""
    asked = _slot(
        "Close the tickets open for more than 30 days and email ops@company.com.", ("helpdesk", "gmail")
    )
    other = _slot("Find critical tickets and move them to in progress.", ("helpdesk", "gmail"))
    spec = validate(ProceduralGenerator(0).draft(other), other).spec
    assert spec is not None
    expect = Expect(
        select="helpdesk", conditions=("age:30",), writes=("helpdesk:close", "gmail:send:ops@company.com")
    )
    for label in ("condition age:30", "write helpdesk:close", "write gmail:send:ops@company.com"):
        assert not check_part(spec, label)[0], label
    lying = {
        "builder": "compose",
        "parts": [
            {"kind": "write", "service": "helpdesk", "value": "close", "status": "honoured", "why": "x"}
        ],
    }
    result = judge_slot(asked, expect, spec, lying)
    by = {p.label: p for p in result.parts}
    assert by["write helpdesk:close"].false_honour
    assert by["condition age:30"].outcome == "silent"  # nothing said it: silent, not reported
    assert not result.full
    built = validate(ProceduralGenerator(0).draft(asked), asked).spec
    assert built is not None
    assert all(
        check_part(built, f"{k} {v}")[0] for k, v in (("condition", "age:30"), ("write", "helpdesk:close"))
    )


def test_chinese_slots_compose_chinese_tasks_that_validate() -> None:
    """Every composed structure renders in Chinese (request and reference answer), validates, and
    leaves no English sentence behind: only ids, names, addresses and record values stay Latin."""

    from coworkenv.synth.procedural.compose import structure_split

    train, held = structure_split(48, 12, seed=5)
    gen = ProceduralGenerator(0, mode="compose")
    for slot in (s.model_copy(update={"language": "zh"}) for s in [*train, *held]):
        spec = validate(gen.draft(slot), slot).spec
        assert spec is not None, slot.task_id
        assert spec.language == "zh"
        body = re.sub(r"“[^”]*”", "", spec.request.split("\n\n谢谢")[0])  # quoted titles are record data
        latin = re.sub(
            r"[\w.+-]+@[\w.-]+|[A-Z][A-Za-z]+(?: [A-Z][A-Za-z]+)*|[A-Za-z]+[-_][\w-]+|\w*\d\w*", "", body
        )
        words = re.findall(r"[a-z]{3,}", latin)
        assert set(words) <= RECORD_VALUES, (slot.task_id, words, body)
        assert re.search(r"[\u4e00-\u9fff]", spec.reference.final_message)


def test_a_clause_without_a_chinese_rule_refuses_the_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mixed-language task: a clause the rendering cannot say refuses the slot, naming it."""
    from coworkenv.errors import SpecError
    from coworkenv.synth.procedural import zh

    monkeypatch.setattr(zh, "CLAUSE_RULES", tuple(r for r in zh.CLAUSE_RULES if "Email" not in r[0]))
    slot = _slot("把状态为错误的集成全部禁用，并发邮件给 security@company.com。", ("config", "gmail"))
    slot = slot.model_copy(update={"language": "zh"})
    with pytest.raises(
        SpecError, match=re.escape("no Chinese rendering for the clause 'Email security@company.com")
    ):
        ProceduralGenerator(0).draft(slot)
