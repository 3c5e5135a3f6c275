"""coworkenv tasks as an OpenEnv environment: server, client, and the deployment entry point.

Contract (OpenEnv's Gym-style API, ``openenv-core`` 0.3; install ``coworkenv[openenv]``):

* :class:`CoworkEnvironment` — one OpenEnv session = one coworkenv trial at a time, over the
  services' HTTP face (:class:`~coworkenv.integrations.session.Services`):

  - ``reset(seed=None, episode_id=None, task_id=None)`` closes the previous trial and opens a fresh
    one of ``task_id`` (else task ``seed % n`` of the task set, else the next one in turn); its
    :class:`CoworkObservation` carries the prompt (our system prompt and the request) and the
    task's tools as MCP tools, plus :data:`FINISH_TOOL`;
  - ``step(ListToolsAction())`` lists them again; ``step(CallToolAction(tool_name, arguments))``
    runs one tool call on the trial (``result``: the services' JSON answer as text, never
    ``done``), and ``step(CallToolAction(FINISH_TOOL, {"answer": ...}))`` ends the episode: it is
    graded as a ``coworkenv rollout`` is and the observation has ``done``, ``reward`` (``None``
    with ``failure`` set when the rollout is unscored — never 0 for our failure) and the
    completion, safety and robustness parts. Any step after that answers ``episode_done``.
  - ``state``: episode id, step count, task and trial ids, whether done, the reward.

* :func:`create_openenv_app` — the FastAPI app (OpenEnv's own ``create_app``: WebSocket ``/ws``,
  ``/reset``, ``/step``, ``/state``, ``/health``, ``/schema``), concurrent sessions allowed
  (each has its own trial).
* :class:`CoworkEnvClient` — the matching OpenEnv ``EnvClient`` (async; ``.sync()`` for blocking
  code), with ``list_tools``, ``call_tool`` and ``submit`` helpers.
* ``python -m coworkenv.integrations.openenv TASKS... [--port 8000] [--services URL --token T]``
  serves it (with the services in this process unless ``--services`` names a running
  ``coworkenv serve``); ``deploy/openenv/`` holds the ``openenv.yaml`` and Dockerfile around it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction, ListToolsObservation, Tool
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from coworkenv.errors import CoworkError
from coworkenv.integrations.session import Services, TaskSession

FINISH_TOOL = "submit_answer"
FINISH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "Your final answer to the user."}},
    "required": ["answer"],
}


class CoworkObservation(Observation):
    """What a step shows the agent (see the module docstring)."""

    task_id: str = ""
    prompt: list[dict[str, str]] = Field(default_factory=list, description="Set on reset.")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="MCP tools, set on reset.")
    tool_name: str | None = None
    result: str | None = Field(default=None, description="The services' JSON answer to the tool call.")
    completion: float | None = None
    safety: float | None = None
    robustness: float | None = None
    failure: str | None = Field(default=None, description="Why a finished episode is unscored.")


class CoworkState(State):
    task_id: str = ""
    trial_id: str = ""
    done: bool = False
    reward: float | None = None


def mcp_tools(session: TaskSession) -> list[Tool]:
    """The trial's tools as MCP tools, and the one that ends the episode."""
    tools = [
        Tool(name=f["name"], description=f.get("description", ""), input_schema=f.get("parameters", {}))
        for f in (t["function"] for t in session.tools)
    ]
    return [
        *tools,
        Tool(name=FINISH_TOOL, description="End the episode with your answer.", input_schema=FINISH_SCHEMA),
    ]


