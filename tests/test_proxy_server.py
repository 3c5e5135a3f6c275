"""The proxy served over real HTTP, with the official ``openai`` and ``anthropic`` SDKs as clients."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from coworkenv.proxy.messages import AssistantTurn, ToolCall
from tests.test_proxy_support import ToyBackend, call, fail, make_proxy, serving

TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "run",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
USER_X: list[Any] = [{"role": "user", "content": "x"}]
ANTHROPIC_TOOL = {"name": "Bash", "description": "run", "input_schema": TOOL["function"]["parameters"]}


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


# ---------------------------------------------------------------------------- Chat Completions


async def test_chat_non_stream_tool_call_and_capture(tmp_path: Path) -> None:
    backend = ToyBackend(call("bash", '{"command": "ls"}'))
    proxy, store = make_proxy(tmp_path, backend)
    prefix = proxy.open_rollout("r1", task_id="t1", harness="mini", state_hash=lambda: "h0")
    async with serving(proxy.app) as site:
        res = await site.oai(prefix).chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
            tools=[TOOL],  # type: ignore[list-item]
        )
    msg = res.choices[0].message
    assert res.choices[0].finish_reason == "tool_calls"
    assert msg.tool_calls
    assert msg.tool_calls[0].function.name == "bash"
    assert json.loads(msg.tool_calls[0].function.arguments) == {"command": "ls"}  # type: ignore[union-attr]
    assert res.usage
    assert res.usage.prompt_tokens == 2
    assert res.usage.completion_tokens > 0
    calls, problems = store.read("r1")
    assert problems == []
    assert len(calls) == 1
    c = calls[0]
    assert (c.rollout_id, c.seq, c.task_id, c.harness, c.dialect) == ("r1", 0, "t1", "mini", "openai_chat")
    assert c.call_id == res.id
    assert c.state_hash == "h0"
    assert c.policy_version == "v1"
    assert c.prompt_ids == (2, 1)
    assert len(c.output_ids) == len(c.logprobs) > 0
    assert [m.role for m in c.request.messages] == ["system", "user"]
    assert c.request.tools[0].name == "bash"
    assert c.response["tool_calls"][0]["name"] == "bash"
    assert c.error is None
    assert c.t_start <= c.t_end


async def test_chat_stream_text_tools_and_usage(tmp_path: Path) -> None:
    turn = AssistantTurn(
        content="let me look",
        tool_calls=(
            ToolCall(id="call_a", name="bash", arguments='{"command": "ls"}'),
            ToolCall(id="call_b", name="bash", arguments='{"command": "pwd"}'),
        ),
        finish_reason="tool_calls",
    )
    proxy, store = make_proxy(tmp_path, ToyBackend(turn))
    prefix = proxy.open_rollout("r1")
    async with serving(proxy.app) as site:
        stream = await site.oai(prefix).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[TOOL],  # type: ignore[list-item]
            stream=True,
            stream_options={"include_usage": True},
        )
        text, calls, finish, usage = "", {}, None, None
        async for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for tc in choice.delta.tool_calls or []:
                    entry = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                    entry["id"] += tc.id or ""
                    entry["name"] += (tc.function.name or "") if tc.function else ""
                    entry["args"] += (tc.function.arguments or "") if tc.function else ""
    assert text == "let me look"
    assert finish == "tool_calls"
    assert calls == {
        0: {"id": "call_a", "name": "bash", "args": '{"command": "ls"}'},
        1: {"id": "call_b", "name": "bash", "args": '{"command": "pwd"}'},
    }
    assert usage is not None
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    (c,), _ = store.read("r1")
    assert c.stream
    assert c.finish_reason == "tool_calls"


# ---------------------------------------------------------------------------- Responses


CODEX_TOOLS: list[Any] = [
    {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}},
    {
        "type": "namespace",
        "name": "mcp__stub",
        "description": "ns",
        "tools": [
            {"type": "function", "name": "stub_echo", "parameters": {"type": "object", "properties": {}}}
        ],
    },
    {"type": "web_search", "external_web_access": True},
]


async def test_responses_stream_namespace_call_round_trip(tmp_path: Path) -> None:
    backend = ToyBackend(
        call("mcp__stub__stub_echo", '{"text": "hi"}', "call_9"), AssistantTurn(content="done")
    )
    proxy, store = make_proxy(tmp_path, backend)
    prefix = proxy.open_rollout("r1")
    async with serving(proxy.app) as site:
        client = site.oai(prefix)
        async with client.responses.stream(
            model="m",
            instructions="be brief",
            tools=CODEX_TOOLS,
            input=[
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            ],
        ) as stream:
            kinds = [event.type async for event in stream]
            first = await stream.get_final_response()
        fc = first.output[0]
        assert fc.type == "function_call"
        assert (fc.name, fc.namespace, fc.call_id, fc.arguments) == (  # type: ignore[union-attr]
            "stub_echo",
            "mcp__stub",
            "call_9",
            '{"text": "hi"}',
        )
        assert kinds[0] == "response.created"
        assert kinds[-1] == "response.completed"
        assert "response.function_call_arguments.done" in kinds
        assert first.usage is not None
        assert first.usage.input_tokens == 2
        # Codex replays the call with its namespace, then the output: both map back to the flat name
        second = await client.responses.create(
            model="m",
            tools=CODEX_TOOLS,
            input=[
                {"type": "message", "role": "user", "content": "go"},
                {
                    "type": "function_call",
                    "call_id": "call_9",
                    "name": "stub_echo",
                    "namespace": "mcp__stub",
                    "arguments": '{"text": "hi"}',
                },  # type: ignore[list-item]
                {"type": "function_call_output", "call_id": "call_9", "output": "hi"},
            ],
        )
    assert second.output_text == "done"
    assert second.status == "completed"
    req = backend.requests[1]
    assert [t.name for t in req.tools] == ["exec_command", "mcp__stub__stub_echo"]
    assert [m.role for m in req.messages] == ["user", "assistant", "tool"]
    assert req.messages[1].tool_calls[0].name == "mcp__stub__stub_echo"
    assert req.messages[2].tool_call_id == "call_9"
    assert [m.role for m in backend.requests[0].messages] == ["system", "system", "user"]
    calls, _ = store.read("r1")
    assert [c.dialect for c in calls] == ["openai_responses"] * 2
    assert [c.seq for c in calls] == [0, 1]


# ---------------------------------------------------------------------------- Anthropic


async def test_anthropic_non_stream_and_stream_tool_use(tmp_path: Path) -> None:
    turn = AssistantTurn(
        content="I'll run it.",
        tool_calls=(ToolCall(id="toolu_1", name="Bash", arguments='{"command": "echo hi"}'),),
        finish_reason="tool_calls",
    )
    backend = ToyBackend(turn, turn, AssistantTurn(content="all done"))
    proxy, store = make_proxy(tmp_path, backend)
    prefix = proxy.open_rollout("r1", harness="claude")
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "do it"}]},
        {"role": "system", "content": "agents: none"},  # Claude Code puts these mid-conversation
    ]
    async with serving(proxy.app) as site:
        client = site.ant(prefix)
        plain = await client.messages.create(
            model="claude-x", max_tokens=100, system="sys", messages=messages, tools=[ANTHROPIC_TOOL]
        )  # type: ignore[list-item]
        assert plain.stop_reason == "tool_use"
        assert [b.type for b in plain.content] == ["text", "tool_use"]
        assert plain.content[1].input == {"command": "echo hi"}  # type: ignore[union-attr]
        async with client.messages.stream(
            model="claude-x", max_tokens=100, messages=messages, tools=[ANTHROPIC_TOOL]
        ) as stream:  # type: ignore[list-item]
            final = await stream.get_final_message()
        assert final.stop_reason == "tool_use"
        assert final.content[1].input == {"command": "echo hi"}
        assert final.content[0].text == "I'll run it."  # type: ignore[union-attr]
        history = [
            *messages,
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "hi"}],
                    }
                ],
            },
        ]
        raw = await client.messages.with_raw_response.create(
            model="claude-x", max_tokens=100, messages=history, stream=True
        )
        events = [e async for e in await raw.parse()]
    assert [e.type for e in events][-2:] == ["message_delta", "message_stop"]
    assert events[-2].delta.stop_reason == "end_turn"  # type: ignore[union-attr]
    req = backend.requests[2]
    assert [m.role for m in req.messages] == ["user", "system", "assistant", "tool"]
    assert req.messages[2].tool_calls[0].name == "Bash"
    assert req.messages[3].content == "hi"
    assert [m.role for m in backend.requests[0].messages] == ["system", "user", "system"]
    calls, _ = store.read("r1")
    assert [c.stream for c in calls] == [False, True, True]
    assert all(c.harness == "claude" for c in calls)


# ---------------------------------------------------------------------------- refusal


async def test_unknown_wrong_or_closed_prefix_is_refused_in_dialect_shape(tmp_path: Path) -> None:
    """Unknown id, wrong secret and closed rollout: one answer, so a caller learns nothing of which
    rollout ids are open."""
    proxy, store = make_proxy(tmp_path)
    prefix = proxy.open_rollout("r1")
    wrong = prefix.rsplit("/", 1)[0] + "/not-the-secret"
    msgs: list[Any] = [{"role": "user", "content": "hi"}]
    async with serving(proxy.app) as site:
        answers = []
        for p in (wrong, "/r/nobody/abc"):
            res = await site.http.post(f"{site.url}{p}/v1/chat/completions", json={"messages": msgs})
            answers.append((res.status_code, res.json()))
        with pytest.raises(openai.NotFoundError):
            await site.oai(wrong).chat.completions.create(model="m", messages=msgs)
        with pytest.raises(anthropic.NotFoundError) as err:
            await site.ant(wrong).messages.create(model="m", max_tokens=5, messages=msgs)
        assert err.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
        bare = await site.http.post(f"{site.url}/v1/chat/completions", json={"messages": msgs})
        assert bare.status_code == 404
        assert "rollout base URL" in bare.json()["error"]["message"]
        ok = await site.oai(prefix).chat.completions.create(model="m", messages=msgs)
        assert ok.choices[0].message.content == "ok"
        proxy.close_rollout("r1")
        res = await site.http.post(f"{site.url}{prefix}/v1/chat/completions", json={"messages": msgs})
        answers.append((res.status_code, res.json()))
        assert answers[0][0] == 404
        assert answers[0] == answers[1] == answers[2]
        with pytest.raises(anthropic.NotFoundError):
            await site.ant(prefix).messages.create(model="m", max_tokens=5, messages=msgs)
    calls, _ = store.read("r1")
    assert len(calls) == 1
    assert not store.path("nobody").exists()
    assert proxy.stats("r1") == {"calls": 1, "errors": 0, "pending": 0}


# ---------------------------------------------------------------------------- streaming mechanics


async def test_keepalive_while_slow_backend_then_sdk_parses(tmp_path: Path) -> None:
    proxy, store = make_proxy(
        tmp_path, ToyBackend(AssistantTurn(content="slow answer"), delay_s=0.35), keepalive_s=0.1
    )
    prefix = proxy.open_rollout("r1")
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with serving(proxy.app) as site:
        url = f"{site.url}{prefix}/v1/chat/completions"
        raw = (await site.http.post(url, json={**body, "stream": True})).text
        stream = await site.oai(prefix).chat.completions.create(stream=True, **body)  # type: ignore[call-overload]
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert raw.startswith(": keep-alive\n\n")
    assert raw.count(": keep-alive") >= 2
    assert raw.rstrip().endswith("data: [DONE]")
    assert text == "slow answer"
    calls, _ = store.read("r1")
    assert calls[0].t_first_byte is not None
    assert calls[0].t_first_byte < calls[0].t_end - 0.1


async def test_backend_errors_are_dialect_errors_and_recorded(tmp_path: Path) -> None:
    fast = ToyBackend(fail("http_5xx"))
    slow = ToyBackend(fail("timeout"), delay_s=0.25)  # fails after a keep-alive: error event mid-stream
    proxy, store = make_proxy(tmp_path, fast, keepalive_s=0.1)
    p1 = proxy.open_rollout("fast")
    p2 = proxy.open_rollout("slow", backend=slow)
    msgs: list[Any] = [{"role": "user", "content": "hi"}]
    async with serving(proxy.app) as site:
        with pytest.raises(openai.InternalServerError) as e1:
            await site.oai(p1).chat.completions.create(model="m", messages=msgs)
        assert e1.value.status_code == 502
        with pytest.raises(anthropic.APIStatusError) as e2:
            await site.ant(p1).messages.create(model="m", max_tokens=5, messages=msgs, stream=True)
        assert e2.value.status_code == 502
        assert e2.value.body["error"]["type"] == "api_error"
        stream = await site.oai(p2).chat.completions.create(model="m", messages=msgs, stream=True)
        with pytest.raises(openai.APIError, match="timeout"):
            await drain(stream)
        with pytest.raises(anthropic.APIStatusError, match="timeout"):
            async with site.ant(p2).messages.stream(model="m", max_tokens=5, messages=msgs) as s:
                await s.get_final_message()
        events = [e async for e in await site.oai(p2).responses.create(model="m", input="hi", stream=True)]
        assert events[-1].type == "response.failed"
        assert events[-1].response.error.code == "timeout"
    fast_calls, _ = store.read("fast")
    slow_calls, _ = store.read("slow")
    assert [c.error is not None for c in fast_calls + slow_calls] == [True] * 5
    assert fast_calls[0].error.startswith("http_5xx")  # type: ignore[union-attr]
    assert proxy.stats("slow") == {"calls": 3, "errors": 3, "pending": 0}


async def test_bad_body_and_malformed_turn(tmp_path: Path) -> None:
    bad_args = AssistantTurn(tool_calls=(ToolCall(id="c", name="bash", arguments='{"command": '),))
    proxy, store = make_proxy(tmp_path, ToyBackend(bad_args))
    prefix = proxy.open_rollout("r1")
    async with serving(proxy.app) as site:
        r = await site.http.post(f"{site.url}{prefix}/v1/chat/completions", content=b"{not json")
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "invalid_request_error"
        robot = {"messages": [{"role": "robot", "content": "x"}]}
        r = await site.http.post(f"{site.url}{prefix}/v1/messages", json=robot)
        assert r.status_code == 400
        assert "messages[0].role" in r.json()["error"]["message"]
        res = await site.oai(prefix).chat.completions.create(model="m", messages=USER_X)
    assert res.choices[0].message.tool_calls is None
    assert res.choices[0].message.content == '<tool_call>bash {"command": </tool_call>'
    calls, _ = store.read("r1")
    assert [c.error is not None for c in calls] == [True, True, False]
    assert calls[2].malformed
    assert calls[2].response["tool_calls"] == []
    assert proxy.stats("r1")["errors"] == 2


async def test_settle_waits_for_slow_pending_call(tmp_path: Path) -> None:
    proxy, _ = make_proxy(tmp_path, ToyBackend(delay_s=0.4))
    prefix = proxy.open_rollout("r1")
    async with serving(proxy.app) as site:
        client = site.oai(prefix)
        pending = asyncio.create_task(
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        )
        while proxy.stats("r1")["pending"] == 0:
            await asyncio.sleep(0.01)
        t0 = time.monotonic()
        count = await proxy.settle("r1", quiet_s=0.05, timeout_s=5)
        waited = time.monotonic() - t0
        await pending
        assert count == 1
        assert waited >= 0.3
        assert await proxy.settle("r1", quiet_s=0.0) == 1
        # bounded: a call that outlives the timeout is reported as still pending
        slow = asyncio.create_task(
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        )
        while proxy.stats("r1")["pending"] == 0:
            await asyncio.sleep(0.01)
        assert await proxy.settle("r1", quiet_s=0.05, timeout_s=0.1) == 1
        assert proxy.stats("r1")["pending"] == 1
        await slow


async def test_models_backend_swap_and_rollout_override(tmp_path: Path) -> None:
    first, second, own = ToyBackend(version="v1"), ToyBackend(version="v2"), ToyBackend(version="own")
    proxy, store = make_proxy(tmp_path, first)
    p1 = proxy.open_rollout("a")
    p2 = proxy.open_rollout("b", backend=own)
    msgs: list[Any] = [{"role": "user", "content": "x"}]
    async with serving(proxy.app) as site:
        models = await site.oai(p1).models.list()
        assert [m.id for m in models.data] == ["toy"]
        await site.oai(p1).chat.completions.create(model="m", messages=msgs)
        proxy.set_backend(second)
        await site.oai(p1).chat.completions.create(model="m", messages=msgs)
        await site.oai(p2).chat.completions.create(model="m", messages=msgs)
    assert [c.policy_version for c in store.read("a")[0]] == ["v1", "v2"]
    assert [c.policy_version for c in store.read("b")[0]] == ["own"]
    with pytest.raises(ValueError, match="already open"):
        proxy.open_rollout("a")
    with pytest.raises(ValueError, match="rollout id"):
        proxy.open_rollout("../etc")
    proxy.close_rollout("a")
    proxy.open_rollout("a")  # reopened: numbering continues, nothing is overwritten
    assert proxy.stats("a")["calls"] == 0


async def test_resumed_rollout_continues_seq_from_the_store(tmp_path: Path) -> None:
    for _ in range(2):  # the second proxy over the same store is a restart after a crash
        proxy, store = make_proxy(tmp_path)
        prefix = proxy.open_rollout("r1")
        async with serving(proxy.app) as site:
            await site.oai(prefix).chat.completions.create(model="m", messages=USER_X)
        proxy.shutdown()
    assert [c.seq for c in store.read("r1")[0]] == [0, 1]


async def test_a_prompt_over_the_context_is_a_400_in_each_dialect_and_recorded(tmp_path: Path) -> None:
    """Never truncated silently: the harness gets a client error in its own dialect's shape."""
    proxy, store = make_proxy(tmp_path, ToyBackend(fail("context_length")))
    prefix = proxy.open_rollout("long")
    msgs: list[Any] = [{"role": "user", "content": "hi"}]
    async with serving(proxy.app) as site:
        with pytest.raises(openai.BadRequestError) as e1:
            await site.oai(prefix).chat.completions.create(model="m", messages=msgs)
        assert e1.value.status_code == 400
        assert "context_length" in str(e1.value)
        with pytest.raises(anthropic.BadRequestError) as e2:
            await site.ant(prefix).messages.create(model="m", max_tokens=5, messages=msgs)
        assert e2.value.status_code == 400
    calls, _ = store.read("long")
    assert len(calls) == 2
    assert all((c.error or "").startswith("context_length") for c in calls)


