"""Building blocks of a composed task: the record/entity types and the condition builders.

Contract: a :class:`Cond` sets one record field for a *role* — ``pass`` (satisfies the condition),
``near`` (looks like a match and is not: one day inside an age threshold, a few percent under an
amount, the adjacent status, the owner's namesake) or ``fail`` (clearly outside). Temporal
conditions are offsets from ``mock_today`` with at least a one-day margin on either side of the
threshold, so no record sits on the boundary. An :class:`Act` is a write on selected records whose
``targets`` pin their ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coworkenv.synth.procedural.builder import target
from coworkenv.synth.procedural.records import Company, Person, Rng, money_text

Row = dict[str, Any]
TEMPORAL = frozenset({"age", "recent", "upcoming"})


@dataclass
class Item:
    """One answer (or distractor / noise) record and the entity it is about."""

    rid: str
    company: Company
    contact: Person
    customer_id: str
    topic: str
    record: Row
    roles: dict[str, str] = field(default_factory=dict)
    """The role it plays for each condition (``pass``/``near``/``fail``): what the cross-service
    blocks (tier, duplicate, no_match) plant around it."""


@dataclass(frozen=True)
class Params:
    """The task-wide parameters the conditions read."""

    days: int
    amount: int
    owner: Person
    namesake: Person
    other: Person
    tier: str = "enterprise"
    """The customer tier a tier condition selects."""
    status: str = ""
    """The status a status condition selects, when the scenario names one the field has."""


@dataclass(frozen=True)
class Cond:
    kind: str
    field: str
    """The record field the condition reads (two conditions of one task never share a field)."""
    phrase: Callable[[Params], str]
    apply: Callable[[Rng, Row, str, Params], None]


@dataclass(frozen=True)
class Act:
    """The write on selected records: per item, or one call covering all of them."""

    tool: str
    audit: str
    id_field: str
    per_item: bool
    verb: str
    build: Callable[[Rng, list[Item], str, str], Row]
    """(rng, items, note, recipient email) → the call's arguments."""
    text_field: str | None = None
    id_match: str = "iequals"
    pins: tuple[tuple[str, str], ...] = ()
    """Field values every call must carry besides the id (a tag added; ``{who}``: the recipient),
    checked per record."""

    def targets(self, items: list[Item]) -> list[dict[str, Any]]:
        return [target(self.id_field, it.rid, match=self.id_match) for it in items]


# ---------------------------------------------------------------- condition builders


def _offset(rng: Rng, kind: str, role: str, n: int) -> int:
    if kind == "age":  # older than n days
        return {
            "pass": -(n + rng.randint(1, max(2, n))),
            "near": -max(0, n - rng.randint(1, max(1, n // 4))),
            "fail": -rng.randint(0, max(0, n // 3)),
        }[role]
    if kind == "recent":  # within the last n days
        return {
            "pass": -rng.randint(0, max(0, n - 1)),
            "near": -(n + rng.randint(1, 3)),
            "fail": -(n + rng.randint(10, 40)),
        }[role]
    return {  # upcoming: within the next n days
        "pass": rng.randint(1, n),
        "near": n + rng.randint(1, 3),
        "fail": n + rng.randint(10, 30),
    }[role]


def temporal(kind: str, fld: str, ts: bool, text: str) -> Cond:
    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        off = _offset(rng, kind, role, p.days)
        hour = rng.randint(8, 16)
        row[fld] = rng.ts(off, hour) if ts else rng.day(off)
        if fld == "start_time":  # keep a calendar event one hour long
            row["end_time"] = rng.ts(off, hour + 1)

    return Cond(kind, fld, lambda p: text.format(n=p.days), apply)


def amount(fld: str, text: str, cents: bool = True) -> Cond:
    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        lo, hi = {"pass": (1.1, 2.2), "near": (0.9, 0.97), "fail": (0.1, 0.5)}[role]
        v = p.amount * rng.uniform(lo, hi)
        row[fld] = round(v, 2) if cents else int(v)

    return Cond("amount", fld, lambda p: text.format(x=money_text(p.amount).removesuffix(".00")), apply)


def _status_order(values: tuple[str, str, str], wanted: str) -> tuple[str, str, str]:
    """(pass, near, fail) values: the scenario's status when the field has it, else the first."""
    if wanted not in values or wanted == values[0]:
        return values
    rest = [v for v in values if v != wanted]
    return (wanted, rest[0], rest[1])


def status(fld: str, values: tuple[str, str, str], text: str) -> Cond:
    """Selects ``values[0]`` (phrased ``text``), or the status the scenario names when the field
    has it (phrased "with <field> <value>"); the near miss holds the next value."""

    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        row[fld] = _status_order(values, p.status)[("pass", "near", "fail").index(role)]

    def phrase(p: Params) -> str:
        chosen = _status_order(values, p.status)[0]
        return text if chosen == values[0] else f"with {fld.replace('_', ' ')} {chosen}"

    return Cond("status", fld, phrase, apply)


def owner(fld: str, text: str, as_list: bool = False, by_name: bool = False) -> Cond:
    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        who = {"pass": p.owner, "near": p.namesake, "fail": p.other}[role]
        val = who.name if by_name else who.email
        row[fld] = [*row.get(fld, []), val] if as_list else val

    return Cond("owner", fld, lambda p: text.format(owner=p.owner.name), apply)


def absence(fld: str, text: str) -> Cond:
    """Owned by someone out of office today: ``pass`` → the owner (on leave now), ``near`` → a
    namesake whose leave starts next week, ``fail`` → a colleague with no leave (the leave events
    are planted in the calendar by the assembler)."""

    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        row[fld] = {"pass": p.owner, "near": p.namesake, "fail": p.other}[role].email

    return Cond("absence", fld, lambda p: text, apply)


def stock() -> Cond:
    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        thr = int(row["min_stock_threshold"])
        row["current_stock"] = {
            "pass": rng.randint(0, thr - 1),
            "near": thr + rng.randint(1, 3),
            "fail": thr * 3,
        }[role]

    return Cond("amount", "current_stock", lambda p: "below their minimum stock threshold", apply)


def across(kind: str, fld: str, text: str) -> Cond:
    """A condition read from records around the row (the customer's CRM tier, a twin charge, a
    knowledge-base article for its category): the row keeps its fields and the assembler plants
    those records by the item's role. ``fld`` is the row field the join goes through."""

    def apply(rng: Rng, row: Row, role: str, p: Params) -> None:
        del rng, row, role, p

    return Cond(kind, fld, lambda p: text.format(n=p.days, tier=p.tier), apply)
