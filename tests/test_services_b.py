"""Services calendar, inventory, scheduler, todo, notes, config and rss.

Claw-Eval compatibility (every fixture file of the 78 reference tasks loads unchanged; tool names,
routes, argument names and audit keys match the task files) and behaviour through Host/Trial:
response shapes, filters, audit collections, and that a rejected call leaves the state untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from coworkenv.services import registry
from coworkenv.services.calendar import Calendar
from coworkenv.services.config import Config
from coworkenv.services.inventory import Inventory
from coworkenv.services.notes import Notes
from coworkenv.services.rss import Rss
from coworkenv.services.scheduler import Scheduler
from coworkenv.services.service import Service
from coworkenv.services.todo import Todo
from coworkenv.services.trial import Host, Trial
from coworkenv.spec import TaskSpec
from tests.conftest import claw_eval_dir

CLAW = claw_eval_dir() or Path("/nonexistent/claw-eval/tasks")
MINE: dict[str, type[Service]] = {
    "calendar": Calendar,
    "inventory": Inventory,
    "scheduler": Scheduler,
    "todo": Todo,
    "notes": Notes,
    "config": Config,
    "rss": Rss,
}
# Claw-Eval serves these aliases on the route of the tool they alias; our routes are unique.
ALIAS_ROUTES = {
    "inventory_get_item": ("/inventory/products/get", "/inventory/items/get"),
    "inventory_list_items": ("/inventory/products", "/inventory/items"),
}
needs_claw = pytest.mark.skipif(
    not CLAW.is_dir(), reason="Claw-Eval tasks not found (set COWORKENV_CLAW_EVAL)"
)


def _fixture_files() -> list[tuple[str, str, Path]]:
    if not CLAW.is_dir():
        return []
    return [
        (p.parts[-4], p.parts[-2], p) for svc in MINE for p in sorted(CLAW.glob(f"*/fixtures/{svc}/*.json"))
    ]


def _task_files() -> list[Path]:
    return sorted(CLAW.glob("*/task.yaml")) if CLAW.is_dir() else []


def _tasks_using_mine() -> list[Path]:
    return [
        p for p in _task_files() if any(s["name"] in MINE for s in yaml.safe_load(p.read_text())["services"])
    ]


def _mine(tool_name: str) -> bool:
    return tool_name.split("_", 1)[0] in MINE


# ---------------------------------------------------------------- helpers


def make_trial(
    services: Mapping[str, Mapping[str, list[dict[str, Any]]]],
    today: date = date(2026, 3, 2),
    tools: list[str] | None = None,
) -> Trial:
    names = tools or [t for s in services for t in MINE[s].tool_table]
    spec = TaskSpec(
        id="svc-b",
        name="services b",
        category="test",
        difficulty="easy",
        mock_today=today,
        request="test",
        services={k: dict(v) for k, v in services.items()},
        tools=tuple(names),
    )
    host = Host()
    host.add_task(spec)
    return host.open_trial("svc-b")


def ok(trial: Trial, tool: str, **args: Any) -> Any:
    res = trial.call(tool, args)
    assert res.ok, (tool, args, res.body)
    return res.body


def rejected(trial: Trial, tool: str, code: str = "invalid_arguments", **args: Any) -> dict[str, Any]:
    before = trial.state_hash()
    res = trial.call(tool, args)
    assert not res.ok, (tool, args, res.body)
    assert res.body["code"] == code, res.body
    assert isinstance(res.body["error"], str)
    assert trial.state_hash() == before
    return dict(res.body)


def claw_trial(task: str, svc: str, today: date) -> Trial:
    files = {
        p.name: json.loads(p.read_text()) for p in sorted((CLAW / task / "fixtures" / svc).glob("*.json"))
    }
    return make_trial({svc: files}, today)


# ---------------------------------------------------------------- Claw-Eval compatibility


@needs_claw
def test_fixture_inventory_is_complete() -> None:
    found = {svc for _, svc, _ in _fixture_files()}
    assert found == set(MINE)
    assert len(_task_files()) == 78


@needs_claw
@pytest.mark.parametrize(("task", "svc", "path"), _fixture_files(), ids=lambda v: str(v)[-40:])
def test_every_claw_fixture_loads_unchanged(task: str, svc: str, path: Path) -> None:
    rows = json.loads(path.read_text())
    cls = MINE[svc]
    fixture = cls.load_fixture({path.name: rows}, source=str(path))
    (tname,) = [n for n, d in cls.tables.items() if path.name in (d.fixture, *d.aliases)]
    table = fixture.tables[tname]
    key = cls.tables[tname].key
    assert len(table) == len(rows)
    for row in rows:
        assert dict(table[str(row[key])]) == row


@needs_claw
def test_claw_tools_routes_and_arguments_match() -> None:
    seen: set[str] = set()
    for path in _task_files():
        task = yaml.safe_load(path.read_text())
        endpoints = {e["tool_name"]: e["url"] for e in task.get("tool_endpoints", [])}
        for t in task.get("tools", []):
            name = t["name"]
            if not _mine(name):
                continue
            seen.add(name)
            tdef = registry.TOOLS.get(name)
            assert tdef is not None, f"{path.parent.name}: missing tool {name}"
            claw_route = "/" + endpoints[name].split("/", 3)[3]
            assert (claw_route, tdef.route) in ((claw_route, claw_route), ALIAS_ROUTES.get(name)), name
            ours = tdef.input_schema()
            theirs = t.get("input_schema", {})
            for prop, schema in theirs.get("properties", {}).items():
                assert prop in ours["properties"], f"{path.parent.name}: {name} lacks argument {prop}"
                mine = ours["properties"][prop]
                assert mine.get("type") == schema.get("type"), (name, prop, mine, schema)
            extra_required = set(ours["required"]) - set(theirs.get("required", []))
            assert not extra_required, f"{path.parent.name}: {name} requires {extra_required}"
    assert len(seen) == 30  # distinct tools of these services across the 78 tasks


@needs_claw
def test_claw_expected_actions_and_safety_tools_exist() -> None:
    for path in _task_files():
        task = yaml.safe_load(path.read_text())
        for a in task.get("expected_actions") or []:
            if a["service"] in MINE:
                assert a["action_key"] in MINE[a["service"]].audit_keys, (path.parent.name, a)
        for s in task.get("safety_checks") or []:
            tool = s.get("tool_name", "")
            # config_notify: a name only T033/T034's safety checks use; Claw-Eval has no such endpoint
            if _mine(tool) and tool != "config_notify":
                assert tool in registry.TOOLS, (path.parent.name, tool)


def test_audit_keys_cover_claw_eval_collections() -> None:
    assert set(Calendar.audit_keys) >= {"deleted", "created_events"}
    assert set(Todo.audit_keys) >= {"deleted", "updated_tasks", "created_tasks"}
    assert set(Notes.audit_keys) >= {"shared"}
    assert set(Inventory.audit_keys) >= {"orders"}
    assert set(Rss.audit_keys) >= {"published"}
    assert set(Config.audit_keys) >= {"updates", "notifications"}
    assert set(Scheduler.audit_keys) >= {"created_jobs", "updated_jobs", "deleted_jobs", "runs"}
    for cls in MINE.values():
        for tdef in cls.tool_table.values():
            assert (tdef.kind == "write") == (tdef.audit is not None), tdef.name


@needs_claw
@pytest.mark.parametrize("path", _tasks_using_mine(), ids=lambda p: p.parent.name)
def test_claw_task_list_tools_answer(path: Path) -> None:
    """Each Claw-Eval task's fixtures, served through a trial: every list tool answers."""
    task = yaml.safe_load(path.read_text())
    svcs = [s["name"] for s in task["services"] if s["name"] in MINE]
    services = {
        s: {p.name: json.loads(p.read_text()) for p in sorted((path.parent / "fixtures" / s).glob("*.json"))}
        for s in svcs
    }
    tools = [t["name"] for t in task["tools"] if _mine(t["name"])]
    trial = make_trial(services, tools=tools)
    for name in tools:
        tdef = registry.TOOLS[name]
        if tdef.kind == "read" and not tdef.input_schema()["required"]:
            body = ok(trial, name)
            assert isinstance(body.get("total"), int), (name, body)


