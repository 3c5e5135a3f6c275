"""coworkenv tasks as a SkyRL-gym text environment: text in, tool calls run on the trial, our reward out.

Contract (``skyrl-gym`` 0.4; install ``coworkenv[skyrl]``)::

    import coworkenv.integrations.skyrl  # registers "coworkenv"
    env = skyrl_gym.make("coworkenv", env_config={"services": services}, extras={"task_id": ...})

* ``env_config``: ``services`` (a :class:`~coworkenv.integrations.session.Services`), or
  ``services_url`` + ``token`` + ``tasks`` (task refs, as ``coworkenv serve`` takes) for a running
  ``coworkenv serve``. ``extras``: ``task_id`` (required) and ``max_turns`` (default 20).
* ``init(prompt)`` opens a fresh trial and returns our system prompt — the task's tools as a
  Hermes ``<tools>`` block and how to call them — and the task's request (the dataset's prompt is
  replaced: the task defines it).
* ``step(action)`` parses the model's text (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
  or the other forms our proxy accepts, :func:`~coworkenv.proxy.codecs.parse.parse_turn`): each
  call runs on the trial and comes back as a ``<tool_response>`` user turn (reward 0, not done);
  a turn without a call — or the ``max_turns``-th turn — is the final answer: the trial is graded
  as a ``coworkenv rollout`` is and the step is ``done`` with our reward. An unscored rollout
  gives ``reward=None`` and ``metadata["failure"]`` (drop it; it is not a 0).
"""

from __future__ import annotations

import json
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from coworkenv.errors import CoworkError
from coworkenv.integrations.session import Services, TaskSession
from coworkenv.proxy.codecs.parse import parse_turn

ENV_ID = "coworkenv"
_CONNECTED: dict[tuple[str, str], Services] = {}


def _services(config: Any) -> Services:
    get = config.get if hasattr(config, "get") else lambda k, d=None: getattr(config, k, d)
    if get("services") is not None:
        return get("services")  # type: ignore[no-any-return]
    url, token, tasks = get("services_url"), get("token"), get("tasks")
    if not (url and token and tasks):
        raise CoworkError(
            "coworkenv's SkyRL env needs env_config services=Services, or services_url, token and tasks"
        )
    refs = tasks.split() if isinstance(tasks, str) else list(tasks)
    key = (str(url), " ".join(refs))
    if key not in _CONNECTED:
        from coworkenv.rollout.cli import resolve_specs

        _CONNECTED[key] = Services.connect(str(url), str(token), resolve_specs(refs))
    return _CONNECTED[key]


def tools_prompt(session: TaskSession) -> str:
    """Our system prompt with the trial's tools in Hermes form."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in session.tools)
    head = session.prompt[0]["content"]
    return (
        f"{head}\n\n# Tools\n\nYou may call one or more functions. Their signatures are within "
        f"<tools></tools> XML tags:\n<tools>\n{lines}\n</tools>\n\nFor each call, return a JSON "
        "object with the function name and arguments within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


class CoworkTextEnv(BaseTextEnv):
    """See the module docstring."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        extras = extras or {}
        if "task_id" not in extras:
            raise CoworkError("coworkenv's SkyRL env needs extras['task_id'] (the task of this row)")
        self.services = _services(env_config or {})
        self.task_id = str(extras["task_id"])
        self.max_turns = int(extras.get("max_turns", 20))
        self.session: TaskSession | None = None

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        self.session = self.services.open(self.task_id, harness="skyrl")
        conversation = [
            {"role": "system", "content": tools_prompt(self.session)},
            {"role": "user", "content": self.session.prompt[1]["content"]},
        ]
        return conversation, {"task_id": self.task_id, "rollout_id": self.session.rollout_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        session = self.session
        if session is None:
            raise CoworkError("step() before init(): no trial is open")
        self.turns += 1
        turn = parse_turn(action, sorted(session.tool_names))
        if turn.tool_calls and self.turns < self.max_turns:
            answers = [
                f"<tool_response>\n{session.call(c.name, c.arguments)}\n</tool_response>"
                for c in turn.tool_calls
            ]
            return BaseTextEnvStepOutput(
                observations=[{"role": "user", "content": "\n".join(answers)}],
                reward=0.0,
                done=False,
                metadata={},
            )
        outcome = session.finish(turn.content)
        failure = outcome.failure
        meta: dict[str, Any] = {**outcome.parts(), "rollout_id": outcome.record.rollout_id}
        if failure is not None:
            meta["failure"] = f"{failure.kind}: {failure.detail}"
        return BaseTextEnvStepOutput(observations=[], reward=outcome.reward, done=True, metadata=meta)

    def get_metrics(self) -> dict[str, Any]:
        if self.session is None or self.session.outcome is None:
            return {}
        return {k: v for k, v in self.session.outcome.parts().items() if v is not None}

    def close(self) -> None:
        if self.session is not None and not self.session.done:
            self.session.close()


if ENV_ID not in skyrl_gym.registry:
    skyrl_gym.register(id=ENV_ID, entry_point="coworkenv.integrations.skyrl:CoworkTextEnv")
