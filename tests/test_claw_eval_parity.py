"""Claw-Eval parity of the services: the Claw-Eval profile answers as Claw-Eval's mock services.

The differential test runs Claw-Eval's own ``mock_services`` (from ``../shared/claw-eval/upstream``)
beside our HTTP face on every declared tool of all 78 shared tasks — by the equivalence rules and,
with the clocks aligned, byte for byte (``coworkenv parity --mode identical``). Under ``CI=true`` a
missing checkout fails instead of skipping.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from coworkenv.claweval.differential import Report, compare, run
from coworkenv.claweval.identical import (
    KINDS,
    Answer,
    IdenticalReport,
    RawPair,
    Request,
    describe,
    set_order_only,
)
from coworkenv.claweval.identical import run as run_identical
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


# ---------------------------------------------------------------- byte identity (--mode identical)

FIXTURE_DEFAULTS = {
    ("T014_meeting_notes", "notes"),
    ("T016_kb_search", "kb"),
    ("T020_inventory_check", "inventory"),
    ("T022_newsletter_curation", "rss"),
    ("T028_api_config_audit", "config"),
}
"""The deliberate exemption the importer declares: these tasks' task.yaml sets no ``*_FIXTURES``, so
Claw-Eval's server serves its built-in default (the zh twin's records); we serve the task's own."""


@pytest.fixture(scope="module")
def identical_report() -> IdenticalReport:
    tasks, checkout = _require()
    return run_identical(tasks, checkout)


def test_the_shared_tasks_answer_byte_for_byte_as_claw_eval(identical_report: IdenticalReport) -> None:
    """Every request kind on all 78 shared tasks: status, media type and body bytes the same, clocks
    aligned. The only non-identical pairs are the two deliberate kinds, listed here exactly: the
    importer's fixture-default tasks (their fixture pairs and the audit after them) and the order
    of Claw-Eval's rss ``categories`` sets (and nothing else in those bodies)."""
    r = identical_report
    assert not r.failed_tasks
    assert r.count("different") == 0, r.summary() + "\n" + r.differences()
    probed = {p.task_id for p in r.pairs}
    assert len(probed) == N_TASKS - 2  # T097/T098 read documents, which Claw-Eval serves from files
    assert {p.request.kind for p in r.pairs} == set(KINDS)
    assert all(r.count("identical", k) >= 20 for k in KINDS), r.by_kind()
    fixture_default = {
        (p.task_id, p.request.route.strip("/").split("/")[0])
        for p in r.pairs
        if p.reason == "fixture-default"
    }
    assert fixture_default == FIXTURE_DEFAULTS
    assert all(p.request.kind in ("fixture", "audit") for p in r.pairs if p.reason == "fixture-default")
    set_order = {p.request.route for p in r.pairs if p.reason == "set-order"}
    assert set_order <= {"/rss/feeds", "/rss/audit"}, set_order
    assert r.count("deliberate") == sum(r.reasons().values())
    assert r.count("identical") >= 0.98 * len(r.pairs)


def test_byte_identity_covers_the_cases_of_issue_30(identical_report: IdenticalReport) -> None:
    """Ids and duplicates after a delete then create; bodiless list calls, audited; 422 shapes of
    bodiless, ``null`` and non-object bodies; fixture defaults as Claw-Eval resolves them."""
    r = identical_report

    def pairs(kind: str, route: str, label: str = "") -> list[RawPair]:
        return [
            p
            for p in r.pairs
            if p.request.kind == kind and p.request.route == route and label in p.request.label
        ]

    duplicates = [p for p in r.pairs if p.request.kind == "sequence" and "a duplicate id" in p.request.label]
    assert {p.request.route.split("/")[1] for p in duplicates} == {"calendar", "todo"}  # ids from 1
    assert all(p.verdict == "identical" for p in duplicates)
    sequences = {p.request.route.split("/")[1] for p in r.pairs if p.request.kind == "sequence"}
    assert sequences == {"calendar", "todo", "scheduler"}  # every service that creates and deletes
    bodiless_list = [p for p in pairs("bodiless", "/gmail/messages") if p.request.body is None]
    assert bodiless_list
    assert all(p.verdict == "identical" for p in bodiless_list)
    audited = pairs("audit", "/gmail/audit", "after bodiless")
    assert audited
    assert all(p.verdict == "identical" for p in audited)
    assert all(b'"endpoint":"/gmail/messages"' in p.ours.body for p in audited)
    for body, kind in (
        (None, b'"missing"'),
        (b"null", b'"model_attributes_type"'),
        (b"[1]", b"model_attributes"),
    ):
        shapes = [p for p in r.pairs if p.request.route == "/gmail/send" and p.request.body == body]
        assert shapes
        assert all(p.verdict == "identical" and p.ours.status == 422 for p in shapes)
        assert all(kind in p.ours.body for p in shapes)
    assert any(p.verdict == "identical" for p in pairs("fixture", "/notes/list"))  # T013zh: its own default


