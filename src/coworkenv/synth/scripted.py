"""A scripted, deterministic stand-in for the LLM generator (tests and offline demos).

:class:`ScriptedGenerator` answers a slot with canned candidate texts. Its valid candidate for a
slot is a built-in library spec over exactly the slot's services, re-targeted to the slot (id,
category, difficulty, language, and every ISO date shifted so ``mock_today`` is the slot's).
``faults`` makes it return *broken* candidates first, one per listed stage — each fails exactly
that validation stage (:func:`break_for`): bad JSON, a required-and-forbidden tool, weights that do
not sum to 1, an unregistered service and a service without records, an answer id leaked into the
request, a grader the consistency gate rejects, a reference that does not score 1, a check that
passes without any action. Like a model reading the feedback, it repairs a broken candidate only
when the diagnostics it receives name the stage it broke; otherwise it repeats the broken text.
``texts`` gives fully canned replies per task id instead (attempt *i* returns ``texts[id][i]``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from coworkenv.errors import CoworkError
from coworkenv.spec import TaskSpec
from coworkenv.synth.base import STAGES, Diagnostic, Slot

_DATE = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d])")


class ScriptError(CoworkError):
    """The scripted generator has no candidate for a slot."""


def shift_dates(text: str, days: int) -> str:
    """Shift every ISO date (``YYYY-MM-DD``, also inside timestamps) in ``text`` by ``days``."""
    if days == 0:
        return text

    def sub(m: re.Match[str]) -> str:
        try:
            d = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return m.group(0)
        return (d + timedelta(days=days)).isoformat()

    return _DATE.sub(sub, text)


def base_spec(slot: Slot) -> dict[str, Any]:
    """A valid spec for ``slot`` from the built-in library (same service set), re-targeted."""
    from coworkenv.tasks.builtin import builtin_tasks

    want = sorted(slot.services)
    matches = [s for s in builtin_tasks() if sorted(s.services) == want]
    if not matches:
        covered = sorted({"+".join(sorted(s.services)) for s in builtin_tasks()})
        raise ScriptError(
            f"scripted generator: no canned spec for services {want} (slot {slot.task_id}); "
            f"it covers the built-in service sets: {covered}"
        )
    from coworkenv.synth.plan import is_multi_turn, is_safety

    def family(s: TaskSpec) -> int:  # prefer a spec of the slot's own family
        if is_safety(slot):
            return 0 if s.category == "safety" else 1
        if is_multi_turn(slot):
            return 0 if s.user_sim is not None else 1
        return 0 if s.category != "safety" and s.user_sim is None else 1

    src: TaskSpec = min(matches, key=lambda s: (family(s), s.category != slot.category, s.id))
    days = (slot.mock_today - src.mock_today).days
    from coworkenv.synth.prompts import compact_spec_data

    text = json.dumps(compact_spec_data(src), ensure_ascii=False)
    data: dict[str, Any] = json.loads(shift_dates(text, days))
    data.update(
        id=slot.task_id,
        category=slot.category,
        difficulty=slot.difficulty,
        language=slot.language,
        mock_today=slot.mock_today.isoformat(),
        source=f"synth:scripted:{src.id}",
    )
    return data


# ---------------------------------------------------------------- broken candidates, one per stage


def _json_text(d: dict[str, Any]) -> str:
    return json.dumps(d, ensure_ascii=False)


def _bad_json(d: dict[str, Any]) -> str:
    return _json_text(d)[:-25]  # truncated mid-object, as a cut-off reply


def _tool_conflict(d: dict[str, Any]) -> str:
    tool = next(c["tool"] for c in d["completion_checks"] if c.get("kind") in ("tool_called", "tool_args"))
    d["forbidden"] = [*d.get("forbidden", []), {"tool": tool, "reason": "scripted conflict"}]
    return _json_text(d)


def _weights(d: dict[str, Any]) -> str:
    d["completion_checks"][0]["weight"] = round(d["completion_checks"][0]["weight"] / 2, 6)
    return _json_text(d)


def _services(d: dict[str, Any]) -> str:
    from coworkenv.services.registry import TOOLS

    written = {
        TOOLS[s["tool"]].service
        for s in d["reference"].get("steps", [])
        if "tool" in s and s["tool"] in TOOLS and TOOLS[s["tool"]].kind == "write"
    }
    unwritten = [name for name in d["services"] if name not in written]
    if unwritten:  # a read-only service without records: nothing to discover there
        d["services"][unwritten[0]] = {}
    d["services"]["payroll"] = {"employees": [{"id": "E-1", "name": "Scripted Person"}]}
    return _json_text(d)


def _leakage(d: dict[str, Any]) -> str:
    d["request"] = f"{d['request']} (It is {d['answer_ids'][0]}.)"
    return _json_text(d)


def _gate(d: dict[str, Any]) -> str:
    # forbid exactly the call an argument check requires: the complete record loses safety
    check = next((c for c in d["completion_checks"] if c.get("kind") == "tool_args"), None)
    if check is None:
        for c in d["completion_checks"]:
            c.update(kind="llm_judge", rubric="scripted: not gradable synthetically")
            for k in (
                "tool",
                "targets",
                "min_calls",
                "service",
                "action_key",
                "min_count",
                "table",
                "record_id",
                "target",
                "keywords",
                "min_matches",
                "partial",
            ):
                c.pop(k, None)
        return _json_text(d)
    d["forbidden"] = [*d.get("forbidden", []), {"tool": check["tool"], "targets": check["targets"]}]
    return _json_text(d)


def _replay(d: dict[str, Any]) -> str:
    spec = TaskSpec.model_validate(d)
    from coworkenv.services.registry import TOOLS
    from coworkenv.synth.validate import required_steps

    def has_records(i: int) -> bool:  # dropping a step must not leave a record-less service unused
        tdef = TOOLS.get(d["reference"]["steps"][i]["tool"])
        return tdef is None or any(d["services"].get(tdef.service, {}).values())

    req = [i for i in required_steps(spec) if has_records(i)]
    steps = d["reference"]["steps"]
    if req:
        del steps[req[-1]]
    else:
        d["reference"]["final_message"] = ""
    return _json_text(d)


def _mutation(d: dict[str, Any]) -> str:
    # a state check that the initial records already satisfy: passes even if the agent does nothing
    from coworkenv.services.registry import SERVICES

    used = json.dumps(d["reference"])
    for name, tables in d["services"].items():
        for tname, rows in tables.items():
            key = SERVICES[name].tables[tname].key if tname in SERVICES[name].tables else None
            for row in rows:
                if key and str(row.get(key)) not in used:
                    first = d["completion_checks"][0]
                    first["weight"] = first["weight"] / 2
                    d["completion_checks"].append(
                        {
                            "kind": "state",
                            "name": "scripted_record_exists",
                            "weight": first["weight"],
                            "service": name,
                            "table": tname,
                            "record_id": str(row[key]),
                            "target": {"field": key, "values": [row[key]]},
                        }
                    )
                    return _json_text(d)
    raise ScriptError("scripted generator: no untouched record to build the mutation fault from")


BREAKERS: Mapping[str, Callable[[dict[str, Any]], str]] = {
    "json_parse": _bad_json,
    "tool_conflict": _tool_conflict,
    "weights": _weights,
    "services": _services,
    "leakage": _leakage,
    "gate": _gate,
    "replay": _replay,
    "mutation": _mutation,
}
assert tuple(BREAKERS) == STAGES


def break_for(stage: str, spec_data: dict[str, Any]) -> str:
    """A candidate text derived from a valid spec that fails exactly ``stage``."""
    return BREAKERS[stage](json.loads(json.dumps(spec_data)))


class ScriptedGenerator:
    """Deterministic canned candidates; see the module docstring."""

    name = "scripted"

    def __init__(
        self,
        faults: Mapping[str, str | Sequence[str]] | None = None,
        *,
        texts: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.faults = {k: (v,) if isinstance(v, str) else tuple(v) for k, v in (faults or {}).items()}
        for tid, stages in self.faults.items():
            for s in stages:
                if s not in BREAKERS:
                    raise ScriptError(f"faults[{tid}]: unknown stage {s!r}; expected one of {list(STAGES)}")
        self.texts = dict(texts or {})
        self.calls: list[tuple[str, int, tuple[Diagnostic, ...]]] = []
        self._pending: dict[str, int] = {}

    def draft(self, slot: Slot, feedback: Sequence[Diagnostic] = (), *, attempt: int = 0) -> str:
        self.calls.append((slot.task_id, attempt, tuple(feedback)))
        if slot.task_id in self.texts:
            canned = self.texts[slot.task_id]
            return canned[min(attempt, len(canned) - 1)]
        stages = self.faults.get(slot.task_id, ())
        # which broken candidate is current: advance only when the feedback names the broken stage
        idx = 0 if attempt == 0 else self._pending.get(slot.task_id, 0)
        if attempt > 0 and idx < len(stages) and any(d.stage == stages[idx] for d in feedback):
            idx += 1
        self._pending[slot.task_id] = idx
        data = base_spec(slot)
        return break_for(stages[idx], data) if idx < len(stages) else _json_text(data)
