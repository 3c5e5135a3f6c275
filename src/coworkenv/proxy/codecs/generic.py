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
from coworkenv.proxy.messages import ChatRequest, ToolCall, openai_message


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
            [openai_message(m, arguments_object) for m in request.messages],
            tools=[tool_schema(t) for t in request.tools] or None,
            add_generation_prompt=True,
            tokenize=False,
        )
        return str(text)

    def format_assistant(self, content: str, tool_calls: Sequence[ToolCall]) -> str:
        calls = [hermes_call_text(c, pretty=True) for c in tool_calls]
        return "\n".join([content, *calls] if content else calls)
