"""coworkenv tasks under TRL's ``GRPOTrainer``, through the OpenEnv server.

Contract (TRL ≥ 1.16, its ``environment_factory`` path; install ``coworkenv[openenv]`` and TRL):

* :func:`environment_factories` gives ``{toolset: factory}`` for ``GRPOTrainer(environment_factory=...)``:
  one environment class per distinct tool set of the tasks (TRL reads a class's public methods
  as its tools and renders only the row's environment's tools into its prompt). Each instance
  holds one :class:`~coworkenv.integrations.openenv.CoworkEnvClient` session to the OpenEnv server
  at ``url``; ``reset(task_id=...)`` opens a fresh trial there, and every tool method is one
  ``call_tool`` step (the method's signature and docstring come from the tool's JSON schema, so
  TRL shows the model the same tools ``coworkenv serve`` lists).
* :func:`dataset` gives the matching rows: ``prompt`` (our system prompt and the request),
  ``environment`` (the row's tool set) and ``task_id``.
* :func:`coworkenv_reward` is the reward function: for each rollout it submits the completion's
  last assistant text as the final answer; the OpenEnv server grades the trial as a
  ``coworkenv rollout`` is. An unscored rollout (our grader failed) gives ``None`` — TRL leaves it
  out of that reward — and its label is kept on the environment (``last_failure``); a policy
  cannot make itself unscored.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coworkenv.integrations.openenv import CoworkEnvClient
from coworkenv.rollout.loop import system_prompt
from coworkenv.services.trial import load_task
from coworkenv.spec import TaskSpec

_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def toolset_key(spec: TaskSpec) -> str:
    """A stable name for the task's tool set (tasks with the same tools share an environment)."""
    return "cowork-" + hashlib.sha1("\n".join(sorted(spec.tools)).encode()).hexdigest()[:10]


def _method(name: str, description: str, schema: Mapping[str, Any]) -> Callable[..., str]:
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    notes: dict[str, Any] = {"return": str}
    lines = [description.strip() or name, "", "Args:"]
    for pname in sorted(props, key=lambda p: p not in required):  # required first, as Python wants
        prop = props[pname]
        typ = _TYPES.get(str(prop.get("type")), str)
        ann: Any = typ if pname in required else typ | None
        default = inspect.Parameter.empty if pname in required else None
        params.append(
            inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=ann)
        )
        notes[pname] = ann
        text = " ".join(str(prop.get("description") or pname).split())
        if prop.get("enum"):
            text += f" (choices: {json.dumps(prop['enum'])})"
        lines.append(f"    {pname}: {text}")
    if not props:
        lines.pop()
    lines += ["", "Returns:", "    The service's JSON answer."]

    def tool(self: _CoworkToolEnv, *args: Any, **kwargs: Any) -> str:
        bound = dict(zip([p.name for p in params[1:]], args, strict=False)) | kwargs
        return self._call(name, {k: v for k, v in bound.items() if v is not None})

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = "\n".join(lines)
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = notes
    return tool


class _CoworkToolEnv:
    """Base of the generated environment classes (one per tool set)."""

    url: str = ""

    def __init__(self) -> None:
        self._client = CoworkEnvClient(base_url=self.url).sync()
        self._client.connect()
        self.task_id = ""
        self.last_reward: float | None = None
        self.last_failure: str | None = None
        self._open = False

    def reset(self, task_id: str = "", **_: Any) -> None:
        result = self._client.reset(task_id=task_id)
        self.task_id, self._open = result.observation.task_id, True
        self.last_reward = self.last_failure = None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        return self._client.call_tool(name, **arguments).observation.result or ""

    def _finish(self, answer: str) -> float | None:
        if not self._open:
            return self.last_reward
        end = self._client.submit(answer)
        self._open = False
        self.last_reward, self.last_failure = end.reward, end.observation.failure
        reward: float | None = end.reward
        return reward


def environment_factories(url: str, specs: Sequence[TaskSpec]) -> dict[str, Callable[[], Any]]:
    """``{toolset: factory}`` for ``GRPOTrainer(environment_factory=...)`` (see the module docstring)."""
    out: dict[str, Callable[[], Any]] = {}
    for spec in specs:
        key = toolset_key(spec)
        if key in out:
            continue
        tools = load_task(spec).tools
        members: dict[str, Any] = {"url": url.rstrip("/")}
        for name in spec.tools:
            tdef = tools[name]
            members[name] = _method(name, tdef.description, tdef.input_schema())
        out[key] = type(f"CoworkTools_{key[7:]}", (_CoworkToolEnv,), members)
    return out


def dataset(specs: Sequence[TaskSpec], repeat: int = 1) -> Any:
    """The training rows (a ``datasets.Dataset``): prompt, environment, task_id; ``repeat`` per task."""
    from datasets import Dataset

    rows = [
        {
            "prompt": [
                {"role": "system", "content": system_prompt(spec)},
                {"role": "user", "content": spec.request},
            ],
            "environment": toolset_key(spec),
            "task_id": spec.id,
        }
        for spec in specs
        for _ in range(repeat)
    ]
    return Dataset.from_list(rows)


def final_text(completion: Any) -> str:
    """The last assistant text of a completion (a message list, or plain text)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(list(completion)):
        if message.get("role") == "assistant":
            content = message.get("content") or ""
            if isinstance(content, list):
                return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return str(content)
    return ""


def coworkenv_reward(completions: Sequence[Any], environments: Sequence[Any], **_: Any) -> list[float | None]:
    """TRL reward function: each rollout's final answer submitted and graded (see the module docstring)."""
    return [env._finish(final_text(c)) for c, env in zip(completions, environments, strict=True)]


def with_tool_template(tokenizer: Any) -> Any:
    """Give a ChatML tokenizer without tool support (SmolLM2's) TRL's Qwen2.5 template.

    SmolLM2 already speaks ChatML (``<|im_start|>``/``<|im_end|>``); the Qwen2.5 template adds the
    ``<tools>`` block and ``<tool_call>`` JSON that TRL knows how to parse. Other tokenizers are
    returned unchanged.
    """
    from trl.chat_template_utils import qwen2_5_chat_template

    template = tokenizer.chat_template or ""
    if "<|im_start|>" in template and "tool" not in template:
        tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer
