"""Service catalogs for generation prompts, built from the service registry (never hand-written).

``service_catalog(name)`` describes one registered service the way a generator needs it: its tables
(key field, record fields with JSON types), its tools (kind read/write, description, argument JSON
Schema, the audit collection a write records into) and its audit keys. ``catalog_text(names)``
renders the catalogs of a slot's services as JSON for a prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from typing import Any

from coworkenv.errors import CoworkError


def _field_type(prop: dict[str, Any]) -> str:
    if "type" in prop:
        t = prop["type"]
        if t == "array":
            inner = prop.get("items", {})
            return f"array<{_field_type(inner) if isinstance(inner, dict) and inner else 'any'}>"
        return str(t)
    branches = prop.get("anyOf")
    if isinstance(branches, list):
        return " | ".join(_field_type(b) for b in branches if isinstance(b, dict))
    if "$ref" in prop:
        return "object"
    return "any"


def _record_fields(model: Any) -> dict[str, str]:
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    out: dict[str, str] = {}
    for name, prop in schema.get("properties", {}).items():
        out[name] = _field_type(prop) + (" (required)" if name in required else "")
    return out


@cache
def service_catalog(name: str) -> dict[str, Any]:
    """The catalog of one registered service (tables, tools with argument schemas, audit keys)."""
    from coworkenv.services.registry import SERVICES

    cls = SERVICES.get(name)
    if cls is None:
        raise CoworkError(f"unknown service {name!r}; registered: {sorted(SERVICES)}")
    tables = {
        tname: {
            "key": d.key,
            "fixture_file": d.fixture,
            "record_fields": _record_fields(d.record),
        }
        for tname, d in cls.tables.items()
    }
    tools = [
        {
            "name": t.name,
            "kind": t.kind,
            "description": t.description,
            "arguments": t.input_schema(),
            **({"audit_key": t.audit} if t.audit else {}),
        }
        for t in cls.tool_table.values()
    ]
    return {
        "service": name,
        "title": cls.title or name,
        "tables": tables,
        "tools": tools,
        "audit_keys": list(cls.audit_keys),
    }


def catalog_text(names: Iterable[str]) -> str:
    """The catalogs of the given services, as a JSON list (prompt text)."""
    return json.dumps([service_catalog(n) for n in names], indent=1, ensure_ascii=False)
