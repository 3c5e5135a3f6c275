"""What every wire dialect implements, and the helpers they share.

Contract: a :class:`Dialect` turns a request body (already JSON-decoded) into a :class:`Parsed`
(a normalized :class:`ChatRequest` plus the few wire facts needed to answer: stream flag, usage
option, model name, tool-name mapping), and turns an :class:`Outcome` into either one JSON body or
the complete list of SSE frames of the turn (buffered pseudo-streaming: the turn is finished and
parsed before the first protocol event). Errors are rendered in the dialect's own error shape.
Bad bodies raise :class:`RequestError`, naming the field and what was expected. Unknown vendor
fields are ignored, never rejected.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from coworkenv.errors import CoworkError
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, ToolCall
from coworkenv.proxy.sse import dumps


class RequestError(CoworkError):
    """The request body cannot be translated; ``field`` is a dotted path into the body."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path or '<body>'}: {message}")
        self.field = field_path


@dataclass(slots=True)
class Parsed:
    """A translated request: the normalized request and what the answer must echo."""

    request: ChatRequest
    stream: bool = False
    include_usage: bool = False
    model: str = ""
    # flattened tool name -> (namespace, name) for Responses ``namespace`` tools
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass(slots=True)
class Outcome:
    """A finished turn, ready to render."""

    turn: AssistantTurn
    response_id: str
    model: str
    created: int
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Dialect(ABC):
    """One wire protocol (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages)."""

    name: ClassVar[str]
    id_prefix: ClassVar[str]

    @abstractmethod
    def parse(self, body: Any) -> Parsed: ...

    @abstractmethod
    def render(self, parsed: Parsed, out: Outcome) -> bytes:
        """The non-streaming JSON response body."""

    @abstractmethod
    def render_stream(self, parsed: Parsed, out: Outcome) -> list[bytes]:
        """Every SSE frame of the turn, in order (the stream is complete after the last)."""

    @abstractmethod
    def error_body(self, status: int, kind: str, message: str) -> bytes:
        """A JSON error body in this dialect's shape."""

    @abstractmethod
    def stream_error(self, kind: str, message: str, parsed: Parsed | None, response_id: str) -> bytes:
        """The SSE frames that end a stream with an error (after keep-alives were sent)."""


# --------------------------------------------------------------------------- shared helpers


def need_dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(where, f"expected a JSON object, got {type(value).__name__}")
    return value


def need_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestError(where, f"expected a JSON array, got {type(value).__name__}")
    return value


