"""Checking a built task against the parts a human reader expects from its scenario.

The generator judges its own builds (:mod:`~coworkenv.synth.procedural.scenario`); a judge that
grades itself can be wrong in its own favour. This module is the independent side: a slot's
``expect`` (written by hand: what is selected, the conditions and thresholds, the joins, the writes,
what is forbidden, what the distractor misses) is checked against the *built task* — its request
text, its reference calls, its forbidden rules and its distractors — and against what the
generator *said* it built, so a part that is neither built nor reported is caught.

Contract:

* :func:`load_suite` reads a YAML suite (``mock_today`` and ``slots``: plan-slot fields plus
  ``id`` and ``expect``) into ``(Slot, Expect)`` pairs; a malformed entry raises
  :class:`~coworkenv.errors.SpecError` naming the entry and field.
* :func:`expected_parts` lists a slot's expected parts as short labels (``condition age:3``,
  ``write helpdesk:tag:needs-kb``).
* :func:`check_part` says whether the built :class:`~coworkenv.spec.TaskSpec` does one part (with
  the evidence, or why not). It reads the spec only: no generator internals.
* :func:`run_suite` builds, validates and judges every slot of a suite; :func:`summary` counts.
* :func:`judge_slot` builds nothing itself: given the spec (or the error that refused the slot) and
  the generator's scenario report, it classifies every expected part as ``built`` (the spec does
  it), ``reported`` (not built, and the generator's report says so, or it refused the slot with an
  error), ``silent`` (not built,
  not reported) — and counts ``false_honour`` (the report says honoured, the spec does not do it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml

from coworkenv.errors import SpecError
from coworkenv.spec import TaskSpec, ToolCall
from coworkenv.synth.base import Slot

Outcome = Literal["built", "reported", "silent"]

WRITE_TOOLS: dict[tuple[str, str], tuple[str, ...]] = {
    ("gmail", "send"): ("gmail_send_message",),
    ("gmail", "draft"): ("gmail_save_draft",),
    ("gmail", "reply"): ("gmail_reply",),
    ("todo", "create"): ("todo_create_task",),
    ("todo", "update"): ("todo_update_task",),
    ("helpdesk", "create"): ("helpdesk_create_ticket",),
    ("helpdesk", "update"): ("helpdesk_update_ticket",),
    ("helpdesk", "close"): ("helpdesk_close_ticket", "helpdesk_update_ticket"),
    ("helpdesk", "tag"): ("helpdesk_update_ticket",),
    ("helpdesk", "reassign"): ("helpdesk_update_ticket",),
    ("calendar", "create"): ("calendar_create_event",),
    ("calendar", "delete"): ("calendar_delete_event",),
    ("crm", "note"): ("crm_update_customer",),
    ("crm", "update"): ("crm_update_customer",),
    ("config", "disable"): ("config_update_integration",),
    ("config", "notify"): ("config_send_notification",),
    ("scheduler", "disable"): ("scheduler_update_job",),
    ("scheduler", "run"): ("scheduler_run_job",),
    ("kb", "update"): ("kb_update_article",),
    ("finance", "report"): ("finance_submit_report",),
    ("notes", "share"): ("notes_share",),
    ("documents", "create"): ("documents_create",),
    ("inventory", "order"): ("inventory_create_order",),
    ("rss", "publish"): ("rss_publish",),
    ("contacts", "send"): ("contacts_send_message",),
}
"""(service, action) → the tools that do it."""

FORBID_TOOLS: dict[str, tuple[str, ...]] = {
    "send": ("gmail_send_message", "contacts_send_message", "gmail_reply"),
    "email": ("gmail_send_message", "gmail_reply"),
    "export": ("crm_export", "crm_export_customers"),
    "delete": ("calendar_delete_event", "todo_delete_task", "scheduler_delete_job"),
    "change": ("finance_update_vendor_bank",),
    "disable": ("config_update_integration", "scheduler_update_job"),
    "order": ("inventory_create_order",),
    "close": ("helpdesk_close_ticket", "helpdesk_update_ticket"),
    "pay": ("finance_update_vendor_bank",),
}
"""A prohibited verb → the tools a forbidden rule on it names."""

CONDITION_KINDS = frozenset(
    {"age", "recent", "upcoming", "amount", "status", "owner", "tier", "duplicate", "absence", "no_match"}
)
STATUS_WORDS = r"critical|at[ _-]risk|failed|failing|error|high[ -]priority|high"


@dataclass(frozen=True)
class Expect:
    """A slot's expected parts (see the module docstring)."""

    select: str = ""
    conditions: tuple[str, ...] = ()
    joins: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    distractor: str = ""


