"""coworkenv tasks as an Inspect AI task: samples from tasks, tools from the trial, our grader as scorer.

Contract (``inspect-ai`` 0.3; install ``coworkenv[inspect]``)::

    inspect eval src/coworkenv/integrations/inspect_eval.py@coworkenv \\
        -T tasks=builtin --model openai-api/coworkenv/policy   # COWORKENV_BASE_URL=<proxy>/v1

* :func:`coworkenv` (the ``@task``): one :class:`Sample` per task (``input`` = the request,
  ``id`` and ``metadata.task_id`` = the task id), ``epochs`` trials each. ``tasks`` is a
  space-separated list of task files, directories or built-in ids; with ``services`` (and
  ``token``) it uses a running ``coworkenv serve``, else it serves the tasks from this process.
* :func:`cowork_agent` (the solver) opens a fresh trial per sample, sets our system prompt, gives
  the model exactly the trial's tools (one ``ToolDef`` per tool, its served JSON schema; each call
  goes to the services over HTTP), lets Inspect's ``generate`` loop run until the model answers
  without a tool call (or ``message_limit``), then grades the trial with that answer. The
  messages stay in Inspect's log (the transcript); the grade goes to ``state.metadata["coworkenv"]``.
* :func:`cowork_scorer` returns the reward as the score value, with completion, safety,
  robustness, failure and rollout id as metadata. An unscored rollout (our grader failed, the
  trial could not be opened) raises, so Inspect records a sample error — never a score of 0.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, ToolDef, ToolParams

from coworkenv.errors import CoworkError
from coworkenv.integrations.session import Services, TaskSession

_STACK = contextlib.ExitStack()
_SERVED: dict[tuple[str, str | None], Services] = {}


def _services(tasks: str, url: str | None, token: str | None) -> Services:
    """The services for this task set: a running server, or one served here (kept for the process)."""
    from coworkenv.rollout.cli import resolve_specs

    key = (tasks, url)
    if key not in _SERVED:
        specs = resolve_specs(tasks.split())
        if url:
            if not token:
                raise CoworkError("services=URL needs token=<its operator token> (-T token=...)")
            _SERVED[key] = Services.connect(url, token, specs)
        else:
            _SERVED[key] = _STACK.enter_context(Services.local(specs))
    return _SERVED[key]


def trial_tools(session: TaskSession) -> list[Tool]:
    """The trial's tools as Inspect tools (names, descriptions and schemas as served)."""
    out = []
    for schema in session.tools:
        fn = schema["function"]
        params = ToolParams.model_validate({"properties": {}, "required": [], **fn.get("parameters", {})})
        out.append(
            ToolDef(
                _caller(session, fn["name"]),
                name=fn["name"],
                description=fn.get("description") or fn["name"],
                parameters=params,
            ).as_tool()
        )
    return out


def _caller(session: TaskSession, name: str) -> Callable[..., Coroutine[Any, Any, str]]:
    async def call(**arguments: Any) -> str:
        return await anyio.to_thread.run_sync(session.call, name, arguments)

    return call


@solver
def cowork_agent(services: Services) -> Solver:
    """See the module docstring."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        task_id = str(state.metadata["task_id"])
        session = await anyio.to_thread.run_sync(
            lambda: services.open(task_id, harness="inspect", trial=state.epoch)
        )
        state.messages = [
            ChatMessageSystem(content=session.prompt[0]["content"]),
            ChatMessageUser(content=session.prompt[1]["content"]),
        ]
        state.tools = trial_tools(session)
        try:
            state = await generate(state, tool_calls="loop")
        finally:  # a sample that hit its limit is still graded on what it did
            answer = state.output.completion if state.output else ""
            outcome = await anyio.to_thread.run_sync(session.finish, answer)
            failure = outcome.failure
            state.metadata["coworkenv"] = {
                **outcome.parts(),
                "rollout_id": outcome.record.rollout_id,
                "failure": f"{failure.kind}: {failure.detail}" if failure is not None else None,
            }
        return state

    return solve


@scorer(metrics=[mean(), stderr()])
def cowork_scorer() -> Scorer:
    """See the module docstring."""

    async def score(state: TaskState, target: Target) -> Score:
        graded = state.metadata.get("coworkenv")
        if graded is None or graded["reward"] is None:
            why = graded["failure"] if graded else "the solver did not grade this sample"
            raise CoworkError(f"rollout unscored ({why}): labelled, not scored 0")
        return Score(
            value=graded["reward"], answer=state.output.completion, metadata=json.loads(json.dumps(graded))
        )

    return score


@task
def coworkenv(
    tasks: str = "builtin",
    services: str | None = None,
    token: str | None = None,
    epochs: int = 1,
    message_limit: int = 42,
) -> Task:
    """An Inspect task over coworkenv tasks (see the module docstring)."""
    served = _services(tasks, services, token)
    samples = [
        Sample(
            input=t.spec.request, id=t.spec.id, metadata={"task_id": t.spec.id, "category": t.spec.category}
        )
        for t in served.tasks.values()
    ]
    return Task(
        dataset=samples,
        solver=cowork_agent(served),
        scorer=cowork_scorer(),
        epochs=epochs,
        message_limit=message_limit,
    )
