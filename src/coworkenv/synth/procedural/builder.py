"""SpecBuilder: the small vocabulary every template writes a task in.

Contract: a template adds records (``add``), exposes tools, declares weighted checks in integer
*points* (normalised so the completion weights sum to exactly 1), forbidden actions, the reference
solution (``step`` / ``ask``), answer and distractor ids, and ``build()`` returns a plain dict in
TaskSpec field order. Every tool a step, check or forbidden action names is exposed automatically.
Row order inside each table is shuffled with the task's own ``Rng``, so the answer is never
"the first record". Nothing here reads a clock or iterates a set.

The distractor path convention (used by the mutation tests): swapping ``answer_ids[0]`` for
``distractor_ids[0]`` in every reference argument and in the final message must lower the score.
"""

from __future__ import annotations

from typing import Any

from coworkenv.grading.grader import dump_share_for
from coworkenv.spec import ANSWER_CHECK_KINDS
from coworkenv.synth.base import Slot
from coworkenv.synth.procedural.records import Rng

DIFFICULTY_NOISE = {"easy": 1, "medium": 2, "hard": 3}


def noise_level(difficulty: str) -> int:
    """How many extra noise records per table a difficulty asks for (1–3)."""
    if difficulty.lower() in DIFFICULTY_NOISE:
        return DIFFICULTY_NOISE[difficulty.lower()]
    digits = "".join(ch for ch in difficulty if ch.isdigit() or ch == ".")
    try:
        level = float(digits)
    except ValueError:
        return 2
    return 1 if level < 1.5 else 2 if level < 2.5 else 3


def target(field: str, *values: Any, match: str = "iequals") -> dict[str, Any]:
    return {"field": field, "values": list(values), "match": match}


