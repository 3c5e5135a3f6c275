"""SmolLM2-Instruct: ChatML whose template ignores ``tools``, so tools go into the system prompt.

The system turn is a tool block — each tool as one compact signature line
(:mod:`.signature`: types, required/optional, enums, defaults, bounds and descriptions, about
half the JSON Schema's tokens), the call format and an example call built from the first tool's
required parameters — followed by the caller's system text (or SmolLM2's default).
``tool_format="json"`` (family ``smollm2-json``) writes each tool as its full JSON object instead.
The tool block comes first because it is what the conversations of a task family share, token
for token, while the system text carries per-task details such as the date: the generation
engine's prefix cache and SFT packing then share the whole tool block instead of stopping at the
first differing character. Calls are written on one line,
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; tool results come back as a user turn
of ``<tool_response>`` blocks. Without tools the rendering equals SmolLM2's own chat template.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import orjson

from coworkenv.proxy.codecs.base import Codec, hermes_call_text
from coworkenv.proxy.codecs.chatml import render_chatml
from coworkenv.proxy.codecs.signature import signature
from coworkenv.proxy.messages import ChatRequest, ToolCall, ToolSpec

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

_PLACEHOLDER: dict[str, Any] = {
    "string": "...",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def example_arguments(tool: ToolSpec) -> dict[str, Any]:
    """Placeholder values for the tool's required parameters (by JSON type)."""
    props = tool.parameters.get("properties") or {}
    required = tool.parameters.get("required") or []
    out: dict[str, Any] = {}
    for key in required:
        spec = props.get(key) if isinstance(props, dict) else None
        kind = spec.get("type") if isinstance(spec, dict) else None
        out[str(key)] = _PLACEHOLDER.get(kind if isinstance(kind, str) else "string", "...")
    return out


ToolFormat = Literal["compact", "json"]
TOOL_FORMATS: tuple[ToolFormat, ...] = ("compact", "json")


def tool_block(tools: Sequence[ToolSpec], tool_format: ToolFormat = "compact") -> str:
    """The tools' part of the system prompt. A harness sends the same tools on every call of a
    rollout, so the text is cached by the tools' exact content (rendering costs ~0.1 ms per tool)."""
    try:
        key = (tool_format, *((t.name, t.description, orjson.dumps(t.parameters)) for t in tools))
    except (orjson.JSONEncodeError, TypeError):  # parameters orjson cannot write: render, uncached
        return _render_tool_block(tools, tool_format)
    text = _BLOCKS.get(key)
    if text is None:
        if len(_BLOCKS) >= _BLOCKS_KEPT:
            _BLOCKS.clear()
        text = _BLOCKS[key] = _render_tool_block(tools, tool_format)
    return text


_BLOCKS: dict[tuple[object, ...], str] = {}
_BLOCKS_KEPT = 512


def _render_tool_block(tools: Sequence[ToolSpec], tool_format: ToolFormat) -> str:
    if tool_format == "json":
        head = "The available tools, one JSON object per line:"
        lines = [json.dumps(t.model_dump(), ensure_ascii=False) for t in tools]
    else:
        head = "The available tools, one per line: name(arguments; ? = optional) — what it does:"
        lines = [signature(t) for t in tools]
    first = {"name": tools[0].name, "arguments": example_arguments(tools[0])}
    example = json.dumps(first, ensure_ascii=False)
    return (
        f"\n\nYou can call tools. {head}\n"
        + "\n".join(lines)
        + "\n\nTo call a tool, reply with exactly one line per call:\n"
        '<tool_call>{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}</tool_call>\n'
        f"For example:\n<tool_call>{example}</tool_call>\n"
        "Tool results come back in <tool_response> tags. "
        "When the task is done, reply with your final answer as plain text."
    )


class SmolLM2Codec(Codec):
    family: ClassVar[str] = "smollm2"

    def __init__(self, tool_format: ToolFormat = "compact") -> None:
        if tool_format not in TOOL_FORMATS:
            raise ValueError(f"tool_format {tool_format!r}: choose one of {', '.join(TOOL_FORMATS)}")
        self.tool_format: ToolFormat = tool_format

    def render_text(self, request: ChatRequest) -> str:
        def system(text: str | None) -> str:
            base = DEFAULT_SYSTEM if text is None else text
            if not request.tools:
                return base
            return tool_block(request.tools, self.tool_format).lstrip() + "\n\n" + base

        return render_chatml(request, system, self.format_assistant)

    def format_assistant(self, content: str, tool_calls: Sequence[ToolCall]) -> str:
        calls = [hermes_call_text(c, pretty=False) for c in tool_calls]
        return "\n".join([content, *calls] if content else calls)
