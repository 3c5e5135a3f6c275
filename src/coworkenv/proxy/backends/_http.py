"""HTTP plumbing shared by the remote backends (pass-through, token-exact upstream engines).

Contract: :class:`JsonPoster` POSTs a JSON body and returns the JSON object answered (:meth:`post`)
or the ``data:`` events of a Server-Sent-Events answer, parsed, up to ``[DONE]`` (:meth:`events`).
It sends through aiohttp's client: one session per event loop, HTTP/1.1 keep-alive connections
reused with no pool limit (the rollouts bound the concurrency), no cookies kept between calls.
A loop's session is closed by :meth:`aclose`, or else when that loop shuts down its async
generators (``asyncio.run``, uvicorn and pytest-asyncio do before closing a loop). An injected
httpx ``transport`` (tests, custom routing) sends through httpx instead, with the same errors.

Every transport or protocol failure is a :class:`BackendError` of one kind: ``timeout`` (no
complete answer within ``timeout_s``), ``connect`` (refused, reset, closed before an answer),
``rate_limit`` (429), ``http_5xx``, ``http_4xx``, ``truncated`` (a body cut short or not complete
JSON), ``bad_response`` (an answer of the wrong shape, e.g. JSON where a stream was asked for).

Why aiohttp: per call it costs ~0.1 ms of CPU against a local server where httpx costs 0.55 ms
with one client and 1.2-1.5 ms with 64 (httpcore's pool scans every connection per request), and
the proxy's CPU per forwarded call is dominated by it (``benchmarks/bench_proxy.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
import httpx
import orjson

from coworkenv.proxy.backends.base import BackendError

_ERROR_SNIPPET = 300  # bytes of an error body quoted in the BackendError


@dataclass(slots=True)
class _Answer:
    """An answer whose headers arrived: its status, content type and body chunks (as they come)."""

    status: int
    content_type: str
    chunks: AsyncIterator[bytes]

    async def body(self) -> bytes:
        return b"".join([c async for c in self.chunks])


class _AiohttpClient:
    def __init__(self, timeout_s: float, headers: dict[str, str]) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            headers=headers,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self._proxies: dict[str, str | None] = {}

    def _proxy(self, url: str) -> str | None:
        """The ``HTTP(S)_PROXY`` for ``url`` unless ``NO_PROXY`` exempts its host (as httpx does),
        looked up once per origin: aiohttp's ``trust_env`` looks it up in a thread on every request,
        which costs more CPU (~0.4 ms) than the request itself."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._proxies:
            proxy = getproxies().get(parts.scheme)
            self._proxies[origin] = None if proxy is None or proxy_bypass(parts.netloc) else proxy
        return self._proxies[origin]

    @asynccontextmanager
    async def post(self, url: str, body: bytes) -> AsyncIterator[_Answer]:
        async with self.session.post(url, data=body, proxy=self._proxy(url)) as resp:
            yield _Answer(resp.status, resp.content_type, resp.content.iter_any())

    async def aclose(self) -> None:
        await self.session.close()


class _HttpxClient:
    def __init__(
        self, timeout_s: float, headers: dict[str, str], transport: httpx.AsyncBaseTransport
    ) -> None:
        self.client = httpx.AsyncClient(timeout=timeout_s, headers=headers, transport=transport)

    @asynccontextmanager
    async def post(self, url: str, body: bytes) -> AsyncIterator[_Answer]:
        async with self.client.stream("POST", url, content=body) as resp:
            kind = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
            yield _Answer(resp.status_code, kind, resp.aiter_bytes())

    async def aclose(self) -> None:
        await self.client.aclose()


_Client = _AiohttpClient | _HttpxClient


async def _hold(client: _Client) -> AsyncGenerator[None, None]:
    """Parks for the life of its loop; the loop's ``shutdown_asyncgens`` (or :meth:`JsonPoster.aclose`)
    resumes it with GeneratorExit, which closes the client on its own loop."""
    try:
        yield
    finally:
        await client.aclose()


