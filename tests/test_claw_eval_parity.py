"""Claw-Eval parity of the services: the Claw-Eval profile answers as Claw-Eval's mock services.

The differential test runs Claw-Eval's own ``mock_services`` (from ``../shared/claw-eval/upstream``)
beside our HTTP face on every declared tool of all 78 shared tasks. Under ``CI=true`` a missing
checkout fails instead of skipping.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from coworkenv.claweval.differential import Report, compare, run
from coworkenv.claweval.upstream import find_checkout
from coworkenv.importers.claw_eval import import_task
from coworkenv.serve.http import create_app
from coworkenv.services.trial import Host, load_task
from coworkenv.spec import TaskSpec

from .conftest import base_spec

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT.parent / "shared" / "claw-eval" / "tasks"
CHECKOUT = find_checkout()
N_TASKS = 78
MIN_RATE = 0.98


def _require() -> tuple[Path, Path]:
    if CHECKOUT is None or not TASKS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(
                "Claw-Eval checkout missing: ../shared/claw-eval/{tasks,upstream} must be beside the repo"
            )
        pytest.skip("Claw-Eval checkout not found (../shared/claw-eval/upstream)")
    return TASKS, CHECKOUT


@pytest.fixture(scope="module")
def report() -> Report:
    tasks, checkout = _require()
    return run(tasks, checkout)


def _client(task_dir: str, now: datetime | None = None) -> tuple[TestClient, Host]:
    tasks, _ = _require()
    spec, _notes = import_task(tasks / task_dir)
    host = Host()
    host.add_task(spec)
    host.open_trial(spec.id, "t", now=now)
    # Claw-Eval's grader reads the root audit routes without a token (serve --claw-eval-compat)
    app = create_app(host, default_trial="t", mcp=False, open_compat_grading=True)
    return TestClient(app), host


# ---------------------------------------------------------------- the differential run


def test_all_shared_tasks_are_probed_on_both_sides(report: Report) -> None:
    assert not report.failed_tasks
    probed = {p.task_id for p in report.pairs}
    documents_only = {n.split()[0] for n in report.not_compared} - probed  # PDF reading, not fixtures
    assert len(probed) + len(documents_only) == N_TASKS
    assert len(documents_only) <= 2
    kinds = {p.probe.kind for p in report.pairs}
    assert kinds == {"valid", "edge", "invalid", "audit"}


def test_equivalence_rate_meets_the_bar(report: Report) -> None:
    assert report.rate >= MIN_RATE, report.summary() + "\n" + report.differences()


def test_the_comparison_can_fail() -> None:
    """Each difference the issue lists is caught by :func:`compare`."""
    assert compare((200, {"error": "Ticket X not found"}), (404, {"error": "x", "code": "not_found"}))
    assert compare((200, {"sent_messages": []}), (200, {"sent": []}))
    assert compare((200, {"a": 1}), (200, {"a": 1, "extra": 2}))
    assert compare((200, {"t": "2026-03-01T10:00:00Z"}), (200, {"t": "2026-03-02T10:00:00Z"}))
    assert compare((200, {"t": "2026-03-01T10:00:00Z"}), (200, {"t": "2026-03-01T10:00:05Z"})) is None
    assert compare((422, {"detail": [{"loc": ["body", "a"]}]}), (422, {"detail": [{"loc": ["body", "b"]}]}))


def test_strict_profile_is_measurably_different() -> None:
    """The harness discriminates: our strict services are not Claw-Eval's."""
    tasks, checkout = _require()
    strict = run(tasks, checkout, only=["T128_ticket_assignment", "T008_todo_management"], profile="strict")
    assert strict.pairs
    assert strict.rate < 0.6, strict.summary()


# ---------------------------------------------------------------- the profile, case by case


def test_imported_tasks_default_to_the_claw_eval_profile_ours_to_strict() -> None:
    tasks, _ = _require()
    spec, _ = import_task(tasks / "T002_email_triage")
    assert spec.claw_eval is not None
    assert spec.profile == "claw-eval"
    assert load_task(spec).profile == "claw-eval"
    ours = TaskSpec.model_validate(base_spec())
    assert ours.profile == "strict"
    assert load_task(ours).profile == "strict"
    assert load_task(spec, profile="strict").profile == "strict"