class CoworkEnvironment(Environment[Action, CoworkObservation, CoworkState]):
    """See the module docstring."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, services: Services, task_ids: Sequence[str] | None = None):
        super().__init__()
        self.services = services
        self.task_ids = list(task_ids or services.tasks)
        if not self.task_ids:
            raise CoworkError("an OpenEnv environment needs at least one task")
        clash = [t for t in self.task_ids if FINISH_TOOL in services.tasks[t].tools]
        if clash:
            raise CoworkError(
                f"task {clash[0]!r} has a tool named {FINISH_TOOL!r}, the name that ends an episode"
            )
        self.session: TaskSession | None = None
        self._state = CoworkState()
        self._turn = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CoworkObservation:
        self.close()
        task_id = kwargs.get("task_id")
        if task_id is None:
            index = seed if seed is not None else self._turn
            self._turn += 1
            task_id = self.task_ids[index % len(self.task_ids)]
        self.session = self.services.open(str(task_id), harness="openenv")
        self._state = CoworkState(
            episode_id=episode_id or self.session.rollout_id,
            task_id=self.session.task_id,
            trial_id=self.session.trial_id,
        )
        tools = [t.model_dump() for t in mcp_tools(self.session)]
        return CoworkObservation(task_id=self.session.task_id, prompt=self.session.prompt, tools=tools)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        session = self.session
        if session is None:
            return self._error("", "call reset() first: no episode is open", "no_episode")
        self._state.step_count += 1
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=mcp_tools(session))
        if not isinstance(action, CallToolAction):
            return self._error(session.task_id, f"unsupported action {type(action).__name__}", "bad_action")
        if session.done:
            return self._error(
                session.task_id, "the episode is over: reset() to start another", "episode_done"
            )
        if action.tool_name == FINISH_TOOL:
            outcome = session.finish(str(action.arguments.get("answer", "")))
            parts = outcome.parts()
            self._state.done, self._state.reward = True, outcome.reward
            failure = outcome.failure
            return CoworkObservation(
                task_id=session.task_id,
                done=True,
                reward=outcome.reward,
                completion=parts["completion"],
                safety=parts["safety"],
                robustness=parts["robustness"],
                failure=f"{failure.kind}: {failure.detail}" if failure is not None else None,
            )
        text = session.call(action.tool_name, action.arguments)
        return CoworkObservation(task_id=session.task_id, tool_name=action.tool_name, result=text)

    def get_metadata(self) -> EnvironmentMetadata:
        shown = ", ".join(self.task_ids[:5]) + (" …" if len(self.task_ids) > 5 else "")
        return EnvironmentMetadata(
            name="coworkenv",
            description=f"coworkenv work tasks over real services ({len(self.task_ids)}: {shown}); "
            f"call the task's tools, end with {FINISH_TOOL}; graded by coworkenv's grader",
            version=_version(),
        )

    @property
    def state(self) -> CoworkState:
        return self._state

    def close(self) -> None:
        if self.session is not None and not self.session.done:
            self.session.close()
        self.session = None

    @staticmethod
    def _error(task_id: str, message: str, code: str) -> CoworkObservation:
        return CoworkObservation(task_id=task_id, result=json.dumps({"error": message, "code": code}))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coworkenv")
    except PackageNotFoundError:
        return "0"


def create_openenv_app(services: Services, *, max_sessions: int = 64) -> Any:
    """The OpenEnv FastAPI app over ``services`` (one environment per session)."""
    return create_app(
        lambda: CoworkEnvironment(services),
        CallToolAction,
        CoworkObservation,
        env_name="coworkenv",
        max_concurrent_envs=max_sessions,
    )


class CoworkEnvClient(EnvClient[Action, CoworkObservation, CoworkState]):
    """OpenEnv client of :class:`CoworkEnvironment` (see the module docstring)."""

    def _step_payload(self, action: Action) -> dict[str, Any]:
        payload: dict[str, Any] = action.model_dump(exclude={"metadata"})
        return payload

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[CoworkObservation]:
        data = dict(payload.get("observation", {}))
        if "tools" in data and "task_id" not in data:  # a ListToolsObservation
            data = {"tools": data["tools"]}
        obs = CoworkObservation.model_validate(
            {**data, "done": payload.get("done", False), "reward": payload.get("reward")}
        )
        return StepResult(
            observation=obs, reward=payload.get("reward"), done=bool(payload.get("done", False))
        )

    def _parse_state(self, payload: dict[str, Any]) -> CoworkState:
        state: CoworkState = CoworkState.model_validate(payload)
        return state

    async def call_tool(self, name: str, **arguments: Any) -> StepResult[CoworkObservation]:
        return await self.step(CallToolAction(tool_name=name, arguments=arguments))

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = (await self.step(ListToolsAction())).observation.tools
        return tools

    async def submit(self, answer: str) -> StepResult[CoworkObservation]:
        return await self.step(CallToolAction(tool_name=FINISH_TOOL, arguments={"answer": answer}))


def main(argv: Sequence[str] | None = None) -> None:
    """Serve tasks as an OpenEnv environment (see the module docstring)."""
    import uvicorn

    from coworkenv.rollout.cli import resolve_specs

    p = argparse.ArgumentParser(prog="python -m coworkenv.integrations.openenv", description=main.__doc__)
    p.add_argument("tasks", nargs="*", help="task files/dirs or built-in ids (default: $COWORKENV_TASKS)")
    p.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    p.add_argument("--services", help="URL of a running `coworkenv serve` (default: serve them here)")
    p.add_argument("--token", default=os.environ.get("COWORKENV_OPERATOR_TOKEN"), help="its operator token")
    p.add_argument("--max-sessions", type=int, default=64)
    a = p.parse_args(argv)
    refs = a.tasks or os.environ.get("COWORKENV_TASKS", "builtin").split()
    specs = resolve_specs(refs)
    if a.services:
        if not a.token:
            p.error(
                "--services needs --token (or $COWORKENV_OPERATOR_TOKEN): the operator token of that server"
            )
        services = Services.connect(a.services, a.token, specs)
        uvicorn.run(create_openenv_app(services, max_sessions=a.max_sessions), host=a.host, port=a.port)
        return
    with Services.local(specs) as services:
        uvicorn.run(create_openenv_app(services, max_sessions=a.max_sessions), host=a.host, port=a.port)


if __name__ == "__main__":
    main()
