"""Pass-through to an external OpenAI-compatible Chat Completions API (capturing a teacher).

The normalized request is sent as an OpenAI chat request (``tools`` as function tools, assistant
``tool_calls``, ``tool`` results) to ``POST {base}/chat/completions``; the answer's message maps back
to an :class:`AssistantTurn` with the teacher's own tool-call ids and argument text, verbatim.
No tokens are visible: ``token_exact=False`` and empty id lists, so these calls are kept for
distillation/inspection but never trained on as policy samples. The API key comes from the
``api_key`` argument or, at construction, the environment variable named by ``api_key_env``.

``stream=True`` asks the upstream for a stream (``stream_options.include_usage``) and assembles the
turn from its chunks: content deltas joined, tool-call deltas merged by ``index`` (id and name from
their first chunk, argument pieces joined), the last ``finish_reason``, ``usage`` and ``model``.
A stream that ends without a ``finish_reason`` is ``truncated``; an ``error`` event in it is
``upstream_error``. Other failures are the :mod:`._http` kinds (``timeout``, ``connect``,
``rate_limit``, ``http_5xx``, ``http_4xx``, ``truncated``, ``bad_response``).
"""

from __future__ import annotations

import os
from contextlib import aclosing
from typing import Any

import httpx

from coworkenv.proxy.backends._http import JsonPoster
from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.codecs.base import tool_schema
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, FinishReason, Message, ToolCall

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "stop",
}


def openai_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
        out["content"] = m.content or None
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id or ""
    if m.name is not None and m.role != "tool":
        out["name"] = m.name
    return out


class _CallParts:
    """One tool call of a stream: id and name from the first chunk that has them, arguments joined."""

    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []

    def add(self, piece: dict[str, Any]) -> None:
        fn = piece.get("function") or {}
        self.id = self.id or str(piece.get("id") or "")
        self.name = self.name or str(fn.get("name") or "")
        if fn.get("arguments"):
            self.args.append(str(fn["arguments"]))

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "function": {"name": self.name, "arguments": "".join(self.args)}}


class PassthroughBackend:
    name = "passthrough"

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 600.0,
        version: str = "external",
        transport: httpx.AsyncBaseTransport | None = None,
        stream: bool = False,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.stream = stream
        self._version = version
        key = api_key or os.environ.get(api_key_env)
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self.http = JsonPoster(timeout_s=timeout_s, headers=headers, transport=transport)

    @property
    def policy_version(self) -> str:
        return self._version

    async def complete(self, request: ChatRequest) -> Completion:
        payload: dict[str, Any] = {
            "model": self.model or request.model,
            "messages": [openai_message(m) for m in request.messages],
        }
        if request.tools:
            payload["tools"] = [tool_schema(t) for t in request.tools]
        for key in ("max_tokens", "temperature", "top_p"):
            value = getattr(request, key)
            if value is not None:
                payload[key] = value
        if request.stop:
            payload["stop"] = list(request.stop)
        if self.stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
            data = await self._assemble(payload)
        else:
            data = await self.http.post(self.url, payload)
        try:
            choice = data["choices"][0]
            msg = choice["message"]
            calls = tuple(
                ToolCall(
                    id=str(c.get("id") or f"call_{i}"),
                    name=str(c["function"]["name"]),
                    arguments=str(c["function"].get("arguments") or "{}"),
                )
                for i, c in enumerate(msg.get("tool_calls") or [])
            )
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BackendError(
                "bad_response", f"{self.url}: no choices[0].message in the answer ({exc!r})"
            ) from None
        content = msg.get("content") or ""
        finish = _FINISH.get(str(choice.get("finish_reason")), "stop")
        if calls:
            finish = "tool_calls"
        usage = data.get("usage") or {}
        return Completion(
            turn=AssistantTurn(content=str(content), tool_calls=calls, finish_reason=finish),
            text=str(content),
            token_exact=False,
            policy_version=self._version,
            model=str(data.get("model") or payload["model"]),
            usage_prompt_tokens=int(usage.get("prompt_tokens") or 0),
            usage_completion_tokens=int(usage.get("completion_tokens") or 0),
        )

    async def _assemble(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The chunks of a streamed answer folded into the shape of a non-streamed one."""
        content: list[str] = []
        calls: dict[int, _CallParts] = {}
        finish: str | None = None
        model, usage = "", None
        try:
            async with aclosing(self.http.events(self.url, payload)) as events:
                async for event in events:
                    if event.get("error"):
                        raise BackendError(
                            "upstream_error", f"{self.url}: error in the stream: {event['error']}"
                        )
                    model = event.get("model") or model
                    usage = event.get("usage") or usage
                    for choice in event.get("choices") or ():
                        if choice.get("index", 0) != 0:
                            continue
                        finish = choice.get("finish_reason") or finish
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            content.append(str(delta["content"]))
                        for piece in delta.get("tool_calls") or ():
                            calls.setdefault(int(piece.get("index", 0)), _CallParts()).add(piece)
        except (AttributeError, TypeError, ValueError) as exc:
            raise BackendError(
                "bad_response", f"{self.url}: a stream chunk of the wrong shape ({exc!r})"
            ) from None
        if finish is None:
            raise BackendError("truncated", f"{self.url}: the stream ended without a finish_reason")
        if any(not parts.name for parts in calls.values()):
            raise BackendError("bad_response", f"{self.url}: a streamed tool call has no function name")
        message = {"content": "".join(content), "tool_calls": [calls[i].as_dict() for i in sorted(calls)]}
        return {"choices": [{"message": message, "finish_reason": finish}], "model": model, "usage": usage}

    async def aclose(self) -> None:
        await self.http.aclose()
