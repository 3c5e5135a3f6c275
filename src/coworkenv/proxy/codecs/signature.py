"""Compact tool signatures: every fact a call needs, in a fraction of the JSON Schema's tokens.

``signature(tool)`` renders one tool as one line::

    name(req: type, opt?: type = default) — Description. req: what it is; opt: what it is

* types: ``string``, ``integer``, ``number``, ``boolean``, ``T[]`` for arrays, ``{k: T, j?: T}``
  for objects with properties, ``"a"|"b"`` for enums, ``A|B`` for unions (``anyOf``/``oneOf``/a
  type list), ``any`` when the schema says nothing;
* ``?`` marks an optional parameter (not in ``required``); ``= v`` its default (JSON);
* numeric bounds as ``integer 1..366``, ``integer >=1``, ``number <=1``; string and array size
  bounds as ``string len>=1``, ``string[] n>=1``; a ``pattern`` or ``format`` after the type;
* a parameter's description follows the tool's, unless every word of it is already in the tool's
  or the parameter's name (``ticket_id: "Ticket ID"`` says nothing a model does not already read).

Nothing a call needs is dropped: names, types, required/optional, enums, defaults, bounds and every
informative description. What goes is the JSON Schema's syntax (braces, quotes, repeated keys) and
``additionalProperties`` (the service rejects unknown arguments either way, with an error naming
them). Keys this renderer does not know are appended as ``key=value`` so nothing is silently lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from coworkenv.proxy.messages import ToolSpec

_SHOWN = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "default",
        "description",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "format",
        "anyOf",
        "oneOf",
        "additionalProperties",
        "title",
    }
)


def _js(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def _bounds(s: dict[str, Any]) -> str:
    parts: list[str] = []
    lo, hi = s.get("minimum"), s.get("maximum")
    if lo is not None and hi is not None:
        parts.append(f"{_js(lo)}..{_js(hi)}")
    elif lo is not None:
        parts.append(f">={_js(lo)}")
    elif hi is not None:
        parts.append(f"<={_js(hi)}")
    if s.get("exclusiveMinimum") is not None:
        parts.append(f">{_js(s['exclusiveMinimum'])}")
    if s.get("exclusiveMaximum") is not None:
        parts.append(f"<{_js(s['exclusiveMaximum'])}")
    for key, label in (
        ("minLength", "len>="),
        ("maxLength", "len<="),
        ("minItems", "n>="),
        ("maxItems", "n<="),
    ):
        if s.get(key) is not None:
            parts.append(f"{label}{_js(s[key])}")
    if s.get("format"):
        parts.append(f"format {s['format']}")
    if s.get("pattern"):
        parts.append(f"pattern {_js(s['pattern'])}")
    return " ".join(parts)


def _base(schema: dict[str, Any], kind: Any) -> str:
    if kind == "array":
        inner = type_text(schema.get("items"))
        return f"({inner})[]" if "|" in inner or " " in inner else f"{inner}[]"
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return "{" + ", ".join(_param(k, v, schema) for k, v in props.items()) + "}" if props else "object"
    return kind if isinstance(kind, str) else "any"


def type_text(schema: Any) -> str:
    """The compact type of a JSON Schema fragment (bounds included, descriptions not)."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        base = "|".join(_js(v) for v in schema["enum"])
    elif "const" in schema:
        base = _js(schema["const"])
    elif "anyOf" in schema or "oneOf" in schema:
        base = "|".join(type_text(s) for s in schema.get("anyOf") or schema.get("oneOf") or [])
    elif isinstance(schema.get("type"), list):
        base = "|".join(_base(schema, k) for k in schema["type"])
    else:
        base = _base(schema, schema.get("type"))
    rest = _bounds(schema)
    extra = " ".join(f"{k}={_js(v)}" for k, v in schema.items() if k not in _SHOWN)
    return " ".join(x for x in (base, rest, extra) if x)


def _param(name: str, schema: Any, parent: dict[str, Any]) -> str:
    opt = "" if name in (parent.get("required") or []) else "?"
    text = f"{name}{opt}: {type_text(schema)}"
    if isinstance(schema, dict) and "default" in schema:
        text += f" = {_js(schema['default'])}"
    return text


_FILLER = frozenset({"a", "an", "the", "of", "to", "for", "in", "by", "new", "this"})


def _words(text: str) -> set[str]:
    """Lowercase words with a plural ``s`` dropped (``transactions`` → ``transaction``)."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z0-9]+", text.lower())}


def _says_more(description: str, names: str) -> bool:
    """False for a description whose every word is already in the tool's or the parameter's name
    (``ticket_id: "Ticket ID"``, ``finance_submit_report.title: "Report title"``)."""
    return bool(_words(description) - _words(names.replace("_", " ")) - _FILLER)


def _clean(text: str) -> str:
    return text.strip().replace("``", "`")


def _descriptions(props: dict[str, Any], names: str, prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in props.items():
        if not isinstance(v, dict):
            continue
        d = _clean(str(v.get("description") or ""))
        if d and _says_more(d, f"{names} {k}"):
            out.append(f"{prefix}{k}: {d}")
        items = v.get("items")
        nested = v.get("properties") or (items.get("properties") if isinstance(items, dict) else None)
        if isinstance(nested, dict):
            out.extend(_descriptions(nested, f"{names} {k}", f"{prefix}{k}."))
    return out


def signature(tool: ToolSpec) -> str:
    """One line: the call signature, then the tool's and its parameters' descriptions."""
    params = tool.parameters if isinstance(tool.parameters, dict) else {}
    props = params.get("properties") or {}
    args = ", ".join(_param(k, v, params) for k, v in props.items())
    extra = " ".join(f"{k}={_js(v)}" for k, v in params.items() if k not in _SHOWN)
    line = f"{tool.name}({args})" + (f" {extra}" if extra else "")
    notes = [_clean(tool.description).rstrip(".")] if tool.description.strip() else []
    notes += _descriptions(props, tool.name)
    return line + (" — " + "; ".join(notes) if notes else "")


def signatures(tools: Sequence[ToolSpec]) -> str:
    return "\n".join(signature(t) for t in tools)
