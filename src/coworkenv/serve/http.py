"""HTTP face: one FastAPI app for a :class:`Host`, every tool at its Claw-Eval route, per trial.

Routes (all bodies JSON; every error is ``{"error": str, "code": str, ...}``); ``[op]`` marks the
routes that need the operator token (see :mod:`coworkenv.serve.access`), ``<key>`` is a trial's
capability — or, with the token, its id::

    POST   /trials                      [op] {task_id, trial_id?, faults?, now?}
                                        -> 201 {trial_id, prefix, base_url, profile, now, ...}
                                        (now: the services' frozen clock; a recorded one replays)
    GET    /trials                      [op] open trial ids
    DELETE /trials/{tid}                [op]
    GET    /tasks                       [op]
    GET    /health                      liveness; task and trial counts only with the token
    POST   /t/<key>/<tool route>        JSON body = arguments (empty body = {}) -> Trial.call
    GET    /t/<key>/<service>/audit     [op] Claw-Eval's audit body (calls + audit collections)
    POST   /t/<key>/<service>/reset     [op] that service back to its fixtures, its calls dropped
    POST   /t/<key>/reset               [op] the whole trial back to its fixtures
    GET    /t/<key>/events[?since=N]    [op] uniform AuditEvents
    GET    /t/<key>/state               [op] tables, audit collections, state hash, the trial's clock
    GET    /t/<key>/health, /t/<key>/<service>/health
    GET    /t/<key>/tools               OpenAI-style function schemas of the exposed tools
    *      /t/<key>/mcp                 MCP streamable HTTP (see :mod:`coworkenv.serve.mcp`)

Contract: a tool route does one dict lookup (route -> ToolDef) and one :meth:`Trial.call` with the
raw decoded body — no per-request model construction here; ``call`` validates. The status code is
``CallResult.status``; a fault's latency is awaited; a 429 carries ``Retry-After``. Audit, reset,
health and events never fault and never record a call; a refused request is recorded as a refusal
(:meth:`Host.refuse`). A Claw-Eval health probe (header ``X-Health-Check: 1``) on a tool route is
answered without calling the tool. With ``create_app(host, default_trial=tid)`` the same per-trial
routes are also served without the ``/t/<key>`` prefix, so Claw-Eval's harness can point at the app
as if it were its mock services (its grading routes there stay operator-only unless
``open_compat_grading=True``, which Claw-Eval's own grader needs). :func:`compat_apps` makes the
pair ``coworkenv serve --claw-eval-compat`` runs: the agent's app, where the grading routes need the
token in every mode, and the grader's app, for a separate port the agent is not given.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from coworkenv.bodylimit import BodyLimit
from coworkenv.serve import to_json
from coworkenv.serve.access import (
    REFUSAL_MESSAGES,
    OperatorToken,
    is_operator_path,
    new_token,
    record_refusal,
    refusal,
)
from coworkenv.serve.listen import listen_socket
from coworkenv.services.faults import FaultPlan
from coworkenv.services.service import ToolDef
from coworkenv.services.trial import NO_BODY, NULL_BODY, Host, LoadedTask, Trial

TRIAL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_TRIAL_FIELDS = frozenset({"task_id", "trial_id", "faults", "now"})

Endpoint = Callable[[Request], Awaitable[Response]]


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(to_json(body), status_code=status, headers=headers, media_type="application/json")


def error_response(code: str, message: str, status: int, **extra: Any) -> Response:
    return json_response({"error": message, "code": code, **extra}, status)


# ---------------------------------------------------------------- route index


_GLOBAL_ROUTES: dict[str, ToolDef] = {}
_task_routes: dict[int, tuple[LoadedTask, dict[str, ToolDef]]] = {}
_CACHE_LIMIT = 1024


def task_routes(task: LoadedTask) -> Mapping[str, ToolDef]:
    """Route -> ToolDef of the task's exposed tools (built once per loaded task; bounded cache)."""
    hit = _task_routes.get(id(task))
    if hit is None or hit[0] is not task:
        if len(_task_routes) >= _CACHE_LIMIT:
            _task_routes.clear()
        hit = (task, {t.route: t for t in task.tools.values()})
        _task_routes[id(task)] = hit
    return hit[1]