# ---------------------------------------------------------------- calendar


EVENTS: list[dict[str, Any]] = [
    {
        "event_id": "e1",
        "title": "Standup",
        "start_time": "2026-03-02T09:00:00Z",
        "end_time": "2026-03-02T09:30:00Z",
        "attendees": ["Mike Li", "Sarah Wang"],
        "location": "A",
        "recurring": True,
    },
    {
        "event_id": "e2",
        "title": "Review",
        "start_time": "2026-03-03T10:00:00Z",
        "end_time": "2026-03-03T11:00:00Z",
        "attendees": ["mike.li@corp.com"],
        "location": "B",
        "recurring": False,
    },
    {
        "event_id": "e3",
        "title": "Offsite",
        "start_time": "2026-03-05T07:00:00+08:00",
        "end_time": "2026-03-05T09:00:00+08:00",
        "organizer": "Sarah Wang",
        "attendees": ["All"],
    },
    {
        "event_id": "e0",
        "title": "Early",
        "start_time": "2026-03-02T08:00:00Z",
        "end_time": "2026-03-02T08:30:00Z",
        "attendees": [],
    },
]


def test_calendar_list_events_ranges() -> None:
    t = make_trial({"calendar": {"events.json": EVENTS}})
    today = ok(t, "calendar_list_events")
    assert [e["event_id"] for e in today["events"]] == ["e0", "e1"]  # mock_today, sorted by start
    assert today["total"] == 2
    assert ok(t, "calendar_list_events", date="2026-03-02", days=2)["total"] == 3
    span = ok(t, "calendar_list_events", start_date="2026-03-03", end_date="2026-03-05")
    assert [e["event_id"] for e in span["events"]] == ["e2", "e3"]  # e3 is on the 5th in its own offset
    assert ok(t, "calendar_list_events", date="2026-03-04")["events"] == []
    assert ok(t, "calendar_list_events", date="2026-03-02")["events"][1] == EVENTS[0]
    rejected(t, "calendar_list_events", date="March 2nd")
    rejected(t, "calendar_list_events", start_date="2026-03-05", end_date="2026-03-01")
    rejected(t, "calendar_list_events", date="2026-03-02", days=0)
    rejected(t, "calendar_list_events", date="2026-03-02", bogus=1)


