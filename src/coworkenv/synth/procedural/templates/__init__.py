"""The template registry: every procedural scenario template by id (one module per family)."""

from __future__ import annotations

from types import MappingProxyType

from coworkenv.synth.procedural.templates import advice, business, engineering, knowledge, security
from coworkenv.synth.procedural.templates.base import FAMILIES, Template

_ALL: tuple[Template, ...] = (
    *business.TEMPLATES,
    *knowledge.TEMPLATES,
    *advice.TEMPLATES,
    *engineering.TEMPLATES,
    *security.TEMPLATES,
)


def _index() -> MappingProxyType[str, Template]:
    out: dict[str, Template] = {}
    for t in _ALL:
        if t.id in out:
            raise RuntimeError(f"duplicate procedural template id {t.id!r}")
        out[t.id] = t
    return MappingProxyType(dict(sorted(out.items())))


TEMPLATES = _index()

__all__ = ["FAMILIES", "TEMPLATES", "Template"]
