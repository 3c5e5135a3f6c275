"""Capability URLs and the operator token: an agent reaches only its own trial's tools.

The issue's reproduction (``coworkenv serve`` + a curious agent) replayed against the app: list
trials, read another trial's events, erase a forbidden call with a reset, call another trial's
tools — each refused in the usual error shape and recorded, the evidence intact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from coworkenv.serve.access import OperatorToken, is_operator_path, presented_token
from coworkenv.serve.http import create_app
from coworkenv.services.trial import Host
from tests.test_serve_http import helpdesk_spec

OPERATOR = "operator-token-for-tests"
AS_OPERATOR = {"Authorization": f"Bearer {OPERATOR}"}
CLOSE = {"ticket_id": "TK-1", "resolution": "done"}


@pytest.fixture
def host() -> Host:
    h = Host()
    h.add_task(helpdesk_spec(tools=("helpdesk_list_tickets", "helpdesk_get_ticket")))
    return h


@pytest.fixture
async def agent(host: Host) -> AsyncIterator[httpx.AsyncClient]:
    """A client without the token: what an agent's shell can do."""
    app = create_app(host, mcp=False, operator_token=OPERATOR)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as c:
        yield c


async def test_the_issue_reproduction_is_refused_and_recorded(host: Host, agent: httpx.AsyncClient) -> None:
    victim = host.open_trial("hd", "victim")
    attacker = host.open_trial("hd", "attacker")
    # the victim's forbidden call (the task does not expose helpdesk_close_ticket): audited
    r = await agent.post(f"/t/{victim.capability}/helpdesk/tickets/close", json=CLOSE)
    assert r.status_code == 404
    assert r.json()["code"] == "tool_not_available"
    assert [e.tool for e in victim.audit] == ["helpdesk_close_ticket"]

    attempts = [
        ("GET", "/trials"),
        ("POST", "/trials"),
        ("GET", "/tasks"),
        ("DELETE", "/trials/victim"),
        ("GET", "/t/victim/events"),
        ("GET", "/t/victim/state"),
        ("GET", "/t/victim/helpdesk/audit"),
        ("POST", "/t/victim/reset"),
        ("POST", "/t/victim/helpdesk/reset"),
        ("POST", "/t/victim/helpdesk/tickets"),  # another trial's tool, by its id
        ("POST", "/t/guessed-capability/helpdesk/tickets"),
    ]
    for method, path in attempts:
        r = await agent.request(method, path, json={})
        assert (r.status_code, r.json()["code"]) == (401, "unauthorized"), (method, path, r.text)
        assert "operator token" in r.json()["error"]
    # with its own capability, the grading routes are still the operator's — recorded on that trial
    for method, tail in [("GET", "events"), ("GET", "state"), ("POST", "reset"), ("GET", "helpdesk/audit")]:
        r = await agent.request(method, f"/t/{attacker.capability}/{tail}")
        assert r.status_code == 401, tail
    wrong = await agent.post(f"/t/{attacker.capability}/reset", headers={"X-Coworkenv-Token": "x" * 24})
    assert (wrong.status_code, wrong.json()["code"]) == (403, "forbidden")

    assert [e.tool for e in victim.audit] == ["helpdesk_close_ticket"]  # the evidence survived
    assert victim.refusals == []
    assert [x["path"] for x in attacker.refusals] == [
        "/t/<capability of attacker>/events",
        "/t/<capability of attacker>/state",
        "/t/<capability of attacker>/reset",
        "/t/<capability of attacker>/helpdesk/audit",
        "/t/<capability of attacker>/reset",
    ]
    assert [x["code"] for x in attacker.refusals][-1] == "forbidden"
    assert len(host.refusals) == len(attempts) + 5
    assert all(attacker.capability not in str(x) and OPERATOR not in str(x) for x in host.refusals)

    # the operator sees everything, by trial id
    events = (await agent.get("/t/victim/events", headers=AS_OPERATOR)).json()
    assert [e["tool"] for e in events] == ["helpdesk_close_ticket"]
    listed = (await agent.get("/trials", headers=AS_OPERATOR)).json()
    assert {t["trial_id"] for t in listed} == {"victim", "attacker"}


async def test_capability_reaches_tools_tools_list_and_health_only(
    host: Host, agent: httpx.AsyncClient
) -> None:
    trial = host.open_trial("hd", "t")
    base = f"/t/{trial.capability}"
    assert (await agent.post(f"{base}/helpdesk/tickets", json={})).status_code == 200
    assert (await agent.get(f"{base}/tools")).status_code == 200
    assert (await agent.get(f"{base}/health")).json()["trial_id"] == "t"
    health = await agent.get("/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}  # no trial count without the token
    counts = (await agent.get("/health", headers=AS_OPERATOR)).json()
    assert counts["trials"] == 1
    host.close_trial("t")  # a closed trial's capability is dead
    assert (await agent.post(f"{base}/helpdesk/tickets", json={})).status_code == 401


def test_token_parsing_and_operator_paths() -> None:
    assert presented_token([(b"Authorization", b"Bearer abc")]) == b"abc"
    assert presented_token([(b"x-coworkenv-token", b" abc ")]) == b"abc"
    assert presented_token([(b"authorization", b"Basic abc")]) is None
    token = OperatorToken("s" * 20)
    assert token.check([(b"authorization", b"Bearer " + b"s" * 20)]) is None
    assert token.check([]) == "unauthorized"
    assert token.check([(b"x-coworkenv-token", b"nope")]) == "forbidden"
    with pytest.raises(ValueError, match="at least 16"):
        OperatorToken("short")
    services = ["helpdesk", "calendar"]
    assert is_operator_path("events", services)
    assert is_operator_path("/helpdesk/audit/", services)
    assert not is_operator_path("calendar/events", services)  # a tool, not the event log
    assert not is_operator_path("helpdesk/tickets", services)
    assert not is_operator_path("other/reset", services)


async def test_a_flood_of_refusals_is_bounded_and_attribution_rate_limited(
    host: Host, agent: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coworkenv.services import trial as trial_mod

    attacker = host.open_trial("hd", "attacker")
    looked_up: list[str | None] = []

    def attribute(client: str | None) -> str:
        looked_up.append(client)
        return "attacker"

    host.attribute = attribute
    monkeypatch.setattr(trial_mod, "REFUSALS_KEPT", 30)
    for _ in range(trial_mod.ATTRIBUTION_BURST + 10):
        assert (await agent.get("/trials")).status_code == 401
    # every refusal is in the host log; only the burst was looked up (each lookup scans /proc)
    assert len(host.refusals) == trial_mod.ATTRIBUTION_BURST + 10
    assert trial_mod.ATTRIBUTION_BURST <= len(looked_up) < trial_mod.ATTRIBUTION_BURST + 10
    # the trial keeps a bounded list and counts the rest
    assert len(attacker.refusals) == 30
    assert attacker.refusals[-1]["more"] == len(looked_up) - 30
    assert all(r["attributed_by"] == "peer" for r in attacker.refusals)