def opt_str(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RequestError(where, f"expected a string, got {type(value).__name__}")
    return value


def opt_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(where, f"expected an integer, got {type(value).__name__}")
    return value


def opt_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(where, f"expected a number, got {type(value).__name__}")
    return float(value)


def stop_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return list(value)
    raise RequestError(where, "expected a string or an array of strings")


_TEXT_PARTS = frozenset({"text", "input_text", "output_text", "refusal"})
_MEDIA_PARTS = frozenset({"image", "image_url", "input_image", "document", "input_file", "input_audio"})


def text_of(content: Any, where: str) -> str:
    """The text of a content value: a string, null, or an array of parts (text parts joined with
    newlines; images/documents become a ``[image]``-style placeholder; unknown parts skipped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise RequestError(
            where, f"expected a string or an array of content parts, got {type(content).__name__}"
        )
    texts: list[str] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise RequestError(f"{where}[{i}]", "expected a content part object")
        kind = part.get("type")
        text = part.get("text")
        if isinstance(text, str) and (kind is None or kind in _TEXT_PARTS):
            texts.append(text)
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif kind in _MEDIA_PARTS:
            texts.append(f"[{kind}]")
    return "\n".join(texts)


def arguments_text(value: Any, where: str) -> str:
    """Tool-call arguments as JSON text: strings are kept byte-for-byte, objects are serialized."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value or "{}"
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    raise RequestError(where, "expected the arguments as a JSON string or object")


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object, or None."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def deliverable(turn: AssistantTurn, raw_text: str) -> AssistantTurn:
    """The turn as it is sent: tool-call arguments must be JSON objects (empty means ``{}``);
    otherwise the whole turn degrades to the raw text with ``malformed`` set, never an error.
    The finish reason agrees with the content (``tool_calls`` iff there are calls, unless cut)."""
    calls: list[ToolCall] = []
    for call in turn.tool_calls:
        args = call.arguments.strip() or "{}"
        if not call.name or json_object(args) is None:
            return AssistantTurn(
                content=raw_text or turn.content, tool_calls=(), finish_reason="stop", malformed=True
            )
        calls.append(call if args == call.arguments else call.model_copy(update={"arguments": args}))
    finish = turn.finish_reason
    if calls and finish != "length":
        finish = "tool_calls"
    elif not calls and finish in ("tool_calls", "error"):
        finish = "stop"
    if (
        finish == turn.finish_reason
        and len(calls) == len(turn.tool_calls)
        and all(a is b for a, b in zip(calls, turn.tool_calls, strict=True))
    ):
        return turn
    return turn.model_copy(update={"tool_calls": tuple(calls), "finish_reason": finish})


def build_request(fields: dict[str, Any]) -> ChatRequest:
    """Validate the translated fields once (pydantic-core), mapping failures to RequestError."""
    from pydantic import ValidationError

    try:
        return ChatRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise RequestError(loc, str(first["msg"])) from None


def finish_parse(
    b: dict[str, Any],
    model: str,
    fields: dict[str, Any],
    *,
    stop_key: str | None = None,
    include_usage: bool = True,
    namespaced: dict[str, tuple[str, str]] | None = None,
) -> Parsed:
    """The shared tail of every ``parse``: the dialect's translated ``fields`` (messages, tools,
    max_tokens) plus the keys all dialects read alike — ``temperature``, ``top_p``, ``stream`` and,
    when the dialect has one, the stop list under ``stop_key`` — validated into a :class:`Parsed`."""
    stream = bool(b.get("stream"))
    request: dict[str, Any] = {
        "model": model,
        **fields,
        "temperature": opt_float(b.get("temperature"), "temperature"),
        "top_p": opt_float(b.get("top_p"), "top_p"),
    }
    if stop_key is not None:
        request["stop"] = stop_list(b.get(stop_key), stop_key)
    request["stream"] = stream
    return Parsed(
        request=build_request(request),
        stream=stream,
        include_usage=include_usage,
        model=model,
        namespaced=namespaced if namespaced is not None else {},
    )


def tool_spec(
    t: dict[str, Any], where: str, *, schema_key: str = "parameters", what: str = "a function tool"
) -> dict[str, Any]:
    """A declared tool (``name``, ``description``, JSON schema under ``schema_key``) as a
    normalized tool spec; an empty name is refused ("<what> needs a non-empty name")."""
    name = opt_str(t.get("name"), f"{where}.name")
    if not name:
        raise RequestError(f"{where}.name", f"{what} needs a non-empty name")
    spec: dict[str, Any] = {
        "name": name,
        "description": opt_str(t.get("description"), f"{where}.description"),
    }
    if t.get(schema_key) is not None:
        spec["parameters"] = need_dict(t[schema_key], f"{where}.{schema_key}")
    return spec


def tool_message(item: dict[str, Any], where: str, id_key: str, content_key: str) -> dict[str, Any]:
    """A tool result (call id under ``id_key``, output under ``content_key``) as a ``tool`` message."""
    return {
        "role": "tool",
        "tool_call_id": opt_str(item.get(id_key), f"{where}.{id_key}") or None,
        "content": text_of(item.get(content_key), f"{where}.{content_key}"),
    }


def error_type(status: int, server_error: str) -> str:
    """The error ``type`` both vendors use for a client-side ``status``; ``server_error`` otherwise."""
    if status == 401:
        return "authentication_error"
    if status == 404:
        return "not_found_error"
    if status < 500:
        return "invalid_request_error"
    return server_error


def openai_error(message: str, kind: str, code: str) -> dict[str, Any]:
    """An OpenAI-shaped error object (both OpenAI protocols use it)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class OpenAIDialect(Dialect):
    """The two OpenAI protocols answer plain (non-stream) errors in one shape."""

    def error_body(self, status: int, kind: str, message: str) -> bytes:
        return dumps(openai_error(message, error_type(status, "server_error"), kind))