@dataclass
class PartResult:
    label: str
    outcome: Outcome
    evidence: str
    report: str = ""
    """What the generator said of the part (its verdict and why, or the error)."""
    false_honour: bool = False


@dataclass
class SlotResult:
    task_id: str
    builder: str
    parts: list[PartResult] = field(default_factory=list)
    error: str = ""

    @property
    def full(self) -> bool:
        return not self.error and all(p.outcome == "built" for p in self.parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "builder": self.builder,
            "full": self.full,
            "error": self.error,
            "parts": [p.__dict__ for p in self.parts],
        }


# ---------------------------------------------------------------- the suite


def _expect(entry: dict[str, Any], where: str) -> Expect:
    raw = entry.get("expect")
    if not isinstance(raw, dict):
        raise SpecError.single(where, "expect", "each slot needs an `expect` mapping")
    unknown = sorted(set(raw) - {"select", "conditions", "joins", "writes", "forbid", "distractor"})
    if unknown:
        raise SpecError.single(where, "expect", f"unknown key(s) {unknown}")
    e = Expect(
        select=str(raw.get("select", "")),
        conditions=tuple(str(x) for x in raw.get("conditions", ())),
        joins=tuple(str(x) for x in raw.get("joins", ())),
        writes=tuple(str(x) for x in raw.get("writes", ())),
        forbid=tuple(str(x) for x in raw.get("forbid", ())),
        distractor=str(raw.get("distractor", "")),
    )
    for c in e.conditions:
        if c.split(":", 1)[0] not in CONDITION_KINDS:
            raise SpecError.single(where, "expect.conditions", f"{c!r}: kinds are {sorted(CONDITION_KINDS)}")
    for w in e.writes:
        svc, _, rest = w.partition(":")
        if (svc, rest.split(":", 1)[0]) not in WRITE_TOOLS:
            raise SpecError.single(where, "expect.writes", f"{w!r}: known are {sorted(WRITE_TOOLS)}")
    for v in e.forbid:
        if v not in FORBID_TOOLS:
            raise SpecError.single(where, "expect.forbid", f"{v!r}: known verbs are {sorted(FORBID_TOOLS)}")
    return e


