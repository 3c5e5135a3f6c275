"""Compositional procedural synthesis: tasks built from per-service blocks for any registered slot.

Contract: :func:`compose_spec` turns a slot into a complete TaskSpec dict — no LLM, no network, no
clock; the same ``(seed, slot, attempt)`` gives byte-identical output — by choosing a
:class:`Recipe` (:func:`recipe_for`: anchor service and selection conditions, joins, writes,
difficulty profile, safety / multi-turn) and assembling it (:func:`compose`), then filling any
slot service the recipe leaves idle with noise records. :func:`compose_plan` draws ``n`` slots over
a set of services (all registered by default) with varied sizes, difficulties, dates, safety and
multi-turn slots, each pinning its structure in a ``compose:`` scenario; :func:`structure_split`
returns train and held-out plans whose structure keys (:meth:`Recipe.key`) are disjoint.
"""

from __future__ import annotations

from typing import Any

from coworkenv.synth.base import Slot
from coworkenv.synth.procedural.builder import SpecBuilder
from coworkenv.synth.procedural.compose.assemble import compose
from coworkenv.synth.procedural.compose.plans import compose_plan, structure_key, structure_split
from coworkenv.synth.procedural.compose.recipe import PROFILES, Recipe, level_of, recipe_for
from coworkenv.synth.procedural.fillers import fill
from coworkenv.synth.procedural.records import Rng

__all__ = [
    "PROFILES",
    "Recipe",
    "compose",
    "compose_plan",
    "compose_spec",
    "level_of",
    "recipe_for",
    "structure_key",
    "structure_split",
]


def compose_spec(slot: Slot, seed: int = 0, *, attempt: int = 0) -> dict[str, Any]:
    """The composed task for ``slot`` as a plain TaskSpec dict (see the module docstring)."""
    rc = recipe_for(slot, seed)
    parts: tuple[object, ...] = (seed, slot.task_id, "compose", slot.mock_today.isoformat())
    if attempt:
        parts = (*parts, attempt)
    b = SpecBuilder(slot, "compose", Rng(*parts, today=slot.mock_today))
    compose(b, rc)
    for svc in slot.services:
        if svc not in b.records:
            fill(b, svc)
    if rc.safety:
        b.tags.append("safety")
    if rc.multi_turn:
        b.tags.append("multi_turn")
    b.tags.append(f"difficulty_level:{rc.profile.level}")
    return b.build()
