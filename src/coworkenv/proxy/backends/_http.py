"""HTTP plumbing shared by the remote backends: one pooled client per event loop, and every
transport or protocol failure mapped to a :class:`BackendError` kind — ``timeout``, ``connect``,
``rate_limit`` (429), ``http_5xx``, ``http_4xx``, ``truncated`` (a body that is not complete JSON).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from coworkenv.proxy.backends.base import BackendError


class JsonPoster:
    def __init__(
        self,
        *,
        timeout_s: float,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.headers = headers or {}
        self.transport = transport
        self._clients: dict[int, httpx.AsyncClient] = {}

    def _client(self) -> httpx.AsyncClient:
        key = id(asyncio.get_running_loop())
        client = self._clients.get(key)
        if client is None or client.is_closed:
            client = httpx.AsyncClient(timeout=self.timeout_s, headers=self.headers, transport=self.transport)
            self._clients[key] = client
        return client

    async def post(self, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = await self._client().post(
                url, content=orjson.dumps(payload), headers={"content-type": "application/json"}
            )
        except httpx.TimeoutException as exc:
            raise BackendError("timeout", f"POST {url}: no answer within {self.timeout_s:g}s") from exc
        except httpx.TransportError as exc:
            raise BackendError("connect", f"POST {url}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            kind = (
                "rate_limit"
                if resp.status_code == 429
                else ("http_5xx" if resp.status_code >= 500 else "http_4xx")
            )
            raise BackendError(kind, f"POST {url}: HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise BackendError(
                "truncated", f"POST {url}: body is not complete JSON ({len(resp.content)} bytes)"
            ) from exc
        if not isinstance(data, dict):
            raise BackendError(
                "bad_response", f"POST {url}: expected a JSON object, got {type(data).__name__}"
            )
        return data

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
