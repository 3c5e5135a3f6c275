"""The state one composition threads through its blocks.

Contract: a :class:`Ctx` holds the builder, the recipe, the drawn task parameters and what the
reference agent has *found* so far (who to notify, which procedure to cite, the multi-turn
reference). Reads append to ``reads`` and writes to ``writes`` (each a tool name and arguments);
``assemble`` emits them in that order, reads first, so a reference never writes before it looked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coworkenv.synth.procedural.builder import SpecBuilder
from coworkenv.synth.procedural.compose.anchors import ANCHORS, AnchorDef, Item, Params
from coworkenv.synth.procedural.compose.recipe import Recipe
from coworkenv.synth.procedural.records import Person, Rng

Call = tuple[str, dict[str, Any]]


@dataclass
class Ctx:
    b: SpecBuilder
    rc: Recipe
    p: Params
    topic: str
    items: list[Item] = field(default_factory=list)
    near: list[Item] = field(default_factory=list)
    noise: list[Item] = field(default_factory=list)
    trap: Item | None = None
    reads: list[Call] = field(default_factory=list)
    writes: list[Call] = field(default_factory=list)
    verify: list[Call] = field(default_factory=list)
    """Reads after the writes that confirm them (padding toward the step window)."""
    clauses: list[str] = field(default_factory=list)
    """Request sentences, in order (the anchor's selection first)."""
    done: list[str] = field(default_factory=list)
    """Final-message sentences."""
    who: Person | None = None
    """The internal colleague writes address when no customer contact is joined."""
    who_phrase: str = ""
    customer_recipient: bool = False
    owner_contact: str | None = None
    """The colleague's contact id, once a contacts look-up found it."""
    cite: str | None = None
    code: str | None = None
    policy_title: str | None = None
    temporal_writes: int = 0
    tiers: dict[str, str] = field(default_factory=dict)
    """customer id → CRM tier, when a tier condition planted the accounts (link_crm reuses them)."""
    find: tuple[str, list[str]] = ("", [])
    """The selection clause's record noun and condition phrases (rendered again for Chinese)."""
    twins: list[str] = field(default_factory=list)
    """The earlier charges a duplicate condition planted (never answers)."""

    @property
    def zh(self) -> bool:
        """Whether the task is written in Chinese (the slot's language)."""
        return self.b.slot.language.lower().split("-")[0] == "zh"

    @property
    def r(self) -> Rng:
        return self.b.rng

    @property
    def anchor(self) -> AnchorDef:
        return ANCHORS[self.rc.anchor]

    @property
    def actionable(self) -> list[Item]:
        """Selected records the reference acts on (a safety trap is withheld)."""
        return [it for it in self.items if it is not self.trap]

    def email_for(self, it: Item) -> str:
        if self.customer_recipient:
            return it.contact.email
        assert self.who is not None
        return self.who.email

    def note(self, it: Item, what: str) -> str:
        parts = [f"{it.rid} ({it.company.name}): {what}."]
        if self.cite:
            parts.append(f"Procedure {self.cite}.")
        if self.code:
            parts.append(f"Change ref {self.code}.")
        return " ".join(parts)