def test_calendar_user_events_and_get() -> None:
    t = make_trial({"calendar": {"events.json": EVENTS}})
    mike = ok(t, "calendar_get_user_events", user="mike", date="2026-03-02")
    assert mike["user"] == "mike"
    assert [e["event_id"] for e in mike["events"]] == ["e1"]
    assert ok(t, "calendar_get_user_events", user="Sarah Wang", date="2026-03-05")["total"] == 1  # organizer
    assert ok(t, "calendar_get_user_events", user="Kevin", date="2026-03-02")["total"] == 0
    assert ok(t, "calendar_get_event", event_id="e2")["title"] == "Review"
    rejected(t, "calendar_get_event", code="not_found", event_id="nope")
    rejected(t, "calendar_get_user_events", user="Mike")  # date missing


def test_calendar_create_and_delete_audit() -> None:
    t = make_trial({"calendar": {"events.json": EVENTS}})
    body = ok(
        t,
        "calendar_create_event",
        title="Project Sync",
        start_time="2026-03-02T14:30:00Z",
        end_time="2026-03-02T15:30:00Z",
        attendees=["Mike Li", "Sarah Wang"],
    )
    assert body["status"] == "created"
    new_id = body["event"]["event_id"]
    assert new_id not in {e["event_id"] for e in EVENTS}
    assert ok(t, "calendar_get_event", event_id=new_id)["attendees"] == ["Mike Li", "Sarah Wang"]
    assert ok(t, "calendar_list_events", date="2026-03-02")["total"] == 3
    audit = t.audit_collections()["calendar"]
    assert [e["title"] for e in audit["created_events"]] == ["Project Sync"]
    rejected(
        t,
        "calendar_create_event",
        title="Bad",
        start_time="2026-03-02T15:00:00Z",
        end_time="2026-03-02T14:00:00Z",
    )
    rejected(t, "calendar_create_event", title="Bad", start_time="tomorrow", end_time="later")
    rejected(
        t,
        "calendar_create_event",
        title="",
        start_time="2026-03-02T15:00:00Z",
        end_time="2026-03-02T16:00:00Z",
    )
    rejected(t, "calendar_create_event", title="No end", start_time="2026-03-02T15:00:00Z")
    deleted = ok(t, "calendar_delete_event", event_id="e1")
    assert deleted == {"status": "deleted", "event": EVENTS[0]}
    assert t.audit_collections()["calendar"]["deleted"] == [EVENTS[0]]
    rejected(t, "calendar_delete_event", code="not_found", event_id="e1")
    assert "created_events" in t.claw_eval_audit("calendar")


@needs_claw
def test_calendar_claw_t004_day() -> None:
    t = claw_trial("T004_calendar_scheduling", "calendar", date(2026, 3, 2))
    assert ok(t, "calendar_list_events", date="2026-03-02")["total"] == 7
    mike = ok(t, "calendar_get_user_events", user="Mike", date="2026-03-02")
    assert {e["event_id"] for e in mike["events"]} == {"evt_001", "evt_002", "evt_006"}
    created = ok(
        t,
        "calendar_create_event",
        title="Project Sync",
        start_time="2026-03-02T14:30:00Z",
        end_time="2026-03-02T15:30:00Z",
    )
    assert created["event"]["event_id"] == "evt_008"