def load_suite(path: Path) -> list[tuple[Slot, Expect]]:
    """The suite's slots and their expectations (see the module docstring)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    today = date.fromisoformat(str(doc.get("mock_today", "2026-03-10")))
    out: list[tuple[Slot, Expect]] = []
    for n, entry in enumerate(doc.get("slots") or ()):
        where = f"{path}: slot {n} ({entry.get('id', '?')})"
        fields = {k: v for k, v in entry.items() if k not in ("id", "expect")}
        fields.setdefault("language", "en")
        fields.setdefault("mock_today", today)
        try:
            slot = Slot.model_validate({"task_id": entry["id"], **fields})
        except (KeyError, ValueError) as e:
            raise SpecError.single(where, "slot", str(e)) from e
        out.append((slot, _expect(entry, where)))
    return out


def expected_parts(e: Expect) -> list[str]:
    parts = [f"select {e.select}"] if e.select else []
    parts += [f"condition {c}" for c in e.conditions]
    parts += [f"join {j}" for j in e.joins]
    parts += [f"write {w}" for w in e.writes]
    parts += [f"forbid {f}" for f in e.forbid]
    if e.distractor:
        parts.append(f"distractor {e.distractor}")
    return parts


# ---------------------------------------------------------------- checking a spec


def _calls(spec: TaskSpec) -> list[ToolCall]:
    return [s for s in spec.reference.steps if isinstance(s, ToolCall)]


def _day_phrases(n: int) -> list[str]:
    out = [f"{n} days", f"{n} day", f"{n} 天", f"{n}天"]
    if n <= 3:
        out.append(f"{24 * n} hours")
    if n % 7 == 0:
        out += [f"{n // 7} weeks", f"{n // 7} week"] + (["a week"] if n == 7 else [])
    if n % 30 == 0:
        out += [f"{n // 30} months"]
    if n == 365:
        out += ["a year", "1 year", "12 months"]
    return out


def _condition(spec: TaskSpec, kind: str, value: str) -> tuple[bool, str]:
    req = spec.request
    low = req.lower()
    if kind in ("age", "recent", "upcoming"):
        if not value:
            return bool(re.search(r"\d+ (?:day|hour|week|month)", low)), "a duration in the request"
        n = int(value)
        hit = next((p for p in _day_phrases(n) if re.search(rf"(?<!\d){re.escape(p)}(?![a-z0-9])", low)), "")
        return bool(hit), f"request says {hit!r}" if hit else f"request names none of {_day_phrases(n)}"
    if kind == "amount":
        if not value:
            ok = bool(re.search(r"threshold|above|below|more than usd|over usd|\$|usd|阈值|美元|金额", low))
            return ok, "an amount or threshold in the request"
        shown = f"{int(value):,}"
        return shown in req, f"request {'says' if shown in req else 'lacks'} {shown}"
    if kind == "status":
        if value:
            word = value.replace("_", " ").lower()
            ok = word in low or value.lower() in low
            return ok, f"request {'says' if ok else 'lacks'} {value!r}"
        m = re.search(rf"\b(?:{STATUS_WORDS})\b", low)
        return bool(m), f"request says {m.group(0)!r}" if m else "no status word in the request"
    if kind == "owner":
        if value:
            return value.lower() in low, f"request {'names' if value.lower() in low else 'lacks'} {value}"
        return bool(
            re.search(r"assigned to|owned by|organized by|attended|written by|created by", low)
        ), "owner"
    if kind == "tier":
        word = value.lower() or "tier"
        return word in low, f"request {'says' if word in low else 'lacks'} {word!r}"
    if kind == "duplicate":
        m = re.search(r"duplicate|twice|same amount|重复", low)
        if m is None:
            return False, "request says nothing of duplicates"
        if value:
            hit = next((p for p in _day_phrases(int(value)) if p in low), "")
            return bool(hit), f"duplicates within {hit!r}" if hit else f"no window of {value} days"
        return True, f"request says {m.group(0)!r}"
    if kind == "absence":
        m = re.search(r"out of (?:the )?office|on leave|absent|on vacation|休假|不在办公室", low)
        return bool(m), f"request says {m.group(0)!r}" if m else "no absence in the request"
    m = re.search(
        r"\bno (?:matching |related )?(?:[\w-]+ ){0,3}article|without (?:a |any )?matching|没有对应文章", low
    )
    return bool(m), f"request says {m.group(0)!r}" if m else "no missing-match condition in the request"


def _write(spec: TaskSpec, svc: str, action: str, value: str) -> tuple[bool, str]:
    tools = WRITE_TOOLS[(svc, action)]
    calls = [c for c in _calls(spec) if c.tool in tools]
    if action == "draft":
        sends = [c for c in _calls(spec) if c.tool == "gmail_send_message"]
        if sends:
            return False, "the reference sends mail; a draft was asked"
    if action == "tag":
        calls = [c for c in calls if value in (c.args.get("tags") or ())]
    elif action == "reassign":
        calls = [c for c in calls if c.args.get("assigned_to")]
    elif action == "close" and calls and calls[0].tool == "helpdesk_update_ticket":
        calls = [c for c in calls if str(c.args.get("status", "")) in ("closed", "resolved")]
    elif action == "disable" and svc == "config":
        calls = [c for c in calls if c.args.get("status") == "disabled"]
    elif action == "disable" and svc == "scheduler":
        calls = [c for c in calls if c.args.get("enabled") is False]
    elif value and "@" in value:  # the recipient the scenario names
        calls = [c for c in calls if value in json.dumps(c.args)]
    if not calls:
        return False, f"no reference call to {'/'.join(tools)}" + (f" with {value}" if value else "")
    return True, f"{len(calls)} reference call(s) to {calls[0].tool}" + (f" with {value}" if value else "")


def check_part(spec: TaskSpec, label: str) -> tuple[bool, str]:
    """Whether ``spec`` does the expected part ``label`` (as :func:`expected_parts` writes it)."""
    kind, _, rest = label.partition(" ")
    if kind == "select":
        held = {
            str(v)
            for rows in spec.services.get(rest, {}).values()
            for row in rows
            for v in row.values()
            if isinstance(v, str)
        }
        hit = [i for i in spec.answer_ids if i in held]
        return bool(hit), f"answers {hit[:3]} are {rest} records" if hit else f"no answer is a {rest} record"
    if kind == "condition":
        ckind, _, value = rest.partition(":")
        return _condition(spec, ckind, value)
    if kind == "join":
        reads = [c.tool for c in _calls(spec) if c.tool.startswith(f"{rest}_")]
        return bool(reads), f"reads {reads[0]}" if reads else f"no reference call reads {rest}"
    if kind == "write":
        svc, _, more = rest.partition(":")
        action, _, value = more.partition(":")
        return _write(spec, svc, action, value)
    if kind == "forbid":
        tools = set(FORBID_TOOLS[rest])
        rules = [f.tool for f in spec.forbidden if f.tool in tools]
        if rules:
            return True, f"forbidden rule on {rules[0]}"
        services = {t.split("_", 1)[0] for t in tools}
        effects = [e.name for e in spec.forbidden_effects if e.service in services]
        if effects:
            return True, f"forbidden effect {effects[0]}"
        if not tools & set(spec.tools):
            return True, f"no tool that can {rest} is exposed ({sorted(tools)})"
        return False, f"no forbidden rule on {sorted(tools & set(spec.tools))}"
    return bool(spec.distractor_ids), (
        f"distractors {list(spec.distractor_ids)[:3]}" if spec.distractor_ids else "no distractor record"
    )


# ---------------------------------------------------------------- what the generator said


def _said(label: str, report: dict[str, Any]) -> dict[str, Any] | None:
    """The generator's verdict on the part ``label`` (None when it read no such part)."""
    kind, _, rest = label.partition(" ")
    for p in report.get("parts", ()):
        if p["kind"] != kind:
            continue
        if kind in ("select", "join") and p["service"] == rest:
            return dict(p)
        if kind == "condition" and p["value"] == rest.split(":", 1)[0]:
            return dict(p)
        if kind == "write":
            svc, _, more = rest.partition(":")
            if p["service"] == svc and p["value"] == more.split(":", 1)[0]:
                return dict(p)
        if kind == "forbid" and p["value"] == rest:
            return dict(p)
        if kind == "distractor":
            return dict(p)
    return None


