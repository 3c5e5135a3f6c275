"""The codec contract: chat messages + tool schemas -> prompt text/ids, generated text -> turn.

A :class:`Codec` belongs to one model family. ``render(request, tokenizer)`` returns the exact
prompt text (ending with the assistant generation header) and the token ids fed to the engine;
``format_assistant(content, tool_calls)`` is the *canonical* text of an assistant turn, used both
to render history and by scripted backends, so a model that writes canonical output gets its own
tokens back in the next prompt; ``parse(text, tools)`` turns generated text into an
:class:`~coworkenv.proxy.messages.AssistantTurn` and never raises (see :mod:`.parse`).

Tool-call ids are deterministic: ``call_<n>`` where ``n`` counts the tool calls already in the
conversation (``first_call_index``) plus the position in this turn.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from coworkenv.proxy.messages import AssistantTurn, ChatRequest, FinishReason, Message, ToolCall, ToolSpec

TOOL_NAME_SEPARATORS = ("__", "_", ".", "-", "/", ":")


class TokenizerLike(Protocol):
    """The slice of a Hugging Face tokenizer a codec needs (also met by the scripted byte tokenizer)."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt: the text and the ids fed to the engine (``ids == encode(text)``)."""

    text: str
    ids: tuple[int, ...]


def compact_json(obj: Any) -> str:
    """Canonical argument text: compact separators, non-ASCII kept."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def arguments_object(arguments: str) -> Any:
    """The parsed ``arguments`` of a call, or the raw string when it is not JSON."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def resolve_tool_name(name: str, tool_names: Sequence[str]) -> str | None:
    """The request tool that ``name`` designates: the exact name, else the one tool whose name ends
    with ``name`` after a separator (harnesses prefix MCP tools: ``mcp__svc__x``, ``svc_x``,
    ``svc.x``). ``None`` when nothing or more than one tool matches."""
    if name in tool_names:
        return name
    if not name:
        return None
    hits = [t for t in tool_names if any(t.endswith(sep + name) for sep in TOOL_NAME_SEPARATORS)]
    return hits[0] if len(hits) == 1 else None


def count_tool_calls(messages: Sequence[Message]) -> int:
    return sum(len(m.tool_calls) for m in messages)


def tool_schema(tool: ToolSpec) -> dict[str, Any]:
    """OpenAI function-tool shape, as model families are trained to read it."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def hermes_call_text(call: ToolCall, *, pretty: bool) -> str:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (newlines inside when ``pretty``)."""
    body = json.dumps({"name": call.name, "arguments": arguments_object(call.arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>" if pretty else f"<tool_call>{body}</tool_call>"


class Codec(ABC):
    """One model family's chat template and tool-call format."""

    family: ClassVar[str]
    stop_texts: ClassVar[tuple[str, ...]] = ("<|im_end|>",)
    """Texts that end a turn (the engine also stops at the tokenizer's eos)."""

    @abstractmethod
    def render_text(self, request: ChatRequest) -> str:
        """The prompt text, ending with the assistant generation header."""

    @abstractmethod
    def format_assistant(self, content: str, tool_calls: Sequence[ToolCall]) -> str:
        """Canonical generated text of an assistant turn (without the end-of-turn token)."""

    def render(self, request: ChatRequest, tokenizer: TokenizerLike) -> Rendered:
        text = self.render_text(request)
        return Rendered(text, tuple(tokenizer.encode(text, add_special_tokens=False)))

    def parse(
        self,
        text: str,
        tools: Sequence[ToolSpec] = (),
        *,
        first_call_index: int = 0,
        finish_reason: FinishReason = "stop",
    ) -> AssistantTurn:
        from coworkenv.proxy.codecs.parse import parse_turn

        return parse_turn(
            text, [t.name for t in tools], first_call_index=first_call_index, finish_reason=finish_reason
        )