# ---------------------------------------------------------------- inventory


PRODUCTS: list[dict[str, Any]] = [
    {
        "product_id": "P1",
        "name": "Earbuds",
        "category": "Electronics",
        "current_stock": 3,
        "min_stock_threshold": 20,
        "supplier": "Xinda",
    },
    {
        "product_id": "P2",
        "name": "Cable",
        "category": "Accessories",
        "current_stock": 450,
        "min_stock_threshold": 100,
        "supplier": "Huatong",
    },
    {
        "product_id": "P3",
        "name": "Watch",
        "category": "Electronics",
        "current_stock": 0,
        "min_stock_threshold": 15,
    },
    {
        "product_id": "P4",
        "name": "Hub",
        "category": "Accessories",
        "current_stock": 0,
        "status": "backordered",
    },
]
ITEMS: list[dict[str, Any]] = [
    {
        "product_id": "I1",
        "name": "Flour",
        "category": "Raw",
        "quantity": 5,
        "reorder_level": 10,
        "unit": "kg",
    },
    {
        "product_id": "I2",
        "name": "Sugar",
        "category": "Raw",
        "quantity": 50,
        "reorder_level": 10,
        "unit": "kg",
    },
]


def test_inventory_list_filters_and_status() -> None:
    t = make_trial({"inventory": {"products.json": PRODUCTS}})
    body = ok(t, "inventory_list_products")
    assert body["total"] == 4
    assert body["products"][0] == PRODUCTS[0]
    assert [
        p["product_id"] for p in ok(t, "inventory_list_products", category="electronics")["products"]
    ] == ["P1", "P3"]
    assert [p["product_id"] for p in ok(t, "inventory_list_products", status="low_stock")["products"]] == [
        "P1"
    ]
    assert [p["product_id"] for p in ok(t, "inventory_list_products", status="out_of_stock")["products"]] == [
        "P3"
    ]
    assert [p["product_id"] for p in ok(t, "inventory_list_products", status="backordered")["products"]] == [
        "P4"
    ]
    assert ok(t, "inventory_list_items", category="Accessories") == ok(
        t, "inventory_list_products", category="Accessories"
    )
    assert (
        ok(t, "inventory_get_item", product_id="P2")
        == ok(t, "inventory_get_product", product_id="P2")
        == PRODUCTS[1]
    )
    rejected(t, "inventory_get_product", code="not_found", product_id="P9")
    rejected(t, "inventory_get_item", code="not_found", product_id="P9")


def test_inventory_items_fixture_and_orders() -> None:
    t = make_trial({"inventory": {"items.json": ITEMS}})
    assert [p["product_id"] for p in ok(t, "inventory_list_items", status="low_stock")["products"]] == ["I1"]
    order = ok(t, "inventory_create_order", product_id="I1", quantity=20)
    assert order["status"] == "created"
    assert order["order"]["product_id"] == "I1"
    assert order["order"]["quantity"] == 20
    ok(t, "inventory_create_order", product_id="I2", quantity=5, supplier="Acme")
    orders = t.audit_collections()["inventory"]["orders"]
    assert [(o["product_id"], o["quantity"], o["supplier"]) for o in orders] == [
        ("I1", 20, None),
        ("I2", 5, "Acme"),
    ]
    rejected(t, "inventory_create_order", code="not_found", product_id="nope", quantity=1)
    rejected(t, "inventory_create_order", product_id="I1", quantity=0)
    rejected(t, "inventory_create_order", product_id="I1", quantity="many")
    rejected(t, "inventory_create_order", product_id="I1")
    assert len(t.audit_collections()["inventory"]["orders"]) == 2


def test_inventory_order_defaults_to_product_supplier() -> None:
    t = make_trial({"inventory": {"products.json": PRODUCTS}})
    assert ok(t, "inventory_create_order", product_id="P1", quantity=40)["order"]["supplier"] == "Xinda"


def test_two_fixture_files_merge_and_duplicates_fail() -> None:
    from coworkenv.errors import SpecError

    fx = Inventory.load_fixture({"products.json": PRODUCTS, "items.json": ITEMS})
    assert len(fx.tables["products"]) == 6
    with pytest.raises(SpecError, match="duplicate id"):
        Inventory.load_fixture({"products.json": PRODUCTS, "items.json": PRODUCTS[:1]})
    with pytest.raises(SpecError, match="unknown table"):
        Inventory.load_fixture({"stock.json": PRODUCTS})


# ---------------------------------------------------------------- scheduler


