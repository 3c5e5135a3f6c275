"""Recipes: what a composed task is made of, decided from a slot before any record is drawn.

Contract: :func:`recipe_for` maps ``(slot, seed)`` to a :class:`Recipe` deterministically (no
clock, no ``hash()``): which service anchors the selection, which condition kinds select the
answer records, which services are joined for evidence and which are written, how many answer
records, and whether the task is a safety (act-vs-withhold) or multi-turn one. Difficulty sets the
:class:`Profile` (active services, answer records, compound conditions, a temporal condition and
the target step window — the paper's D1.5 ≈ 3 services / 8–12 steps, D2.5 ≈ 4–5 services /
13–18 steps with temporal dependencies). A scenario may pin the structure
(``compose: anchor=helpdesk cond=age,status items=2 safety=1 multi_turn=0``) or steer it in free
text (service nouns, condition words, thresholds like "48 hours" or "$5,000", "do not export").
A slot that cannot be composed raises :class:`~coworkenv.errors.SpecError` naming the slot, the
field and the fix. :meth:`Recipe.key` is the structure key used for structure-disjoint splits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from coworkenv.errors import SpecError
from coworkenv.synth.base import Slot
from coworkenv.synth.plan import is_multi_turn, is_safety
from coworkenv.synth.procedural.compose.anchors import (
    ACT_VARIANTS,
    ANCHORS,
    EXTRA_CONDS,
    EXTRA_NEEDS,
    TEMPORAL,
)
from coworkenv.synth.procedural.records import Rng, seed_int
from coworkenv.synth.procedural.scenario import (
    NOUNS,
    TIERS,
    WEAK_NOUNS,
    Part,
    amount_value,
    read_scenario,
    threshold_days,
)
from coworkenv.synth.procedural.zh import is_zh

LINKS = ("crm", "contacts", "kb", "notes", "documents")
"""Services that join evidence to an answer record (account, person, procedure, policy)."""
WRITERS = ("gmail", "todo", "helpdesk", "calendar", "config", "scheduler", "documents", "rss", "finance")
"""Services with a write building block usable on a record another service selected (crm and
contacts also write when they are joined: an account note, a message to the owner)."""


@dataclass(frozen=True)
class Profile:
    level: int
    max_services: int
    items: int
    conds: int
    steps: tuple[int, int]
    noise: int


PROFILES = {
    1: Profile(1, 2, 1, 1, (4, 8), 1),
    2: Profile(2, 3, 2, 1, (8, 12), 2),
    3: Profile(3, 5, 2, 2, (13, 18), 3),
}


def level_of(difficulty: str) -> int:
    """easy → 1, medium / D1.x / D2 → 2, hard / D2.5+ → 3 (unknown words → 2)."""
    d = difficulty.strip().lower()
    words = {"easy": 1, "simple": 1, "medium": 2, "moderate": 2, "hard": 3, "expert": 3}
    if d in words:
        return words[d]
    m = re.search(r"\d+(?:\.\d+)?", d)
    if m is None:
        return 2
    v = float(m.group(0))
    return 1 if v < 1.5 else 2 if v < 2.5 else 3


@dataclass(frozen=True)
class Recipe:
    """The structure of one composed task (see the module docstring)."""

    anchor: str
    conds: tuple[str, ...]
    links: tuple[str, ...]
    writes: tuple[str, ...]
    fillers: tuple[str, ...]
    items: int
    profile: Profile
    safety: bool = False
    multi_turn: bool = False
    threshold: int | None = None
    forbid_words: tuple[str, ...] = field(default=())
    amount: int | None = None
    """An amount threshold the scenario wrote ("above $5,000"); drawn when None."""
    drafts: bool = False
    """The scenario asks for drafts, not sends ("draft (do not send) a reply")."""
    act: str = ""
    """A write on the selected records the scenario asks for instead of the anchor's own act
    (``ACT_VARIANTS``: ``tag``), with its value (the tag)."""
    act_value: str = ""
    owner_name: str = ""
    """The person an owner condition names ("assigned to Kenji Mori"); drawn when empty."""
    tier: str = ""
    """The customer tier a tier condition names ("premium-tier customers"); enterprise when empty."""
    status: str = ""
    """The status a status condition names ("low-priority"); the field's first value when empty."""
    recipient: str = ""
    """The address the scenario's writes go to ("email security@company.com"); drawn when empty."""

    @property
    def active(self) -> tuple[str, ...]:
        return tuple(sorted({self.anchor, *self.links, *self.writes}))

    def key(self) -> str:
        """Structure key: anchor, conditions, joins, writes, safety/multi-turn (not seeds/records)."""
        mode = "safety" if self.safety else "multi_turn" if self.multi_turn else "plain"
        return f"{self.anchor}|{'+'.join(self.conds)}|{'+'.join(self.links)}|{'+'.join(self.writes)}|{mode}"


