"""Normalized chat data: what every wire dialect is translated to and from.

Contract: a :class:`ChatRequest` holds everything a backend needs to render a prompt (messages with
structured tool calls, tool schemas, sampling parameters) and nothing dialect-specific; an
:class:`AssistantTurn` is everything a dialect needs to answer (text, tool calls, finish reason).
Tool-call ``arguments`` are kept as the JSON *string* the model produced, so a harness can replay
them byte-identically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_calls", "length", "error"]


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = Field(default="{}", description="JSON object as text, exactly as generated.")


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


def openai_message(m: Message, arguments: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """``m`` in the OpenAI Chat Completions message shape; each call's ``arguments`` text is kept
    as is, or mapped through ``arguments`` (e.g. parsed, for HF chat templates)."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.arguments if arguments is None else arguments(c.arguments),
                },
            }
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


class ToolSpec(BaseModel):
    """A function tool as the model sees it (OpenAI function schema shape)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ChatRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str = ""
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    stream: bool = False


def reusing(previous: ChatRequest | None, request: ChatRequest) -> ChatRequest:
    """``request`` with its leading messages that equal ``previous``'s (same position) and its tool
    list, when equal, replaced by ``previous``'s own objects (equal values, so the same request).

    An agent resends its whole history on every call; a proxy holding each call's parse while the
    engine runs would otherwise keep a fresh copy of every rollout's history and tool schemas alive
    per call in flight — objects the cyclic collector must walk in every young-generation pass
    (at 1,000 live rollouts, most of a 100-200 ms pause). Reused, only a call's new messages are new
    objects; the capture also recognizes reused messages by identity and does not encode them again.
    """
    if previous is None:
        return request
    old, new = previous.messages, request.messages
    k, limit = 0, min(len(old), len(new))
    while k < limit and (new[k] is old[k] or new[k] == old[k]):
        k += 1
    same_tools = request.tools is previous.tools or request.tools == previous.tools
    tools = previous.tools if same_tools else request.tools
    if k == 0 and tools is request.tools:
        return request
    return request.model_copy(update={"messages": old[:k] + new[k:], "tools": tools})


class AssistantTurn(BaseModel):
    """The parsed reply. ``malformed`` marks output the codec could not parse into tool calls; it
    is then delivered as plain text, never an error."""

    model_config = ConfigDict(frozen=True)

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = "stop"
    malformed: bool = False