class JsonPoster:
    def __init__(
        self,
        *,
        timeout_s: float,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.headers = {"content-type": "application/json", **(headers or {})}
        self.transport = transport
        # id(loop) -> (loop, client, the generator that closes it when the loop shuts down)
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, _Client, AsyncGenerator[None, None]]] = {}

    async def _client(self) -> _Client:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is not None and entry[0] is loop:
            return entry[1]
        for key in [k for k, (other, _, _) in self._clients.items() if other.is_closed()]:
            del self._clients[key]  # their loops closed them at shutdown
        client: _Client = (
            _AiohttpClient(self.timeout_s, self.headers)
            if self.transport is None
            else _HttpxClient(self.timeout_s, self.headers, self.transport)
        )
        keeper = _hold(client)
        self._clients[id(loop)] = (loop, client, keeper)
        await anext(keeper)  # registers it with the loop's async-generator finalization
        return client

    @asynccontextmanager
    async def _exchange(self, url: str, payload: dict[str, Any]) -> AsyncIterator[_Answer]:
        """POST ``payload``; yields the answer once its status is known to be < 400. Failures of the
        transport (also while the body is read inside the block) become BackendErrors."""
        client = await self._client()
        try:
            async with client.post(url, orjson.dumps(payload)) as answer:
                if answer.status >= 400:
                    await _refuse(url, answer)
                yield answer
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise BackendError(
                "timeout", f"POST {url}: no complete answer within {self.timeout_s:g}s"
            ) from exc
        except aiohttp.ClientPayloadError as exc:
            raise BackendError("truncated", f"POST {url}: the answer was cut short ({exc})") from exc
        except (aiohttp.ClientError, httpx.TransportError) as exc:
            raise BackendError("connect", f"POST {url}: {type(exc).__name__}: {exc}") from exc

    async def post(self, url: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` as JSON; the JSON object answered."""
        async with self._exchange(url, payload) as answer:
            body = await answer.body()
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise BackendError(
                "truncated", f"POST {url}: body is not complete JSON ({len(body)} bytes)"
            ) from exc
        if not isinstance(data, dict):
            raise BackendError(
                "bad_response", f"POST {url}: expected a JSON object, got {type(data).__name__}"
            )
        return data

    async def events(self, url: str, payload: dict[str, Any]) -> AsyncGenerator[dict[str, Any], None]:
        """POST ``payload``; each ``data:`` event of the SSE answer as a JSON object, until ``[DONE]``
        or the end of the stream (whether the stream was complete is the caller's judgement). The
        body is read to its end after ``[DONE]`` too: a connection whose answer was not read to the
        end is closed instead of going back to the pool."""
        async with self._exchange(url, payload) as answer:
            if answer.content_type != "text/event-stream":
                head = (await answer.body())[:_ERROR_SNIPPET]
                got = answer.content_type or "no content type"
                raise BackendError("bad_response", f"POST {url}: asked for a stream, got {got}: {head!r}")
            done = False
            async for data in _sse_data(answer.chunks):
                done = done or data == b"[DONE]"
                if done:
                    continue
                try:
                    event = orjson.loads(data)
                except orjson.JSONDecodeError as exc:
                    raise BackendError(
                        "bad_response", f"POST {url}: a stream event is not JSON: {data[:_ERROR_SNIPPET]!r}"
                    ) from exc
                if not isinstance(event, dict):
                    raise BackendError(
                        "bad_response", f"POST {url}: a stream event is {type(event).__name__}, not an object"
                    )
                yield event

    async def aclose(self) -> None:
        """Close the clients (on the running loop; those of closed loops were closed with them)."""
        loop = asyncio.get_running_loop()
        entries, self._clients = list(self._clients.values()), {}
        for owner, client, keeper in entries:
            if owner is loop:
                await keeper.aclose()
            elif not owner.is_closed() and owner.is_running():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.aclose(), owner))


async def _refuse(url: str, answer: _Answer) -> None:
    status = answer.status
    kind = "rate_limit" if status == 429 else ("http_5xx" if status >= 500 else "http_4xx")
    text = (await answer.body())[:_ERROR_SNIPPET].decode("utf-8", "replace")
    raise BackendError(kind, f"POST {url}: HTTP {status}: {text}")


async def _sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The ``data`` of each Server-Sent Event in a byte stream (multi-line data joined by newlines;
    comments, other fields and an unterminated last event are dropped, as the SSE spec says)."""
    tail: list[bytes] = []  # the unterminated start of the current line
    data: list[bytes] = []
    async for chunk in chunks:
        lines = chunk.split(b"\n")
        if len(lines) == 1:
            tail.append(chunk)
            continue
        if tail:
            lines[0] = b"".join([*tail, lines[0]])
            tail.clear()
        last = lines.pop()
        if last:
            tail.append(last)
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if data:
                    yield b"\n".join(data)
                    data.clear()
            elif line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
