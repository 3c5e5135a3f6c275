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