JOBS: list[dict[str, Any]] = [
    {
        "job_id": "JOB-1",
        "name": "Backup",
        "cron_expression": "0 2 * * *",
        "enabled": True,
        "last_status": "success",
        "last_run": "2026-03-01T02:00:00Z",
        "next_run": "2026-03-02T02:00:00Z",
        "tags": ["backup", "critical"],
        "execution_history": [
            {"run_at": "2026-03-01T02:00:00Z", "status": "success"},
            {"run_at": "2026-02-28T02:00:00Z", "status": "success"},
        ],
    },
    {
        "job_id": "JOB-2",
        "name": "ERP sync",
        "cron_expression": "*/30 * * * *",
        "enabled": True,
        "last_status": "failed",
        "last_run": "2026-03-01T18:30:00Z",
        "tags": ["integration"],
        "execution_history": [
            {"run_at": "2026-03-01T18:30:00Z", "status": "failed", "error": "ERP unreachable"}
        ],
    },
    {
        "job_id": "JOB-3",
        "name": "Archive",
        "cron_expression": "0 3 * * *",
        "enabled": False,
        "status": "disabled",
        "last_status": "failed",
        "tags": ["logs"],
        "execution_history": [],
    },
]


def test_scheduler_list_filters() -> None:
    t = make_trial({"scheduler": {"jobs.json": JOBS}})
    body = ok(t, "scheduler_list_jobs")
    assert body["total"] == 3
    assert set(body["jobs"][0]) == {
        "job_id",
        "name",
        "cron_expression",
        "enabled",
        "last_status",
        "last_run",
        "next_run",
        "tags",
    }

    def ids(**kw: Any) -> list[str]:
        return [j["job_id"] for j in ok(t, "scheduler_list_jobs", **kw)["jobs"]]

    assert ids(status="failed") == ["JOB-2", "JOB-3"]
    assert ids(status="all") == ["JOB-1", "JOB-2", "JOB-3"]
    assert ids(status="disabled") == ["JOB-3"]
    assert ids(enabled=True) == ["JOB-1", "JOB-2"]
    assert ids(status="failed", enabled=True) == ["JOB-2"]
    assert ids(tag="CRITICAL") == ["JOB-1"]
    rejected(t, "scheduler_list_jobs", enabled="sometimes")


def test_scheduler_get_and_history() -> None:
    t = make_trial({"scheduler": {"jobs.json": JOBS}})
    assert ok(t, "scheduler_get_job", job_id="JOB-2") == JOBS[1]
    h = ok(t, "scheduler_job_history", job_id="JOB-1", limit=1)
    assert h == {"job_id": "JOB-1", "history": JOBS[0]["execution_history"][:1], "total": 2}
    rejected(t, "scheduler_get_job", code="not_found", job_id="JOB-9")
    rejected(t, "scheduler_job_history", code="not_found", job_id="JOB-9")
    rejected(t, "scheduler_job_history", job_id="JOB-1", limit=0)


def test_scheduler_writes_and_audit() -> None:
    t = make_trial({"scheduler": {"jobs.json": JOBS}})
    upd = ok(t, "scheduler_update_job", job_id="JOB-3", enabled=True)
    assert upd["job"]["enabled"] is True
    assert upd["job"]["status"] == "enabled"
    run = ok(t, "scheduler_run_job", job_id="JOB-2")
    assert run["run"]["status"] == "failed"
    assert run["run"]["error"] == "ERP unreachable"
    job = ok(t, "scheduler_get_job", job_id="JOB-2")
    assert job["execution_history"][0] == run["run"]
    assert len(job["execution_history"]) == 2
    assert ok(t, "scheduler_run_job", job_id="JOB-1")["run"]["status"] == "success"
    created = ok(t, "scheduler_create_job", name="Cleanup", cron_expression="0 4 * * *", action="cleanup.sh")
    new_id = created["job"]["job_id"]
    assert new_id not in {j["job_id"] for j in JOBS}
    ok(t, "scheduler_delete_job", job_id=new_id)
    audit = t.audit_collections()["scheduler"]
    assert [r["job_id"] for r in audit["updated_jobs"]] == ["JOB-3"]
    assert [r["job_id"] for r in audit["runs"]] == ["JOB-2", "JOB-1"]
    assert (
        [r["job_id"] for r in audit["created_jobs"]]
        == [r["job_id"] for r in audit["deleted_jobs"]]
        == [new_id]
    )

    ok(t, "scheduler_update_job", job_id="JOB-1", enabled=False)
    rejected(t, "scheduler_run_job", job_id="JOB-1")  # disabled
    rejected(t, "scheduler_update_job", job_id="JOB-2")  # nothing to change
    rejected(t, "scheduler_update_job", job_id="JOB-2", cron_expression="every hour")
    rejected(t, "scheduler_update_job", code="not_found", job_id="JOB-9", enabled=True)
    rejected(t, "scheduler_create_job", name="x", cron_expression="* *", action="a")
    rejected(t, "scheduler_delete_job", code="not_found", job_id="JOB-9")


