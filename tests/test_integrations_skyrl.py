"""SkyRL gym: `skyrl_gym.make("coworkenv")` steps text through a trial and pays our reward."""

from __future__ import annotations

import json

import pytest

from coworkenv.integrations.session import Services
from tests.integration_policies import ours, policies, specs

skyrl_gym = pytest.importorskip("skyrl_gym")

import coworkenv.integrations.skyrl  # noqa: E402, F401  (registers the env)


def test_skyrl_env_pays_our_reward_for_every_policy() -> None:
    with Services.local(specs()) as services:
        for spec in specs():
            for name, (steps, final) in policies(services.tasks[spec.id]).items():
                env = skyrl_gym.make(
                    "coworkenv", env_config={"services": services}, extras={"task_id": spec.id}
                )
                conversation, _meta = env.init([{"role": "user", "content": "replaced"}])
                assert conversation[-1]["content"] == spec.request
                assert all(f'"{t}"' in conversation[0]["content"] for t in spec.tools)
                for step in steps:
                    call = json.dumps({"name": step.tool, "arguments": dict(step.args)})
                    out = env.step(f"<tool_call>\n{call}\n</tool_call>")
                    assert not out["done"]
                    assert out["reward"] == 0.0
                    assert out["observations"][0]["content"].startswith("<tool_response>")
                end = env.step(final)
                assert end["done"]
                assert end["reward"] == ours(spec, (steps, final)), (spec.id, name)
                assert env.get_metrics()["reward"] == end["reward"]
                env.close()


def test_skyrl_env_grades_the_last_allowed_turn_and_names_missing_config() -> None:
    from coworkenv.errors import CoworkError

    spec = specs()[0]
    with Services.local([spec]) as services:
        env = skyrl_gym.make(
            "coworkenv", env_config={"services": services}, extras={"task_id": spec.id, "max_turns": 1}
        )
        env.init([])
        call = json.dumps({"name": spec.tools[0], "arguments": {}})
        end = env.step(f"<tool_call>{call}</tool_call>")
        assert end["done"]  # out of turns: graded on what it did, the call not run
        assert services._request("GET", "/trials") == []
    with pytest.raises(CoworkError, match="task_id"):
        skyrl_gym.make("coworkenv", env_config={}, extras={})
