"""The capturing serving proxy: one ASGI app, a base URL per rollout, every model call recorded.

Contract:

* :meth:`ProxyServer.open_rollout` returns the rollout's path prefix ``/r/<rollout_id>/<secret>``;
  a harness uses ``http://host:port<prefix>/v1`` (OpenAI) or ``http://host:port<prefix>`` (Anthropic).
  Under it: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages`` (any query,
  e.g. ``?beta=true``), each also without ``/v1``; ``POST /v1/messages/count_tokens`` (an estimate,
  not a model call); ``GET /v1/models``; the Gemini API
  ``POST /v1beta/models/<model>:generateContent`` and ``:streamGenerateContent`` (``?alt=sse``),
  plus ``:countTokens`` (an estimate). An unknown rollout, a closed one and a wrong secret get the same
  404 in the dialect's error shape (which ids are open is not told); nothing outside an open prefix
  reaches a backend.
* Every model call under a valid prefix (parsed or not, successful or not) becomes exactly one
  :class:`CapturedCall` in the :class:`CaptureStore`, written before the harness gets its answer.
  ``seq`` is the arrival order within the rollout. Bad bodies → 400; backend failures
  (:class:`BackendError`) → 502 (504 for ``kind == "timeout"``; 400 for ``context_length``, a prompt
  longer than the model's context, which is never truncated silently); anything else → 500 — all
  recorded with ``error`` set. A body over ``max_body_bytes`` (default 16 MiB,
  ``$COWORKENV_MAX_BODY_BYTES``) → 413 ``request_too_large``, recorded too, and not held in memory.
* Streaming is buffered pseudo-streaming: the backend produces the whole turn; while it runs, an SSE
  keep-alive comment goes out every ``keepalive_s`` (the 200 status is committed only then, so a
  failure within the first interval still gets a real 5xx status; a later one ends the stream with
  the dialect's error event). Then the turn is emitted as the dialect's protocol events in one write.
* A closed rollout's entry is kept for the newest :data:`CLOSED_KEPT` closed rollouts only, so a
  long run's proxy holds memory for the rollouts in flight, not for every rollout it served.
* :meth:`settle` waits until no call of the rollout is pending and its record count has been stable
  for ``quiet_s`` (bounded by ``timeout_s``; it returns the count either way, :meth:`stats` tells).
* Store writes never block the event loop on ``fsync``: a store whose ``fsync`` attribute is true
  (``CaptureStore(fsync=True)``, or a store without the attribute) is written from one background
  thread, in completion order; a store with ``fsync = False`` — the :class:`CaptureStore` default,
  a flush per record — is written inline.

The app is plain ASGI (no framework): the per-request path is a dict lookup, one JSON parse, one
model validation, one backend call, one record and one write.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson

from coworkenv import bodylimit
from coworkenv.proxy.backends.base import Backend, BackendError, Completion
from coworkenv.proxy.capture import CapturedCall, CaptureStore
from coworkenv.proxy.dialects.anthropic import AnthropicMessages
from coworkenv.proxy.dialects.base import Dialect, Outcome, Parsed, RequestError, deliverable
from coworkenv.proxy.dialects.gemini import GeminiGenerate, gemini_route
from coworkenv.proxy.dialects.openai_chat import OpenAIChat
from coworkenv.proxy.dialects.openai_responses import OpenAIResponses
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, reusing
from coworkenv.proxy.sse import JSON_HEADERS, KEEPALIVE, SSE_HEADERS, dumps
from coworkenv.serve.listen import serve_lifespan

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

CLOSED_KEPT = 1024
"""Closed rollouts whose entries (call count, model seconds, next seq) the proxy keeps, newest first;
an older one's ``stats`` raise ``KeyError`` and a reopened id resumes its seq from the store."""
ROLLOUT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")

_CHAT, _RESPONSES, _ANTHROPIC = OpenAIChat(), OpenAIResponses(), AnthropicMessages()
# path under the prefix (without a leading "v1/") -> (route kind, dialect)
_ROUTES: dict[str, tuple[str, Dialect]] = {
    "chat/completions": ("call", _CHAT),
    "responses": ("call", _RESPONSES),
    "messages": ("call", _ANTHROPIC),
    "messages/count_tokens": ("count_tokens", _ANTHROPIC),
    "models": ("models", _CHAT),
}
_EMPTY_REQUEST = ChatRequest(messages=())


