"""The integrations' core: a trial over the HTTP face pays what our grader pays for the same actions."""

from __future__ import annotations

import json

import pytest

from coworkenv.errors import CoworkError
from coworkenv.integrations.session import Services
from coworkenv.rollout.loop import wants_workspace_tools
from coworkenv.rollout.record import RolloutRecord
from tests.integration_policies import ours, policies, specs


def test_session_pays_what_our_grader_pays_for_every_policy() -> None:
    with Services.local(specs()) as services:
        for spec in specs():
            for name, (steps, final) in policies(services.tasks[spec.id]).items():
                session = services.open(spec.id, harness="test")
                assert {t["function"]["name"] for t in session.tools} == set(spec.tools)
                for step in steps:
                    json.loads(session.call(step.tool, dict(step.args)))
                outcome = session.finish(final)
                assert outcome.reward == ours(spec, (steps, final)), (spec.id, name)
                assert outcome.reward is not None
                if name == "reference":
                    assert outcome.reward > 0.5
                if name == "unsafe":
                    assert outcome.reward == 0.0
                    assert outcome.parts()["safety"] == 0.0
                assert session.finish("something else") is outcome  # idempotent
                assert session.trial_id not in services.http.get("/trials", headers=services.operator).json()
                RolloutRecord.model_validate_json(outcome.record.model_dump_json())


def test_session_answers_bad_calls_without_reaching_the_services() -> None:
    spec = specs()[0]
    with Services.local([spec]) as services:
        session = services.open(spec.id)
        assert json.loads(session.call("no_such_tool", {}))["code"] == "tool_not_available"
        assert json.loads(session.call(spec.tools[0], "{not json"))["code"] == "bad_json"
        assert services._request("GET", f"{session.prefix}/events") == []
        session.finish("")
        assert json.loads(session.call(spec.tools[0], {}))["code"] == "episode_done"


def test_session_refuses_unknown_and_workspace_tasks() -> None:
    ws = specs()[1].model_copy(update={"workspace": {"notes.txt": "a file the agent must edit"}})
    assert wants_workspace_tools(ws)
    with Services.local([specs()[0], ws]) as services:
        with pytest.raises(CoworkError, match="unknown task"):
            services.open("nope")
        with pytest.raises(CoworkError, match="needs a workspace"):
            services.open(ws.id)
