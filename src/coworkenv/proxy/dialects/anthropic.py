"""Anthropic Messages (``POST /v1/messages``, also ``?beta=true``): what Claude Code speaks.

Accepted: ``system`` as a string or text blocks; messages with string or block content —
``text``, ``image``/``document`` (placeholders), ``tool_use`` (input object serialized as the
call's JSON arguments), ``tool_result`` (content as a string or blocks; each becomes a ``tool``
message, before any text of the same user turn), ``thinking`` blocks skipped; Claude Code's
``role: "system"`` entries inside ``messages`` stay system messages at their position. Tools with
``input_schema`` (``defer_loading``, ``cache_control`` and other vendor keys ignored); typed server
tools (``web_search_*``, ``bash_*``, ...) are dropped. ``thinking``, ``context_management``,
``output_config``, ``metadata`` and beta headers are ignored.
Streaming answer: ``message_start``, per block ``content_block_start`` / ``content_block_delta``
(``text_delta`` or ``input_json_delta``) / ``content_block_stop``, ``message_delta`` with
``stop_reason`` ``tool_use`` | ``end_turn`` | ``max_tokens``, ``message_stop``; failures end with an
``error`` event.
"""

from __future__ import annotations

from typing import Any, ClassVar

from coworkenv.proxy.dialects.base import (
    Dialect,
    Outcome,
    Parsed,
    RequestError,
    arguments_text,
    error_type,
    finish_parse,
    json_object,
    need_dict,
    need_list,
    opt_int,
    opt_str,
    text_of,
    tool_message,
    tool_spec,
)
from coworkenv.proxy.sse import dumps, event_frame

_STOP = {"tool_calls": "tool_use", "length": "max_tokens"}
_SKIPPED_BLOCKS = frozenset({"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"})


def _blocks(role: str, content: list[Any], where: str) -> list[dict[str, Any]]:
    """One Anthropic turn with block content → normalized messages (tool results split out)."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, str]] = []

    def flush_text() -> None:
        if texts:
            out.append({"role": role, "content": "\n".join(texts)})
            texts.clear()

    for i, raw in enumerate(content):
        bw = f"{where}[{i}]"
        if isinstance(raw, str):
            texts.append(raw)
            continue
        block = need_dict(raw, bw)
        kind = block.get("type")
        if kind == "tool_use" and role == "assistant":
            calls.append(
                {
                    "id": opt_str(block.get("id"), f"{bw}.id"),
                    "name": opt_str(block.get("name"), f"{bw}.name"),
                    "arguments": arguments_text(block.get("input"), f"{bw}.input"),
                }
            )
        elif kind == "tool_result":
            flush_text()
            out.append(tool_message(block, bw, "tool_use_id", "content"))
        elif kind in _SKIPPED_BLOCKS:
            continue
        else:
            text = text_of([block], bw)
            if text:
                texts.append(text)
    if role == "assistant":
        out.append({"role": "assistant", "content": "\n".join(texts), "tool_calls": calls})
    else:
        flush_text()
    return out


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    system = text_of(body.get("system"), "system")
    if system:
        messages.append({"role": "system", "content": system})
    if "messages" not in body:
        raise RequestError("messages", "required (an array of messages)")
    for i, raw in enumerate(need_list(body["messages"], "messages")):
        where = f"messages[{i}]"
        m = need_dict(raw, where)
        role = m.get("role")
        if role not in ("user", "assistant", "system"):
            raise RequestError(f"{where}.role", "expected one of user, assistant, system")
        content = m.get("content")
        if isinstance(content, list) and role != "system":
            messages.extend(_blocks(role, content, f"{where}.content"))
        else:
            messages.append({"role": role, "content": text_of(content, f"{where}.content")})
    return messages


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for j, raw in enumerate(need_list(body.get("tools") or [], "tools")):
        t = need_dict(raw, f"tools[{j}]")
        if t.get("type") not in (None, "custom"):
            continue  # server/versioned tools (web_search_20250305, bash_20250124, ...)
        tools.append(tool_spec(t, f"tools[{j}]", schema_key="input_schema", what="a tool"))
    return tools


class AnthropicMessages(Dialect):
    name: ClassVar[str] = "anthropic"
    id_prefix: ClassVar[str] = "msg_"

    def parse(self, body: Any) -> Parsed:
        b = need_dict(body, "")
        model = opt_str(b.get("model"), "model")
        fields = {
            "messages": _messages(b),
            "tools": _tools(b),
            "max_tokens": opt_int(b.get("max_tokens"), "max_tokens"),
        }
        return finish_parse(b, model, fields, stop_key="stop_sequences")

    @staticmethod
    def _content(out: Outcome) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if out.turn.content or not out.turn.tool_calls:
            blocks.append({"type": "text", "text": out.turn.content})
        for call in out.turn.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": json_object(call.arguments) or {},
                }
            )
        return blocks

    def render(self, parsed: Parsed, out: Outcome) -> bytes:
        return dumps(
            {
                "id": out.response_id,
                "type": "message",
                "role": "assistant",
                "model": out.model,
                "content": self._content(out),
                "stop_reason": _STOP.get(out.turn.finish_reason, "end_turn"),
                "stop_sequence": None,
                "usage": {"input_tokens": out.prompt_tokens, "output_tokens": out.completion_tokens},
            }
        )

    def render_stream(self, parsed: Parsed, out: Outcome) -> list[bytes]:
        frames = [
            event_frame(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": out.response_id,
                        "type": "message",
                        "role": "assistant",
                        "model": out.model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": out.prompt_tokens, "output_tokens": 0},
                    },
                },
            )
        ]
        blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
        turn = out.turn
        if turn.content or not turn.tool_calls:
            blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": turn.content}))
        for call in turn.tool_calls:
            blocks.append(
                (
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
                    {"type": "input_json_delta", "partial_json": call.arguments},
                )
            )
        for idx, (start, delta) in enumerate(blocks):
            frames.append(
                event_frame(
                    "content_block_start",
                    {"type": "content_block_start", "index": idx, "content_block": start},
                )
            )
            if delta.get("text") != "":
                frames.append(
                    event_frame(
                        "content_block_delta", {"type": "content_block_delta", "index": idx, "delta": delta}
                    )
                )
            frames.append(event_frame("content_block_stop", {"type": "content_block_stop", "index": idx}))
        frames.append(
            event_frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": _STOP.get(out.turn.finish_reason, "end_turn"),
                        "stop_sequence": None,
                    },
                    "usage": {"input_tokens": out.prompt_tokens, "output_tokens": out.completion_tokens},
                },
            )
        )
        frames.append(event_frame("message_stop", {"type": "message_stop"}))
        return frames

    @staticmethod
    def _error_type(status: int, kind: str) -> str:
        return error_type(status, "timeout_error" if kind == "timeout" else "api_error")

    def error_body(self, status: int, kind: str, message: str) -> bytes:
        return dumps({"type": "error", "error": {"type": self._error_type(status, kind), "message": message}})

    def stream_error(self, kind: str, message: str, parsed: Parsed | None, response_id: str) -> bytes:
        return event_frame(
            "error", {"type": "error", "error": {"type": self._error_type(502, kind), "message": message}}
        )
