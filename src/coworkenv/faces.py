"""Replaying a task through a chosen face: in-process, HTTP or MCP (streamable HTTP).

All three reach the same :meth:`Trial.call`; the HTTP and MCP paths run a real uvicorn server on a
free loopback port and a real client (httpx; the official MCP client), so ``coworkenv run --face``
exercises exactly what an agent harness would.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from anyio.from_thread import start_blocking_portal

from coworkenv.errors import CoworkError
from coworkenv.grading.replay import Caller, ReplayResult, run_reference
from coworkenv.services.trial import Host, Trial
from coworkenv.spec import TaskSpec

FACES = ("inprocess", "http", "mcp")


def run_reference_via(spec: TaskSpec, face: str, source: str = "<spec>") -> ReplayResult:
    if face not in FACES:
        raise CoworkError(f"unknown face {face!r}; expected one of {', '.join(FACES)}")
    host = Host()
    task = host.add_task(spec, source)
    if face == "inprocess":
        return run_reference(task)
    from coworkenv.serve.http import background_server, create_app

    app = create_app(host)
    operator = {"Authorization": f"Bearer {app.state.operator_token}"}
    with background_server(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        resp = http.post("/trials", json={"task_id": spec.id}, headers=operator)
        resp.raise_for_status()
        tid = resp.json()["trial_id"]
        trial = host.trials[tid]
        if face == "http":  # the agent's view: the trial's capability URL, no token
            return run_reference(task, trial=trial, caller=_http_caller(http, trial.capability))
        with start_blocking_portal() as portal:
            from mcp import Client

            with portal.wrap_async_context_manager(Client(f"{url}/t/{trial.capability}/mcp")) as client:

                def mcp_caller(_trial: Trial) -> Caller:
                    def call(tool: str, args: dict[str, Any]) -> Any:
                        res = portal.call(client.call_tool, tool, args)
                        texts = [c.text for c in res.content if getattr(c, "type", "") == "text"]
                        return json.loads(texts[0]) if texts else None

                    return call

                return run_reference(task, trial=trial, caller=mcp_caller)


def _http_caller(http: httpx.Client, key: str) -> Callable[[Trial], Caller]:
    def factory(trial: Trial) -> Caller:
        def call(tool: str, args: dict[str, Any]) -> Any:
            route = trial.task.tools[tool].route if tool in trial.task.tools else f"/unknown/{tool}"
            return http.post(f"/t/{key}{route}", json=args).json()

        return call

    return factory