def test_the_byte_comparison_can_fail() -> None:
    same = Answer(200, "application/json", b'{"a":1,"b":2}')
    assert describe(same, same) is None
    assert describe(same, Answer(200, "application/json", b'{"b":2,"a":1}'))  # key order counts
    assert describe(same, Answer(200, "application/json", b'{"a":1.0,"b":2}'))  # number spelling counts
    assert describe(same, Answer(200, "application/json", b'{"a": 1, "b": 2}'))  # whitespace counts
    assert describe(same, Answer(200, "text/plain", same.body))
    assert describe(same, Answer(201, "application/json", same.body))
    feeds = b'{"feeds":[{"source":"s","categories":["b","a"],"article_count":2}]}'
    ours = Answer(200, "application/json", feeds.replace(b'["b","a"]', b'["a","b"]'))
    assert set_order_only(Answer(200, "application/json", feeds), ours)
    other = b'{"feeds":[{"source":"s","tags":["b","a"],"article_count":2}]}'
    assert not set_order_only(
        Answer(200, "application/json", other),
        Answer(200, "application/json", other.replace(b'["b","a"]', b'["a","b"]')),
    )
    assert not set_order_only(
        Answer(200, "application/json", feeds),
        Answer(200, "application/json", ours.body.replace(b"2}", b"3}")),
    )


def test_unaligned_clocks_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without lining Claw-Eval's clock up with our trial's, shifted gmail dates and timestamps
    differ: the mode reports them rather than tolerating them."""
    from coworkenv.claweval.upstream import UpstreamServices

    tasks, checkout = _require()
    aligned = run_identical(tasks, checkout, only=["T002_email_triage"])
    assert aligned.count("different") == 0, aligned.differences()
    real = UpstreamServices.freeze_clock

    def late(self: UpstreamServices, instant: datetime | None) -> None:
        real(self, None if instant is None else instant + timedelta(seconds=1))

    monkeypatch.setattr(UpstreamServices, "freeze_clock", late)
    off = run_identical(tasks, checkout, only=["T002_email_triage"])
    assert off.count("different") > 0
    assert "within the equivalence rules" in off.differences()  # what --mode equivalent lets pass


def test_the_operator_reads_the_clock_claw_eval_is_aligned_to() -> None:
    """Claw-Eval's server, frozen at our trial's ``now`` (read from ``/state``), stamps it."""
    from coworkenv.claweval.differential import Sides

    tasks, checkout = _require()
    sides = Sides([tasks / "T128_ticket_assignment"], checkout)
    (t,) = list(sides.tasks({}))
    now = datetime.fromisoformat(sides.client.get("/state", headers=sides.operator).json()["now"])
    assert now == t.trial.clock.now()
    sides.upstream.freeze_clock(now)
    sides.upstream.post("/helpdesk/tickets", {})
    assert sides.upstream.audit("helpdesk")["calls"][-1]["timestamp"] == now.isoformat()
    sides.upstream.freeze_clock(None)
    sides.upstream.post("/helpdesk/tickets", {})
    assert sides.upstream.audit("helpdesk")["calls"][-1]["timestamp"] != now.isoformat()


def test_a_null_body_is_fastapis_model_attributes_422_and_no_body_is_missing() -> None:
    client, _ = _client("T002_email_triage")
    headers = {"content-type": "application/json"}
    null = client.post("/gmail/send", content=b"null", headers=headers)
    assert null.status_code == 422
    assert null.json()["detail"] == [
        {
            "type": "model_attributes_type",
            "loc": ["body"],
            "msg": "Input should be a valid dictionary or object to extract fields from",
            "input": None,
        }
    ]
    absent = client.post("/gmail/send", headers=headers)
    assert absent.json()["detail"][0]["type"] == "missing"
    listed = client.post("/gmail/messages", content=b"null", headers=headers)  # an optional body: defaults
    assert listed.status_code == 200
    assert listed.json()["messages"]


def test_audit_keys_come_in_claw_eval_order() -> None:
    client, _ = _client("T002_email_triage")
    assert list(client.get("/gmail/audit").json()) == ["calls", "sent_messages", "drafts"]


def test_parity_command_has_an_identical_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from coworkenv.claweval import identical
    from coworkenv.cli import app

    tasks, checkout = _require()
    (tmp_path / "T008_todo_management").symlink_to(tasks / "T008_todo_management")
    args = ["parity", str(tmp_path), "--checkout", str(checkout), "--mode", "identical", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["services"]
    assert data["mode"] == "identical"
    assert data["different"] == 0
    assert data["identical"] == data["pairs"] > 40
    assert set(data["by_kind"]) == set(KINDS)
    wrong = Answer(200, "application/json", b"{}")
    bad = IdenticalReport(pairs=[RawPair("T", Request("valid", "/x", b"{}"), wrong, wrong, "different", "d")])
    monkeypatch.setattr(identical, "run", lambda *a, **k: bad)
    failed = CliRunner().invoke(app, args[:-1])
    assert failed.exit_code == 1
    assert "different (first 1 of 1)" in failed.output
