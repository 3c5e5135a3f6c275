"""coworkenv tasks as a verifiers environment: one trial per rollout, its MCP tools, our grader.

Contract (``verifiers`` 0.4, the ``verifiers.v1`` stack; install ``coworkenv[verifiers]``)::

    vf-eval coworkenv-verifiers --env.taskset.tasks '["builtin"]' \\
        -m policy --client.base-url <an OpenAI-compatible /v1, e.g. our proxy> --no-push

The taskset id ``coworkenv-verifiers`` is the top-level package :mod:`coworkenv_verifiers`, which
re-exports, as verifiers plugins do, one of each:

* :class:`CoworkEnvTaskset` (config :class:`CoworkEnvConfig`): one task per coworkenv task —
  ``id`` and ``name`` the task id, ``system_prompt`` our system prompt, ``prompt`` the request.
  ``tasks`` lists task files, directories or built-in ids (``builtin``: the whole library);
  ``services`` (with the operator token in the environment variable ``token_var``) uses a running
  ``coworkenv serve``, else :class:`CoworkEnvEnv` serves the tasks from the eval process.
* :class:`CoworkEnvEnv`: each episode opens a fresh trial, hands the agent the trial's own MCP
  endpoint (``/t/<capability>/mcp``: exactly the task's tools, their served schemas; every call
  validated and audited by the services) as its only tool server, runs the agent, then grades the
  trial exactly as ``coworkenv rollout`` does (:meth:`TaskSession.finish`: the task's own
  ``grader.py`` for an imported Claw-Eval task, forbidden actions zero the reward) on the
  services' audit and the trace's messages. The reward is recorded as ``coworkenv`` (weight 1);
  completion, safety and robustness as metrics. An unscored rollout (our grader failed) raises
  :class:`verifiers.v1.EnvError`, so verifiers records an errored episode — never a reward of 0.
  With ``records`` set, each episode's :class:`RolloutRecord` is appended there too, so
  ``coworkenv eval`` scores the very trajectories verifiers scored.
* :class:`CoworkEnvHarness`: verifiers' own ``null`` chat loop (the model, the MCP tools, no
  shell), the default for this taskset so the model gets no tool but the trial's. Another harness
  can be pinned with ``--env.agent.harness.id`` (it must support MCP).

The tool server is named ``coworkenv``, so the model sees each tool as ``coworkenv_<tool>`` (the
verifiers convention: MCP tools stay qualified); the services and the grader see the task's names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.mcp import SharedToolServer

from coworkenv.errors import CoworkError
from coworkenv.integrations.session import Services
from coworkenv.proxy.messages import Message, ToolCall
from coworkenv.rollout.loop import system_prompt
from coworkenv.rollout.record import append_record

TOOL_SERVER = "coworkenv"
"""The name the trial's MCP server has in the agent's tool list (tools appear as ``coworkenv_<tool>``)."""


class CoworkEnvConfig(vf.TasksetConfig):
    """Which coworkenv tasks, and where their services run."""

    tasks: list[str] = Field(default_factory=lambda: ["builtin"])
    """Task files, directories of them, built-in ids, or ``builtin`` (the whole library)."""
    services: str | None = None
    """Base URL of a running ``coworkenv serve`` that serves ``tasks``; unset: served in this process."""
    token_var: str = "COWORKENV_TOKEN"
    """Environment variable holding that server's operator token (never sent to the model)."""
    records: str | None = None
    """Also append each graded episode's rollout record to this ``rollouts.jsonl``
    (``coworkenv eval`` scores it; unscored rollouts are written too, labelled)."""


class CoworkEnvData(vf.TaskData):
    """One coworkenv task: ``id`` is its task id."""


class CoworkEnvTask(vf.Task[CoworkEnvData]):
    @property
    def key(self) -> str:
        return str(self.data.id)


class CoworkEnvTaskset(vf.Taskset[CoworkEnvTask, CoworkEnvConfig]):
    """See the module docstring."""

    def load(self) -> Iterator[CoworkEnvTask]:
        for spec in _specs(self.config.tasks):
            data = CoworkEnvData(
                id=spec.id, name=spec.id, system_prompt=system_prompt(spec), prompt=spec.request
            )
            yield CoworkEnvTask(data, self.config.task)