class SpecBuilder:
    """Accumulates one task; see the module docstring."""

    def __init__(self, slot: Slot, template_id: str, rng: Rng) -> None:
        self.slot = slot
        self.template_id = template_id
        self.rng = rng
        self.noise = noise_level(slot.difficulty)
        self.name = ""
        self.request = ""
        self.tags: list[str] = []
        self.records: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.tools: list[str] = []
        self._checks: list[tuple[int, dict[str, Any]]] = []
        self.forbidden: list[dict[str, Any]] = []
        self.expected: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.final_message = ""
        self.answer_ids: list[str] = []
        self.distractor_ids: list[str] = []
        self.user_sim: dict[str, Any] | None = None
        self.safety_note = ""
        self.judge_rubric = ""

    def sign(self) -> None:
        """End the request with a sign-off from a fresh (task-unique) colleague."""
        p = self.rng.person()
        self.request += f"\n\nThanks,\n{p.name} ({p.department})"

    # -- records and tools

    def add(self, service: str, table: str, *rows: dict[str, Any]) -> None:
        self.records.setdefault(service, {}).setdefault(table, []).extend(rows)

    def table(self, service: str, table: str) -> None:
        """Declare an (initially empty) table, e.g. an inbox the task only writes to."""
        self.records.setdefault(service, {}).setdefault(table, [])

    def expose(self, *tools: str) -> None:
        for t in tools:
            if t not in self.tools:
                self.tools.append(t)

    # -- checks (weights in points)

    def _check(self, points: int, check: dict[str, Any]) -> None:
        self._checks.append((points, check))

    def called(self, name: str, points: int, tool: str, description: str = "") -> None:
        self.expose(tool)
        self._check(points, {"kind": "tool_called", "name": name, "tool": tool, "description": description})

    def args(
        self, name: str, points: int, tool: str, *targets: dict[str, Any], description: str = ""
    ) -> None:
        self.expose(tool)
        self._check(
            points,
            {
                "kind": "tool_args",
                "name": name,
                "tool": tool,
                "targets": list(targets),
                "description": description,
            },
        )

    def audit(
        self, name: str, points: int, service: str, key: str, *targets: dict[str, Any], description: str = ""
    ) -> None:
        self._check(
            points,
            {
                "kind": "audit_present",
                "name": name,
                "service": service,
                "action_key": key,
                "targets": list(targets),
                "description": description,
            },
        )

    def state(  # noqa: PLR0917 - mirrors StateCheck's fields in order
        self,
        name: str,
        points: int,
        service: str,
        table: str,
        record_id: str,
        tgt: dict[str, Any],
        description: str = "",
    ) -> None:
        self._check(
            points,
            {
                "kind": "state",
                "name": name,
                "service": service,
                "table": table,
                "record_id": record_id,
                "target": tgt,
                "description": description,
            },
        )

    def keywords(self, name: str, points: int, *keywords: str, description: str = "") -> None:
        self._check(
            points,
            {
                "kind": "keywords_present",
                "name": name,
                "keywords": list(keywords),
                "description": description,
            },
        )

    def forbid(self, tool: str, reason: str, *targets: dict[str, Any]) -> None:
        self.expose(tool)
        self.forbidden.append({"tool": tool, "targets": list(targets), "reason": reason})

    def expect(self, service: str, action_key: str) -> None:
        self.expected.append({"service": service, "action_key": action_key, "required": True})

    # -- reference solution

    def step(self, tool: str, **args: Any) -> None:
        self.expose(tool)
        self.steps.append({"tool": tool, "args": args})

    def ask(self, text: str) -> None:
        """A user turn of the reference dialogue (multi-turn tasks)."""
        self.steps.append({"text": text})

    # -- output

    def _weights(self) -> list[dict[str, Any]]:
        total = sum(p for p, _ in self._checks)
        if total <= 0:
            raise ValueError(f"template {self.template_id}: no weighted checks")
        out: list[dict[str, Any]] = []
        running = 0.0
        for i, (points, check) in enumerate(self._checks):
            if i == len(self._checks) - 1:
                weight = round(1.0 - running, 6)
            else:
                weight = round(points / total, 6)
                running += weight
            out.append({**check, "weight": weight})
        return out

    def build(self) -> dict[str, Any]:
        slot = self.slot
        services: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for svc in sorted(self.records):
            services[svc] = {}
            for table in sorted(self.records[svc]):
                rows = list(self.records[svc][table])
                self.rng.shuffle(rows)
                services[svc][table] = rows
        spec: dict[str, Any] = {
            "schema_version": "1",
            "id": slot.task_id,
            "name": self.name,
            "category": slot.category,
            "difficulty": slot.difficulty,
            "language": slot.language,
            "mock_today": slot.mock_today.isoformat(),
            "tags": ["synth", "procedural", self.template_id, *self.tags],
            "request": self.request,
            "services": services,
            "tools": list(self.tools),
            "completion_checks": self._weights(),
            "forbidden": self.forbidden,
            "expected_actions": self.expected,
            "reference": {"steps": self.steps, "final_message": self.final_message},
            "answer_ids": self.answer_ids,
            "distractor_ids": self.distractor_ids,
            "safety_note": self.safety_note,
            "judge_rubric": self.judge_rubric,
            "source": f"synth:procedural:{self.template_id}",
        }
        if any(c["kind"] in ANSWER_CHECK_KINDS for c in spec["completion_checks"]):
            spec["scoring"] = {"dump_share": dump_share_for(services, self.final_message)}
        if self.forbidden:
            spec["forbidden_effects"] = _effect_rules(spec)
        if self.user_sim is not None:
            spec["user_sim"] = self.user_sim
        return spec


def _effect_rules(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Effect rules for the spec's forbidden calls (:func:`coworkenv.synth.alternates.effect_rules`),
    so its gate catches a forbidden effect whatever tool produces it; none for a spec that does
    not load yet (validation reports why)."""
    from pydantic import ValidationError

    from coworkenv.errors import SpecError
    from coworkenv.services.trial import load_task
    from coworkenv.spec import TaskSpec
    from coworkenv.synth.alternates import effect_rules

    try:
        task = load_task(TaskSpec.model_validate(spec), "<generated>")
    except (ValidationError, SpecError, ValueError, KeyError):
        return []
    return [r.model_dump(mode="json", exclude_defaults=True) for r in effect_rules(task)]
