"""Hermes / Qwen-style native tool template (ChatML).

The system turn ends with a ``# Tools`` section listing each tool's OpenAI function schema inside
``<tools></tools>`` and the call format; calls are written as
``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`` after any content; consecutive
tool results become one user turn of ``<tool_response>`` blocks. This is the layout Qwen2.5/Qwen3
and Hermes models are trained on, written here without needing their tokenizer's template.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from coworkenv.proxy.codecs.base import Codec, hermes_call_text, tool_schema
from coworkenv.proxy.codecs.chatml import render_chatml
from coworkenv.proxy.messages import ChatRequest, ToolCall, ToolSpec

DEFAULT_SYSTEM = "You are a helpful assistant."


def tools_section(tools: Sequence[ToolSpec]) -> str:
    schemas = "\n".join(json.dumps(tool_schema(t), ensure_ascii=False) for t in tools)
    return (
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{schemas}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


class HermesCodec(Codec):
    family: ClassVar[str] = "hermes"

    def render_text(self, request: ChatRequest) -> str:
        def system(text: str | None) -> str:
            base = DEFAULT_SYSTEM if text is None else text
            return base + (tools_section(request.tools) if request.tools else "")

        return render_chatml(request, system, self.format_assistant)

    def format_assistant(self, content: str, tool_calls: Sequence[ToolCall]) -> str:
        calls = [hermes_call_text(c, pretty=True) for c in tool_calls]
        return "\n".join([content, *calls] if content else calls)
