"""The Gemini API (``POST /v1beta/models/<model>:generateContent`` and ``:streamGenerateContent``):
what Gemini CLI speaks.

The model name and the streaming mode are in the URL, not the body, so the server builds one
:class:`GeminiGenerate` per request (:func:`gemini_route`); ``?alt=sse`` streams server-sent
events, ``streamGenerateContent`` without it answers a JSON array of response chunks (the REST
default). ``:countTokens`` is answered with an estimate, never a model call.

Accepted: ``systemInstruction`` (a content object or a string; its text parts become the first
system message); ``contents`` of role ``user`` / ``model`` (and the legacy ``function``), each with
``parts`` — ``text`` (``thought: true`` parts are skipped: harnesses drop reasoning),
``functionCall`` ``{name, args, id?}`` (``args`` object serialized as the call's JSON arguments),
``functionResponse`` ``{name, response, id?}`` (each becomes a ``tool`` message, before any text of
the same turn; ``response.output`` when that is its only key, else the response as compact JSON),
``inlineData`` / ``fileData`` as the text ``[media]`` (the served models read text only);
``thoughtSignature`` and other vendor keys ignored. A call or response without ``id`` gets a
positional one, and a response is paired with the earliest unanswered call of its name. Tools:
``functionDeclarations`` with ``parametersJsonSchema`` or ``parameters`` (OpenAPI-style upper-case
``type`` values read as JSON-schema types); built-in tools (``googleSearch``, ``codeExecution``,
``urlContext``, ...) are dropped. ``generationConfig``: ``maxOutputTokens``, ``temperature``,
``topP``, ``stopSequences``; ``topK``, ``thinkingConfig``, ``responseSchema``, ``toolConfig``,
``safetySettings`` are ignored.
Both the camelCase and the snake_case spelling of a field are read.

Answer: one ``GenerateContentResponse`` — ``candidates[0].content`` (role ``model``: a text part
and/or ``functionCall`` parts carrying the call id), ``finishReason`` ``STOP`` | ``MAX_TOKENS``,
``usageMetadata``; streamed as one ``data:`` frame. Errors use Google's shape
``{"error": {"code", "message", "status"}}``; a failure after keep-alives ends the stream with
such a frame.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import orjson

from coworkenv.proxy.dialects.base import (
    Dialect,
    Outcome,
    Parsed,
    RequestError,
    arguments_text,
    build_request,
    json_object,
    need_dict,
    need_list,
    opt_float,
    opt_int,
    opt_str,
    stop_list,
)
from coworkenv.proxy.sse import data_frame, dumps

ROUTE = re.compile(r"^(?:v1beta|v1alpha|v1)/models/([^/:]+):([A-Za-z]+)$")
METHODS = ("generateContent", "streamGenerateContent", "countTokens")
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    504: "DEADLINE_EXCEEDED",
}
_FINISH = {"length": "MAX_TOKENS"}
_MEDIA = ("inlineData", "inline_data", "fileData", "file_data")


def gemini_route(path: str, query: bytes = b"") -> tuple[str, GeminiGenerate] | None:
    """``(method, dialect)`` for a Gemini API path under a rollout prefix (``v1beta/models/M:m``),
    or None when the path is not one; an unknown method still routes (the caller answers 404)."""
    found = ROUTE.match(path)
    if found is None:
        return None
    model, method = found.groups()
    sse = b"alt=sse" in query.split(b"&")
    return method, GeminiGenerate(model=model, stream=method == "streamGenerateContent", sse=sse)


def _get(d: dict[str, Any], camel: str) -> Any:
    """``d[camel]``, else its snake_case spelling (the REST API accepts both)."""
    if camel in d:
        return d[camel]
    return d.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel))


def _schema(value: Any) -> Any:
    """A declaration's schema as JSON schema: OpenAPI-style ``"OBJECT"`` types lower-cased."""
    if isinstance(value, dict):
        return {
            k: (v.lower() if k == "type" and isinstance(v, str) else _schema(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_schema(v) for v in value]
    return value


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for j, raw in enumerate(need_list(body.get("tools") or [], "tools")):
        t = need_dict(raw, f"tools[{j}]")
        decls = _get(t, "functionDeclarations")
        if decls is None:
            continue  # googleSearch, codeExecution, urlContext, ...: builtins our model cannot call
        for k, raw_decl in enumerate(need_list(decls, f"tools[{j}].functionDeclarations")):
            where = f"tools[{j}].functionDeclarations[{k}]"
            d = need_dict(raw_decl, where)
            name = opt_str(d.get("name"), f"{where}.name")
            if not name:
                raise RequestError(f"{where}.name", "a function declaration needs a non-empty name")
            spec: dict[str, Any] = {
                "name": name,
                "description": opt_str(d.get("description"), f"{where}.description"),
            }
            schema = _get(d, "parametersJsonSchema")
            key = "parametersJsonSchema"
            if schema is None:
                schema, key = d.get("parameters"), "parameters"
            if schema is not None:
                spec["parameters"] = _schema(need_dict(schema, f"{where}.{key}"))
            tools.append(spec)
    return tools


def _response_text(response: Any, where: str) -> str:
    if response is None:
        return ""
    if isinstance(response, str):
        return response
    r = need_dict(response, where)
    if set(r) == {"output"} and isinstance(r["output"], str):
        return str(r["output"])
    return orjson.dumps(r).decode()


class _Calls:
    """Pairs function responses with the calls they answer (ids, or positional ones)."""

    def __init__(self) -> None:
        self.open: list[tuple[str, str]] = []  # (name, id) of calls not yet answered
        self.count = 0

    def call_id(self, given: str, name: str) -> str:
        cid = given or f"call_{self.count}"
        self.count += 1
        self.open.append((name, cid))
        return cid

    def response_id(self, given: str, name: str) -> str:
        for k, (n, cid) in enumerate(self.open):
            if (given and cid == given) or (not given and n == name):
                del self.open[k]
                return cid
        return given or name


def _content(i: int, raw: Any, calls: _Calls) -> list[dict[str, Any]]:
    where = f"contents[{i}]"
    c = need_dict(raw, where)
    role = c.get("role") or "user"
    if role not in ("user", "model", "function"):
        raise RequestError(f"{where}.role", "expected one of user, model, function")
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    tool_calls: list[dict[str, str]] = []
    for k, raw_part in enumerate(need_list(c.get("parts") or [], f"{where}.parts")):
        pw = f"{where}.parts[{k}]"
        part = need_dict(raw_part, pw)
        fc, fr = _get(part, "functionCall"), _get(part, "functionResponse")
        if fc is not None:
            if role != "model":
                raise RequestError(f"{pw}.functionCall", "only a model turn may hold function calls")
            f = need_dict(fc, f"{pw}.functionCall")
            name = opt_str(f.get("name"), f"{pw}.functionCall.name")
            tool_calls.append(
                {
                    "id": calls.call_id(opt_str(f.get("id"), f"{pw}.functionCall.id"), name),
                    "name": name,
                    "arguments": arguments_text(f.get("args"), f"{pw}.functionCall.args"),
                }
            )
        elif fr is not None:
            f = need_dict(fr, f"{pw}.functionResponse")
            name = opt_str(f.get("name"), f"{pw}.functionResponse.name")
            if texts:
                out.append({"role": "user", "content": "\n".join(texts)})
                texts.clear()
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": calls.response_id(
                        opt_str(f.get("id"), f"{pw}.functionResponse.id"), name
                    ),
                    "name": name or None,
                    "content": _response_text(f.get("response"), f"{pw}.functionResponse.response"),
                }
            )
        elif part.get("thought") is True:
            continue  # reasoning summaries: harnesses drop them, so do we
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "text" in part:
            raise RequestError(f"{pw}.text", f"expected a string, got {type(part['text']).__name__}")
        elif any(key in part for key in _MEDIA):
            texts.append("[media]")
    if role == "model":
        out.append({"role": "assistant", "content": "\n".join(texts), "tool_calls": tool_calls})
    elif texts:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _system(body: dict[str, Any]) -> str:
    raw = _get(body, "systemInstruction")
    if raw is None or isinstance(raw, str):
        return raw or ""
    s = need_dict(raw, "systemInstruction")
    texts = []
    for k, part in enumerate(need_list(s.get("parts") or [], "systemInstruction.parts")):
        text = need_dict(part, f"systemInstruction.parts[{k}]").get("text")
        if isinstance(text, str):
            texts.append(text)
    return "\n".join(texts)