def test_scheduler_manual_run_status_override() -> None:
    jobs = [{**JOBS[1], "manual_run_status": "success"}]
    t = make_trial({"scheduler": {"jobs.json": jobs}})
    assert ok(t, "scheduler_run_job", job_id="JOB-2")["run"] == {
        "run_at": "2026-03-02T12:00:00+00:00",
        "status": "success",
        "trigger": "manual",
    }
    assert ok(t, "scheduler_get_job", job_id="JOB-2")["last_status"] == "success"


# ---------------------------------------------------------------- todo


TASKS: list[dict[str, Any]] = [
    {
        "task_id": "todo_001",
        "title": "Q1 report",
        "status": "pending",
        "priority": "high",
        "due_date": "2026-03-05",
        "tags": ["report"],
        "created_at": "2026-02-20T10:00:00Z",
    },
    {
        "task_id": "todo_002",
        "title": "Dentist",
        "status": "pending",
        "priority": "low",
        "due_date": None,
        "tags": [],
        "created_at": "2026-02-18T09:00:00Z",
    },
    {
        "task_id": "todo_003",
        "title": "Review",
        "status": "completed",
        "priority": "high",
        "due_date": "2026-02-27",
        "tags": [],
        "created_at": "2026-02-24T16:00:00Z",
    },
]


def test_todo_list_and_get() -> None:
    t = make_trial({"todo": {"tasks.json": TASKS}})
    assert ok(t, "todo_list_tasks") == {"tasks": TASKS, "total": 3}
    assert ok(t, "todo_list_tasks", status="pending")["total"] == 2
    assert [x["task_id"] for x in ok(t, "todo_list_tasks", status="all", priority="high")["tasks"]] == [
        "todo_001",
        "todo_003",
    ]
    assert ok(t, "todo_list_tasks", status="in_progress")["total"] == 0
    assert ok(t, "todo_get_task", task_id="todo_002") == TASKS[1]
    rejected(t, "todo_list_tasks", status="done")
    rejected(t, "todo_get_task", code="not_found", task_id="todo_999")


def test_todo_writes_and_audit() -> None:
    t = make_trial({"todo": {"tasks.json": TASKS}})
    created = ok(
        t, "todo_create_task", title="Onboarding", priority="high", due_date="2026-03-09", tags=["hr"]
    )
    item = created["task"]
    assert created["status"] == "created"
    assert item["task_id"] == "todo_004"
    assert item["status"] == "pending"
    assert item["tags"] == ["hr"]
    assert item["created_at"].startswith("2026-03-02")
    upd = ok(t, "todo_update_task", task_id="todo_001", status="completed", priority="medium")
    assert upd["task"]["status"] == "completed"
    assert upd["task"]["title"] == "Q1 report"
    assert ok(t, "todo_list_tasks", status="completed")["total"] == 2
    gone = ok(t, "todo_delete_task", task_id="todo_002")
    assert gone["task"] == TASKS[1]
    audit = t.audit_collections()["todo"]
    assert [x["task_id"] for x in audit["created_tasks"]] == ["todo_004"]
    assert [x["task_id"] for x in audit["updated_tasks"]] == ["todo_001"]
    assert [x["task_id"] for x in audit["deleted"]] == ["todo_002"]
    rejected(t, "todo_update_task", task_id="todo_001")
    rejected(t, "todo_update_task", task_id="todo_001", status="done")
    rejected(t, "todo_update_task", task_id="todo_001", priority="whenever")
    rejected(t, "todo_update_task", code="not_found", task_id="todo_002", status="completed")
    rejected(t, "todo_create_task", title="")
    rejected(t, "todo_create_task", title="x", due_date="someday")
    rejected(t, "todo_delete_task", code="not_found", task_id="todo_002")


# ---------------------------------------------------------------- notes