# ---------------------------------------------------------------- scenario hints


def _threshold(text: str) -> int | None:
    m = re.search(r"(\d+)\s*(hours?|days?|weeks?)", text, re.IGNORECASE)
    if m is None:
        return None
    n, unit = int(m.group(1)), m.group(2).lower()
    days = -(-n // 24) if unit.startswith("hour") else n * 7 if unit.startswith("week") else n
    return max(1, min(days, 365))


def _days(parts: tuple[Part, ...], conds: tuple[str, ...], text: str) -> int | None:
    """The day threshold a free-text scenario wrote for one of the chosen temporal conditions
    (else the first duration it names outside its distractor)."""
    for p in parts:
        windowed = p.value in TEMPORAL or p.value == "duplicate"  # "within 3 days" of a twin charge
        if p.kind == "condition" and p.value in conds and windowed and p.detail:
            days = threshold_days(p.detail)
            if days is not None:
                return days
    return _threshold(re.split(r"\bdistractors?\s*[:\-]", text, maxsplit=1)[0])


def _pins(scenario: str) -> dict[str, str]:
    body = scenario.strip().removeprefix("compose:")
    out: dict[str, str] = {}
    for part in body.split():
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def _compound(anchor: str) -> bool:
    conds = ANCHORS[anchor].conds.values()
    return len({c.field for c in conds}) > 1 and any(c.kind in TEMPORAL for c in conds)


def _has_policy(links: list[str]) -> bool:
    return "notes" in links or "documents" in links


def _err(slot: Slot, fld: str, message: str) -> SpecError:
    return SpecError.single(f"slot {slot.task_id}", fld, message)


def _first_mentioned(text: str, table: tuple[tuple[str, str], ...], allowed: set[str]) -> list[str]:
    hits: list[tuple[int, str]] = []
    for word, svc in table:
        i = text.find(word)
        if i >= 0 and svc in allowed:
            hits.append((i, svc))
    seen: list[str] = []
    for _, svc in sorted(hits):
        if svc not in seen:
            seen.append(svc)
    return seen


PIN_KEYS = ("anchor", "cond", "items", "services", "threshold", "safety", "multi_turn")


def _check_slot(slot: Slot, pinned: dict[str, str]) -> list[str]:
    """The slot's anchor-capable services; raises SpecError for what makes it unsatisfiable."""
    from coworkenv.services.registry import SERVICES

    unknown = sorted(s for s in slot.services if s not in SERVICES)
    if unknown:
        raise _err(slot, "services", f"unknown service(s) {unknown}; registered: {sorted(SERVICES)}")
    if slot.language.lower() not in ("en", "en-us", "en-gb") and not is_zh(slot.language):
        raise _err(
            slot,
            "language",
            f"the procedural generator writes English and Chinese, got {slot.language!r}; "
            "use language 'en' or 'zh', or the llm generator",
        )
    bad = sorted(k for k in pinned if k not in PIN_KEYS)
    if bad:
        raise _err(slot, "scenario", f"compose: unknown key(s) {bad}; known: {list(PIN_KEYS)}")
    for k in ("items", "services", "threshold"):
        if k in pinned and not pinned[k].isdigit():
            raise _err(slot, "scenario", f"compose: {k}={pinned[k]!r} must be a whole number")
    anchors = [s for s in slot.services if s in ANCHORS]
    if not anchors:
        raise _err(
            slot,
            "services",
            f"none of {sorted(slot.services)} holds records a task can select from; add one of "
            f"{sorted(ANCHORS)} (contacts only joins people to records selected elsewhere)",
        )
    return anchors


def _pick_anchor(  # noqa: PLR0917
    slot: Slot, seed: int, pinned: dict[str, str], text: str, prof: Profile, parts: tuple[Part, ...]
) -> str:
    anchors = _check_slot(slot, pinned)
    if "anchor" in pinned:
        if pinned["anchor"] not in anchors:
            raise _err(
                slot,
                "scenario",
                f"compose: anchor={pinned['anchor']} must be one of the slot's {sorted(anchors)}",
            )
        return pinned["anchor"]
    selected = [p.service for p in parts if p.kind == "select" and p.service in anchors]
    if selected:
        return selected[0]
    hinted = _first_mentioned(text, NOUNS, set(anchors)) or _first_mentioned(text, WEAK_NOUNS, set(anchors))
    if hinted:
        return hinted[0]
    if prof.conds > 1:  # hard: anchors that can hold a compound, temporal selection
        anchors = [a for a in anchors if _compound(a)] or anchors
    return anchors[seed_int(seed, slot.task_id, "anchor") % len(anchors)]


def _pick_conds(
    slot: Slot, anchor: str, pinned: dict[str, str], parts: tuple[Part, ...], prof: Profile, *, rng: Rng
) -> tuple[str, ...]:
    adef = ANCHORS[anchor]
    kinds = tuple(adef.conds)
    if "cond" in pinned:
        conds = tuple(c for c in pinned["cond"].split(",") if c)
        if not conds or any(c not in kinds for c in conds):
            raise _err(slot, "scenario", f"compose: cond={pinned['cond']}: {anchor} supports {list(kinds)}")
        fields = [adef.conds[c].field for c in conds]
        if len(set(fields)) < len(fields):
            raise _err(
                slot,
                "scenario",
                f"compose: cond={pinned['cond']}: these conditions read the same {anchor} field "
                f"{sorted(f for f in fields if fields.count(f) > 1)[0]!r}; keep one of them",
            )
        return conds
    hinted = [p.value for p in parts if p.kind == "condition" and p.value in kinds]
    pool = list(kinds)
    rng.shuffle(pool)
    ordered = [*hinted, *[k for k in pool if k not in hinted]]
    if prof.level == 3 and not any(k in TEMPORAL for k in ordered[: prof.conds]):
        temporal = [k for k in ordered if k in TEMPORAL]
        if temporal:
            ordered = [temporal[0], *[k for k in ordered if k != temporal[0]]]
    picked: list[str] = []
    asked = [p for p in parts if p.kind == "condition" and p.supported]
    # every condition the scenario writes, and no drawn one when it writes any (they would narrow
    # the selection it describes); a scenario-only condition (absence, tier) counts as written
    want = len(hinted) or (0 if asked else max(1, prof.conds))
    for k in ordered:  # conditions on distinct fields only (never "older than" and "recent")
        if len(picked) < want and adef.cond(k).field not in {adef.cond(c).field for c in picked}:
            picked.append(k)
    return tuple(picked)


def _assign_roles(  # noqa: PLR0917
    slot: Slot,
    anchor: str,
    pinned: dict[str, str],
    text: str,
    prof: Profile,
    parts: tuple[Part, ...],
    *,
    rng: Rng,
) -> tuple[list[str], list[str]]:
    """Joins and writes: the scenario's writes first, then its joins and nouns, then a seeded
    order, until the difficulty's service count (or the scenario's, when it names more)."""
    others = [s for s in slot.services if s != anchor]
    rng.shuffle(others)
    hinted_w = [p.service for p in parts if p.kind == "write" and p.service in others]
    hinted_j = [p.service for p in parts if p.kind == "join" and p.service in others]
    nouns = _first_mentioned(text, (*NOUNS, *WEAK_NOUNS), set(others))
    hinted_n = [s for s in dict.fromkeys([*hinted_j, *nouns]) if s not in hinted_w]
    order = list(dict.fromkeys([*hinted_w, *hinted_n, *others]))
    named = len(set(hinted_w) | set(hinted_j)) + 1
    cap = int(pinned.get("services", max(prof.max_services, named)))
    links: list[str] = []
    writes: list[str] = []
    asked_writes = any(p.kind == "write" for p in parts)
    for s in order:
        if len(links) + len(writes) >= cap - 1:
            break
        if s in hinted_w and s in WRITERS:
            writes.append(s)
        elif s in ("crm", "contacts", "kb") or (s in ("notes", "documents") and not _has_policy(links)):
            links.append(s)
        elif s in WRITERS and not asked_writes:  # a scenario that names its writes gets no others
            writes.append(s)
    if "crm" in links and prof.level == 3 and not asked_writes:
        writes.append("crm")
    if "contacts" in links and "gmail" not in writes:
        writes.append("contacts")
    return links, writes


def _flag(pinned: dict[str, str], key: str, default: bool) -> bool:
    return pinned[key].lower() in ("1", "true", "yes") if key in pinned else default


def recipe_for(slot: Slot, seed: int = 0) -> Recipe:
    """The recipe of a slot (see the module docstring)."""
    rng = Rng(seed, slot.task_id, "recipe", today=slot.mock_today)
    scenario = slot.scenario.strip()
    pinned = _pins(scenario) if scenario.startswith("compose:") else {}
    text = "" if pinned else scenario.lower()
    prof = PROFILES[level_of(slot.difficulty)]
    parts = read_scenario(scenario, slot.services) if text else ()
    anchor = _pick_anchor(slot, seed, pinned, text, prof, parts)
    conds = _pick_conds(slot, anchor, pinned, parts, prof, rng=rng)
    conds = _extra_conds(slot, anchor, conds, parts, prof)
    if not conds:  # none of the scenario's conditions fits this anchor: a drawn one (reported)
        conds = _pick_conds(slot, anchor, pinned, (), prof, rng=rng)
    links, writes = _assign_roles(slot, anchor, pinned, text, prof, parts, rng=rng)
    if "tier" in conds and "crm" not in links:  # the tier is on the CRM account
        links.insert(0, "crm")
        writes = [w for w in writes if w != "crm"]
    roles = 1 + len(set(links) | set(writes))
    items = int(pinned.get("items", prof.items + (1 if prof.level == 3 and roles < 4 else 0)))
    safety = _flag(pinned, "safety", is_safety(slot))
    if (
        safety
        and "gmail" not in (*links, *writes)
        and any(p.kind == "join" and p.service == "gmail" for p in parts)
    ):
        links.append("gmail")  # the inbox holds the evidence that stops one write (see _safety)
    mt_text = any(w in text for w in ("multi-turn", "multi_turn", "ask the user"))
    multi = _flag(pinned, "multi_turn", is_multi_turn(slot) or mt_text) and not safety
    written = [
        amount_value(p.detail) for p in parts if p.kind == "condition" and p.value == "amount" and p.detail
    ]
    return Recipe(
        anchor=anchor,
        conds=conds,
        links=tuple(links),
        writes=tuple(writes),
        fillers=tuple(s for s in slot.services if s != anchor and s not in links and s not in writes),
        items=max(1, min(items, 3)),
        profile=prof,
        safety=safety,
        multi_turn=multi,
        threshold=int(pinned["threshold"]) if "threshold" in pinned else _days(parts, conds, text),
        forbid_words=tuple(
            w
            for w in ("export", "delete", "close", "bank", "pay")
            if re.search(rf"\b{w}", text) or any(p.kind == "forbid" and p.value == w for p in parts)
        ),
        amount=next((a for a in written if a is not None), None) if "amount" in conds else None,
        drafts="gmail" in writes and any(p.kind == "write" and p.detail == "draft" for p in parts),
        owner_name=next(
            (p.detail for p in parts if p.kind == "condition" and p.value == "owner" and p.detail), ""
        )
        if {"owner", "absence"} & set(conds)
        else "",
        tier=next(
            (p.detail for p in parts if p.kind == "condition" and p.value == "tier" and p.detail in TIERS), ""
        ),
        status=next((p.detail for p in parts if p.kind == "condition" and p.value == "status"), ""),
        recipient=next((p.detail for p in parts if p.kind == "write" and "@" in p.detail), ""),
        **_variant(anchor, parts),
    )


def _extra_conds(
    slot: Slot, anchor: str, conds: tuple[str, ...], parts: tuple[Part, ...], prof: Profile
) -> tuple[str, ...]:
    """Put first the conditions only a scenario asks for (absence, tier, duplicate, no_match) whose
    other service is in the slot, dropping drawn ones on the same field."""
    asked = [
        p.value
        for p in parts
        if p.kind == "condition"
        and (anchor, p.value) in EXTRA_CONDS
        and EXTRA_NEEDS[p.value] in slot.services
    ]
    asked = list(dict.fromkeys(asked))
    if not asked:
        return conds
    fields = {EXTRA_CONDS[(anchor, k)].field for k in asked}
    rest = [c for c in conds if ANCHORS[anchor].conds[c].field not in fields]
    wanted = {p.value for p in parts if p.kind == "condition"}
    return (*asked, *(c for c in rest if c in wanted))


def _variant(anchor: str, parts: tuple[Part, ...]) -> dict[str, str]:
    for p in parts:
        if p.kind == "write" and p.service == anchor and (anchor, p.value) in ACT_VARIANTS:
            return {"act": p.value, "act_value": p.detail or "needs-review"}
    return {}
