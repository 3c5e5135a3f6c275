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
