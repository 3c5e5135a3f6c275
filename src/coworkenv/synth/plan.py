"""Coverage plans: a YAML list of slots with exactly the paper's seven fields, and their coverage.

A plan file is a mapping ``{slots: [...], description?: str}`` — or a bare list of slots, read as
``{slots: [...]}``; each slot has ``task_id``,
``services``, ``category``, ``difficulty``, ``language`` (default ``en``), ``mock_today`` and
``scenario`` (see :class:`~coworkenv.synth.base.Slot`). :func:`load_plan` validates everything at
once and raises one :class:`~coworkenv.errors.SpecError` whose issues name the slot (index and
task id), the field and the fix: unknown or repeated service, repeated task id, a bad date, an
unknown field. Dates stay strings while parsing (YAML's own timestamp conversion is disabled) so a
bad date is a field error, never a YAML crash.

:func:`coverage` summarizes a plan before anything is generated: slots per service × category,
service × difficulty, the safety and multi-turn slots, and the registered services and tools that
no slot exercises.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from coworkenv.errors import SpecError, SpecIssue
from coworkenv.synth.base import Slot

SLOT_FIELDS: tuple[str, ...] = tuple(Slot.model_fields)
PLAN_KEYS = frozenset({"slots", "description"})


class _PlanLoader(yaml.SafeLoader):
    """SafeLoader without implicit timestamps: ``mock_today`` is validated by the Slot model."""


_PlanLoader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class Plan:
    slots: tuple[Slot, ...]
    source: str = "<plan>"
    description: str = ""

    def slot(self, task_id: str) -> Slot:
        for s in self.slots:
            if s.task_id == task_id:
                return s
        raise KeyError(task_id)


def is_safety(slot: Slot) -> bool:
    """A safety (act-vs-withhold) slot: its category names safety."""
    return "safety" in slot.category.lower()


def is_multi_turn(slot: Slot) -> bool:
    cat = slot.category.lower().replace("-", "_")
    return "multi_turn" in cat or "multiturn" in cat or "dialogue" in cat


def _where(i: int, raw: Any) -> str:
    tid = raw.get("task_id") if isinstance(raw, dict) else None
    return f"slots[{i}]" + (f" ({tid})" if isinstance(tid, str) and tid else "")


def _slot_issues(i: int, raw: Any) -> tuple[Slot | None, list[SpecIssue]]:
    from coworkenv.services.registry import SERVICES

    where = _where(i, raw)
    if not isinstance(raw, dict):
        return None, [SpecIssue(where, f"a slot must be a mapping of {list(SLOT_FIELDS)}")]
    issues: list[SpecIssue] = []
    for key in raw:
        if key not in SLOT_FIELDS:
            issues.append(
                SpecIssue(
                    f"{where}.{key}",
                    f"unknown field; a slot has exactly the seven fields {list(SLOT_FIELDS)} "
                    "(put extra detail into `scenario`)",
                )
            )
    services = raw.get("services")
    if isinstance(services, str):
        issues.append(SpecIssue(f"{where}.services", f"must be a list, e.g. [{services}]"))
    elif isinstance(services, list):
        seen: set[str] = set()
        for j, name in enumerate(services):
            if name not in SERVICES:
                issues.append(
                    SpecIssue(
                        f"{where}.services[{j}]",
                        f"unknown service {name!r}; registered services: {sorted(SERVICES)}",
                    )
                )
            elif name in seen:
                issues.append(SpecIssue(f"{where}.services[{j}]", f"service {name!r} listed twice"))
            seen.add(str(name))
    if issues:
        return None, issues
    try:
        return Slot.model_validate(raw), []
    except ValidationError as e:
        out = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"])
            got = err.get("input")
            shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
            hint = " — use an ISO date like 2026-03-10" if loc == "mock_today" else ""
            out.append(SpecIssue(f"{where}.{loc}", f"{err['msg']}{shown}{hint}"))
        return None, out


def plan_from_data(data: Any, source: str | Path = "<plan>") -> Plan:
    """Validate parsed plan data (all problems reported at once); a bare list is the slots."""
    if isinstance(data, list):
        data = {"slots": data}
    if not isinstance(data, dict) or "slots" not in data:
        got = "nothing" if data is None else type(data).__name__
        raise SpecError.single(
            source,
            "slots",
            f"a plan is a `slots:` list of seven-field mappings (or that list alone), got {got}; "
            "e.g.\nslots:\n  - task_id: t1\n    services: [helpdesk, kb]\n    category: support\n"
            "    difficulty: medium\n    mock_today: '2026-03-10'\n    scenario: ...",
        )
    issues = [
        SpecIssue(str(k), f"unknown top-level key; expected {sorted(PLAN_KEYS)}")
        for k in data
        if k not in PLAN_KEYS
    ]
    raw_slots = data["slots"]
    if not isinstance(raw_slots, list) or not raw_slots:
        raise SpecError(source, [*issues, SpecIssue("slots", "must be a non-empty list of slots")])
    slots: list[Slot] = []
    first_index: dict[str, int] = {}
    for i, raw in enumerate(raw_slots):
        slot, problems = _slot_issues(i, raw)
        issues.extend(problems)
        tid = raw.get("task_id") if isinstance(raw, dict) else None
        if isinstance(tid, str) and tid in first_index:
            issues.append(
                SpecIssue(
                    f"{_where(i, raw)}.task_id",
                    f"duplicate task_id (first used by slots[{first_index[tid]}]); task ids must be unique",
                )
            )
            continue
        if isinstance(tid, str):
            first_index[tid] = i
        if slot is not None:
            slots.append(slot)
    if issues:
        raise SpecError(source, issues)
    desc = data.get("description", "")
    return Plan(tuple(slots), str(source), desc if isinstance(desc, str) else str(desc))


def load_plan(path: str | Path) -> Plan:
    """Load and validate a YAML coverage plan."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError.single(p, "", "plan file not found") from None
    except (IsADirectoryError, UnicodeDecodeError) as e:
        raise SpecError.single(p, "", f"cannot read plan: {e}") from None
    try:
        data = yaml.load(text, Loader=_PlanLoader)
    except yaml.YAMLError as e:
        raise SpecError.single(p, "", f"invalid YAML: {' '.join(str(e).split())}") from None
    return plan_from_data(data, p)


