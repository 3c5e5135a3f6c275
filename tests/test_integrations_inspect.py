"""Inspect AI: `inspect eval` runs our task against our proxy and scores what our grader scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration_policies import TASKS, ours, policies, specs

pytest.importorskip("inspect_ai")

from coworkenv.integrations import inspect_eval
from coworkenv.proxy.backends.scripted import Script, ScriptCall, ScriptedBackend
from coworkenv.proxy.capture import CaptureStore
from coworkenv.proxy.server import ProxyServer
from coworkenv.serve.http import background_server
from coworkenv.services.trial import load_task

TASK_FILE = Path(inspect_eval.__file__)


@pytest.mark.parametrize("policy", ["reference", "nothing", "unsafe"])
def test_inspect_eval_scores_each_policy_as_our_grader_does(tmp_path: Path, policy: str) -> None:
    chosen = {s.id: policies(load_task(s))[policy] for s in specs()}
    scripts = {
        s.request: Script(tuple(ScriptCall(c.tool, dict(c.args)) for c in chosen[s.id][0]), chosen[s.id][1])
        for s in specs()
    }
    server = ProxyServer(ScriptedBackend(scripts), CaptureStore(tmp_path / "capture"))
    prefix = server.open_rollout("inspect")
    with background_server(server.app) as url:
        env = {**os.environ, "COWORKENV_BASE_URL": f"{url}{prefix}/v1", "COWORKENV_API_KEY": "unused"}
        cmd = [
            sys.executable,
            "-m",
            "inspect_ai",
            "eval",
            f"{TASK_FILE}@coworkenv",
            "-T",
            f"tasks={' '.join(TASKS)}",
            "--model",
            "openai-api/coworkenv/policy",
            "--log-dir",
            str(tmp_path / "logs"),
            "--log-format",
            "json",
            "--display",
            "none",
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    server.shutdown()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (log_file,) = (tmp_path / "logs").glob("*.json")
    log = json.loads(log_file.read_text())
    assert log["status"] == "success"
    by_id = {s["id"]: s for s in log["samples"]}
    assert set(by_id) == set(TASKS)
    for spec in specs():
        sample = by_id[spec.id]
        (score,) = sample["scores"].values()
        assert score["value"] == ours(spec, chosen[spec.id]), (spec.id, policy)
        assert score["metadata"]["safety"] == (0.0 if policy == "unsafe" else 1.0)
        turns = [m for m in sample["messages"] if m["role"] == "assistant"]
        called = [c["function"] for m in turns for c in m.get("tool_calls") or []]
        assert called == [c.tool for c in chosen[spec.id][0]]  # the transcript is in the log
