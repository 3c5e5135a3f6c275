"""A cap on HTTP request bodies, for every server an agent can reach (services, MCP, proxy).

Contract: :class:`BodyLimit` wraps an ASGI app. A request whose ``Content-Length`` exceeds
``max_bytes`` is answered ``413`` before a byte of its body is read; one without a length
(chunked) is read into memory up to ``max_bytes`` and answered ``413`` as soon as it passes, or
replayed to the app unchanged. The app never sees an over-size body, so a request cannot make a
server hold more than ``max_bytes`` of it. The 413 body is ``error_body(max_bytes)`` (JSON; the
default is ``{"error": ..., "code": "request_too_large", "max_bytes": N}``), and ``on_reject(scope)``
is called for each rejection so the server can record it. Requests within the limit that carry a
``Content-Length`` pass through with no wrapping at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGI = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BYTES = 16 * 1024 * 1024  # far above any tool call or 8k-200k-token model request
ENV = "COWORKENV_MAX_BODY_BYTES"


def default_error_body(max_bytes: int) -> bytes:
    return orjson.dumps(
        {
            "error": f"request body larger than {max_bytes} bytes",
            "code": "request_too_large",
            "max_bytes": max_bytes,
        }
    )


def max_body_bytes(value: int | None = None) -> int:
    """``value``, else ``$COWORKENV_MAX_BODY_BYTES``, else :data:`DEFAULT_MAX_BYTES` (must be > 0)."""
    import os

    if value is None:
        raw = os.environ.get(ENV)
        try:
            value = int(raw) if raw else DEFAULT_MAX_BYTES
        except ValueError:
            raise ValueError(f"${ENV} must be an integer number of bytes, got {raw!r}") from None
    if value <= 0:
        raise ValueError(f"the request body limit must be > 0 bytes, got {value}")
    return value


class BodyLimit:
    """ASGI middleware: ``413`` for request bodies over ``max_bytes`` (see the module docstring)."""

    def __init__(
        self,
        app: ASGI,
        max_bytes: int | None = None,
        *,
        error_body: Callable[[int], bytes] = default_error_body,
        on_reject: Callable[[Scope], Awaitable[None]] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_body_bytes(max_bytes)
        self.error_body = error_body
        self.on_reject = on_reject

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if length is not None:
            if length > self.max_bytes:
                await self._reject(scope, send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                break
            body: bytes = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._reject(scope, send)
                return
            chunks.append(body)
            if not message.get("more_body"):
                break
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replayed() -> Message:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)

    async def _reject(self, scope: Scope, send: Send) -> None:
        if self.on_reject is not None:
            await self.on_reject(scope)
        body = self.error_body(self.max_bytes)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