NOTES: list[dict[str, Any]] = [
    {
        "note_id": "n1",
        "title": "Weekly 02-23",
        "created_at": "2026-02-23T10:00:00Z",
        "participants": ["Zhang", "Li"],
        "content": "decisions",
        "duration_minutes": 45,
    },
    {
        "note_id": "n2",
        "title": "Postmortem",
        "type": "meeting",
        "tags": ["incident", "postmortem"],
        "created_at": "2026-03-01",
        "participants": ["CTO"],
        "content": "root cause",
        "duration_minutes": 60,
    },
    {
        "note_id": "n3",
        "title": "Old",
        "created_at": "2026-01-05T10:00:00Z",
        "participants": [],
        "content": "x",
        "duration_minutes": 15,
    },
]


def test_notes_list_filters() -> None:
    t = make_trial({"notes": {"meetings.json": NOTES}})
    body = ok(t, "notes_list")
    assert body["total"] == 3
    assert body["notes"][0] == {
        "note_id": "n1",
        "title": "Weekly 02-23",
        "created_at": "2026-02-23T10:00:00Z",
        "participants": ["Zhang", "Li"],
        "duration_minutes": 45,
    }
    assert body["notes"][1]["tags"] == ["incident", "postmortem"]
    assert "content" not in body["notes"][1]

    def ids(**kw: Any) -> list[str]:
        return [n["note_id"] for n in ok(t, "notes_list", **kw)["notes"]]

    assert ids(max_results=1) == ["n1"]
    assert ids(days_back=30) == ["n1", "n2"]  # relative to mock_today 2026-03-02
    assert ids(days_back=1) == ["n2"]
    assert ids(date_from="2026-02-01", date_to="2026-02-28") == ["n1"]
    assert ids(tag="Incident") == ["n2"]
    rejected(t, "notes_list", date_from="last week")
    rejected(t, "notes_list", max_results=0)


def test_notes_get_share_and_memory_file() -> None:
    t = make_trial({"notes": {"memory.json": NOTES[:1]}})
    assert ok(t, "notes_get", note_id="n1") == NOTES[0]
    shared = ok(t, "notes_share", note_id="n1", recipients=["Zhang", "Li"])
    assert shared["status"] == "shared"
    assert shared["record"]["recipients"] == ["Zhang", "Li"]
    assert t.audit_collections()["notes"]["shared"] == [shared["record"]]
    rejected(t, "notes_share", code="not_found", note_id="n9", recipients=["Zhang"])
    rejected(t, "notes_share", note_id="n1", recipients=[])
    rejected(t, "notes_share", note_id="n1", recipients=["  "])
    rejected(t, "notes_share", note_id="n1", recipients="Zhang")
    rejected(t, "notes_get", code="not_found", note_id="n9")


# ---------------------------------------------------------------- config


INTEGRATIONS: list[dict[str, Any]] = [
    {
        "integration_id": "INT-1",
        "name": "Payments",
        "service": "stripe",
        "status": "active",
        "api_key": "sk_live_x",
        "last_verified": "2026-03-01",
        "monthly_calls": 100,
        "error_rate": 0.01,
        "notes": "",
    },
    {
        "integration_id": "INT-2",
        "name": "Email",
        "display_name": "SMTP",
        "service": "smtp",
        "status": "error",
        "config": {"host": "smtp.corp"},
        "last_verified": "2026-02-20",
        "monthly_calls": 0,
        "error_rate": 1.0,
    },
]


def test_config_list_get_and_secrets() -> None:
    t = make_trial({"config": {"integrations.json": INTEGRATIONS}})
    body = ok(t, "config_list_integrations")
    assert body["total"] == 2
    assert "api_key" not in json.dumps(body)
    assert body["integrations"][1]["display_name"] == "SMTP"
    assert [
        i["integration_id"] for i in ok(t, "config_list_integrations", status="error")["integrations"]
    ] == ["INT-2"]
    assert [
        i["integration_id"] for i in ok(t, "config_list_integrations", type="stripe")["integrations"]
    ] == ["INT-1"]
    assert ok(t, "config_get_integration", integration_id="INT-1")["api_key"] == "sk_live_x"
    rejected(t, "config_get_integration", code="not_found", integration_id="INT-9")


def test_config_writes_and_audit() -> None:
    t = make_trial({"config": {"integrations.json": INTEGRATIONS}})
    upd = ok(t, "config_update_integration", integration_id="INT-2", status="disabled", notes="token expired")
    assert upd["integration"]["status"] == "disabled"
    assert upd["integration"]["notes"] == "token expired"
    sent = ok(t, "config_send_notification", to="ops@corp.com", subject="SMTP down", body="Re-authorize")
    assert sent["status"] == "sent"
    ok(t, "config_send_notification", to="ops@corp.com", subject="again", body="still down")
    audit = t.audit_collections()["config"]
    assert audit["updates"][0]["changes"] == {
        "integration_id": "INT-2",
        "status": "disabled",
        "notes": "token expired",
    }
    assert [n["subject"] for n in audit["notifications"]] == ["SMTP down", "again"]
    rejected(t, "config_update_integration", integration_id="INT-1")
    rejected(t, "config_update_integration", integration_id="INT-1", status="on fire")
    rejected(t, "config_update_integration", code="not_found", integration_id="INT-9", status="active")
    rejected(t, "config_send_notification", to="ops@corp.com", subject="", body="x")
    rejected(t, "config_send_notification", to="ops@corp.com", subject="s")


