"""OpenAI Responses (``POST /v1/responses``): what Codex speaks (always ``stream: true``).

Accepted: ``instructions`` (becomes the first system message); ``input`` as a string or an array
of items — ``message`` items (roles developer/system become ``system``; content as a string or
``input_text``/``output_text`` parts), ``function_call`` (consecutive calls, and a call following an
assistant message, join one assistant turn), ``function_call_output`` (output as a string or parts);
``reasoning`` and other items are skipped. Tools: ``function``; ``namespace`` tools (Codex's MCP
servers, e.g. ``mcp__stub`` → ``stub_echo``) are flattened to ``<namespace>__<name>`` function tools
and calls to them go back as ``name`` + ``namespace``, the way Codex routes them; builtins such as
``web_search`` are dropped. ``max_output_tokens``, ``temperature``, ``top_p`` are kept; everything
else (``store``, ``include``, ``reasoning``, ``prompt_cache_key``, ``client_metadata``) is ignored.
Streaming answer: ``response.created``, ``response.in_progress``, per output item
``output_item.added`` … ``output_item.done`` (text via ``content_part``/``output_text`` events,
calls via ``function_call_arguments.delta/done``), then ``response.completed`` (or
``response.incomplete`` when cut by the token limit) with usage; failures end with
``response.failed``.
"""

from __future__ import annotations

import time
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
    opt_int,
    opt_str,
    text_of,
    tool_message,
    tool_spec,
)
from coworkenv.proxy.messages import AssistantTurn
from coworkenv.proxy.sse import dumps, event_frame

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def flat_name(namespace: str, name: str) -> str:
    """The function name the model sees for ``name`` inside ``namespace``."""
    return namespace + name if namespace.endswith("__") else f"{namespace}__{name}"


