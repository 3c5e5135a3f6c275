"""Value matching shared by every check: dotted paths and the :class:`FieldTarget` modes.

``lookup(obj, "a.b.0.c")`` walks mappings and sequences and returns :data:`MISSING` when the path
does not exist. ``matches(value, target)`` is true when the value (or, for a list, any element)
equals/contains/matches any accepted value. Non-strings compare by JSON text, so ``3`` matches
``"3"`` under ``iequals`` — agents often stringify numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from coworkenv.spec import FieldTarget

MISSING: Any = object()


def lookup(obj: Any, path: str) -> Any:
    cur = obj
    for part in path.split("."):
        if isinstance(cur, Mapping):
            if part not in cur:
                return MISSING
            cur = cur[part]
        elif isinstance(cur, Sequence) and not isinstance(cur, str) and part.isdigit():
            idx = int(part)
            if idx >= len(cur):
                return MISSING
            cur = cur[idx]
        else:
            return MISSING
    return cur


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, ensure_ascii=False)


@lru_cache(maxsize=4096)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.MULTILINE)


def _one(actual: Any, accepted: Any, mode: str) -> bool:
    a, b = _text(actual), _text(accepted)
    if mode == "equals":
        return a == b
    if mode == "iequals":
        return a.strip().casefold() == b.strip().casefold()
    if mode == "contains":
        return b in a
    if mode == "icontains":
        return b.casefold() in a.casefold()
    return _regex(b).search(a) is not None


def matches(value: Any, target: FieldTarget) -> bool:
    if value is MISSING or value is None:
        return False
    candidates: Sequence[Any] = value if isinstance(value, list | tuple) else (value,)
    if isinstance(value, list | tuple) and target.match in ("contains", "icontains", "regex"):
        candidates = (*candidates, value)  # also test the whole list's text
    return any(_one(c, acc, target.match) for c in candidates for acc in target.values)


def record_matches(record: Any, targets: Sequence[FieldTarget]) -> bool:
    return all(matches(lookup(record, t.field), t) for t in targets)


def keyword_hit(text: str, keyword: str) -> bool:
    """Case-insensitive containment; ``a|b`` accepts either alternative."""
    low = text.casefold()
    return any(alt.strip().casefold() in low for alt in keyword.split("|") if alt.strip())
