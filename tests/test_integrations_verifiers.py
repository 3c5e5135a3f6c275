"""verifiers: `vf-eval` runs our tasks against our proxy and scores what our grader scores.

verifiers lives in its own venv (scripts/install_verifiers.sh: it pins openai<3, Inspect needs
openai>=3.4), so its entry point runs there, as a subprocess, against services and a proxy here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coworkenv.proxy.backends.scripted import Script, ScriptCall, ScriptedBackend
from coworkenv.proxy.capture import CaptureStore
from coworkenv.proxy.server import ProxyServer
from coworkenv.serve.http import background_server
from coworkenv.services.trial import load_task
from tests.integration_policies import TASKS, ours, policies, specs

VENV = Path(os.environ.get("COWORKENV_VERIFIERS_VENV", Path.home() / ".cache/coworkenv/verifiers-venv"))
BIN = VENV / "bin"  # vf-eval, and the uv its chat harness runs on
TOOL_SERVER = "coworkenv"  # coworkenv.integrations.verifiers_env.TOOL_SERVER (that module needs verifiers)
if not (BIN / "vf-eval").is_file():
    pytest.skip(f"no verifiers venv at {VENV}: bash scripts/install_verifiers.sh", allow_module_level=True)


def vf_args(tasks: list[str], records: Path, base_url: str, out: Path) -> list[str]:
    """vf-eval's arguments: our taskset on ``tasks``, its records to ``records``, the proxy as model."""
    return [
        "coworkenv-verifiers",
        "--env.taskset.tasks",
        json.dumps(tasks),
        "--env.taskset.records",
        str(records),
        "-m",
        "policy",
        "--client.base-url",
        base_url,
        "--client.api-key-var",
        "COWORKENV_API_KEY",
        "--no-push",
        "-o",
        str(out),
    ]


@pytest.mark.parametrize("policy", ["reference", "nothing", "unsafe"])
def test_vf_eval_scores_each_policy_as_our_grader_does(tmp_path: Path, policy: str) -> None:
    chosen = {s.id: policies(load_task(s))[policy] for s in specs()}
    scripts = {  # the model sees the trial's tools qualified by their MCP server's name
        s.request: Script(
            tuple(ScriptCall(f"{TOOL_SERVER}_{c.tool}", dict(c.args)) for c in chosen[s.id][0]),
            chosen[s.id][1],
        )
        for s in specs()
    }
    server = ProxyServer(ScriptedBackend(scripts), CaptureStore(tmp_path / "capture"))
    prefix = server.open_rollout("verifiers")
    records = tmp_path / "rollouts.jsonl"
    with background_server(server.app) as url:
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COWORKENV_API_KEY": "unused"}
        cmd = [str(BIN / "vf-eval"), *vf_args(list(TASKS), records, f"{url}{prefix}/v1", tmp_path / "vf")]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    server.shutdown()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (traces_file,) = (tmp_path / "vf").glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    by_id = {e["task"]["data"]["id"]: e for e in episodes}
    assert set(by_id) == set(TASKS)
    for spec in specs():
        episode = by_id[spec.id]
        assert episode["ok"], episode["errors"]
        (trace,) = episode["traces"]
        assert trace["rewards"]["coworkenv"]["score"] == ours(spec, chosen[spec.id]), (spec.id, policy)
        assert trace["metrics"]["safety"] == (0.0 if policy == "unsafe" else 1.0)
        called = [
            c["name"]
            for node in trace["nodes"]
            if node.get("message", {}).get("role") == "assistant"
            for c in node["message"].get("tool_calls") or []
        ]
        assert called == [f"{TOOL_SERVER}_{c.tool}" for c in chosen[spec.id][0]]  # the transcript

    # `coworkenv eval` scores the same trajectories the same
    summary = subprocess.run(
        [str(Path(sys.executable).parent / "coworkenv"), "eval", str(records), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    evaluated = json.loads(summary.stdout)
    theirs = {t: by_id[t]["traces"][0]["rewards"]["coworkenv"]["score"] for t in TASKS}
    assert {t["task_id"]: t["mean_reward"] for t in evaluated["tasks"]} == theirs
    assert evaluated["overall"]["score"] == pytest.approx(100 * sum(theirs.values()) / len(theirs))


UNSCORED = """
import sys
from verifiers.v1.cli.eval.main import main
from coworkenv.integrations.session import Outcome, TaskSession
from coworkenv.rollout.record import FailureLabel

real_finish = TaskSession.finish

def grader_fails(self, *args, **kwargs):
    graded = real_finish(self, *args, **kwargs)
    failure = FailureLabel(kind="grader_error", detail="the grader raised")
    return Outcome(graded.record.model_copy(update={"rewards": None, "failure": failure}))

TaskSession.finish = grader_fails
main(sys.argv[1:])
"""


def test_an_unscored_rollout_is_an_errored_episode_never_a_zero(tmp_path: Path) -> None:
    server = ProxyServer(ScriptedBackend(Script((), "Nothing to do.")), CaptureStore(tmp_path / "capture"))
    prefix = server.open_rollout("verifiers")
    records = tmp_path / "rollouts.jsonl"
    with background_server(server.app) as url:
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COWORKENV_API_KEY": "unused"}
        args = vf_args([TASKS[0]], records, f"{url}{prefix}/v1", tmp_path / "vf")
        cmd = [str(BIN / "python"), "-c", UNSCORED, *args, "--env.retries.max-retries", "0"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    server.shutdown()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (traces_file,) = (tmp_path / "vf").glob("*/traces.jsonl")
    (episode,) = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert not episode["ok"]
    assert "unscored (grader_error: the grader raised)" in json.dumps(episode["errors"])
    assert all("coworkenv" not in (t.get("rewards") or {}) for t in episode["traces"])
    (line,) = records.read_text().splitlines()
    assert json.loads(line)["failure"]["kind"] == "grader_error"  # labelled in our records too


LOAD = """
import json, sys
import verifiers.v1 as vf
from coworkenv.integrations.verifiers_env import CoworkEnvConfig, CoworkEnvEnv, CoworkEnvEnvConfig

tasks = json.loads(sys.argv[1])
env = vf.load_environment(CoworkEnvEnvConfig(taskset=CoworkEnvConfig(id="coworkenv-verifiers", tasks=tasks)))
assert isinstance(env, CoworkEnvEnv), type(env)
print(json.dumps({"env": type(env).__name__, "tasks": [t.key for t in env.taskset.load()]}))
"""


def test_load_environment_builds_our_env_over_the_named_tasks() -> None:
    """verifiers' own loader (``vf.load_environment``, what vf-eval, serve and prime-rl call) builds
    our stateful tool environment over exactly the tasks named."""
    done = subprocess.run(
        [str(BIN / "python"), "-c", LOAD, json.dumps(list(TASKS))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"env": "CoworkEnvEnv", "tasks": list(TASKS)}
