"""SmolLM2-Instruct: ChatML whose template ignores ``tools``, so tools go into the system prompt.

The system turn is a tool block — each tool as one JSON line (name, description, parameters), the
call format and an example call built from the first tool's required parameters — followed by the
caller's system text (or SmolLM2's default). The tool block comes first because it is what the
conversations of a task family share, token for token, while the system text carries per-task
details such as the date: the generation engine's prefix cache and SFT packing then share the
whole tool block instead of stopping at the first differing character. Calls are written on one line,
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; tool results come back as a user turn
of ``<tool_response>`` blocks. Without tools the rendering equals SmolLM2's own chat template.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from coworkenv.proxy.codecs.base import Codec, hermes_call_text
from coworkenv.proxy.codecs.chatml import render_chatml
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


def tool_block(tools: Sequence[ToolSpec]) -> str:
    lines = [json.dumps(t.model_dump(), ensure_ascii=False) for t in tools]
    first = {"name": tools[0].name, "arguments": example_arguments(tools[0])}
    example = json.dumps(first, ensure_ascii=False)
    return (
        "\n\nYou can call tools. The available tools, one JSON object per line:\n"
        + "\n".join(lines)
        + "\n\nTo call a tool, reply with exactly one line per call:\n"
        '<tool_call>{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}</tool_call>\n'
        f"For example:\n<tool_call>{example}</tool_call>\n"
        "Tool results come back in <tool_response> tags. "
        "When the task is done, reply with your final answer as plain text."
    )


class SmolLM2Codec(Codec):
    family: ClassVar[str] = "smollm2"

    def render_text(self, request: ChatRequest) -> str:
        def system(text: str | None) -> str:
            base = DEFAULT_SYSTEM if text is None else text
            return tool_block(request.tools).lstrip() + "\n\n" + base if request.tools else base

        return render_chatml(request, system, self.format_assistant)

    def format_assistant(self, content: str, tool_calls: Sequence[ToolCall]) -> str:
        calls = [hermes_call_text(c, pretty=False) for c in tool_calls]
        return "\n".join([content, *calls] if content else calls)