def registry_routes() -> Mapping[str, ToolDef]:
    """Route -> ToolDef of every registered tool (for calls to tools a task does not expose)."""
    if not _GLOBAL_ROUTES:
        from coworkenv.services import registry

        _GLOBAL_ROUTES.update({t.route: t for t in registry.TOOLS.values()})
    return _GLOBAL_ROUTES


# ---------------------------------------------------------------- the app


class _Api:
    """The endpoints. Per-trial paths are dispatched by hand (dict lookups), not by the router."""

    def __init__(
        self, host: Host, default_trial: str | None, token: OperatorToken, open_compat_grading: bool
    ) -> None:
        self.host = host
        self.default_trial = default_trial
        self.token = token
        self.open_compat_grading = open_compat_grading

    # -- access

    async def _refuse(self, request: Request, code: str, trial: Trial | None) -> Response:
        path = request.url.path
        if trial is not None:
            path = path.replace(trial.capability, f"<capability of {trial.id}>")
        client = f"{request.client.host}:{request.client.port}" if request.client else None
        entry = refusal(code, request.method, path, trial.id if trial else None, client)
        await record_refusal(self.host, entry, trial)
        return error_response(code, REFUSAL_MESSAGES[code], 401 if code == "unauthorized" else 403)

    async def _operator_only(self, request: Request) -> Response | None:
        code = self.token.check(request.headers.raw)
        return None if code is None else await self._refuse(request, code, None)

    async def _trial_for(self, request: Request, key: str) -> tuple[Trial | None, Response | None]:
        """The trial ``key`` names: its capability, or (operator token) its id."""
        trial = self.host.by_capability.get(key)
        if trial is not None:
            return trial, None
        code = self.token.check(request.headers.raw)
        if code is not None:
            return None, await self._refuse(request, code, None)
        trial = self.host.trials.get(key)
        return (trial, None) if trial is not None else (None, _unknown_trial(key))

    # -- host level

    async def health(self, request: Request) -> Response:
        """Liveness for anyone; how many tasks and trials are open only for the operator (an agent
        could otherwise watch its neighbours' trials come and go)."""
        if self.token.check(request.headers.raw) is not None:
            return json_response({"status": "ok"})
        return json_response({"status": "ok", "tasks": len(self.host.tasks), "trials": len(self.host.trials)})

    async def tasks(self, request: Request) -> Response:
        if (refused := await self._operator_only(request)) is not None:
            return refused
        return json_response(
            [
                {
                    "id": t.spec.id,
                    "name": t.spec.name,
                    "category": t.spec.category,
                    "services": list(t.services),
                    "tools": list(t.tools),
                }
                for t in self.host.tasks.values()
            ]
        )

    async def list_trials(self, request: Request) -> Response:
        if (refused := await self._operator_only(request)) is not None:
            return refused
        return json_response(
            [{"trial_id": tid, "task_id": t.task.spec.id} for tid, t in self.host.trials.items()]
        )

    async def create_trial(self, request: Request) -> Response:
        if (refused := await self._operator_only(request)) is not None:
            return refused
        data, bad = await _json_body(request)
        if bad is not None:
            return bad
        if not isinstance(data, dict):
            return error_response(
                "invalid_request", "body must be a JSON object {task_id, trial_id?, faults?}", 422
            )
        unknown = sorted(set(data) - _TRIAL_FIELDS)
        if unknown:
            return error_response(
                "invalid_request", f"unknown fields {unknown}; expected {sorted(_TRIAL_FIELDS)}", 422
            )
        task_id, tid = data.get("task_id"), data.get("trial_id")
        if not isinstance(task_id, str):
            return error_response("invalid_request", "task_id (string) is required", 422)
        if task_id not in self.host.tasks:
            return error_response(
                "unknown_task", f"unknown task {task_id!r}", 404, known=sorted(self.host.tasks)
            )
        if tid is not None and not (isinstance(tid, str) and TRIAL_ID_PATTERN.match(tid)):
            return error_response("invalid_request", f"trial_id must match {TRIAL_ID_PATTERN.pattern}", 422)
        if tid is not None and tid in self.host.trials:
            return error_response("trial_exists", f"trial {tid!r} already exists", 409)
        faults = None
        if data.get("faults") is not None:
            try:
                faults = FaultPlan.model_validate(data["faults"])
            except ValidationError as e:
                problems = [f"faults.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
                return error_response("invalid_request", "; ".join(problems), 422)
        now = None
        if data.get("now") is not None:  # replay: the frozen instant a recorded trial ran at
            try:
                now = datetime.fromisoformat(str(data["now"]).replace("Z", "+00:00"))
            except ValueError:
                return error_response("invalid_request", "now must be an ISO 8601 datetime", 422)
            if now.tzinfo is None:
                now = now.replace(tzinfo=UTC)
        trial = self.host.open_trial(task_id, tid, faults, now)
        prefix = f"/t/{trial.capability}"
        base = str(request.base_url).rstrip("/") + prefix
        body = {
            "trial_id": trial.id,
            "task_id": task_id,
            "prefix": prefix,
            "base_url": base,
            "mcp_url": f"{base}/mcp",
            "tools": list(trial.task.tools),
            "profile": trial.task.profile,
            "now": trial.clock.now().isoformat(),
        }
        return json_response(body, 201)

    async def delete_trial(self, request: Request) -> Response:
        if (refused := await self._operator_only(request)) is not None:
            return refused
        tid = request.path_params["tid"]
        if tid not in self.host.trials:
            return _unknown_trial(tid)
        self.host.close_trial(tid)
        return json_response({"status": "closed", "trial_id": tid})

    # -- per trial

    async def trial_path(self, request: Request) -> Response:
        trial, refused = await self._trial_for(request, request.path_params["tid"])
        if trial is None:
            return refused or _unknown_trial("")
        return await self._dispatch(request, trial, request.path_params["path"])

    async def trial_root(self, request: Request) -> Response:
        trial, refused = await self._trial_for(request, request.path_params["tid"])
        if trial is None:
            return refused or _unknown_trial("")
        return await self._dispatch(request, trial, "")

    async def default_path(self, request: Request) -> Response:
        tid = self.default_trial or ""
        trial = self.host.trials.get(tid)
        if trial is None:
            return _unknown_trial(tid)
        return await self._dispatch(request, trial, request.path_params["path"], compat=True)

    async def _dispatch(self, request: Request, trial: Trial, path: str, *, compat: bool = False) -> Response:
        path = path.strip("/")
        if is_operator_path(path, trial.services) and not (compat and self.open_compat_grading):
            code = self.token.check(request.headers.raw)
            if code is not None:
                return await self._refuse(request, code, trial)
        route = "/" + path
        # Tool names and routes are global, so the registry's index finds every tool; Trial.call
        # answers 404 tool_not_available (and records it) for one the task does not expose.
        compat = trial.task.profile == "claw-eval"
        if compat:  # Claw-Eval's services: the task's services' routes, and nothing else
            tdef = trial.task.routes.get(route)
        else:
            tdef = registry_routes().get(route) or task_routes(trial.task).get(route)
        if tdef is not None:
            return await self._call(request, trial, tdef)
        method = request.method
        head, _, tail = path.partition("/")
        if tail in ("audit", "reset", "health") and head in trial.services:
            if tail == "audit":
                return _expect(method, "GET") or json_response(trial.claw_eval_audit(head))
            if tail == "reset":
                if (wrong := _expect(method, "POST")) is not None:
                    return wrong
                trial.reset_service(head)
                return json_response({"status": "reset", "service": head})
            return _expect(method, "GET") or json_response({"status": "ok", "service": head})
        if path in ("", "health"):
            return _expect(method, "GET") or json_response(
                {
                    "status": "ok",
                    "trial_id": trial.id,
                    "task_id": trial.task.spec.id,
                    "calls": len(trial.audit),
                }
            )
        if path == "events":
            return _expect(method, "GET") or _events(request, trial)
        if path == "tools":
            return _expect(method, "GET") or json_response(
                [t.openai_schema() for t in trial.task.tools.values()]
            )
        if path == "state":
            return _expect(method, "GET") or json_response(
                {
                    "state_hash": trial.state_hash(),
                    "now": trial.clock.now().isoformat(),  # the frozen clock, to line other services up
                    "tables": trial.snapshot(),
                    "audit": trial.audit_collections(),
                }
            )
        if path == "reset":
            if (wrong := _expect(method, "POST")) is not None:
                return wrong
            trial.reset()
            return json_response({"status": "reset", "trial_id": trial.id})
        if compat:
            return json_response({"detail": "Not Found"}, 404)
        return error_response("unknown_route", f"no tool or endpoint at {route}", 404)

    async def _call(self, request: Request, trial: Trial, tdef: ToolDef) -> Response:
        if request.method != "POST":
            if trial.task.profile == "claw-eval":
                return json_response({"detail": "Method Not Allowed"}, 405)
            return error_response("method_not_allowed", f"{tdef.route} takes POST with a JSON body", 405)
        if request.headers.get("x-health-check") == "1":  # Claw-Eval's readiness probe: not a call
            return json_response({"status": "ok", "service": tdef.service})
        claw = trial.task.profile == "claw-eval"
        args, bad = await _json_body(request, NO_BODY if claw else {}, NULL_BODY if claw else None)
        if bad is not None:
            return bad
        res = trial.call(tdef.name, args)
        if res.event.delay_s > 0:
            await asyncio.sleep(res.event.delay_s)
        headers = None
        if res.status == 429:
            retry = res.body.get("retry_after_seconds", 1) if isinstance(res.body, dict) else 1
            headers = {"Retry-After": str(retry)}
        return json_response(res.body, res.status, headers)


async def _json_body(request: Request, missing: Any = None, null: Any = None) -> tuple[Any, Response | None]:
    """The decoded body; ``missing`` (default ``{}``) when there is none, ``null`` (default: as
    ``missing``, if given) when it is JSON ``null``."""
    raw = await request.body()
    if not raw.strip():
        return ({} if missing is None else missing), None
    try:
        data = orjson.loads(raw)
        if data is None:
            data = null if null is not None else missing
        return data, None
    except orjson.JSONDecodeError as e:
        return None, error_response("invalid_json", f"request body is not valid JSON: {e}", 400)


def _expect(method: str, allowed: str) -> Response | None:
    if method == allowed or (allowed == "GET" and method == "HEAD"):
        return None
    return error_response("method_not_allowed", f"use {allowed}", 405)


def _unknown_trial(tid: str) -> Response:
    return error_response("unknown_trial", f"unknown trial {tid!r}", 404)


def _events(request: Request, trial: Trial) -> Response:
    since_raw = request.query_params.get("since", "0")
    try:
        since = max(0, int(since_raw))
    except ValueError:
        return error_response("invalid_request", "since must be an integer", 422)
    return json_response([e.to_dict() for e in trial.audit[since:]])


async def _http_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        return error_response(
            "not_found" if exc.status_code == 404 else "http_error", str(exc.detail), exc.status_code
        )
    return error_response("internal_error", f"{type(exc).__name__}", 500)


def create_app(
    host: Host,
    *,
    default_trial: str | None = None,
    mcp: bool = True,
    operator_token: str | None = None,
    open_compat_grading: bool = False,
    max_body_bytes: int | None = None,
) -> FastAPI:
    """The HTTP (and streamable-HTTP MCP) face of ``host``'s trials.

    ``operator_token`` guards the grading and host routes (default: a fresh random token, readable
    as ``app.state.operator_token`` by the process that made the app — never by an agent).
    ``default_trial`` also serves that trial's routes at the root (Claw-Eval compatibility: e.g.
    ``POST /helpdesk/tickets``, ``GET /helpdesk/audit``, ``POST /helpdesk/reset``); the trial is
    looked up per request, so it may be opened after the app is created. Its root grading routes
    need the token too unless ``open_compat_grading`` (Claw-Eval's grader sends none).
    ``mcp=False`` leaves out the MCP endpoint (and its lifespan). Request bodies (tool routes and
    MCP alike) over ``max_body_bytes`` (default 16 MiB, ``$COWORKENV_MAX_BODY_BYTES``) get a 413
    ``request_too_large`` before they are read (:class:`coworkenv.bodylimit.BodyLimit`).
    """
    from coworkenv.serve.mcp import StreamableHttpMount

    token = OperatorToken(operator_token or new_token())
    api = _Api(host, default_trial, token, open_compat_grading)
    mount = StreamableHttpMount(host, token=token) if mcp else None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if mount is None:
            yield
            return
        async with mount.run():
            yield

    app = FastAPI(
        title="coworkenv services",
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
        docs_url=None,  # the routes are generated per trial; /t/{tid}/tools describes them
        redoc_url=None,
        openapi_url=None,
    )
    app.state.operator_token = token.value
    all_methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes: list[Route] = []  # hot path first: the router tries routes in order
    if mount is not None:
        for mcp_path in ("/t/{tid}/mcp", "/t/{tid}/mcp/"):
            routes.append(Route(mcp_path, mount, methods=["GET", "POST", "DELETE"]))
    routes += [
        Route("/t/{tid}/{path:path}", api.trial_path, methods=all_methods),
        Route("/t/{tid}", api.trial_root, methods=all_methods),
        Route("/health", api.health, methods=["GET"]),
        Route("/tasks", api.tasks, methods=["GET"]),
        Route("/trials", api.list_trials, methods=["GET"]),
        Route("/trials", api.create_trial, methods=["POST"]),
        Route("/trials/{tid}", api.delete_trial, methods=["DELETE"]),
    ]
    if default_trial is not None:
        routes.append(Route("/{path:path}", api.default_path, methods=all_methods))
    app.router.routes.extend(routes)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    return app


def compat_apps(host: Host, default_trial: str, operator_token: str) -> tuple[FastAPI, FastAPI]:
    """The agent's and the grader's apps over the same trials, for Claw-Eval compatibility.

    Both serve ``default_trial`` at Claw-Eval's bare routes. On the agent's app the grading routes
    (``/<service>/audit``, ``/<service>/reset``, ``/reset``, ``/events``, ``/state``) need the
    operator token, as everywhere else: an agent that can reach its port cannot empty the audit
    after a forbidden action. The grader's app answers them without a token (Claw-Eval's grader
    sends none) and has no MCP endpoint; serve it on a port only the grader reaches.
    """
    agent = create_app(host, default_trial=default_trial, operator_token=operator_token)
    grader = create_app(
        host, default_trial=default_trial, mcp=False, operator_token=operator_token, open_compat_grading=True
    )
    return agent, grader


# ---------------------------------------------------------------- running


@contextmanager
def background_server(
    app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning"
) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a daemon thread; yields its base URL (``port=0``: a free port).

    For tests and in-process sandboxes. The app's lifespan runs (so the MCP endpoint works).
    """
    sock = listen_socket(host, port)
    bound_port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="coworkenv-http"
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"HTTP server on {host}:{bound_port} failed to start")
            time.sleep(0.01)
        yield f"http://{host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