def added_conditions(spec: TaskSpec, expect: Expect) -> list[str]:
    """Conditions a composed task selects by that the scenario did not ask for (they narrow the
    selection the scenario describes); templates carry no ``cond:`` tags and are not judged."""
    asked = {c.split(":", 1)[0] for c in expect.conditions}
    if "absence" in asked:
        asked.add("owner")
    return [t.removeprefix("cond:") for t in spec.tags if t.startswith("cond:") and t[5:] not in asked]


def added_writes(spec: TaskSpec, expect: Expect) -> list[str]:
    """Services a composed task writes to that the scenario did not ask to write (extra work it
    would be graded on); judged only when the scenario names writes."""
    asked = {w.split(":", 1)[0] for w in expect.writes}
    return [t.removeprefix("write:") for t in spec.tags if t.startswith("write:") and t[6:] not in asked]


def judge_slot(
    slot: Slot, expect: Expect, spec: TaskSpec | None, report: dict[str, Any], error: str = ""
) -> SlotResult:
    """Classify every expected part of ``slot`` (see the module docstring); a condition the
    task adds (:func:`added_conditions`) is a part of its own, ``silent`` unless reported."""
    out = SlotResult(slot.task_id, str(report.get("builder", "")), error=error)
    if spec is not None and expect.conditions:
        for kind in added_conditions(spec, expect):
            parts = report.get("parts", ())
            noted = [p for p in parts if p.get("kind") == "added" and p.get("value") == kind]
            out.parts.append(
                PartResult(
                    f"added condition {kind}",
                    "reported" if noted else "silent",
                    "the task selects by it; the scenario does not ask",
                    str(noted[0]["why"]) if noted else "",
                )
            )
    if spec is not None and expect.writes:
        for svc in added_writes(spec, expect):
            out.parts.append(
                PartResult(f"added write {svc}", "silent", "the task writes to it; the scenario does not ask")
            )
    for label in expected_parts(expect):
        said = _said(label, report)
        said_text = f"{said['status']}: {said['why']}" if said else ""
        if spec is None:  # a refused slot is reported whole: its error says why (never a silent swap)
            out.parts.append(PartResult(label, "reported", "slot refused", said_text or error))
            continue
        ok, evidence = check_part(spec, label)
        if ok:
            out.parts.append(PartResult(label, "built", evidence, said_text))
            continue
        reported = said is not None and said["status"] != "honoured"
        out.parts.append(
            PartResult(
                label,
                "reported" if reported else "silent",
                evidence,
                said_text,
                false_honour=said is not None and said["status"] == "honoured",
            )
        )
    return out