_GEMINI = GeminiGenerate()


def _route(rest: str, query: bytes) -> tuple[str, Dialect] | None:
    """(route kind, dialect) of a path under a rollout prefix, or None."""
    gemini = gemini_route(rest, query)
    if gemini is not None:
        method, dialect = gemini
        kinds = {"generateContent": "call", "streamGenerateContent": "call", "countTokens": "gemini_count"}
        return (kinds[method], dialect) if method in kinds else None
    return _ROUTES.get(rest[3:] if rest.startswith("v1/") else rest)


def _dialect_for(path: str) -> Dialect:
    """The dialect whose error shape fits an unroutable path (best guess from its tail)."""
    if "models/" in path and ":" in path.rsplit("/", 1)[-1]:
        return _GEMINI
    if "messages" in path:
        return _ANTHROPIC
    if "responses" in path:
        return _RESPONSES
    return _CHAT


# BackendError kinds that are not a 502: the engine timed out, or the request cannot fit the model
_BACKEND_STATUS = {"timeout": 504, "context_length": 400}


@dataclass(slots=True, eq=False)
class _Rollout:
    rollout_id: str
    secret: bytes
    task_id: str
    harness: str
    backend: Backend | None
    state_hash: Callable[[], str] | None
    next_seq: int = 0
    calls: int = 0
    errors: int = 0
    pending: int = 0
    last_change: float = 0.0
    model_s: float = 0.0
    """Seconds with at least one of its model calls in flight (overlapping calls counted once)."""
    busy: int = 0
    busy_since: float = 0.0
    last_request: ChatRequest | None = None
    """Its latest parsed request, whose messages and tools the next call's parse reuses (``reusing``)."""


