"""Generated text -> :class:`AssistantTurn`, shared by every codec. Never raises.

Accepted tool-call forms, in order of preference:

1. Hermes tags: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (any number; the
   closing tag may be missing at the very end of the text). Text outside the tags is the content.
2. Fenced code blocks (```` ```json ... ``` ````) holding a call object or a list of them.
3. The whole reply being a bare call object or a list of them.
4. Call objects embedded in prose, when their name resolves to a request tool.

A call object has a string ``name`` and ``arguments`` (or ``parameters``) that is an object or a
JSON string of one; ``arguments`` become compact JSON of the parsed object. Names resolve against
the request's tools (:func:`~coworkenv.proxy.codecs.base.resolve_tool_name`). A tagged call, or a
fenced/bare object that has the call shape, whose JSON is broken or whose tool is unknown makes the
whole turn a plain-text reply (the text, stripped) with ``malformed=True``. JSON that does not look
like a call (a fenced report, say) is ordinary content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from coworkenv.proxy.codecs.base import compact_json, resolve_tool_name
from coworkenv.proxy.messages import AssistantTurn, FinishReason, ToolCall

_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_FENCE = re.compile(r"```[ \t]*(?:json|tool_call|tool_code)?[ \t]*\n?(.*?)```", re.S | re.I)


class _Malformed(Exception):
    pass


def _call_shaped(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("name"), str)
        and ("arguments" in obj or "parameters" in obj)
    )


def _to_call(obj: Any, tool_names: Sequence[str], call_id: str) -> ToolCall:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise _Malformed("a tool call must be an object with a string 'name'")
    name = resolve_tool_name(obj["name"], tool_names)
    if name is None:
        raise _Malformed(f"unknown tool {obj['name']!r}")
    args = obj.get("arguments", obj.get("parameters", {}))
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise _Malformed("arguments are not JSON") from None
    if not isinstance(args, dict):
        raise _Malformed("arguments must be a JSON object")
    return ToolCall(id=call_id, name=name, arguments=compact_json(args))


def _calls_from(objs: list[Any], tool_names: Sequence[str], first: int) -> list[ToolCall]:
    return [_to_call(o, tool_names, f"call_{first + i}") for i, o in enumerate(objs)]


def _as_call_list(obj: Any) -> list[Any] | None:
    """The call objects ``obj`` holds, or None when it is not call-shaped."""
    if _call_shaped(obj):
        return [obj]
    if isinstance(obj, list) and obj and all(_call_shaped(o) for o in obj):
        return list(obj)
    return None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _from_tags(text: str, tool_names: Sequence[str], first: int) -> tuple[str, list[ToolCall]] | None:
    bodies = _TAG.findall(text)
    if not bodies:
        return None
    if not tool_names:
        raise _Malformed("tool call tags but the request offers no tools")
    objs: list[Any] = []
    for body in bodies:
        try:
            obj = json.loads(body)
        except ValueError:
            raise _Malformed("tool call body is not JSON") from None
        objs.extend(obj if isinstance(obj, list) else [obj])
    content = _TAG.sub("", text).strip()
    return content, _calls_from(objs, tool_names, first)


def _from_fences(text: str, tool_names: Sequence[str], first: int) -> tuple[str, list[ToolCall]] | None:
    objs: list[Any] = []
    spans: list[tuple[int, int]] = []
    for m in _FENCE.finditer(text):
        calls = _as_call_list(_loads(m.group(1).strip()))
        if calls is not None:
            objs.extend(calls)
            spans.append(m.span())
    if not objs:
        return None
    content = text
    for start, end in reversed(spans):
        content = content[:start] + content[end:]
    return content.strip(), _calls_from(objs, tool_names, first)


def _from_embedded(text: str, tool_names: Sequence[str], first: int) -> tuple[str, list[ToolCall]] | None:
    decoder = json.JSONDecoder()
    objs: list[Any] = []
    spans: list[tuple[int, int]] = []
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if _call_shaped(obj) and resolve_tool_name(obj["name"], tool_names) is not None:
            objs.append(obj)
            spans.append((pos, end))
            pos = text.find("{", end)
        else:
            pos = text.find("{", pos + 1)
    if not objs:
        return None
    try:
        calls = _calls_from(objs, tool_names, first)
    except _Malformed:
        return None  # prose with JSON in it: not a call after all
    content = text
    for start, end in reversed(spans):
        content = content[:start] + content[end:]
    return content.strip(), calls


def parse_turn(
    text: str,
    tool_names: Sequence[str],
    *,
    first_call_index: int = 0,
    finish_reason: FinishReason = "stop",
) -> AssistantTurn:
    """Parse one generated turn; see the module docstring for the accepted forms."""
    try:
        found = _from_tags(text, tool_names, first_call_index)
        if found is None and tool_names:
            found = _from_fences(text, tool_names, first_call_index)
            if found is None:
                whole = _as_call_list(_loads(text.strip()))
                if whole is not None:
                    found = ("", _calls_from(whole, tool_names, first_call_index))
            if found is None:
                found = _from_embedded(text, tool_names, first_call_index)
    except (_Malformed, RecursionError):
        return AssistantTurn(content=text.strip(), finish_reason=finish_reason, malformed=True)
    if found is None or not found[1]:
        return AssistantTurn(content=text.strip(), finish_reason=finish_reason)
    content, calls = found
    return AssistantTurn(content=content, tool_calls=tuple(calls), finish_reason="tool_calls")
