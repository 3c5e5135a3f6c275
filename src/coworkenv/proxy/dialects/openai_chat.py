"""OpenAI Chat Completions (``POST /v1/chat/completions``), streaming and not, with tools.

Accepted: roles system/developer (both become ``system``), user, assistant (``tool_calls`` with
arguments as a string or an object; legacy ``function_call``), tool/function (content as a string
or an array of text parts — Qwen Code); ``tools`` of type ``function`` and legacy ``functions``;
``max_tokens`` or ``max_completion_tokens``; ``stop``; ``stream_options.include_usage``. Other
fields (``tool_choice``, ``prompt_cache_key``, ``reasoning_effort``, ...) are ignored.
Streaming answer: a role delta, one content delta, per tool call a header delta (index, id, name)
and an arguments delta, a finish chunk, a usage chunk when asked, then ``[DONE]``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from coworkenv.proxy.dialects.base import (
    OpenAIDialect,
    Outcome,
    Parsed,
    RequestError,
    arguments_text,
    finish_parse,
    need_dict,
    need_list,
    openai_error,
    opt_int,
    opt_str,
    text_of,
    tool_spec,
)
from coworkenv.proxy.sse import DONE, data_frame, dumps

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _message(i: int, raw: Any) -> dict[str, Any]:
    where = f"messages[{i}]"
    m = need_dict(raw, where)
    role = _ROLES.get(m.get("role"))  # type: ignore[arg-type]
    if role is None:
        raise RequestError(f"{where}.role", "expected one of system, developer, user, assistant, tool")
    out: dict[str, Any] = {"role": role, "content": text_of(m.get("content"), f"{where}.content")}
    if role == "assistant":
        calls: list[dict[str, str]] = []
        for j, tc in enumerate(need_list(m.get("tool_calls") or [], f"{where}.tool_calls")):
            tw = f"{where}.tool_calls[{j}]"
            fn = need_dict(need_dict(tc, tw).get("function"), f"{tw}.function")
            calls.append(
                {
                    "id": opt_str(tc.get("id"), f"{tw}.id") or f"call_{i}_{j}",
                    "name": opt_str(fn.get("name"), f"{tw}.function.name"),
                    "arguments": arguments_text(fn.get("arguments"), f"{tw}.function.arguments"),
                }
            )
        legacy = m.get("function_call")
        if isinstance(legacy, dict):
            calls.append(
                {
                    "id": f"call_{i}_fn",
                    "name": opt_str(legacy.get("name"), f"{where}.function_call.name"),
                    "arguments": arguments_text(legacy.get("arguments"), f"{where}.function_call.arguments"),
                }
            )
        out["tool_calls"] = calls
    elif role == "tool":
        out["tool_call_id"] = opt_str(m.get("tool_call_id"), f"{where}.tool_call_id") or None
    name = m.get("name")
    if isinstance(name, str) and name:
        out["name"] = name
    return out


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for j, raw in enumerate(need_list(body.get("tools") or [], "tools")):
        t = need_dict(raw, f"tools[{j}]")
        if t.get("type", "function") != "function":
            continue  # builtin tools of other vendors: not callable by our model
        fn = need_dict(t.get("function"), f"tools[{j}].function")
        tools.append(tool_spec(fn, f"tools[{j}].function"))
    for j, fn in enumerate(need_list(body.get("functions") or [], "functions")):
        tools.append(tool_spec(need_dict(fn, f"functions[{j}]"), f"functions[{j}]"))
    return tools


class OpenAIChat(OpenAIDialect):
    name: ClassVar[str] = "openai_chat"
    id_prefix: ClassVar[str] = "chatcmpl-"

    def parse(self, body: Any) -> Parsed:
        b = need_dict(body, "")
        if "messages" not in b:
            raise RequestError("messages", "required (an array of chat messages)")
        messages = [_message(i, m) for i, m in enumerate(need_list(b["messages"], "messages"))]
        max_tokens = opt_int(b.get("max_completion_tokens"), "max_completion_tokens")
        if max_tokens is None:
            max_tokens = opt_int(b.get("max_tokens"), "max_tokens")
        model = opt_str(b.get("model"), "model")
        fields = {"messages": messages, "tools": _tools(b), "max_tokens": max_tokens}
        opts = b.get("stream_options")
        include_usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
        return finish_parse(b, model, fields, stop_key="stop", include_usage=include_usage)

    @staticmethod
    def _usage(out: Outcome) -> dict[str, int]:
        return {
            "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "total_tokens": out.prompt_tokens + out.completion_tokens,
        }

    def render(self, parsed: Parsed, out: Outcome) -> bytes:
        turn = out.turn
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.tool_calls:
            message["content"] = turn.content or None
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in turn.tool_calls
            ]
        return dumps(
            {
                "id": out.response_id,
                "object": "chat.completion",
                "created": out.created,
                "model": out.model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": turn.finish_reason}
                ],
                "usage": self._usage(out),
            }
        )

    def render_stream(self, parsed: Parsed, out: Outcome) -> list[bytes]:
        head = {
            "id": out.response_id,
            "object": "chat.completion.chunk",
            "created": out.created,
            "model": out.model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return data_frame(
                {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            )

        turn = out.turn
        frames = [chunk({"role": "assistant", "content": ""})]
        if turn.content:
            frames.append(chunk({"content": turn.content}))
        for k, c in enumerate(turn.tool_calls):
            frames.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": k,
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            frames.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": c.arguments}}]}))
        frames.append(chunk({}, turn.finish_reason))
        if parsed.include_usage:
            frames.append(data_frame({**head, "choices": [], "usage": self._usage(out)}))
        frames.append(DONE)
        return frames

    def stream_error(self, kind: str, message: str, parsed: Parsed | None, response_id: str) -> bytes:
        return data_frame(openai_error(message, "server_error", kind))