class GeminiGenerate(Dialect):
    """One Gemini API request: the model and the streaming mode come from its URL."""

    name: ClassVar[str] = "gemini"
    id_prefix: ClassVar[str] = "gen-"

    def __init__(self, *, model: str = "", stream: bool = False, sse: bool = False) -> None:
        self.model = model
        self.stream = stream
        self.sse = sse

    def parse(self, body: Any) -> Parsed:
        b = need_dict(body, "")
        if "contents" not in b:
            raise RequestError("contents", "required (an array of content objects)")
        calls = _Calls()
        messages: list[dict[str, Any]] = []
        system = _system(b)
        if system:
            messages.append({"role": "system", "content": system})
        for i, raw in enumerate(need_list(b["contents"], "contents")):
            messages.extend(_content(i, raw, calls))
        gen = _get(b, "generationConfig")
        g = need_dict(gen, "generationConfig") if gen is not None else {}
        request = build_request(
            {
                "model": self.model,
                "messages": messages,
                "tools": _tools(b),
                "max_tokens": opt_int(_get(g, "maxOutputTokens"), "generationConfig.maxOutputTokens"),
                "temperature": opt_float(g.get("temperature"), "generationConfig.temperature"),
                "top_p": opt_float(_get(g, "topP"), "generationConfig.topP"),
                "stop": stop_list(_get(g, "stopSequences"), "generationConfig.stopSequences"),
                "stream": self.stream,
            }
        )
        # only SSE is streamed with keep-alives; the JSON-array stream is answered in one body
        return Parsed(request=request, stream=self.stream and self.sse, include_usage=True, model=self.model)

    def _response(self, out: Outcome) -> dict[str, Any]:
        turn = out.turn
        parts: list[dict[str, Any]] = []
        if turn.content or not turn.tool_calls:
            parts.append({"text": turn.content})
        for call in turn.tool_calls:
            parts.append(
                {
                    "functionCall": {
                        "id": call.id,
                        "name": call.name,
                        "args": json_object(call.arguments) or {},
                    }
                }
            )
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": _FINISH.get(turn.finish_reason, "STOP"),
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": out.prompt_tokens,
                "candidatesTokenCount": out.completion_tokens,
                "totalTokenCount": out.prompt_tokens + out.completion_tokens,
            },
            "modelVersion": out.model,
            "responseId": out.response_id,
        }

    def render(self, parsed: Parsed, out: Outcome) -> bytes:
        body = self._response(out)
        return dumps([body] if self.stream else body)

    def render_stream(self, parsed: Parsed, out: Outcome) -> list[bytes]:
        return [data_frame(self._response(out))]

    @staticmethod
    def _error(status: int, message: str) -> dict[str, Any]:
        code = status if status < 600 else 500
        google = _STATUS.get(code) or (
            "FAILED_PRECONDITION" if code < 500 else "INTERNAL" if code == 500 else "UNAVAILABLE"
        )
        return {"error": {"code": code, "message": message, "status": google}}

    def error_body(self, status: int, kind: str, message: str) -> bytes:
        return dumps(self._error(status, f"{kind}: {message}"))

    def stream_error(self, kind: str, message: str, parsed: Parsed | None, response_id: str) -> bytes:
        return data_frame(self._error(504 if kind == "timeout" else 502, f"{kind}: {message}"))