def test_unknown_id_is_200_with_an_error_body() -> None:
    client, _ = _client("T128_ticket_assignment")
    resp = client.post("/helpdesk/tickets/get", json={"ticket_id": "TK-NOPE"})
    assert (resp.status_code, resp.json()) == (200, {"error": "Ticket TK-NOPE not found"})


def test_values_claw_eval_accepts_are_accepted() -> None:
    client, host = _client("T128_ticket_assignment")
    tid = next(iter(host.trials["t"].snapshot()["helpdesk"]["rows"]))["ticket_id"]
    resp = client.post("/helpdesk/tickets/update", json={"ticket_id": tid, "priority": "P1"})
    assert resp.status_code == 200
    assert resp.json()["ticket"]["priority"] == "P1"
    audit = client.get("/helpdesk/audit").json()
    assert audit["updated_tickets"][0]["priority"] == "P1"


def test_bad_date_answers_like_claw_eval() -> None:
    client, _ = _client("T004_calendar_scheduling")
    resp = client.post("/calendar/events", json={"date": "02/21/2026"})
    assert (resp.status_code, resp.json()) == (200, {"error": "Invalid date format: 02/21/2026"})


def test_invalid_body_is_fastapi_422() -> None:
    client, _ = _client("T002_email_triage")
    resp = client.post("/gmail/messages/get", json={})
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "message_id"]


def test_gmail_audit_key_is_sent_messages() -> None:
    client, _ = _client("T002_email_triage")
    client.post("/gmail/send", json={"to": "a@b.c", "subject": "s", "body": "b"})
    audit = client.get("/gmail/audit").json()
    assert [m["to"] for m in audit["sent_messages"]] == ["a@b.c"]
    assert "sent" not in audit


def test_routes_claw_eval_lacks_are_404_not_found() -> None:
    client, _ = _client("T008_todo_management")
    resp = client.post("/todo/tasks/get", json={"task_id": "x"})
    assert (resp.status_code, resp.json()) == (404, {"detail": "Not Found"})


def test_every_tool_of_every_shared_task_exists() -> None:
    tasks, _ = _require()
    for d in sorted(tasks.iterdir()):
        if (d / "task.yaml").is_file():
            spec, _ = import_task(d)
            assert set(load_task(spec).tools) == set(spec.tools), d.name


def test_tools_the_issue_found_missing_exist() -> None:
    from coworkenv.services import claw

    for name, route in (
        ("crm_export_report", "/crm/export"),
        ("finance_report_submit", "/finance/report/submit"),
    ):
        tdef = claw.resolve_tool(name, route)
        assert tdef is not None
        assert tdef.method != "claw_not_served"
    assert claw.resolve_tool("inventory_list_items", "/inventory/products") is not None


def test_now_is_frozen_per_trial_so_a_run_replays() -> None:
    now = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
    first, _ = _client("T002_email_triage", now=now)
    again, _ = _client("T002_email_triage", now=now)
    a = first.post("/gmail/messages", json={}).json()
    b = again.post("/gmail/messages", json={}).json()
    assert a == b
    assert a["messages"]
    newest = max(m["date"] for m in a["messages"])
    assert newest == "2026-05-03T09:30:00Z"  # Claw-Eval's rule: the newest mail is one day old
    # the operator reads the frozen clock back, to line an external Claw-Eval service up with it
    token = first.app.state.operator_token  # type: ignore[attr-defined]
    state = first.get("/state", headers={"Authorization": f"Bearer {token}"}).json()
    assert state["now"] == now.isoformat()


