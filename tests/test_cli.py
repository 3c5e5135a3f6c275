"""The CLI: schema, validate, run through every face, import, and one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import base_spec


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coworkenv.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    p = tmp_path / "task.json"
    p.write_text(json.dumps(base_spec()))
    return p


def test_schema_prints_json_schema() -> None:
    r = cli("schema")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["title"] == "coworkenv TaskSpec"


@pytest.mark.parametrize("face", ["inprocess", "http", "mcp"])
def test_run_reference_through_each_face(task_file: Path, face: str) -> None:
    r = cli("run", str(task_file), "--face", face, "--json")
    assert r.returncode == 0, r.stderr
    graded = json.loads(r.stdout)
    assert graded["reward"] == 1.0
    assert [c["status"] for c in graded["checks"]] == ["passed"] * 3


def test_validate_reports_and_fails_on_bad_spec(task_file: Path, tmp_path: Path) -> None:
    assert cli("validate", str(task_file)).returncode == 0
    bad = tmp_path / "bad.json"
    data = base_spec()
    data["completion_checks"][0]["weight"] = 0.9
    bad.write_text(json.dumps(data))
    r = cli("validate", str(bad))
    assert r.returncode == 1
    assert "sum to 1" in r.stderr + r.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "/no/such/task.json"], "no such file"),
        (["validate", "/no/such/task.json"], "file not found"),
        (["run", "{task}", "--face", "carrier-pigeon"], "unknown face"),
        (["import", "claw-eval", "/no/such/dir"], "directory not found"),
        (["synth", "/no/plan.yaml", "--out", "{tmp}/s"], "plan file not found"),
        (["plan", "report", "/no/plan.yaml"], "plan file not found"),
        (["package", "/no/dir", "--format", "harbor", "--out", "{tmp}/p"], "not found"),
        (["rollout", "/no/task.json", "--backend", "reference", "--out", "{tmp}/r"], "no such file"),
        (["trees", "/no/dir"], "rollouts.jsonl: not found"),
        (["curate", "/no/dir", "--export", "{tmp}/sft.jsonl"], "rollouts.jsonl: not found"),
        (["eval", "/no/dir"], "no such file"),
        (["report", "/no/dir", "--out", "{tmp}/r.html"], "no rollouts here"),
        (["train", "sft", "/no/cfg.yaml"], "config file not found"),
        (["train", "rl", "/no/cfg.yaml"], "config file not found"),
        (["job", "--config", "/no/job.toml"], "config file not found"),
        (["proxy", "--backend", "nonsense:x"], "unknown kind"),
        (
            [
                "rollout",
                "M1003_ticket_kb_resolution",
                "--backend",
                "passthrough:http://127.0.0.1:9/v1",
                "--out",
                "{tmp}/u",
            ],
            "failed before the policy could act",
        ),
    ],
)
def test_bad_input_is_one_clear_line_without_traceback(
    task_file: Path, tmp_path: Path, args: list[str], needle: str
) -> None:
    r = cli(*[a.replace("{task}", str(task_file)).replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode != 0
    assert needle in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


def test_debug_flag_shows_traceback() -> None:
    r = cli("--debug", "run", "/no/such/task.json")
    assert r.returncode != 0
    assert "Traceback" in r.stderr


def test_import_claw_eval_subset(claw_eval_tasks: Path, tmp_path: Path) -> None:
    r = cli(
        "import", "claw-eval", str(claw_eval_tasks / "T160_vip_ticket_escalation"), "--out", str(tmp_path)
    )
    assert r.returncode == 0, r.stderr
    spec = json.loads((tmp_path / "T160_vip_ticket_escalation" / "task.json").read_text())
    assert {f["tool"] for f in spec["forbidden"]} == {"gmail_send_message", "helpdesk_close_ticket"}


def _planted(claw_eval_tasks: Path, tmp_path: Path, name: str) -> Path:
    """A copy of a Claw-Eval dataset holding one task (its fixtures resolve under the copy)."""
    import shutil

    task = tmp_path / "dataset" / "tasks" / name
    shutil.copytree(claw_eval_tasks / name, task)
    return task


def test_validate_passes_claw_eval_tasks_graded_by_their_grader(
    claw_eval_tasks: Path, tmp_path: Path
) -> None:
    """``validate`` once exited 1 on 23 of 37 imported Claw-Eval tasks ("no completion check can be
    exercised synthetically") though each grades by its own grader.py. Now a task directory is
    imported on the fly, the gate's "graded by its own grader.py" is information, and every one of
    the shared tasks passes — while a planted broken one (no grader.py, a grader.py that does not
    compile, a task.yaml naming a tool no service has) still fails, naming what is wrong."""
    r = cli("validate", str(claw_eval_tasks))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.count("pass") >= 78
    assert "graded by its own" in r.stdout

    name = "T002_email_triage"
    task = _planted(claw_eval_tasks, tmp_path, name)
    assert cli("validate", str(task)).returncode == 0
    (task / "grader.py").write_text("def grade(:\n")
    r = cli("validate", str(task))
    assert r.returncode == 1
    assert "does not compile" in r.stdout
    (task / "grader.py").unlink()
    r = cli("validate", str(task))
    assert r.returncode == 1
    assert "grader.py" in r.stdout
    assert "does not exist" in r.stdout

    broken = _planted(claw_eval_tasks, tmp_path / "b", name)
    text = (broken / "task.yaml").read_text()
    (broken / "task.yaml").write_text(text.replace("task_id:", "task_id_typo:", 1))
    r = cli("validate", str(broken))
    assert r.returncode == 1
    assert "coworkenv import claw-eval" in r.stdout + r.stderr


def test_run_rollout_and_serve_take_a_claw_eval_task_directory(claw_eval_tasks: Path) -> None:
    """``serve`` once exited 2 with 20 schema errors on a Claw-Eval task directory; the commands
    that take tasks now import one on the fly."""
    from coworkenv.cli import expand_paths, resolve_task

    task = claw_eval_tasks / "T002_email_triage"
    spec, _ = resolve_task(str(task))
    assert spec.claw_eval is not None
    assert spec.id == "T002_email_triage"
    spec_yaml, _ = resolve_task(str(task / "task.yaml"))
    assert spec_yaml.id == spec.id
    assert len(expand_paths([claw_eval_tasks])) >= 78
    import socket
    import time

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {"COWORKENV_OPERATOR_TOKEN": "operator-token-for-this-test", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "coworkenv.cli", "serve", str(task), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                auth = {"Authorization": "Bearer operator-token-for-this-test"}
                tasks = httpx.get(f"http://127.0.0.1:{port}/tasks", headers=auth)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
        assert [t["id"] for t in tasks.json()] == ["T002_email_triage"]
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
