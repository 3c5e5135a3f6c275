"""Pass-through to an external OpenAI-compatible Chat Completions API (capturing a teacher).

The normalized request is sent as an OpenAI chat request (``tools`` as function tools, assistant
``tool_calls``, ``tool`` results) to ``POST {base}/chat/completions``; the answer's message maps back
to an :class:`AssistantTurn` with the teacher's own tool-call ids and argument text, verbatim.
No tokens are visible: ``token_exact=False`` and empty id lists, so these calls are kept for
distillation/inspection but never trained on as policy samples. The API key comes from the
``api_key`` argument or, at call time, the environment variable named by ``api_key_env``.
"""

from __future__ import annotations

import os
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
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
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
        except (KeyError, IndexError, TypeError) as exc:
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

    async def aclose(self) -> None:
        await self.http.aclose()
