"""The template contract.

A :class:`Template` declares its id (the slot's ``scenario: template:<id>``), its family (one of
:data:`FAMILIES`, the paper's task families), the default plan category, the services it needs,
whether it is a safety (act-vs-withhold) or multi-turn scenario, and ``build(b)`` which fills a
:class:`~coworkenv.synth.procedural.builder.SpecBuilder` from the builder's seeded ``Rng``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coworkenv.synth.procedural.builder import SpecBuilder

FAMILIES: tuple[str, ...] = (
    "business_workflow",
    "knowledge_content",
    "interactive_advice",
    "engineering_ops",
    "security_compliance",
)


@dataclass(frozen=True)
class Template:
    id: str
    family: str
    category: str
    services: tuple[str, ...]
    build: Callable[[SpecBuilder], None]
    summary: str
    selects: str = ""
    """The service whose records the task selects (what a scenario's "find the ..." must name for
    the template to honour it; :func:`~coworkenv.synth.procedural.scenario.judge_template`)."""
    safety: bool = False
    multi_turn: bool = False

    def __post_init__(self) -> None:
        if self.selects not in self.services:
            raise ValueError(f"template {self.id}: selects={self.selects!r} is not one of {self.services}")
        if self.family not in FAMILIES:
            raise ValueError(
                f"template {self.id}: unknown family {self.family!r}; expected one of {FAMILIES}"
            )