# ---------------------------------------------------------------- coverage


@dataclass(frozen=True)
class Coverage:
    slots: int
    by_service: dict[str, int]
    by_category: dict[str, int]
    by_difficulty: dict[str, int]
    by_language: dict[str, int]
    service_category: dict[tuple[str, str], int]
    service_difficulty: dict[tuple[str, str], int]
    safety_slots: tuple[Slot, ...]
    multi_turn_slots: tuple[Slot, ...]
    unused_services: tuple[str, ...]
    unused_tools: dict[str, tuple[str, ...]]
    """Registered tools no slot exercises, by service (every tool of a service no slot selects)."""

    @property
    def unused_tool_count(self) -> int:
        return sum(len(v) for v in self.unused_tools.values())


def coverage(plan: Plan) -> Coverage:
    from coworkenv.services.registry import SERVICES

    by_service: Counter[str] = Counter()
    sc: Counter[tuple[str, str]] = Counter()
    sd: Counter[tuple[str, str]] = Counter()
    for s in plan.slots:
        for name in s.services:
            by_service[name] += 1
            sc[(name, s.category)] += 1
            sd[(name, s.difficulty)] += 1
    unused = tuple(sorted(n for n in SERVICES if n not in by_service))
    return Coverage(
        slots=len(plan.slots),
        by_service=dict(sorted(by_service.items())),
        by_category=dict(sorted(Counter(s.category for s in plan.slots).items())),
        by_difficulty=dict(sorted(Counter(s.difficulty for s in plan.slots).items())),
        by_language=dict(sorted(Counter(s.language for s in plan.slots).items())),
        service_category=dict(sc),
        service_difficulty=dict(sd),
        safety_slots=tuple(s for s in plan.slots if is_safety(s)),
        multi_turn_slots=tuple(s for s in plan.slots if is_multi_turn(s)),
        unused_services=unused,
        unused_tools={n: tuple(SERVICES[n].tool_table) for n in unused},
    )
