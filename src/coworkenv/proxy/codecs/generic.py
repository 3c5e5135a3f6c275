"""Any Hugging Face chat model: render with ``tokenizer.apply_chat_template(tools=...)``.

Messages are handed to the tokenizer's own template in the OpenAI-like shape HF templates expect
(assistant ``tool_calls`` with parsed ``arguments`` objects, ``tool`` messages with
``tool_call_id`` and ``name``). Parsing uses the shared parser (Hermes tags, JSON fallbacks — which
also cover Llama-3's bare ``{"name": ..., "parameters": ...}``). ``format_assistant`` writes the
Hermes form. The tokenizer must be given at construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from coworkenv.errors import CoworkError
from coworkenv.proxy.codecs.base import Codec, arguments_object, hermes_call_text, tool_schema
from coworkenv.proxy.messages import ChatRequest, Message, ToolCall


def hf_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_object(c.arguments)},
            }
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


class GenericCodec(Codec):
    family: ClassVar[str] = "generic"
    stop_texts: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tokenizer: Any) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise CoworkError(
                "the generic codec needs a tokenizer with a chat_template; "
                "use codec 'smollm2' or 'hermes' for this model"
            )
        self.tokenizer = tokenizer

    def render_text(self, request: ChatRequest) -> str:
        text = self.tokenizer.apply_chat_template(
            [hf_message(m) for m in request.messages],
            tools=[tool_schema(t) for t in request.tools] or None,
            add_generation_prompt=True,
            tokenize=False,
        )
        return str(text)

    def format_assistant(self, content: str, tool_calls: Sequence[ToolCall]) -> str:
        calls = [hermes_call_text(c, pretty=True) for c in tool_calls]
        return "\n".join([content, *calls] if content else calls)
