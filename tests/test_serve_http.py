"""The HTTP face: routes generated from the tool table, all through Trial.call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from coworkenv.serve.http import background_server, create_app, registry_routes, task_routes
from coworkenv.services import registry
from coworkenv.services.faults import FaultPlan
from coworkenv.services.trial import Host
from coworkenv.spec import TaskSpec

OPERATOR = "operator-token-for-tests"
AS_OPERATOR = {"Authorization": f"Bearer {OPERATOR}"}
TOOLS = ("helpdesk_list_tickets", "helpdesk_get_ticket", "helpdesk_update_ticket", "helpdesk_close_ticket")


def helpdesk_spec(task_id: str = "hd", tools: tuple[str, ...] = TOOLS) -> TaskSpec:
    return TaskSpec.model_validate(
        {
            "id": task_id,
            "name": "helpdesk triage",
            "category": "ops",
            "difficulty": "easy",
            "mock_today": "2026-03-10",
            "request": "Triage the open tickets.",
            "services": {
                "helpdesk": {
                    "tickets": [
                        {"ticket_id": "TK-1", "title": "VPN down", "status": "open", "priority": "low"},
                        {"ticket_id": "TK-2", "title": "Printer", "status": "closed", "priority": "medium"},
                    ]
                }
            },
            "tools": list(tools),
        }
    )


@pytest.fixture
def host() -> Host:
    h = Host()
    h.add_task(helpdesk_spec())
    return h


@pytest.fixture
async def client(host: Host) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(host, mcp=False, operator_token=OPERATOR)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=AS_OPERATOR) as c:
        yield c


async def open_trial(client: httpx.AsyncClient, tid: str = "t1", **extra: Any) -> dict[str, Any]:
    r = await client.post("/trials", json={"task_id": "hd", "trial_id": tid, **extra})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


# ---------------------------------------------------------------- host routes


async def test_health_tasks_and_trial_lifecycle(client: httpx.AsyncClient, host: Host) -> None:
    assert (await client.get("/health")).json()["status"] == "ok"
    tasks = (await client.get("/tasks")).json()
    assert [t["id"] for t in tasks] == ["hd"]
    assert tasks[0]["tools"] == list(TOOLS)

    created = await open_trial(client, "t1")
    assert created["trial_id"] == "t1"
    cap = host.trials["t1"].capability
    assert created["prefix"] == f"/t/{cap}"
    assert len(cap) >= 24
    assert created["base_url"].endswith(f"/t/{cap}")
    assert "t1" in host.trials
    assert [t["trial_id"] for t in (await client.get("/trials")).json()] == ["t1"]

    r = await client.post("/trials", json={"task_id": "hd"})
    assert r.status_code == 201
    assert r.json()["trial_id"] in host.trials  # generated id

    assert (await client.delete("/trials/t1")).status_code == 200
    assert "t1" not in host.trials
    r = await client.delete("/trials/t1")
    assert r.status_code == 404
    assert r.json()["code"] == "unknown_trial"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"task_id": "nope"}, 404, "unknown_task"),
        ({}, 422, "invalid_request"),
        ({"task_id": "hd", "trial_id": "a/b"}, 422, "invalid_request"),
        ({"task_id": "hd", "bogus": 1}, 422, "invalid_request"),
        ({"task_id": "hd", "faults": {"rate": 2}}, 422, "invalid_request"),
    ],
)
async def test_create_trial_rejects_bad_requests(
    client: httpx.AsyncClient, host: Host, body: dict[str, Any], status: int, code: str
) -> None:
    r = await client.post("/trials", json=body)
    assert r.status_code == status
    assert r.json()["code"] == code
    assert not host.trials


async def test_duplicate_trial_is_a_conflict(client: httpx.AsyncClient) -> None:
    await open_trial(client, "dup")
    r = await client.post("/trials", json={"task_id": "hd", "trial_id": "dup"})
    assert r.status_code == 409


# ---------------------------------------------------------------- tool routes


async def test_tool_call_changes_state_and_shows_in_audit(client: httpx.AsyncClient, host: Host) -> None:
    await open_trial(client)
    r = await client.post("/t/t1/helpdesk/tickets/update", json={"ticket_id": "TK-1", "priority": "high"})
    assert r.status_code == 200
    assert r.json()["ticket"]["priority"] == "high"
    trial = host.trials["t1"]
    assert trial.services["helpdesk"].table("tickets").require("TK-1", "Ticket")["priority"] == "high"

    audit = (await client.get("/t/t1/helpdesk/audit")).json()
    assert [c["endpoint"] for c in audit["calls"]] == ["/helpdesk/tickets/update"]
    assert audit["calls"][0]["request_body"]["ticket_id"] == "TK-1"
    assert [u["ticket_id"] for u in audit["updated_tickets"]] == ["TK-1"]

    events = (await client.get("/t/t1/events")).json()
    assert len(events) == 1
    assert events[0]["tool"] == "helpdesk_update_ticket"
    assert events[0]["ok"] is True
    assert events[0]["records"][0][0] == "updated_tickets"

    state = (await client.get("/t/t1/state")).json()
    assert state["state_hash"] == trial.state_hash()


async def test_empty_body_means_no_arguments(client: httpx.AsyncClient) -> None:
    await open_trial(client)
    r = await client.post("/t/t1/helpdesk/tickets")
    assert r.status_code == 200
    assert [t["ticket_id"] for t in r.json()["tickets"]] == ["TK-1"]  # default status=open


@pytest.mark.parametrize(
    ("route", "body", "status", "code"),
    [
        ("/helpdesk/tickets/update", {"ticket_id": "TK-404", "priority": "high"}, 404, "not_found"),
        ("/helpdesk/tickets/update", {"ticket_id": "TK-1", "priority": "whenever"}, 422, "invalid_arguments"),
        ("/helpdesk/tickets/update", {"ticket_id": "TK-1", "tags": "not-a-list"}, 422, "invalid_arguments"),
        ("/helpdesk/tickets/update", {"ticket_id": "TK-1", "surprise": 1}, 422, "invalid_arguments"),
        ("/helpdesk/tickets/update", [1, 2], 422, "invalid_arguments"),
        ("/helpdesk/tickets/close", {"ticket_id": "TK-2", "resolution": "again"}, 422, "invalid_arguments"),
        ("/helpdesk/tickets/create", {"title": "not exposed"}, 404, "tool_not_available"),
    ],
)
async def test_bad_call_is_structured_recorded_and_changes_nothing(
    client: httpx.AsyncClient, host: Host, *, route: str, body: Any, status: int, code: str
) -> None:
    await open_trial(client)
    trial = host.trials["t1"]
    before = trial.state_hash()
    r = await client.post(f"/t/t1{route}", json=body)
    assert r.status_code == status
    assert r.json()["code"] == code
    assert isinstance(r.json()["error"], str)
    assert trial.state_hash() == before
    (event,) = trial.audit
    assert event.ok is False
    assert event.status == status


async def test_malformed_json_and_wrong_method(client: httpx.AsyncClient, host: Host) -> None:
    await open_trial(client)
    r = await client.post(
        "/t/t1/helpdesk/tickets/get", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["code"] == "invalid_json"
    r = await client.get("/t/t1/helpdesk/tickets/get")
    assert r.status_code == 405
    assert (await client.get("/t/t1/helpdesk/reset")).status_code == 405
    assert not host.trials["t1"].audit


async def test_unknown_trial_and_route_are_json_404(client: httpx.AsyncClient) -> None:
    await open_trial(client)
    for method, url in [
        ("POST", "/t/ghost/helpdesk/tickets"),
        ("GET", "/t/ghost/helpdesk/audit"),
        ("GET", "/t/ghost/events"),
        ("GET", "/t/ghost"),
    ]:
        r = await client.request(method, url)
        assert r.status_code == 404
        assert r.json()["code"] == "unknown_trial"
    r = await client.post("/t/t1/helpdesk/nothing/here")
    assert r.status_code == 404
    assert r.json()["code"] == "unknown_route"
    r = await client.get("/no/such/path")
    assert r.status_code == 404
    assert r.json()["code"] == "not_found"


async def test_tools_and_health(client: httpx.AsyncClient) -> None:
    await open_trial(client)
    tools = (await client.get("/t/t1/tools")).json()
    assert [t["function"]["name"] for t in tools] == list(TOOLS)
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in tools)
    assert (await client.get("/t/t1/health")).json()["trial_id"] == "t1"
    assert (await client.get("/t/t1/helpdesk/health")).json()["status"] == "ok"


async def test_resets(client: httpx.AsyncClient, host: Host) -> None:
    await open_trial(client)
    trial = host.trials["t1"]
    fresh = trial.state_hash()
    await client.post("/t/t1/helpdesk/tickets/update", json={"ticket_id": "TK-1", "priority": "high"})
    assert trial.state_hash() != fresh
    r = await client.post("/t/t1/helpdesk/reset")
    assert r.status_code == 200
    assert trial.state_hash() == fresh
    assert (await client.get("/t/t1/helpdesk/audit")).json()["calls"] == []

    await client.post("/t/t1/helpdesk/tickets/close", json={"ticket_id": "TK-1", "resolution": "fixed"})
    assert len(trial.audit) == 1
    assert (await client.post("/t/t1/reset")).status_code == 200
    assert trial.state_hash() == fresh
    assert trial.audit == []


async def test_trials_are_isolated(client: httpx.AsyncClient, host: Host) -> None:
    await open_trial(client, "a")
    await open_trial(client, "b")
    await client.post("/t/a/helpdesk/tickets/update", json={"ticket_id": "TK-1", "priority": "critical"})
    got_a = (await client.post("/t/a/helpdesk/tickets/get", json={"ticket_id": "TK-1"})).json()
    got_b = (await client.post("/t/b/helpdesk/tickets/get", json={"ticket_id": "TK-1"})).json()
    assert got_a["priority"] == "critical"
    assert got_b["priority"] == "low"
    assert len(host.trials["b"].audit) == 1


# ---------------------------------------------------------------- faults


async def test_rate_limit_fault_rejects_without_state_change(client: httpx.AsyncClient, host: Host) -> None:
    plan = {"rate": 1.0, "rate_limit": 1.0, "server_error": 0.0, "latency": 0.0}
    await open_trial(client, faults=plan)
    trial = host.trials["t1"]
    before = trial.state_hash()
    r = await client.post("/t/t1/helpdesk/tickets/update", json={"ticket_id": "TK-1", "priority": "high"})
    assert r.status_code == 429
    assert "Retry-After" in r.headers
    assert trial.state_hash() == before
    assert trial.audit[0].fault == "rate_limit"
    # audit, events, health and reset never fault
    assert (await client.get("/t/t1/helpdesk/audit")).status_code == 200
    assert (await client.get("/t/t1/events")).status_code == 200
    assert (await client.get("/t/t1/health")).status_code == 200
    assert (await client.post("/t/t1/helpdesk/reset")).status_code == 200


async def test_latency_fault_delays_then_runs(client: httpx.AsyncClient, host: Host) -> None:
    plan = FaultPlan(rate=1.0, rate_limit=0.0, server_error=0.0, latency=1.0, latency_s=(0.001, 0.002))
    await open_trial(client, faults=plan.model_dump())
    r = await client.post("/t/t1/helpdesk/tickets/update", json={"ticket_id": "TK-1", "priority": "high"})
    assert r.status_code == 200
    event = host.trials["t1"].audit[0]
    assert event.fault == "latency"
    assert event.delay_s > 0
    assert event.ok


# ---------------------------------------------------------------- Claw-Eval compatibility


async def test_claw_eval_compat_mode_serves_unprefixed_routes(host: Host) -> None:
    trial = host.open_trial("hd", "compat")
    app = create_app(host, default_trial="compat", mcp=False, open_compat_grading=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        probe = await c.post("/helpdesk/tickets", headers={"X-Health-Check": "1"})
        assert probe.status_code < 500
        assert trial.audit == []  # a readiness probe is not a call
        assert (await c.post("/helpdesk/reset")).status_code == 200
        r = await c.post("/helpdesk/tickets", json={"status": "all"})
        assert r.json()["total"] == 2
        r = await c.post("/helpdesk/tickets/close", json={"ticket_id": "TK-1", "resolution": "done"})
        assert r.json()["status"] == "closed"
        audit = (await c.get("/helpdesk/audit")).json()
        assert [x["ticket_id"] for x in audit["closed"]] == ["TK-1"]
        assert [x["endpoint"] for x in audit["calls"]] == ["/helpdesk/tickets", "/helpdesk/tickets/close"]
        # the prefixed routes and host routes still work (the prefixed grading ones need the token)
        assert (await c.get("/t/compat/helpdesk/audit")).status_code == 401
        op = {"Authorization": f"Bearer {app.state.operator_token}"}
        assert (await c.get("/t/compat/helpdesk/audit", headers=op)).json() == audit
        assert (await c.get("/health")).json()["status"] == "ok"


# ---------------------------------------------------------------- generated from the registry


def test_every_registered_tool_has_a_route() -> None:
    routes = registry_routes()
    assert {t.name for t in routes.values()} == set(registry.TOOLS)
    for tdef in registry.TOOLS.values():
        assert routes[tdef.route] is tdef


async def test_every_registered_tool_is_callable_over_http() -> None:
    """All services registered now, empty fixtures: each tool route answers JSON through Trial.call."""
    spec = TaskSpec.model_validate(
        {
            "id": "all",
            "name": "all tools",
            "category": "x",
            "difficulty": "easy",
            "mock_today": "2026-03-10",
            "request": "anything",
            "services": {name: {} for name in registry.SERVICES},
            "tools": sorted(registry.TOOLS),
        }
    )
    host = Host()
    loaded = host.add_task(spec)
    trial = host.open_trial("all", "x")
    assert set(task_routes(loaded)) == {t.route for t in registry.TOOLS.values()}
    app = create_app(host, mcp=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        for i, tdef in enumerate(registry.TOOLS.values()):
            r = await c.post(f"/t/{trial.capability}{tdef.route}", json={})
            assert r.status_code < 500, (tdef.name, r.text)
            assert isinstance(r.json(), dict | list)
            assert trial.audit[i].tool == tdef.name
            if r.status_code >= 400:
                assert isinstance(r.json()["error"], str)


# ---------------------------------------------------------------- a real server


def test_real_uvicorn_server_round_trip(host: Host) -> None:
    app = create_app(host, operator_token=OPERATOR)
    with background_server(app) as url, httpx.Client(base_url=url, timeout=10, headers=AS_OPERATOR) as c:
        created = c.post("/trials", json={"task_id": "hd", "trial_id": "live"}).json()
        assert created["base_url"] == f"{url}/t/{host.trials['live'].capability}"
        base = created["base_url"]
        r = c.post(f"{base}/helpdesk/tickets/update", json={"ticket_id": "TK-1", "tags": ["vpn", "p1"]})
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/json")
        assert c.post(f"{base}/helpdesk/tickets/get", json={"ticket_id": "TK-1"}).json()["tags"] == [
            "vpn",
            "p1",
        ]
        bad = c.post(f"{base}/helpdesk/tickets/get", json={"ticket_id": "nope"})
        assert bad.status_code == 404
        assert bad.json()["code"] == "not_found"
        assert [e["ok"] for e in c.get(f"{base}/events").json()] == [True, True, False]
        assert [e["seq"] for e in c.get(f"{base}/events", params={"since": 2}).json()] == [2]