def summary(results: Sequence[SlotResult]) -> dict[str, Any]:
    parts = [p for r in results for p in r.parts]
    return {
        "slots": len(results),
        "full": sum(r.full for r in results),
        "refused": sum(bool(r.error) for r in results),
        "parts": len(parts),
        "built": sum(p.outcome == "built" for p in parts),
        "reported": sum(p.outcome == "reported" for p in parts),
        "silent": sum(p.outcome == "silent" for p in parts),
        "false_honour": sum(p.false_honour for p in parts),
    }


def run_suite(path: Path, mode: str = "auto", seed: int = 0) -> list[SlotResult]:
    """Every slot of a suite built by the offline generator, validated (replay, mutation tests)
    and judged (:func:`judge_slot`); a slot the generator refuses or that fails validation is
    judged with its error."""
    from coworkenv.synth.procedural import ProceduralGenerator
    from coworkenv.synth.validate import validate

    gen = ProceduralGenerator(seed, mode=mode)
    results: list[SlotResult] = []
    for slot, expect in load_suite(path):
        try:
            report = gen.scenario_report(slot)
            outcome = validate(gen.draft(slot), slot)
        except SpecError as e:
            results.append(judge_slot(slot, expect, None, {}, error=str(e)))
            continue
        if not outcome.ok or outcome.spec is None:
            error = "; ".join(f"{d.stage}: {d.message}" for d in outcome.diagnostics)
            results.append(judge_slot(slot, expect, None, report, error=f"invalid: {error}"))
            continue
        results.append(judge_slot(slot, expect, outcome.spec, report))
    return results
