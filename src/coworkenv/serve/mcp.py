"""MCP face: a trial's exposed tools over stdio or streamable HTTP (official ``mcp`` SDK, 2.x).

Contract: ``tools/list`` lists exactly the task's exposed tools (``LoadedTask.tools``: name, the
docstring description, ``inputSchema = ToolDef.input_schema()``, ``readOnlyHint`` from the
read/write tag). ``tools/call`` goes through :meth:`Trial.call` and nothing else: the result body
comes back as JSON text content (plus ``structuredContent`` when it is an object); a rejected
call (bad arguments, unknown id, unexposed tool, injected fault) is an ``isError`` result carrying
the error payload, and — by ``Trial.call``'s contract — changed nothing. Fault latency is awaited.

One low-level :class:`mcp.server.Server` serves any number of trials: its handlers resolve the
trial per request (stdio: the one trial; HTTP: the ``/t/<capability>/mcp`` path — or the trial id
with the operator token — see :class:`StreamableHttpMount` and :mod:`coworkenv.serve.access`).
``python -m coworkenv.serve.mcp --task-file F`` serves one fresh trial over stdio (``--record DIR``
writes the call log and state for the host that spawned it).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Message, Receive, Scope, Send

from coworkenv import __version__
from coworkenv.errors import CoworkError
from coworkenv.serve import to_json
from coworkenv.serve.access import REFUSAL_MESSAGES, OperatorToken, record_refusal, refusal
from coworkenv.services.faults import FaultPlan
from coworkenv.services.service import ToolDef
from coworkenv.services.trial import CallResult, Host, LoadedTask, Trial

log = logging.getLogger(__name__)

Context = ServerRequestContext[Any, Any]
TrialResolver = Callable[[Context], Trial]
CallHook = Callable[[Trial, CallResult], None]

SCOPE_TRIAL_KEY = "coworkenv.trial_id"
"""ASGI scope key under which :class:`StreamableHttpMount` leaves the trial id for the handlers."""


# ---------------------------------------------------------------- tool table -> MCP


def mcp_tool(tdef: ToolDef) -> types.Tool:
    """The MCP description of one tool-table row."""
    return types.Tool(
        name=tdef.name,
        description=tdef.description,
        input_schema=tdef.input_schema(),
        annotations=types.ToolAnnotations(read_only_hint=tdef.kind == "read"),
    )


_tool_cache: dict[int, tuple[LoadedTask, list[types.Tool]]] = {}


def task_tools(task: LoadedTask) -> list[types.Tool]:
    """The task's exposed tools as MCP tools (schemas built once per loaded task)."""
    hit = _tool_cache.get(id(task))
    if hit is None or hit[0] is not task:
        if len(_tool_cache) >= 1024:  # bounded: a long-lived process may load many tasks
            _tool_cache.clear()
        hit = (task, [mcp_tool(t) for t in task.tools.values()])
        _tool_cache[id(task)] = hit
    return hit[1]


def call_result(res: CallResult) -> types.CallToolResult:
    """Render a :class:`CallResult`: JSON text always, ``structuredContent`` for object bodies."""
    body = res.body
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=to_json(body).decode())],
        structured_content=body if isinstance(body, dict) else None,
        is_error=not res.ok,
    )