def _tools(body: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    tools: list[dict[str, Any]] = []
    namespaced: dict[str, tuple[str, str]] = {}
    for j, raw in enumerate(need_list(body.get("tools") or [], "tools")):
        t = need_dict(raw, f"tools[{j}]")
        kind = t.get("type")
        if kind == "function":
            tools.append(tool_spec(t, f"tools[{j}]"))
        elif kind == "namespace":
            ns = opt_str(t.get("name"), f"tools[{j}].name")
            for k, raw_inner in enumerate(need_list(t.get("tools") or [], f"tools[{j}].tools")):
                inner = need_dict(raw_inner, f"tools[{j}].tools[{k}]")
                if inner.get("type", "function") != "function":
                    continue
                spec = tool_spec(inner, f"tools[{j}].tools[{k}]")
                flat = flat_name(ns, spec["name"])
                namespaced[flat] = (ns, spec["name"])
                spec["name"] = flat
                tools.append(spec)
        # web_search, file_search, custom, ...: builtins the local model cannot call
    return tools, namespaced


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    instructions = opt_str(body.get("instructions"), "instructions")
    if instructions:
        messages.append({"role": "system", "content": instructions})
    raw = body.get("input")
    if raw is None:
        raise RequestError("input", "required (a string or an array of input items)")
    if isinstance(raw, str):
        messages.append({"role": "user", "content": raw})
        return messages
    open_turn: dict[str, Any] | None = None  # the assistant message calls attach to
    for i, item in enumerate(need_list(raw, "input")):
        where = f"input[{i}]"
        it = need_dict(item, where)
        kind = it.get("type") or ("message" if "role" in it else None)
        if kind == "message":
            role = _ROLES.get(it.get("role"))  # type: ignore[arg-type]
            if role is None:
                raise RequestError(f"{where}.role", "expected one of developer, system, user, assistant")
            msg: dict[str, Any] = {"role": role, "content": text_of(it.get("content"), f"{where}.content")}
            if role == "assistant":
                msg["tool_calls"] = []
                open_turn = msg
            else:
                open_turn = None
            messages.append(msg)
        elif kind == "function_call":
            name = opt_str(it.get("name"), f"{where}.name")
            ns = it.get("namespace")
            if isinstance(ns, str) and ns:
                name = flat_name(ns, name)
            call = {
                "id": opt_str(it.get("call_id"), f"{where}.call_id") or opt_str(it.get("id"), f"{where}.id"),
                "name": name,
                "arguments": arguments_text(it.get("arguments"), f"{where}.arguments"),
            }
            if open_turn is None:
                open_turn = {"role": "assistant", "content": "", "tool_calls": []}
                messages.append(open_turn)
            open_turn["tool_calls"].append(call)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append(tool_message(it, where, "call_id", "output"))
            open_turn = None
        # reasoning, web_search_call, compaction, ...: not part of the model's visible history
    return messages


class OpenAIResponses(OpenAIDialect):
    name: ClassVar[str] = "openai_responses"
    id_prefix: ClassVar[str] = "resp_"

    def parse(self, body: Any) -> Parsed:
        b = need_dict(body, "")
        tools, namespaced = _tools(b)
        model = opt_str(b.get("model"), "model")
        fields = {
            "messages": _messages(b),
            "tools": tools,
            "max_tokens": opt_int(b.get("max_output_tokens"), "max_output_tokens"),
        }
        return finish_parse(b, model, fields, namespaced=namespaced)

    # ------------------------------------------------------------------ answer

    def _items(self, parsed: Parsed, out: Outcome) -> list[dict[str, Any]]:
        suffix = out.response_id.removeprefix(self.id_prefix)
        items: list[dict[str, Any]] = []
        if out.turn.content or not out.turn.tool_calls:
            items.append(
                {
                    "id": f"msg_{suffix}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": out.turn.content, "annotations": [], "logprobs": []}
                    ],
                }
            )
        for k, call in enumerate(out.turn.tool_calls):
            item: dict[str, Any] = {
                "id": f"fc_{suffix}_{k}",
                "type": "function_call",
                "status": "completed",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            }
            target = parsed.namespaced.get(call.name)
            if target is not None:
                item["namespace"], item["name"] = target
            items.append(item)
        return items

    def _response(self, out: Outcome, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        done = status != "in_progress"
        return {
            "id": out.response_id,
            "object": "response",
            "created_at": out.created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": None,
            "max_output_tokens": None,
            "model": out.model,
            "output": output,
            "parallel_tool_calls": True,
            "temperature": None,
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "text": {"format": {"type": "text"}},
            "usage": {
                "input_tokens": out.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": out.prompt_tokens + out.completion_tokens,
            }
            if done
            else None,
        }

    @staticmethod
    def _status(out: Outcome) -> str:
        return "incomplete" if out.turn.finish_reason == "length" else "completed"

    def render(self, parsed: Parsed, out: Outcome) -> bytes:
        return dumps(self._response(out, self._status(out), self._items(parsed, out)))

    def render_stream(self, parsed: Parsed, out: Outcome) -> list[bytes]:
        frames: list[bytes] = []

        def emit(kind: str, **fields: Any) -> None:
            frames.append(event_frame(kind, {"type": kind, "sequence_number": len(frames), **fields}))

        items = self._items(parsed, out)
        emit("response.created", response=self._response(out, "in_progress", []))
        emit("response.in_progress", response=self._response(out, "in_progress", []))
        for idx, item in enumerate(items):
            iid = item["id"]
            if item["type"] == "message":
                text = item["content"][0]["text"]
                emit(
                    "response.output_item.added",
                    output_index=idx,
                    item={**item, "status": "in_progress", "content": []},
                )
                empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                emit(
                    "response.content_part.added", item_id=iid, output_index=idx, content_index=0, part=empty
                )
                if text:
                    emit(
                        "response.output_text.delta",
                        item_id=iid,
                        output_index=idx,
                        content_index=0,
                        delta=text,
                        logprobs=[],
                    )
                emit(
                    "response.output_text.done",
                    item_id=iid,
                    output_index=idx,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
                emit(
                    "response.content_part.done",
                    item_id=iid,
                    output_index=idx,
                    content_index=0,
                    part=item["content"][0],
                )
            else:
                emit(
                    "response.output_item.added",
                    output_index=idx,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                emit(
                    "response.function_call_arguments.delta",
                    item_id=iid,
                    output_index=idx,
                    delta=item["arguments"],
                )
                emit(
                    "response.function_call_arguments.done",
                    item_id=iid,
                    output_index=idx,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            emit("response.output_item.done", output_index=idx, item=item)
        status = self._status(out)
        emit(f"response.{status}", response=self._response(out, status, items))
        return frames

    def stream_error(self, kind: str, message: str, parsed: Parsed | None, response_id: str) -> bytes:
        out = Outcome(
            turn=AssistantTurn(),
            response_id=response_id,
            model=parsed.model if parsed else "",
            created=int(time.time()),
        )
        response = self._response(out, "failed", [])
        response["error"] = {"code": kind, "message": message}
        return event_frame(
            "response.failed", {"type": "response.failed", "sequence_number": 0, "response": response}
        )
