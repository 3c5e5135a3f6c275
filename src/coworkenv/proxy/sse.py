"""Server-sent-event framing for the proxy's buffered pseudo-streaming.

Contract: every frame ends with a blank line; ``data`` payloads are single-line JSON (orjson never
emits a raw newline), so one ``data:`` line per event is always valid. :data:`KEEPALIVE` is an SSE
comment, which every SSE client (the OpenAI and Anthropic SDKs, Codex, the AI SDK) skips.
"""

from __future__ import annotations

from typing import Any

import orjson

KEEPALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"

SSE_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
JSON_HEADERS: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (non-ASCII kept as UTF-8)."""
    return orjson.dumps(obj)


def data_frame(obj: Any) -> bytes:
    """``data: <json>`` (the Chat Completions framing: no event name)."""
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def event_frame(event: str, obj: Any) -> bytes:
    """``event: <name>`` + ``data: <json>`` (the Responses and Anthropic framing)."""
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"