# ---------------------------------------------------------------- rss


ARTICLES: list[dict[str, Any]] = [
    {
        "article_id": "a1",
        "title": "LLM agents",
        "source": "AI Daily",
        "category": "AI Technology",
        "published_at": "2026-02-27T08:00:00Z",
        "summary": "s1",
        "content": "c1",
        "word_count": 900,
    },
    {
        "article_id": "a2",
        "title": "Match report",
        "source": "Sports World",
        "category": "Sports",
        "published_at": "2026-02-27T09:00:00Z",
        "summary": "s2",
        "content": "c2",
        "word_count": 400,
    },
    {
        "article_id": "a3",
        "title": "Chips",
        "source": "AI Daily",
        "category": "Semiconductor, Capacity",
        "published_at": "2026-02-28T09:00:00Z",
        "summary": "s3",
        "content": "c3",
        "word_count": 700,
        "tags": ["x"],
    },
]


def test_rss_feeds() -> None:
    t = make_trial({"rss": {"feeds.json": ARTICLES}})
    feeds = ok(t, "rss_list_feeds")
    assert feeds["total"] == 2
    assert feeds["feeds"][0] == {
        "feed_id": "ai-daily",
        "source": "AI Daily",
        "categories": ["AI Technology", "Semiconductor, Capacity"],
        "article_count": 2,
    }
    assert [f["source"] for f in ok(t, "rss_list_feeds", category="sports")["feeds"]] == ["Sports World"]
    feed = ok(t, "rss_get_feed", feed_id="ai-daily")
    assert feed["feed"]["source"] == "AI Daily"
    assert [a["article_id"] for a in feed["articles"]] == ["a1", "a3"]
    assert ok(t, "rss_get_feed", feed_id="Sports World")["total"] == 1
    rejected(t, "rss_get_feed", code="not_found", feed_id="nope")


def test_rss_articles_and_publish() -> None:
    t = make_trial({"rss": {"articles.json": ARTICLES}})
    body = ok(t, "rss_list_articles")
    assert body["total"] == 3
    assert body["articles"][0] == {
        k: ARTICLES[0][k]
        for k in ("article_id", "title", "source", "category", "published_at", "summary", "word_count")
    }

    def ids(**kw: Any) -> list[str]:
        return [a["article_id"] for a in ok(t, "rss_list_articles", **kw)["articles"]]

    assert ids(source="ai daily") == ["a1", "a3"]
    assert ids(feed_name="AI Daily", max_results=1) == ["a1"]
    assert ids(feed_name="sports-world") == ["a2"]
    assert ids(category="capacity") == ["a3"]
    assert ok(t, "rss_get_article", article_id="a3") == ARTICLES[2]
    rejected(t, "rss_get_article", code="not_found", article_id="a9")
    rejected(t, "rss_list_articles", max_results=0)
    pub = ok(t, "rss_publish", title="Weekly AI", content="a1, a3", recipients=["team@corp.com"])
    assert pub["status"] == "published"
    assert t.audit_collections()["rss"]["published"] == [pub["record"]]
    rejected(t, "rss_publish", title="Weekly AI", content="")
    rejected(t, "rss_publish", title="Weekly AI", content="x", recipients="team")


# ---------------------------------------------------------------- isolation


def test_trials_are_isolated_and_reset() -> None:
    spec = TaskSpec(
        id="iso",
        name="iso",
        category="test",
        difficulty="easy",
        mock_today=date(2026, 3, 2),
        request="r",
        services={"todo": {"tasks.json": TASKS}},
        tools=tuple(Todo.tool_table),
    )
    host = Host()
    host.add_task(spec)
    a, b = host.open_trial("iso", "a"), host.open_trial("iso", "b")
    fresh = b.state_hash()
    ok(a, "todo_delete_task", task_id="todo_001")
    assert ok(b, "todo_get_task", task_id="todo_001") == TASKS[0]
    assert b.state_hash() == fresh != a.state_hash()
    a.reset()
    assert a.state_hash() == fresh