def test_injected_faults_answer_with_claw_eval_bodies() -> None:
    from coworkenv.services.faults import FaultPlan

    tasks, _ = _require()
    spec, _ = import_task(tasks / "T002_email_triage")
    host = Host()
    host.add_task(spec)
    plan = FaultPlan(rate=1.0, rate_limit=1.0, server_error=0.0, latency=0.0)
    client = TestClient(create_app(host, default_trial="f", mcp=False, open_compat_grading=True))
    host.open_trial(spec.id, "f", faults=plan)
    resp = client.post("/gmail/messages", json={})
    assert resp.status_code == 429
    assert resp.json()["error"] == "rate_limit_exceeded"
    assert resp.headers["retry-after"] == "2"
    assert client.get("/gmail/audit").json()["calls"] == []  # a fault never reaches the handler's log


def test_post_trials_takes_the_recorded_now_to_replay() -> None:
    tasks, _ = _require()
    spec, _ = import_task(tasks / "T004_calendar_scheduling")
    host = Host()
    host.add_task(spec)
    app = create_app(host, mcp=False)
    client = TestClient(app, headers={"Authorization": f"Bearer {app.state.operator_token}"})
    bodies = []
    for tid in ("a", "b"):
        made = client.post(
            "/trials", json={"task_id": spec.id, "trial_id": tid, "now": "2026-07-01T08:00:00Z"}
        )
        assert made.status_code == 201
        assert made.json()["profile"] == "claw-eval"
        assert made.json()["now"] == "2026-07-01T08:00:00+00:00"
        prefix = made.json()["prefix"]  # the trial's capability URL
        bodies.append(client.post(f"{prefix}/calendar/events", json={"date": "2026-07-02", "days": 7}).json())
    assert bodies[0] == bodies[1]
    assert bodies[0]["events"]  # Claw-Eval's rule: the earliest event is the day after now
    bad = client.post("/trials", json={"task_id": spec.id, "now": "yesterday"})
    assert bad.status_code == 422


def test_agents_see_the_tasks_own_tool_descriptions_and_schemas() -> None:
    tasks, _ = _require()
    spec, _ = import_task(tasks / "T002_email_triage")
    tools = {t.name: t for t in load_task(spec).tools.values()}
    get = tools["gmail_get_message"]
    assert get.description == "Get the detailed content of an email by its message ID"
    assert get.input_schema()["required"] == ["message_id"]
    assert (
        get.openai_schema()["function"]["parameters"]["properties"]["message_id"]["description"]
        == "Message ID"
    )