async def test_a_resent_history_reaches_the_backend_as_the_previous_calls_objects(tmp_path: Path) -> None:
    """An agent resends its history and tools on every call; the proxy hands the backend (and the
    capture) the previous call's own message and tool objects for the equal leading part, so a
    call in flight holds only its new messages as new objects (fewer objects for the collector)."""
    backend = ToyBackend(AssistantTurn(content="ok"))
    proxy, store = make_proxy(tmp_path, backend)
    prefix = proxy.open_rollout("r1")
    history: list[Any] = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    async with serving(proxy.app) as site:
        client = site.oai(prefix)
        for turn in range(3):
            await client.chat.completions.create(model="m", messages=history, tools=[TOOL])  # type: ignore[arg-type, list-item]
            history = [
                *history,
                {"role": "assistant", "content": f"a{turn}"},
                {"role": "user", "content": "go"},
            ]
    first, second, third = backend.requests
    assert [m.content for m in third.messages] == ["s", "hi", "a0", "go", "a1", "go"]
    assert all(third.messages[i] is first.messages[i] for i in range(2))
    assert all(third.messages[i] is second.messages[i] for i in range(4))
    assert third.tools is first.tools
    calls, problems = store.read("r1")
    assert problems == []
    assert [c.request for c in calls] == [first, second, third]
    proxy.close_rollout("r1")
    assert proxy._closed["r1"].last_request is None  # a closed rollout keeps no history
