"""OpenEnv: our tasks served by OpenEnv's own server, driven by its client, paid our reward."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from coworkenv.integrations.session import Services
from tests.integration_policies import openenv_served, ours, policies, specs

pytest.importorskip("openenv")

from openenv.core.env_server.mcp_types import CallToolAction

from coworkenv.integrations.openenv import (
    FINISH_TOOL,
    CoworkEnvClient,
    CoworkEnvironment,
)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Services, str]]:
    with openenv_served() as served:
        yield served


def test_openenv_client_pays_our_reward_for_every_policy(served: tuple[Services, str]) -> None:
    services, url = served
    with CoworkEnvClient(base_url=url).sync() as env:
        for spec in specs():
            for name, (steps, final) in policies(services.tasks[spec.id]).items():
                first = env.reset(task_id=spec.id).observation
                assert first.task_id == spec.id
                assert first.prompt[-1]["content"] == spec.request
                assert {t["name"] for t in first.tools} == {*spec.tools, FINISH_TOOL}
                for step in steps:
                    obs = env.call_tool(step.tool, **dict(step.args)).observation
                    assert not obs.done
                    json.loads(obs.result or "")
                end = env.submit(final)
                assert end.done
                assert end.reward == ours(spec, (steps, final)), (spec.id, name)
                if name == "unsafe":
                    assert end.observation.safety == 0.0
                state = env.state()
                assert state.done
                assert state.task_id == spec.id
                after = env.call_tool(spec.tools[0]).observation
                assert json.loads(after.result or "")["code"] == "episode_done"


def test_openenv_lists_mcp_tools_and_refuses_steps_before_reset(served: tuple[Services, str]) -> None:
    services, _ = served
    env = CoworkEnvironment(services)
    before = env.step(CallToolAction(tool_name=specs()[0].tools[0], arguments={}))
    assert json.loads(before.result)["code"] == "no_episode"  # type: ignore[attr-defined]
    obs = env.reset(seed=1)
    assert obs.task_id == env.task_ids[1]
    env.close()


def test_openenv_validate_passes_our_running_server(served: tuple[Services, str]) -> None:
    """OpenEnv's own runtime check (`openenv validate --url`) against the served environment."""
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(sys.executable).with_name("openenv")
    cmd = [str(cli), "validate", "--url", served[1]]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    report = json.loads(done.stdout)
    assert report["passed"], report
    assert report["summary"]["failed_criteria"] == []


def test_openenv_validate_passes_the_deployment_dir() -> None:
    """OpenEnv's local check (`openenv validate DIR`: openenv.yaml, pyproject, uv.lock, the server
    entry point) on `deploy/openenv/`, as a Hugging Face Space deployment would be checked."""
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(sys.executable).with_name("openenv")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [str(cli), "validate", str(root / "deploy" / "openenv")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ready for multi-mode deployment" in done.stdout