def test_parity_command_measures_any_task_directory(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from coworkenv.cli import app

    tasks, checkout = _require()
    (tmp_path / "T008_todo_management").symlink_to(tasks / "T008_todo_management")
    result = CliRunner().invoke(app, ["parity", str(tmp_path), "--checkout", str(checkout), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["services"]["rate"] == 1.0
    assert "pairs equivalent" in data["services"]["summary"]


SEQUENCES = {
    "calendar": [
        ("/calendar/events/delete", {"event_id": "evt_002"}),
        ("/calendar/events/create", {"title": "A", "start_time": "2026-03-10T10:00", "end_time": "2026-03-10T11:00"}),  # noqa: E501
        ("/calendar/events/create", {"title": "B", "start_time": "2026-03-11T10:00", "end_time": "2026-03-11T11:00"}),  # noqa: E501
        ("/calendar/events/delete", {"event_id": "evt_008"}),
        ("/calendar/events", {}),
    ],
    "todo": [
        ("/todo/tasks/delete", {"task_id": "todo_002"}),
        ("/todo/tasks/create", {"title": "A"}),
        ("/todo/tasks/create", {"title": "B"}),
        ("/todo/tasks/update", {"task_id": "todo_011", "status": "completed"}),
        ("/todo/tasks", {}),
    ],
    "scheduler": [
        ("/scheduler/jobs/delete", {"job_id": "JOB-002"}),
        ("/scheduler/jobs/create", {"name": "A", "cron_expression": "0 1 * * *", "action": "a"}),
        ("/scheduler/jobs/create", {"name": "B", "cron_expression": "0 2 * * *", "action": "b"}),
        ("/scheduler/jobs/get", {"job_id": "JOB-011"}),
        ("/scheduler/jobs", {}),
    ],
}  # fmt: skip


def test_creates_after_a_delete_number_and_keep_duplicates_as_claw_eval_does() -> None:
    """Claw-Eval's services keep rows in a list: after a delete the next create is numbered
    ``len + 1`` — an id a record may already hold, and both are kept (reads, updates and deletes
    act on the first). Ours overwrote by id (JOB-010 then JOB-010 again). The sequences answer
    alike, audits included."""
    from coworkenv.claweval.differential import Sides

    tasks, checkout = _require()
    names = ["T004_calendar_scheduling", "T008_todo_management", "T034_ops_review_dashboard"]
    sides = Sides([tasks / n for n in names], checkout)
    compared = 0
    for t in sides.tasks({}):
        for svc in sorted(t.running & set(SEQUENCES)):
            for route, args in SEQUENCES[svc]:
                assert compare(sides.theirs(route, args), sides.ours(route, args)) is None, (svc, route)
                compared += 1
            audit = compare((200, sides.upstream.audit(svc)), (200, sides.our_audit(svc)))
            assert audit is None, (svc, audit)
    assert compared == 15


def test_a_table_keeps_appended_duplicates_in_list_order() -> None:
    from coworkenv.services.service import Table

    journal: list[object] = []
    base = {"J1": {"id": "J1", "v": 0}, "J2": {"id": "J2", "v": 0}}
    t = Table(base, "id", journal)
    t.append({"id": "J2", "v": 1})  # the key is taken: both kept, the first answers
    assert [dict(r) for r in t] == [{"id": "J1", "v": 0}, {"id": "J2", "v": 0}, {"id": "J2", "v": 1}]
    assert dict(t.get("J2") or {}) == {"id": "J2", "v": 0}
    t.update("J2", v=5)
    assert [r["v"] for r in t] == [0, 5, 1]
    t.delete("J2")  # the first goes; the appended one answers now
    assert dict(t.get("J2") or {}) == {"id": "J2", "v": 1}
    t.update("J2", v=7)
    assert [dict(r) for r in t] == [{"id": "J1", "v": 0}, {"id": "J2", "v": 7}]
    for entry in reversed(journal):  # a rejected call's journal undone: back to the start
        table, ident, previous, had = entry  # type: ignore[misc]
        table._undo(ident, previous, had)
    assert [dict(r) for r in t] == [{"id": "J1", "v": 0}, {"id": "J2", "v": 0}]
    t.append({"id": "J2", "v": 2})
    t.reset()
    assert len(t) == 2


def test_bodiless_and_non_object_requests_answer_as_claw_eval_on_every_shared_task() -> None:
    """A request with no body (or JSON ``null``) and one whose body is not an object, on every
    declared route of the 78 shared tasks: FastAPI's answers there — a list handler runs with its
    defaults (``/calendar/events`` from 2026-03-02), a required body is a 422 on ``["body"]``, a
    non-object a ``model_attributes_type`` 422 — and the audits after them, alike here."""
    from coworkenv.claweval.differential import Sides, _body
    from coworkenv.importers.claw_eval import task_dirs

    tasks, checkout = _require()
    sides = Sides(task_dirs(tasks), checkout)
    differences, compared = [], 0
    for t in sides.tasks({}):
        for route in sorted(set(t.routes.values())):
            svc = route.strip("/").split("/", 1)[0]
            if svc not in t.running:
                continue
            for kind, send in (("no body", {}), ("null", {"content": b"null"}), ("list", {"json": [1]})):
                headers = {"content-type": "application/json"}
                theirs = sides.upstream.clients[svc].post(route, headers=headers, **send)
                ours = sides.client.post(route, headers=headers, **send)
                diff = compare((theirs.status_code, _body(theirs)), (ours.status_code, _body(ours)))
                compared += 1
                if diff is not None:
                    differences.append(f"{t.task_dir.name} {route} {kind}: {diff[:160]}")
        for svc in sorted(t.running):
            diff = compare((200, sides.upstream.audit(svc)), (200, sides.our_audit(svc)))
            if diff is not None:
                differences.append(f"{t.task_dir.name} {svc}/audit: {diff[:160]}")
    assert compared > 1000
    assert differences == []
