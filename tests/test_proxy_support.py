"""Helpers for the proxy tests (no tests here): a toy backend and an in-loop uvicorn server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import uvicorn

from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.capture import CaptureStore
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, ToolCall
from coworkenv.proxy.server import ProxyServer

Reply = AssistantTurn | BaseException | Callable[[ChatRequest], AssistantTurn]


class ToyBackend:
    """Answers from a list of replies (the last one repeats); tokens are UTF-8 bytes of the text.

    ``prompt_ids`` are (number of messages, number of tools) so a test can check what reached the
    backend; a reply that is an exception is raised; ``delay_s`` makes every call slow."""

    name = "toy"

    def __init__(self, *replies: Reply, delay_s: float = 0.0, version: str = "v1") -> None:
        self.replies: list[Reply] = list(replies) or [AssistantTurn(content="ok")]
        self.delay_s = delay_s
        self.version = version
        self.requests: list[ChatRequest] = []

    @property
    def policy_version(self) -> str:
        return self.version

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests) - 1, len(self.replies) - 1)]
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if isinstance(reply, BaseException):
            raise reply
        turn = reply(request) if callable(reply) else reply
        text = turn.content + "".join(
            f"<tool_call>{c.name} {c.arguments}</tool_call>" for c in turn.tool_calls
        )
        out = tuple(text.encode())
        return Completion(
            turn=turn,
            text=text,
            prompt_ids=(len(request.messages), len(request.tools)),
            output_ids=out,
            logprobs=tuple(-0.5 for _ in out),
            policy_version=self.version,
            model="toy-model",
        )


def call(name: str, arguments: str = "{}", call_id: str = "call_1") -> AssistantTurn:
    return AssistantTurn(
        tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),), finish_reason="tool_calls"
    )


def fail(kind: str = "http_5xx") -> BackendError:
    return BackendError(kind, f"injected {kind}")


def make_proxy(tmp_path: Path, backend: Any = None, **kw: Any) -> tuple[ProxyServer, CaptureStore]:
    store = CaptureStore(tmp_path / "capture")
    return ProxyServer(backend or ToyBackend(), store, **kw), store


class Site:
    """A served app: its URL, and SDK clients sharing one HTTP client that is closed at exit."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=1000))
        self._http2 = httpx2.AsyncClient(
            timeout=30, limits=httpx2.Limits(max_connections=1000)
        )  # the anthropic SDK's own httpx fork

    async def aclose(self) -> None:
        await self.http.aclose()
        await self._http2.aclose()

    def oai(self, prefix: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{self.url}{prefix}/v1", api_key="x", max_retries=0, http_client=self.http
        )

    def ant(self, prefix: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=f"{self.url}{prefix}", api_key="x", max_retries=0, http_client=self._http2
        )


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[Site]:
    """Serve ``app`` with uvicorn on a free loopback port inside the running loop."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_keep_alive=120
    )  # a long keep-alive: a pooled connection closed by the server mid-reuse is a client race
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # leave pytest's signals
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    site = Site(f"http://127.0.0.1:{port}")
    try:
        yield site
    finally:
        await site.aclose()
        server.should_exit = True
        await task