def build_server(
    resolve: TrialResolver, *, on_call: CallHook | None = None, name: str = "coworkenv"
) -> Server[Any]:
    """A low-level MCP server whose ``tools/list`` / ``tools/call`` act on ``resolve(ctx)``'s trial.

    ``resolve`` raises :class:`MCPError` when the request names no live trial. ``on_call`` sees
    every call after it ran (used to record a stdio trial for its host).
    """

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=task_tools(resolve(ctx).task))

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        trial = resolve(ctx)
        res = trial.call(params.name, params.arguments if params.arguments is not None else {})
        if on_call is not None:
            try:
                on_call(trial, res)
            except Exception:  # a recorder failure must not turn into a tool failure
                log.exception("on_call hook failed")
        if res.event.delay_s > 0:
            await anyio.sleep(res.event.delay_s)
        return call_result(res)

    server: Server[Any] = Server(
        name,
        version=__version__,
        instructions="Tools of a coworkenv task environment. Tool results are JSON.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware = []  # drop the default per-message OpenTelemetry span: keep per-call CPU low
    return server


# ---------------------------------------------------------------- stdio


async def serve_stdio_async(trial: Trial, *, on_call: CallHook | None = None) -> None:
    """Serve ``trial``'s tools over this process's stdin/stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    server = build_server(lambda _ctx: trial, on_call=on_call, name=f"coworkenv-{trial.task.spec.id}")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio(trial: Trial, *, on_call: CallHook | None = None) -> None:
    """Blocking :func:`serve_stdio_async` (for ``coworkenv mcp --task X``)."""
    anyio.run(lambda: serve_stdio_async(trial, on_call=on_call))


class Recorder:
    """Writes a stdio trial's evidence into ``directory`` for the process that spawned the server.

    ``events.jsonl`` gets one :class:`AuditEvent` per call, flushed at once; ``state.json`` (tables,
    audit collections, state hash) is rewritten atomically at start and after each successful call.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._events = (directory / "events.jsonl").open("ab")

    def start(self, trial: Trial) -> None:
        self._write_state(trial)

    def __call__(self, trial: Trial, res: CallResult) -> None:
        self._events.write(to_json(res.event.to_dict()) + b"\n")
        self._events.flush()
        if res.ok:
            self._write_state(trial)

    def _write_state(self, trial: Trial) -> None:
        state = {
            "trial_id": trial.id,
            "task_id": trial.task.spec.id,
            "state_hash": trial.state_hash(),
            "tables": trial.snapshot(),
            "audit": trial.audit_collections(),
        }
        tmp = self.directory / "state.json.tmp"
        tmp.write_bytes(to_json(state))
        os.replace(tmp, self.directory / "state.json")

    def close(self) -> None:
        self._events.close()


# ---------------------------------------------------------------- streamable HTTP


class StreamableHttpMount:
    """ASGI app for ``/t/<key>/mcp``: one SDK session manager, the trial taken from the path.

    ``<key>`` is the trial's capability, or its id when the request carries ``token`` (the
    operator's); anything else is refused (401/403, recorded by :meth:`Host.refuse`). Mount it on
    a route whose path has a ``tid`` parameter and enter :meth:`run` in the app's lifespan. A
    session is bound to the trial it was opened on: its id is refused under another trial's path.
    Requests before :meth:`run` answer 503 (JSON bodies).
    """

    _MAX_SESSIONS_TRACKED = 10_000

    def __init__(self, host: Host, *, token: OperatorToken | None = None, json_response: bool = True) -> None:
        self.host = host
        self.token = token
        self.json_response = json_response
        self.server = build_server(self._resolve, name="coworkenv")
        self._manager: StreamableHTTPSessionManager | None = None
        self._session_trial: dict[str, str] = {}

    def _resolve(self, ctx: Context) -> Trial:
        request = ctx.request
        tid = request.scope.get(SCOPE_TRIAL_KEY) if request is not None else None
        trial = self.host.trials.get(tid) if isinstance(tid, str) else None
        if trial is None:
            raise MCPError(types.INVALID_REQUEST, f"trial {tid!r} does not exist (closed?)")
        return trial

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session manager (once per app lifetime)."""
        manager = StreamableHTTPSessionManager(app=self.server, json_response=self.json_response)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None
                self._session_trial.clear()

    def _trial(self, scope: Scope) -> tuple[Trial | None, str]:
        key = str(scope.get("path_params", {}).get("tid", ""))
        trial = self.host.by_capability.get(key)
        if trial is not None:
            return trial, ""
        code = "unauthorized" if self.token is None else self.token.check(scope.get("headers") or ())
        if code is None:
            trial = self.host.trials.get(key)
            return trial, "" if trial is not None else "unknown_trial"
        return None, code

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        trial, code = self._trial(scope)
        if trial is None:
            if code == "unknown_trial":
                await _send_json(send, 404, {"error": "unknown trial", "code": code})
                return
            client = scope.get("client")
            where = f"{client[0]}:{client[1]}" if client else None
            method, path = str(scope.get("method", "")), str(scope.get("path", ""))
            await record_refusal(self.host, refusal(code, method, path, None, where), None)
            status = 401 if code == "unauthorized" else 403
            await _send_json(send, status, {"error": REFUSAL_MESSAGES[code], "code": code})
            return
        tid = trial.id
        manager = self._manager
        if manager is None:
            body = {
                "error": "MCP session manager is not running (app lifespan not started)",
                "code": "unavailable",
            }
            await _send_json(send, 503, body)
            return
        sid = _header(scope, b"mcp-session-id")
        if sid is not None and self._session_trial.get(sid, tid) != tid:
            await _send_json(send, 404, {"error": "Session not found", "code": "unknown_session"})
            return
        scope[SCOPE_TRIAL_KEY] = tid
        if sid is not None:
            await manager.handle_request(scope, receive, send)
            return

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                new = _header({"headers": message.get("headers", [])}, b"mcp-session-id")
                if new is not None:
                    self._remember(new, tid)
            await send(message)

        await manager.handle_request(scope, receive, capture)

    def _remember(self, sid: str, tid: str) -> None:
        if len(self._session_trial) >= self._MAX_SESSIONS_TRACKED:
            live = self.host.trials
            self._session_trial = {s: t for s, t in self._session_trial.items() if t in live}
        self._session_trial[sid] = tid


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _send_json(send: Send, status: int, body: Any) -> None:
    data = to_json(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})


# ---------------------------------------------------------------- python -m coworkenv.serve.mcp


def main(argv: list[str] | None = None) -> int:
    """Serve one fresh trial of a task file over MCP stdio."""
    from coworkenv.tasks.load import load_spec

    parser = argparse.ArgumentParser(prog="python -m coworkenv.serve.mcp", description=main.__doc__)
    parser.add_argument("--task-file", required=True, help="task file or directory (JSON/YAML)")
    parser.add_argument("--trial", default=None, help="trial id (default: random)")
    parser.add_argument(
        "--faults", default=None, help='fault plan as JSON, e.g. \'{"rate": 0.2, "seed": 1}\''
    )
    parser.add_argument("--record", default=None, help="directory for events.jsonl and state.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        spec = load_spec(args.task_file)
        faults = FaultPlan.model_validate(json.loads(args.faults)) if args.faults else None
        host = Host()
        host.add_task(spec, args.task_file)
        trial = host.open_trial(spec.id, args.trial, faults)
    except (CoworkError, ValueError) as e:  # SpecError, JSON and pydantic errors
        print(f"error: {e}", file=sys.stderr)
        return 2
    recorder = Recorder(Path(args.record)) if args.record else None
    if recorder is not None:
        recorder.start(trial)
    try:
        serve_stdio(trial, on_call=recorder)
    finally:
        if recorder is not None:
            recorder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