class CoworkEnvHarness(NullHarness):
    """verifiers' ``null`` chat loop: the model and the trial's MCP tools, nothing else."""


class CoworkEnvEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The one seat: the policy under evaluation or training. Its chat loop runs in a local
    subprocess (verifiers' default is a Prime sandbox): it runs no code, only model and MCP calls."""


class CoworkEnvEnv(vf.Env[CoworkEnvEnvConfig]):
    """See the module docstring."""

    _services: Services | None = None
    _stack: contextlib.ExitStack | None = None

    async def start(self) -> None:
        config = self.taskset.config
        assert isinstance(config, CoworkEnvConfig)
        specs = _specs(config.tasks)
        if config.services:
            token = os.environ.get(config.token_var)
            if not token:
                raise CoworkError(
                    f"--env.taskset.services {config.services} needs its operator token "
                    f"in ${config.token_var}"
                )
            self._services = Services.connect(config.services, token, specs)
        else:
            self._stack = contextlib.ExitStack()
            self._services = await asyncio.to_thread(self._stack.enter_context, Services.local(specs))

    async def stop(self) -> None:
        if self._stack is not None:
            await asyncio.to_thread(self._stack.close)
        elif self._services is not None:
            self._services.close()
        self._services = self._stack = None

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        services = self._services
        if services is None:
            raise CoworkError("CoworkEnvEnv.run outside serving(): its services are not started")
        task_id = str(task.data.id)
        session = await asyncio.to_thread(services.open, task_id, harness="verifiers")
        try:
            server = SharedToolServer(url=f"{services.url}{session.prefix}/mcp", local=True, external=True)
            trace = await agents.agent.run(task, tools={TOOL_SERVER: server})
            answer = trace.last_reply if trace.num_turns else ""
            outcome = await asyncio.to_thread(session.finish, answer, messages(trace.messages))
        finally:
            await asyncio.to_thread(session.close)
        config = self.taskset.config
        if isinstance(config, CoworkEnvConfig) and config.records:
            await asyncio.to_thread(append_record, Path(config.records), outcome.record)
        parts = outcome.parts()
        if outcome.reward is None:
            failure = outcome.failure
            why = f"{failure.kind}: {failure.detail}" if failure is not None else "no grade"
            raise vf.EnvError(f"rollout of {task_id} unscored ({why}): labelled, not scored 0")
        trace.record_reward("coworkenv", outcome.reward)
        trace.record_metrics({k: v for k, v in parts.items() if k != "reward" and v is not None})


def messages(trace: Sequence[Any]) -> tuple[Message, ...]:
    """A verifiers trace's messages as ours (the transcript our grader reads); tool names unqualified."""
    prefix = f"{TOOL_SERVER}_"
    out = []
    for m in trace:
        content = m.content if isinstance(m.content, str) else _text(m.content)
        if m.role == "assistant":
            calls = tuple(
                ToolCall(id=c.id, name=c.name.removeprefix(prefix), arguments=c.arguments)
                for c in m.tool_calls or ()
            )
            out.append(Message(role="assistant", content=content, tool_calls=calls))
        elif m.role == "tool":
            name = (m.name or "").removeprefix(prefix) or None
            out.append(Message(role="tool", content=content, tool_call_id=m.tool_call_id, name=name))
        else:
            out.append(Message(role=m.role, content=content))
    return tuple(out)


def _text(content: Any) -> str:
    if content is None:
        return ""
    return "".join(p.text if hasattr(p, "text") else json.dumps(p, default=str) for p in content)


def _specs(tasks: Sequence[str]) -> list[Any]:
    from coworkenv.rollout.cli import resolve_specs

    specs = resolve_specs(list(tasks))
    if not specs:
        raise CoworkError(f"--env.taskset.tasks {list(tasks)} names no task")
    return specs


__all__ = ["CoworkEnvConfig", "CoworkEnvEnv", "CoworkEnvHarness", "CoworkEnvTask", "CoworkEnvTaskset"]
