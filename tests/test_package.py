"""Packaging: every built-in task round-trips through all three layouts; Harbor's oracle scores 1 and
its evidence endpoints refuse the agent; the Claw-Eval grader.py grades a trace through coworkenv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from coworkenv.errors import SpecError
from coworkenv.importers.claw_eval import EXTENSION_KEY, import_task, task_dirs
from coworkenv.serve.http import background_server
from coworkenv.services.registry import TOOLS
from coworkenv.spec import TaskSpec
from coworkenv.synth.packaging import FORMATS, export_task, import_package, load_specs
from coworkenv.synth.packaging.harbor import MARKER, verifier_token
from coworkenv.synth.packaging.sandbox import is_guarded, locked_app
from coworkenv.synth.packaging.verifier import VerifierError, verify
from coworkenv.tasks.builtin import builtin_task, builtin_tasks

CLAW_TASKS = Path("/work/shared/claw-eval/tasks")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_builtin_task_round_trips(fmt: str, tmp_path: Path) -> None:
    specs = builtin_tasks()
    assert len(specs) >= 34
    for spec in specs:
        d = export_task(spec, tmp_path, fmt)
        back, notes = import_package(d, fmt)
        assert back == spec, (fmt, spec.id)
        if fmt != "claw-eval":
            assert notes == [], (fmt, spec.id, notes)


def test_export_is_deterministic(tmp_path: Path) -> None:
    spec = builtin_tasks()[0]
    for fmt in FORMATS:
        a = export_task(spec, tmp_path / "a", fmt)
        b = export_task(spec, tmp_path / "b", fmt)
        files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        for rel in files_a:
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), (fmt, rel)


# ---------------------------------------------------------------- Claw-Eval layout


def test_claw_eval_layout_is_native_where_it_can_be(tmp_path: Path) -> None:
    spec = builtin_task("M1100_at_risk_auth_ticket_kb")
    d = export_task(spec, tmp_path, "claw-eval")
    data = yaml.safe_load((d / "task.yaml").read_text())
    assert data["task_id"] == spec.id
    assert data["prompt"]["text"] == spec.request
    assert [t["name"] for t in data["tools"]] == list(spec.tools)
    routes = {e["tool_name"]: e["url"] for e in data["tool_endpoints"]}
    assert routes["helpdesk_list_tickets"].endswith(TOOLS["helpdesk_list_tickets"].route)
    assert (
        json.loads((d / "fixtures/helpdesk/tickets.json").read_text()) == spec.services["helpdesk"]["tickets"]
    )
    ext = data[EXTENSION_KEY]
    assert ext["fixture_tables"]["helpdesk"] == {"tickets.json": "tickets"}
    # checks Claw-Eval cannot express (state, audit) travel in the extension; identity fields do not
    assert "completion_checks" in ext["overrides"]
    assert not {"id", "name", "request", "tools", "services"} & set(ext["overrides"])
    # without the extension the native import loses information, so the extension is doing work
    native, _ = import_task(d, use_extension=False)
    assert native != spec


def test_claw_eval_extension_errors_name_the_key(tmp_path: Path) -> None:
    d = export_task(builtin_tasks()[0], tmp_path, "claw-eval")
    data = yaml.safe_load((d / "task.yaml").read_text())
    data[EXTENSION_KEY]["overrides"]["no_such_field"] = 1
    (d / "task.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=r"coworkenv\.overrides.*no_such_field"):
        import_task(d)


@pytest.mark.skipif(not CLAW_TASKS.is_dir(), reason="real Claw-Eval tasks not present")
def test_real_claw_eval_tasks_reexport_to_equal_specs(tmp_path: Path) -> None:
    dirs = task_dirs(CLAW_TASKS)[::6]  # a spread of the 78 (all of them: tests/test_import_claw_eval.py)
    assert len(dirs) >= 10
    for src in dirs:
        spec, _ = import_task(src)
        back, _ = import_package(export_task(spec, tmp_path, "claw-eval"), "claw-eval")
        assert back == spec, src.name


def _stub_claw_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Minimal stand-ins for claw_eval's grader base and DimensionScores (not installed here)."""

    class AbstractGrader:
        @staticmethod
        def _get_final_assistant_text(messages: list[dict[str, Any]]) -> str:
            texts = [m["content"] for m in messages if m["role"] == "assistant"]
            return texts[-1] if texts else ""

    class DimensionScores:
        completion = 0.0
        safety = 1.0
        robustness = 0.0

    base = types.ModuleType("claw_eval.graders.base")
    base.AbstractGrader = AbstractGrader  # type: ignore[attr-defined]
    trace = types.ModuleType("claw_eval.models.trace")
    trace.DimensionScores = DimensionScores  # type: ignore[attr-defined]
    for name, mod in {
        "claw_eval": types.ModuleType("claw_eval"),
        "claw_eval.graders": types.ModuleType("claw_eval.graders"),
        "claw_eval.models": types.ModuleType("claw_eval.models"),
        "claw_eval.graders.base": base,
        "claw_eval.models.trace": trace,
    }.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _claw_grader(d: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"grader_{d.name}", d / "grader.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.CoworkenvGrader()


def test_claw_eval_grader_py_grades_a_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coworkenv.grading.replay import run_reference
    from coworkenv.services import load_task

    _stub_claw_eval(monkeypatch)
    spec = builtin_task("M1100_at_risk_auth_ticket_kb")
    d = export_task(spec, tmp_path, "claw-eval")
    grader = _claw_grader(d)
    ref = run_reference(load_task(spec))
    dispatches = [
        {"tool_name": e.tool, "request_body": e.args, "response_status": e.status, "response_body": e.result}
        for e in ref.episode.events
    ]
    audit = {svc: {"calls": [], **ref.trial.audit_collections().get(svc, {})} for svc in spec.services}
    msgs = [{"role": "assistant", "content": spec.reference.final_message}]
    good = grader.grade(msgs, dispatches, None, audit_data=audit)
    assert (good.completion, good.safety) == (pytest.approx(ref.grade.completion), 1.0)
    assert ref.grade.completion == pytest.approx(1.0)
    empty = grader.grade([{"role": "assistant", "content": ""}], [], None, audit_data={})
    assert empty.completion == 0.0


# ---------------------------------------------------------------- Harbor layout


def test_harbor_layout_hides_the_grading_from_the_agent(tmp_path: Path) -> None:
    spec = builtin_task("M1100_at_risk_auth_ticket_kb")
    d = export_task(spec, tmp_path, "harbor")
    for rel in (
        "instruction.md",
        "task.toml",
        "environment/Dockerfile",
        "environment/docker-compose.yaml",
        "solution/solve.sh",
        "tests/test.sh",
        "tests/task.json",
    ):
        assert (d / rel).is_file(), rel
    assert os.access(d / "tests/test.sh", os.X_OK)
    assert os.access(d / "solution/solve.sh", os.X_OK)
    assert (d / "instruction.md").read_text().startswith(spec.request + "\n\n" + MARKER)
    toml = tomllib.loads((d / "task.toml").read_text())
    assert toml["metadata"]["task_id"] == spec.id
    assert toml["agent"]["timeout_sec"] == spec.limits.timeout_s
    token = verifier_token(spec)
    assert "/logs/verifier/reward.json" in (d / "tests/test.sh").read_text()
    # what the agent's image is built from holds neither the checks nor the token
    agent_side = (d / "environment/Dockerfile").read_text()
    assert "services/" not in agent_side
    assert "tests" not in agent_side
    serving = TaskSpec.model_validate_json((d / "environment/services/task.json").read_text())
    assert serving.completion_checks == ()
    assert serving.reference.steps == ()
    assert serving.answer_ids == ()
    for p in (d / "environment").rglob("*"):
        if p.is_file() and p.name != "docker-compose.yaml":
            assert token not in p.read_text(), p
    assert token not in (d / "instruction.md").read_text()


def test_guarded_paths_cover_no_tool_route() -> None:
    assert not [t.route for t in TOOLS.values() if is_guarded(t.route)]
    for path in (
        "/t/default/events",
        "/events",
        "/t/x/state",
        "/reset",
        "/helpdesk/audit",
        "/t/default/helpdesk/reset",
        "/trials",
        "/trials/abc",
    ):
        assert is_guarded(path), path
    assert not is_guarded("/t/default/calendar/events")
    assert not is_guarded("/t/default/tools")


def _run_oracle(d: Path, base: str, ws: Path) -> None:
    env = {**os.environ, "COWORKENV_SERVICES_URL": base, "COWORKENV_WORKSPACE": str(ws)}
    subprocess.run(
        [sys.executable, str(d / "solution/replay.py"), str(d / "solution/reference.json")],
        env=env,
        check=True,
        timeout=60,
    )


@pytest.mark.parametrize("task_id", ["M1100_at_risk_auth_ticket_kb", "M133_safety_payment_change_refusal"])
def test_harbor_oracle_scores_one_and_the_agent_cannot_touch_the_evidence(
    task_id: str, tmp_path: Path
) -> None:
    spec = builtin_task(task_id)
    d = export_task(spec, tmp_path / "pkg", "harbor")
    token = (d / "tests/token").read_text().strip()
    app = locked_app(str(d / "environment/services/task.json"), token)
    ws = tmp_path / "app"
    ws.mkdir()
    with background_server(app) as url:
        base = f"{url}/t/default"
        # the agent (no token) cannot read the evidence or wipe it
        for method, path in (
            ("GET", "/events"),
            ("GET", "/state"),
            ("POST", "/reset"),
            ("GET", f"/{next(iter(spec.services))}/audit"),
            ("POST", "/trials"),
        ):
            target = (url if path == "/trials" else base) + path
            assert httpx.request(method, target).status_code == 403, path
        assert httpx.get(f"{base}/tools").status_code == 200
        out = tmp_path / "logs/verifier/reward.json"
        # nothing done yet: completion 0
        zero = verify(d / "tests/task.json", base, token, answer=ws / "answer.md", workspace=ws, out=out)
        assert zero["completion"] == 0.0
        _run_oracle(d, base, ws)
        reward = verify(d / "tests/task.json", base, token, answer=ws / "answer.md", workspace=ws, out=out)
        with pytest.raises(VerifierError, match="403"):
            verify(d / "tests/task.json", base, "wrong-token", answer=ws / "answer.md", workspace=ws, out=out)
    assert reward == {
        "reward": pytest.approx(1.0),
        "completion": pytest.approx(1.0),
        "safety": 1.0,
        "robustness": 1.0,
    }
    assert json.loads(out.read_text()) == reward
    assert json.loads((out.parent / "grade.json").read_text())["task_id"] == spec.id


def test_harbor_forbidden_call_zeroes_safety(tmp_path: Path) -> None:
    spec = next(s for s in builtin_tasks() if s.forbidden and not s.forbidden[0].targets)
    d = export_task(spec, tmp_path / "pkg", "harbor")
    token = (d / "tests/token").read_text().strip()
    ws = tmp_path / "app"
    ws.mkdir()
    with background_server(locked_app(str(d / "environment/services/task.json"), token)) as url:
        base = f"{url}/t/default"
        _run_oracle(d, base, ws)
        httpx.post(base + TOOLS[spec.forbidden[0].tool].route, json={})  # even a failed call counts
        r = verify(
            d / "tests/task.json",
            base,
            token,
            answer=ws / "answer.md",
            workspace=ws,
            out=tmp_path / "reward.json",
        )
    assert r["safety"] == 0.0
    assert r["reward"] == 0.0


def test_verifier_without_services_writes_no_reward(tmp_path: Path) -> None:
    d = export_task(builtin_tasks()[0], tmp_path, "harbor")
    out = tmp_path / "reward.json"
    with pytest.raises(VerifierError, match="cannot reach"):
        verify(
            d / "tests/task.json",
            "http://127.0.0.1:9/t/default",
            "t",
            answer=tmp_path / "a.md",
            workspace=None,
            out=out,
        )
    assert not out.exists()


def test_harbor_import_notes_edits_and_rejects_broken_packages(tmp_path: Path) -> None:
    spec = builtin_tasks()[0]
    d = export_task(spec, tmp_path, "harbor")
    text = (d / "instruction.md").read_text()
    (d / "instruction.md").write_text("Edited request." + text[len(spec.request) :])
    back, notes = import_package(d, "harbor")
    assert back.request == "Edited request."
    assert any("request from instruction.md" in n for n in notes)
    (d / "instruction.md").write_text("no marker here")
    with pytest.raises(SpecError, match=r"instruction\.md"):
        import_package(d, "harbor")
    (d / "tests/task.json").unlink()
    with pytest.raises(SpecError, match=r"(?s)tests/task.json.*missing"):
        import_package(d, "harbor")


# ---------------------------------------------------------------- input and CLI


def test_load_specs_accepts_files_dirs_and_task_dirs(tmp_path: Path) -> None:
    specs = builtin_tasks()[:2]
    for s in specs:
        (tmp_path / f"{s.id}.json").write_text(s.model_dump_json())
    assert [s for s, _ in load_specs(tmp_path)] == list(specs)
    assert [s for s, _ in load_specs(tmp_path / f"{specs[0].id}.json")] == [specs[0]]
    own = export_task(specs[1], tmp_path / "own", "coworkenv")
    assert load_specs(own)[0][0] == specs[1]
    with pytest.raises(SpecError, match="not found"):
        load_specs(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="no task files"):
        load_specs(tmp_path / "empty")


def test_package_cli(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from coworkenv.synth.packaging.cli import register

    app = typer.Typer()
    register(app)

    @app.command()
    def _other() -> None: ...

    src = tmp_path / "tasks"
    src.mkdir()
    for s in builtin_tasks()[:3]:
        (src / f"{s.id}.json").write_text(s.model_dump_json())
    res = CliRunner().invoke(
        app, ["package", str(src), "--format", "claw-eval", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == sorted(s.id for s in builtin_tasks()[:3])
    bad = CliRunner().invoke(app, ["package", str(src), "--format", "zip"])
    assert bad.exit_code != 0
    assert isinstance(bad.exception, SpecError)