class ProxyApp:
    """The ASGI 3 callable of a :class:`ProxyServer` (an object with an async ``__call__``, which
    servers detect as ASGI 3)."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.server._asgi(scope, receive, send)


@dataclass(slots=True, eq=False)
class _Call:
    """The state of one model call while it is handled."""

    rollout: _Rollout
    seq: int
    response_id: str
    dialect: Dialect
    backend: Backend
    t_start: float
    state_hash: str | None = None
    parsed: Parsed | None = None
    completion: Completion | None = None
    turn: AssistantTurn | None = None
    error: tuple[int, str, str] | None = None  # HTTP status, kind, message
    t_first: float | None = None  # first byte (a keep-alive) sent


class ProxyServer:
    """The proxy; ``app`` is the ASGI application to serve (e.g. with uvicorn)."""

    def __init__(
        self,
        backend: Backend,
        store: CaptureStore,
        *,
        keepalive_s: float = 2.0,
        max_body_bytes: int | None = None,
    ) -> None:
        if keepalive_s <= 0:
            raise ValueError(f"keepalive_s must be > 0, got {keepalive_s}")
        self.max_body_bytes = bodylimit.max_body_bytes(max_body_bytes)
        self._backend = backend
        self._store = store
        self.keepalive_s = keepalive_s
        self._open: dict[str, _Rollout] = {}
        self._closed: dict[str, _Rollout] = {}
        self._writer: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="capture-writer")
            if getattr(store, "fsync", True)
            else None
        )
        self.app = ProxyApp(self)

    # ------------------------------------------------------------------ rollout lifecycle

    def open_rollout(
        self,
        rollout_id: str,
        *,
        task_id: str = "",
        harness: str = "",
        backend: Backend | None = None,
        state_hash: Callable[[], str] | None = None,
    ) -> str:
        """Register a rollout; returns its path prefix ``/r/<rollout_id>/<secret>``."""
        if not ROLLOUT_ID.match(rollout_id):
            raise ValueError(
                f"rollout id {rollout_id!r}: use 1-200 characters from A-Z a-z 0-9 . _ - (it names a file)"
            )
        if rollout_id in self._open:
            raise ValueError(f"rollout {rollout_id!r} is already open; close it first")
        previous = self._closed.pop(rollout_id, None)
        secret = secrets.token_urlsafe(18)
        self._open[rollout_id] = _Rollout(
            rollout_id=rollout_id,
            secret=secret.encode(),
            task_id=task_id,
            harness=harness,
            backend=backend,
            state_hash=state_hash,
            next_seq=previous.next_seq if previous else self._stored_count(rollout_id),
            last_change=time.monotonic(),
        )
        self._store.create(rollout_id)  # the file exists before the first call: not on its latency
        return f"/r/{rollout_id}/{secret}"

    def _stored_count(self, rollout_id: str) -> int:
        """Next seq after calls already in the store (a rollout resumed after a crash)."""
        if not self._store.path(rollout_id).exists():
            return 0
        calls, _ = self._store.read(rollout_id)
        return max((c.seq for c in calls), default=-1) + 1

    def close_rollout(self, rollout_id: str) -> None:
        """Refuse further requests under this rollout's prefix (calls in flight still complete and
        are recorded). Closing an unknown or closed rollout is a no-op."""
        rollout = self._open.pop(rollout_id, None)
        if rollout is not None:
            rollout.last_request = None
            self._closed[rollout_id] = rollout
            if len(self._closed) > CLOSED_KEPT:  # the oldest closed rollout's entry goes
                del self._closed[next(iter(self._closed))]
            sync = getattr(self._store, "sync", None)
            if callable(sync):
                sync(rollout_id)

    def _rollout(self, rollout_id: str) -> _Rollout:
        rollout = self._open.get(rollout_id) or self._closed.get(rollout_id)
        if rollout is None:
            raise KeyError(f"unknown rollout {rollout_id!r}")
        return rollout

    def model_seconds(self, rollout_id: str) -> float:
        """Seconds this rollout has waited on the model so far: the time with at least one of its
        calls in flight here (queued, prefilled, decoded — on a shared engine, also the other
        rollouts' share of each batch step), overlapping calls counted once; 0 for an unknown id."""
        rollout = self._open.get(rollout_id) or self._closed.get(rollout_id)
        if rollout is None:
            return 0.0
        running = time.monotonic() - rollout.busy_since if rollout.busy else 0.0
        return rollout.model_s + running

    async def settle(self, rollout_id: str, *, quiet_s: float = 0.2, timeout_s: float = 10.0) -> int:
        """Wait until no call is pending and the record count was stable for ``quiet_s``; returns the
        number of calls recorded under this rollout since it was opened (also on timeout)."""
        rollout = self._rollout(rollout_id)
        deadline = time.monotonic() + timeout_s
        while True:
            now = time.monotonic()
            if rollout.pending == 0 and now - rollout.last_change >= quiet_s:
                return rollout.calls
            if now >= deadline:
                log.warning("settle(%s): timed out with %d call(s) pending", rollout_id, rollout.pending)
                return rollout.calls
            await asyncio.sleep(min(0.01, max(quiet_s / 4, 0.001)))

    def set_backend(self, backend: Backend) -> None:
        """Swap the default backend (e.g. after a weight push); calls in flight keep the old one."""
        self._backend = backend

    def stats(self, rollout_id: str) -> dict[str, int]:
        r = self._rollout(rollout_id)
        return {"calls": r.calls, "errors": r.errors, "pending": r.pending}

    def shutdown(self) -> None:
        """Wait for queued store writes; safe to call twice."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)

    # ------------------------------------------------------------------ ASGI

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await serve_lifespan(receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        parts = path.split("/", 4)
        if len(parts) < 5 or parts[1] != "r":
            dialect = _dialect_for(path)
            await _respond(
                send,
                404,
                dialect.error_body(
                    404, "not_found", f"no route {path}: use a rollout base URL /r/<rollout_id>/<secret>/v1"
                ),
            )
            return
        rollout_id, secret, rest = parts[2], parts[3], parts[4]
        route = _route(rest, scope.get("query_string", b""))
        dialect = route[1] if route else _dialect_for(rest)
        rollout = self._open.get(rollout_id)
        # unknown, closed and wrong-secret prefixes get one answer: a caller cannot tell which
        # rollout ids are open (the operator can: ProxyServer.stats / the capture store)
        if rollout is None or not hmac.compare_digest(secret.encode(), rollout.secret):
            await _respond(
                send, 404, dialect.error_body(404, "rollout_not_found", "no open rollout at this prefix")
            )
            return
        if route is None:
            await _respond(send, 404, dialect.error_body(404, "not_found", f"no endpoint /{rest}"))
            return
        kind = route[0]
        if kind == "models":
            await _respond(send, 200, self._models(rollout))
            return
        if scope["method"] != "POST":
            await _respond(send, 405, dialect.error_body(405, "method_not_allowed", f"/{rest} takes POST"))
            return
        raw = await _read_body(receive, self.max_body_bytes, scope)
        if kind == "call":
            await self._call(rollout, dialect, raw, send)
            return
        if raw is None:
            too_large = f"the request body is larger than {self.max_body_bytes} bytes"
            await _respond(send, 413, dialect.error_body(413, "request_too_large", too_large))
            return
        if kind == "count_tokens":
            await _respond(send, 200, dumps({"input_tokens": max(1, len(raw) // 4)}))
            return
        if kind == "gemini_count":
            await _respond(send, 200, dumps({"totalTokens": max(1, len(raw) // 4)}))

    def _models(self, rollout: _Rollout) -> bytes:
        name = (rollout.backend or self._backend).name
        entry = {
            "id": name,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "1970-01-01T00:00:00Z",
            "owned_by": "coworkenv",
            "display_name": name,
        }
        return dumps(
            {"object": "list", "data": [entry], "has_more": False, "first_id": name, "last_id": name}
        )

    # ------------------------------------------------------------------ one model call

    async def _call(self, rollout: _Rollout, dialect: Dialect, raw: bytes | None, send: Send) -> None:
        call = _Call(
            rollout=rollout,
            seq=rollout.next_seq,
            response_id=dialect.id_prefix + secrets.token_hex(12),
            dialect=dialect,
            backend=rollout.backend or self._backend,
            t_start=time.time(),
        )
        rollout.next_seq += 1
        rollout.pending += 1
        rollout.last_change = time.monotonic()
        call.state_hash = _state_hash(rollout)
        if rollout.busy == 0:
            rollout.busy_since = time.monotonic()
        rollout.busy += 1
        try:
            await self._generate(call, raw, send)
        except asyncio.CancelledError:
            call.error = (499, "cancelled", "the proxy shut down during the call")
            await self._record(rollout, self._captured(call))
            raise
        finally:
            rollout.busy -= 1
            if rollout.busy == 0:
                rollout.model_s += time.monotonic() - rollout.busy_since
        record = self._captured(call)
        try:
            await self._record(rollout, record)
        except Exception as exc:
            log.exception("capture store failed for rollout %s", rollout.rollout_id)
            call.error, call.turn = (500, "capture_failed", f"the call could not be recorded: {exc}"), None
        await self._answer(call, send)

    async def _generate(self, call: _Call, raw: bytes | None, send: Send) -> None:
        """Parse and run the backend, sending keep-alives meanwhile; failures land in call.error
        (``raw`` None: the body was over the size cap and was not kept)."""
        if raw is None:
            message = f"the request body is larger than {self.max_body_bytes} bytes"
            call.error = (413, "request_too_large", message)
            return
        try:
            try:
                parsed = call.dialect.parse(orjson.loads(raw))
            except orjson.JSONDecodeError as exc:
                raise RequestError("", f"the body is not valid JSON ({exc})") from None
            parsed.request = call.rollout.last_request = reusing(call.rollout.last_request, parsed.request)
            call.parsed = parsed
            if parsed.stream:
                task = asyncio.ensure_future(call.backend.complete(parsed.request))
                try:
                    while not (await asyncio.wait((task,), timeout=self.keepalive_s))[0]:
                        if call.t_first is None:
                            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                            call.t_first = time.time()
                        await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                except BaseException:
                    task.cancel()
                    raise
                call.completion = completion = task.result()
            else:
                call.completion = completion = await call.backend.complete(parsed.request)
            call.turn = deliverable(completion.turn, completion.text)
        except RequestError as exc:
            call.error = (400, "invalid_request", f"invalid {call.dialect.name} request: {exc}")
        except BackendError as exc:
            call.error = (_BACKEND_STATUS.get(exc.kind, 502), exc.kind, str(exc))
        except Exception as exc:  # a bug in a backend: answer and record, never crash the server
            log.exception("backend %s failed on rollout %s", call.backend.name, call.rollout.rollout_id)
            call.error = (500, "internal", f"{type(exc).__name__}: {exc}")

    async def _answer(self, call: _Call, send: Send) -> None:
        dialect, parsed, completion, turn = call.dialect, call.parsed, call.completion, call.turn
        streaming = call.t_first is not None  # the 200 and SSE headers went out with a keep-alive
        if parsed is not None and completion is not None and turn is not None and call.error is None:
            outcome = Outcome(
                turn=turn,
                response_id=call.response_id,
                model=parsed.model or completion.model or call.backend.name,
                created=int(call.t_start),
                prompt_tokens=completion.usage_prompt_tokens or len(completion.prompt_ids),
                completion_tokens=completion.usage_completion_tokens or len(completion.output_ids),
            )
            if not parsed.stream:
                await _respond(send, 200, dialect.render(parsed, outcome))
                return
            frames = b"".join(dialect.render_stream(parsed, outcome))
            if not streaming:
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await send({"type": "http.response.body", "body": frames, "more_body": False})
            return
        status, kind, message = call.error or (500, "internal", "no answer")
        if streaming:
            frame = dialect.stream_error(kind, message, parsed, call.response_id)
            await send({"type": "http.response.body", "body": frame, "more_body": False})
        else:
            await _respond(send, status, dialect.error_body(status, kind, message))

    def _captured(self, call: _Call) -> CapturedCall:
        """The call's record. Built without revalidation (``model_construct``): every field comes from
        an already-validated model (the parsed request, the backend's :class:`Completion`, the
        delivered turn) or from here; validating tens of thousands of token ids again was most of the
        capture's cost on long prompts."""
        t_end = time.time()
        c, turn, parsed = call.completion, call.turn, call.parsed
        return CapturedCall.model_construct(
            rollout_id=call.rollout.rollout_id,
            seq=call.seq,
            call_id=call.response_id,
            task_id=call.rollout.task_id,
            harness=call.rollout.harness,
            dialect=call.dialect.name,
            stream=parsed.stream if parsed else False,
            request=parsed.request if parsed else _EMPTY_REQUEST,
            prompt_ids=tuple(c.prompt_ids) if c else (),  # a tuple already: tuple() returns it as is
            output_ids=tuple(c.output_ids) if c else (),
            logprobs=tuple(c.logprobs) if c else (),
            token_exact=c.token_exact if c else False,
            text=c.text if c else "",
            response=turn.model_dump() if turn and not call.error else {},
            finish_reason=turn.finish_reason if turn and not call.error else "error",
            malformed=turn.malformed if turn else False,
            error=f"{call.error[1]}: {call.error[2]}" if call.error else None,
            policy_version=c.policy_version if c else _policy_version(call.backend),
            model=c.model if c else call.backend.name,
            state_hash=call.state_hash,
            t_start=call.t_start,
            t_first_byte=call.t_first if call.t_first is not None else t_end,
            t_end=t_end,
        )

    async def _record(self, rollout: _Rollout, call: CapturedCall) -> None:
        """Append the call (before the answer goes out) and update the rollout's counters."""
        try:
            if self._writer is None:
                self._store.append(call)
            else:
                await asyncio.get_running_loop().run_in_executor(self._writer, self._store.append, call)
        finally:
            rollout.calls += 1
            if call.error is not None:
                rollout.errors += 1
            rollout.pending -= 1
            rollout.last_change = time.monotonic()


def _state_hash(rollout: _Rollout) -> str | None:
    if rollout.state_hash is None:
        return None
    try:
        return rollout.state_hash()
    except Exception:
        log.exception("state_hash() of rollout %s failed; recorded as null", rollout.rollout_id)
        return None


def _policy_version(backend: Backend) -> str:
    try:
        return str(backend.policy_version)
    except Exception:
        return "unknown"


async def _read_body(receive: Receive, limit: int, scope: Scope) -> bytes | None:
    """The request body, or None once it is over ``limit`` bytes (a declared Content-Length over it
    is not read at all; a chunked one stops being kept as it passes the limit)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        body: bytes = message.get("body", b"")
        size += len(body)
        if size > limit:
            return None
        chunks.append(body)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": body, "more_body": False})
