"""The MCP face over stdio and streamable HTTP: only the task's tools, every call through Trial.call."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from coworkenv.serve.http import background_server, create_app
from coworkenv.serve.mcp import build_server, call_result
from coworkenv.services import registry
from coworkenv.services.trial import CallResult, Host
from coworkenv.spec import TaskSpec

TOOLS = ("helpdesk_list_tickets", "helpdesk_get_ticket", "helpdesk_update_ticket")


MCP_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
"""A raw MCP ``initialize`` request (id 1), for tests that speak JSON-RPC without a client."""


def helpdesk_spec(task_id: str = "hd", tools: tuple[str, ...] = TOOLS) -> dict[str, Any]:
    return {
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
                    {"ticket_id": "TK-2", "title": "Printer", "status": "open", "priority": "medium"},
                ]
            }
        },
        "tools": list(tools),
    }


def payload(result: types.CallToolResult) -> Any:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


# ---------------------------------------------------------------- in process


async def test_in_process_server_lists_and_calls() -> None:
    host = Host()
    host.add_task(TaskSpec.model_validate(helpdesk_spec()))
    trial = host.open_trial("hd", "t")
    seen: list[str] = []
    server = build_server(lambda _ctx: trial, on_call=lambda _t, res: seen.append(res.event.tool))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == list(TOOLS)
        by_name = {t.name: t for t in tools}
        assert by_name["helpdesk_update_ticket"].input_schema["required"] == ["ticket_id"]
        assert by_name["helpdesk_get_ticket"].annotations is not None
        assert by_name["helpdesk_get_ticket"].annotations.read_only_hint is True
        assert by_name["helpdesk_update_ticket"].annotations is not None
        assert by_name["helpdesk_update_ticket"].annotations.read_only_hint is False

        res = await client.call_tool("helpdesk_update_ticket", {"ticket_id": "TK-2", "tags": ["hw"]})
        assert not res.is_error
        assert res.structured_content == payload(res)
        assert payload(res)["ticket"]["tags"] == ["hw"]

        before = trial.state_hash()
        bad_calls: list[tuple[str, dict[str, Any]]] = [
            ("helpdesk_update_ticket", {"ticket_id": "TK-9"}),
            ("helpdesk_update_ticket", {"ticket_id": "TK-1", "priority": 7}),
            ("helpdesk_close_ticket", {"ticket_id": "TK-1", "resolution": "not exposed"}),
            ("no_such_tool", {}),
        ]
        for name, args in bad_calls:
            bad = await client.call_tool(name, args)
            assert bad.is_error, name
            assert isinstance(payload(bad)["error"], str)
        assert trial.state_hash() == before
    assert seen == [
        "helpdesk_update_ticket",
        "helpdesk_update_ticket",
        "helpdesk_update_ticket",
        "helpdesk_close_ticket",
        "no_such_tool",
    ]
    assert [e.ok for e in trial.audit] == [True, False, False, False, False]


def test_call_result_for_non_object_body() -> None:
    host = Host()
    host.add_task(TaskSpec.model_validate(helpdesk_spec()))
    trial = host.open_trial("hd", "t")
    res = trial.call("helpdesk_get_ticket", {"ticket_id": "TK-1"})
    rendered = call_result(res)
    assert rendered.structured_content == res.body
    listed = call_result(CallResult(ok=True, body=[1, 2], status=200, event=res.event))
    assert listed.structured_content is None
    assert payload(listed) == [1, 2]


# ---------------------------------------------------------------- stdio


async def test_stdio_server(tmp_path: Path) -> None:
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(helpdesk_spec()))
    record = tmp_path / "rec"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "coworkenv.serve.mcp",
            "--task-file",
            str(task_file),
            "--trial",
            "s1",
            "--record",
            str(record),
        ],
    )
    # a transport (the stdio client's streams), which every mcp 2.x Client takes
    async with Client(stdio_client(params)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == list(TOOLS)  # helpdesk_close_ticket / create exist but are not exposed

        initial = json.loads((record / "state.json").read_text())
        res = await client.call_tool("helpdesk_update_ticket", {"ticket_id": "TK-1", "priority": "critical"})
        assert not res.is_error
        got = await client.call_tool("helpdesk_get_ticket", {"ticket_id": "TK-1"})
        assert payload(got)["priority"] == "critical"
        after = json.loads((record / "state.json").read_text())
        assert after["state_hash"] != initial["state_hash"]
        assert [u["ticket_id"] for u in after["audit"]["helpdesk"]["updated_tickets"]] == ["TK-1"]

        bad = await client.call_tool("helpdesk_update_ticket", {"ticket_id": "TK-1", "status": "exploded"})
        assert bad.is_error
        assert payload(bad)["code"] == "invalid_arguments"
        assert json.loads((record / "state.json").read_text())["state_hash"] == after["state_hash"]

    events = [json.loads(line) for line in (record / "events.jsonl").read_text().splitlines()]
    assert [(e["tool"], e["ok"]) for e in events] == [
        ("helpdesk_update_ticket", True),
        ("helpdesk_get_ticket", True),
        ("helpdesk_update_ticket", False),
    ]
    assert events[0]["trial_id"] == "s1"


def test_stdio_entry_rejects_a_bad_task_file(tmp_path: Path) -> None:
    import subprocess

    bad = tmp_path / "task.json"
    bad.write_text(json.dumps({**helpdesk_spec(), "tools": ["helpdesk_nope"]}))
    proc = subprocess.run(
        [sys.executable, "-m", "coworkenv.serve.mcp", "--task-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "helpdesk_nope" in proc.stderr


# ---------------------------------------------------------------- streamable HTTP


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_streamable_http_per_trial(mode: str) -> None:
    host = Host()
    host.add_task(TaskSpec.model_validate(helpdesk_spec("hd")))
    host.add_task(TaskSpec.model_validate(helpdesk_spec("narrow", ("helpdesk_get_ticket",))))
    a = host.open_trial("hd", "a")
    b = host.open_trial("narrow", "b")
    app = create_app(host)
    with background_server(app) as url:
        async with Client(f"{url}/t/{b.capability}/mcp", mode=mode) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["helpdesk_get_ticket"]
            denied = await client.call_tool(
                "helpdesk_update_ticket", {"ticket_id": "TK-1", "priority": "high"}
            )
            assert denied.is_error
            assert payload(denied)["code"] == "tool_not_available"

        async with Client(f"{url}/t/{a.capability}/mcp", mode=mode) as client:
            assert [t.name for t in (await client.list_tools()).tools] == list(TOOLS)
            res = await client.call_tool("helpdesk_update_ticket", {"ticket_id": "TK-1", "priority": "high"})
            assert not res.is_error
            assert a.services["helpdesk"].table("tickets").require("TK-1", "Ticket")["priority"] == "high"
            audit = a.claw_eval_audit("helpdesk")
            assert [c["endpoint"] for c in audit["calls"]] == ["/helpdesk/tickets/update"]
            assert [u["ticket_id"] for u in audit["updated_tickets"]] == ["TK-1"]

            before = a.state_hash()
            bad = await client.call_tool(
                "helpdesk_update_ticket", {"ticket_id": "TK-404", "priority": "high"}
            )
            assert bad.is_error
            assert payload(bad)["code"] == "not_found"
            assert a.state_hash() == before

        # trial b saw only its own (denied) call; its state is untouched
        assert [e.tool for e in b.audit] == ["helpdesk_update_ticket"]
        assert b.services["helpdesk"].table("tickets").require("TK-1", "Ticket")["priority"] == "low"
        # the same calls are visible over the HTTP face
        op = {"Authorization": f"Bearer {app.state.operator_token}"}
        events = httpx.get(f"{url}/t/a/events", headers=op).json()
        assert [e["ok"] for e in events] == [True, False]


async def test_streamable_http_unknown_trial_and_session_binding() -> None:
    host = Host()
    host.add_task(TaskSpec.model_validate(helpdesk_spec()))
    a = host.open_trial("hd", "a")
    b = host.open_trial("hd", "b")
    init = MCP_INITIALIZE
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    with background_server(create_app(host)) as url, httpx.Client(timeout=10) as c:
        # an unknown key and a known trial id are refused alike (ids cannot be probed) and recorded
        for key in ("ghost", "a"):
            r = c.post(f"{url}/t/{key}/mcp", json=init, headers=headers)
            assert r.status_code == 401
            assert r.json()["code"] == "unauthorized"
        assert [x["path"] for x in host.refusals] == ["/t/ghost/mcp", "/t/a/mcp"]
        assert a.refusals == []
        assert b.refusals == []

        r = c.post(f"{url}/t/{a.capability}/mcp", json=init, headers=headers)
        assert r.status_code == 200
        sid = r.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        hdrs = {**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        c.post(f"{url}/t/{a.capability}/mcp", json=note, headers=hdrs)
        ok = c.post(f"{url}/t/{a.capability}/mcp", json=listing, headers=hdrs)
        assert ok.status_code == 200
        assert [t["name"] for t in ok.json()["result"]["tools"]] == list(TOOLS)
        # a session opened on trial a is refused under trial b's path
        assert c.post(f"{url}/t/{b.capability}/mcp", json=listing, headers=hdrs).status_code == 404


async def test_every_registered_tool_listed_over_mcp() -> None:
    spec = TaskSpec.model_validate(
        {
            **helpdesk_spec("all"),
            "services": {name: {} for name in registry.SERVICES},
            "tools": sorted(registry.TOOLS),
        }
    )
    host = Host()
    host.add_task(spec)
    trial = host.open_trial("all", "x")
    async with Client(build_server(lambda _ctx: trial)) as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == set(registry.TOOLS)
        for t in tools:
            assert t.input_schema["type"] == "object"
            assert t.description
