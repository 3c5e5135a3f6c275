"""Backends: scripted (offline teacher), embedded (local model, real logprobs), upstream (vLLM /
SGLang-like, token ids in and out), pass-through (external chat API), and the spec factory.

The embedded tests use a tiny random Llama with the real SmolLM2 tokenizer; one test loads the real
SmolLM2 and checks the token-in/token-out consistency of its logprobs.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from coworkenv.errors import CoworkError
from coworkenv.grading.grader import Episode, grade
from coworkenv.models import ModelError
from coworkenv.proxy.backends import make_backend, parse_spec
from coworkenv.proxy.backends._http import JsonPoster, _sse_data
from coworkenv.proxy.backends.base import Backend, BackendError, Completion
from coworkenv.proxy.backends.passthrough import PassthroughBackend
from coworkenv.proxy.backends.scripted import EOS_ID, ByteTokenizer, Faults, ScriptedBackend
from coworkenv.proxy.backends.upstream import UpstreamBackend
from coworkenv.proxy.codecs import get_codec
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, Message, ToolCall, ToolSpec
from coworkenv.services.trial import Trial, load_task
from coworkenv.spec import TaskSpec
from tests.conftest import base_spec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

MCP_TOOLS = tuple(
    ToolSpec(name=f"mcp__svc__{n}", description=n)
    for n in (
        "helpdesk_list_tickets",
        "helpdesk_get_ticket",
        "helpdesk_update_ticket",
        "helpdesk_close_ticket",
    )
)


def user(text: str = "Escalate the stale enterprise ticket.") -> Message:
    return Message(role="user", content=text)


# ================================================================ scripted


async def drive(
    backend: Backend, spec: TaskSpec, tools: tuple[ToolSpec, ...], max_turns: int = 10
) -> tuple[list[Completion], Trial]:
    """A minimal white-box agent loop: call the backend, run its tool calls on a trial, repeat."""
    trial = Trial(load_task(spec), "t")
    messages: list[Message] = [user(spec.request)]
    done: list[Completion] = []
    for _ in range(max_turns):
        comp = await backend.complete(ChatRequest(messages=tuple(messages), tools=tools))
        done.append(comp)
        messages.append(Message(role="assistant", content=comp.turn.content, tool_calls=comp.turn.tool_calls))
        if not comp.turn.tool_calls:
            break
        for call in comp.turn.tool_calls:
            res = trial.call(call.name.rsplit("__", 1)[-1], json.loads(call.arguments))
            messages.append(Message(role="tool", content=json.dumps(res.body), tool_call_id=call.id))
    return done, trial


async def test_scripted_reference_solves_the_task_through_prefixed_tools() -> None:
    spec = TaskSpec.model_validate(base_spec())
    backend = ScriptedBackend.from_reference(spec)
    assert isinstance(backend, Backend)
    comps, trial = await drive(backend, spec, MCP_TOOLS)
    calls = [c for comp in comps for c in comp.turn.tool_calls]
    assert [(c.id, c.name) for c in calls] == [
        ("call_0", "mcp__svc__helpdesk_list_tickets"),
        ("call_1", "mcp__svc__helpdesk_update_ticket"),
    ]
    assert json.loads(calls[1].arguments) == {"ticket_id": "TK-1", "priority": "critical"}
    assert comps[-1].turn.content == "TK-1 escalated to critical."
    result = grade(
        spec, Episode(events=trial.audit, final_answer=comps[-1].turn.content, state=trial.snapshot())
    )
    assert result.completion == pytest.approx(1.0)
    tok = ByteTokenizer()
    for comp in comps:  # ids are populated, aligned and reversible
        assert len(comp.logprobs) == len(comp.output_ids) > 0
        assert comp.output_ids[-1] == EOS_ID
        assert tok.decode(comp.output_ids, skip_special_tokens=True) == comp.text
        assert tok.decode(comp.prompt_ids).endswith("<|im_start|>assistant\n")
        assert comp.policy_version == "scripted"
    # the next prompt contains the previous turn's exact output text (token consistency)
    assert tok.decode(comps[0].output_ids) in tok.decode(comps[1].prompt_ids)


async def test_scripted_from_steps_counts_assistant_turns_and_resolves_names() -> None:
    backend = ScriptedBackend.from_steps([("helpdesk_get_ticket", {"ticket_id": "TK-2"})], "done")
    for sep_name in ("svc_helpdesk_get_ticket", "svc.helpdesk_get_ticket", "helpdesk_get_ticket"):
        comp = await backend.complete(ChatRequest(messages=(user(),), tools=(ToolSpec(name=sep_name),)))
        assert comp.turn.tool_calls[0].name == sep_name
    # a split assistant turn (text message + tool-call message) still counts once
    split = (
        user(),
        Message(role="assistant", content="thinking"),
        Message(role="assistant", tool_calls=(ToolCall(id="x", name="helpdesk_get_ticket"),)),
        Message(role="tool", content="{}", tool_call_id="x"),
    )
    comp = await backend.complete(ChatRequest(messages=split, tools=MCP_TOOLS))
    assert comp.turn.content == "done"
    assert not comp.turn.tool_calls
    with pytest.raises(BackendError, match="helpdesk_get_ticket") as err:
        await backend.complete(ChatRequest(messages=(user(),), tools=(ToolSpec(name="other"),)))
    assert err.value.kind == "scripted"


async def test_scripted_multi_turn_asks_the_user_then_continues() -> None:
    spec = TaskSpec.model_validate(
        base_spec(
            reference={
                "steps": [
                    {"tool": "helpdesk_list_tickets", "args": {}},
                    {"text": "Yes, escalate TK-1."},
                    {"tool": "helpdesk_update_ticket", "args": {"ticket_id": "TK-1", "priority": "critical"}},
                ],
                "final_message": "TK-1 escalated to critical.",
            },
            user_sim={
                "persona": "ops lead",
                "replies": [{"text": "Yes, escalate TK-1.", "triggers": ["confirm"]}],
            },
        )
    )
    backend = ScriptedBackend.from_reference(spec)
    msgs: list[Message] = [user()]
    c1 = await backend.complete(ChatRequest(messages=tuple(msgs), tools=MCP_TOOLS))
    msgs += [
        Message(role="assistant", tool_calls=c1.turn.tool_calls),
        Message(role="tool", content="[]", tool_call_id="call_0"),
    ]
    c2 = await backend.complete(ChatRequest(messages=tuple(msgs), tools=MCP_TOOLS))
    assert not c2.turn.tool_calls
    assert "confirm" in c2.turn.content  # worded to trigger the scripted user's reply
    msgs += [Message(role="assistant", content=c2.turn.content), user("Yes, escalate TK-1.")]
    c3 = await backend.complete(ChatRequest(messages=tuple(msgs), tools=MCP_TOOLS))
    assert c3.turn.tool_calls[0].name == "mcp__svc__helpdesk_update_ticket"
    assert c3.turn.tool_calls[0].id == "call_1"


async def test_scripted_workspace_steps_use_the_harness_shell_tool() -> None:
    backend = ScriptedBackend.from_steps(
        [
            ("workspace.write_file", {"path": "out/report.md", "content": "it's done"}),
            ("helpdesk_list_tickets", {}),
        ],
        "ok",
    )
    bash = ToolSpec(name="Bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
    comp = await backend.complete(ChatRequest(messages=(user(),), tools=(bash, *MCP_TOOLS)))
    command = json.loads(comp.turn.tool_calls[0].arguments)["command"]
    assert comp.turn.tool_calls[0].name == "Bash"
    assert command == "mkdir -p out && printf '%s' 'it'\"'\"'s done' > out/report.md"
    # without any shell or write tool the workspace step is dropped
    comp = await backend.complete(ChatRequest(messages=(user(),), tools=MCP_TOOLS))
    assert comp.turn.tool_calls[0].name == "mcp__svc__helpdesk_list_tickets"


async def test_scripted_routes_several_tasks_by_request_text() -> None:
    a = TaskSpec.model_validate(base_spec())
    b = TaskSpec.model_validate(
        base_spec(id="t2", request="Close TK-2 please.", forbidden=[], reference={"final_message": "closed"})
    )
    backend = ScriptedBackend.from_references([a, b])
    comp = await backend.complete(ChatRequest(messages=(user("Task: Close TK-2 please."),), tools=MCP_TOOLS))
    assert comp.turn.content == "closed"
    with pytest.raises(BackendError, match="no scripted task matches"):
        await backend.complete(ChatRequest(messages=(user("something else"),), tools=MCP_TOOLS))


async def test_scripted_faults_hit_at_the_rate_with_every_kind() -> None:
    backend = ScriptedBackend.from_steps(
        [("helpdesk_list_tickets", {})], "ok", faults=Faults(rate=0.3, seed=7)
    )
    kinds: list[str] = []
    for _ in range(300):
        try:
            comp = await backend.complete(ChatRequest(messages=(user(),), tools=MCP_TOOLS))
        except BackendError as exc:
            kinds.append(exc.kind)
        else:
            if comp.turn.malformed:
                kinds.append("garbage")
                assert not comp.turn.tool_calls
            else:
                assert comp.turn.tool_calls[0].name == "mcp__svc__helpdesk_list_tickets"
    assert 60 <= len(kinds) <= 120
    assert set(kinds) == {"timeout", "http_5xx", "truncated", "garbage"}
    again = ScriptedBackend.from_steps([("helpdesk_list_tickets", {})], "ok", faults=Faults(rate=0.3, seed=7))
    replay: list[str] = []
    for _ in range(20):
        try:
            comp = await again.complete(ChatRequest(messages=(user(),), tools=MCP_TOOLS))
            replay.append("garbage" if comp.turn.malformed else "ok")
        except BackendError as exc:
            replay.append(exc.kind)
    assert [k for k in replay if k != "ok"] == kinds[: len([k for k in replay if k != "ok"])]
    with pytest.raises(ValueError, match="unknown fault kinds"):
        Faults(rate=0.1, kinds=("meteor",))


# ================================================================ embedded (tiny random model)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from coworkenv.proxy.backends.embedded import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture
def tiny(tokenizer: Any) -> Any:
    from coworkenv.proxy.backends.embedded import tiny_random_model

    return tiny_random_model(tokenizer)


def test_smollm2_codec_matches_the_tokenizer_template_without_tools(tokenizer: Any) -> None:
    codec = get_codec("smollm2")
    for msgs in (
        [user("hi")],
        [
            Message(role="system", content="Be brief."),
            user("hi"),
            Message(role="assistant", content="Hello!"),
            user("x"),
        ],
    ):
        req = ChatRequest(messages=tuple(msgs))
        ref = tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in msgs], add_generation_prompt=True, tokenize=False
        )
        assert codec.render_text(req) == ref
        ids = tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in msgs], add_generation_prompt=True, tokenize=True
        )
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        assert list(codec.render(req, tokenizer).ids) == list(ids)


def recomputed_logprobs(model: Any, comp: Completion, temperature: float, top_p: float) -> list[float]:
    from coworkenv.proxy.backends.embedded import processed_logprobs

    seq = torch.tensor([[*comp.prompt_ids, *comp.output_ids]])
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0]
    n = len(comp.prompt_ids)
    lp = processed_logprobs(logits[n - 1 : -1], temperature, top_p)
    return [float(lp[i, t]) for i, t in enumerate(comp.output_ids)]


async def test_embedded_logprobs_are_the_sampling_distribution_and_seeded(tokenizer: Any, tiny: Any) -> None:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(tiny, tokenizer, seed=3, temperature=0.7, top_p=0.9, version="v1")
    req = ChatRequest(messages=(user(),), tools=MCP_TOOLS, max_tokens=12)
    comp = await backend.complete(req)
    assert isinstance(backend, Backend)
    assert list(comp.prompt_ids) == tokenizer.encode(
        get_codec("smollm2").render_text(req), add_special_tokens=False
    )
    assert 0 < len(comp.output_ids) <= 12
    assert comp.policy_version == "v1"
    assert comp.logprobs == pytest.approx(recomputed_logprobs(tiny, comp, 0.7, 0.9), abs=1e-4)
    assert all(math.isfinite(x) for x in comp.logprobs)  # sampled tokens are inside the nucleus
    twin = EmbeddedBackend(tiny, tokenizer, seed=3, temperature=0.7, top_p=0.9)
    assert (await twin.complete(req)).output_ids == comp.output_ids
    greedy = await backend.complete(req.model_copy(update={"temperature": 0.0}))
    assert greedy.logprobs == pytest.approx(recomputed_logprobs(tiny, greedy, 1.0, 1.0), abs=1e-4)
    assert greedy.turn.finish_reason == "length"


async def test_embedded_stops_at_end_ids_and_excludes_them_from_text(tokenizer: Any, tiny: Any) -> None:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(tiny, tokenizer, temperature=0.0)
    req = ChatRequest(messages=(user(),), max_tokens=6)
    first = (await backend.complete(req)).output_ids[0]
    backend.end_ids = frozenset({first})
    comp = await backend.complete(req)
    assert comp.output_ids == (first,)
    assert comp.turn.finish_reason == "stop"
    assert comp.text == ""
    assert {0, 2} <= EmbeddedBackend(tiny, tokenizer).end_ids  # <|endoftext|>, <|im_end|>


async def test_embedded_does_not_block_the_event_loop(tokenizer: Any, tiny: Any) -> None:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(tiny, tokenizer, seed=0, max_new_tokens=40)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    reqs = [ChatRequest(messages=(user(f"question {i}"),), max_tokens=40) for i in range(3)]
    comps = await asyncio.gather(*(backend.complete(r) for r in reqs))
    task.cancel()
    assert ticks >= 3
    assert all(len(c.output_ids) == len(c.logprobs) > 0 for c in comps)


async def test_embedded_set_weights_swaps_policy_and_version(tokenizer: Any, tiny: Any) -> None:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend, tiny_random_model

    backend = EmbeddedBackend(tiny, tokenizer, temperature=0.0, version="0")
    req = ChatRequest(messages=(user(),), max_tokens=8)
    before = await backend.complete(req)
    other = tiny_random_model(tokenizer, seed=1)
    backend.set_weights(other, "step-1")
    after = await backend.complete(req)
    assert after.policy_version == "step-1"
    assert before.policy_version == "0"
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-3)
    assert after.logprobs == pytest.approx(recomputed_logprobs(other, after, 1.0, 1.0), abs=1e-4)
    with pytest.raises(ModelError, match="do not fit"):
        backend.set_weights(tiny_random_model(tokenizer, hidden=32), "bad")
    assert backend.policy_version == "step-1"


async def test_embedded_rejects_a_prompt_over_the_context(tokenizer: Any, tiny: Any) -> None:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend(tiny, tokenizer)
    backend.context_limit = 20
    with pytest.raises(BackendError, match="context is 20") as err:
        await backend.complete(ChatRequest(messages=(user("word " * 50),)))
    assert err.value.kind == "context_length"


def test_real_smollm2_logprobs_match_a_recomputed_forward_pass() -> None:
    """Token-in/token-out consistency on the real embedded model (the one model-loading test)."""
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    backend = EmbeddedBackend.from_checkpoint(seed=0, temperature=1.0, top_p=1.0)
    comp = asyncio.run(backend.complete(ChatRequest(messages=(user("Say hello."),), max_tokens=8)))
    assert 0 < len(comp.output_ids) <= 8
    assert comp.logprobs == pytest.approx(recomputed_logprobs(backend.model, comp, 1.0, 1.0), abs=2e-3)
    assert comp.policy_version == "smollm2"


# ================================================================ fake remote servers

CANNED = '<tool_call>{"name": "helpdesk_list_tickets", "arguments": {"status": "open"}}</tool_call>'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"model": "teacher-2", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _tool_piece(index: int, **fields: Any) -> dict[str, Any]:
    fn = {k: v for k, v in fields.items() if k in ("name", "arguments")}
    return {"index": index, **({"id": fields["id"]} if "id" in fields else {}), "function": fn}


TEACHER_EVENTS: list[dict[str, Any]] = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"content": "Let me "}),
    _chunk({"content": "look."}),
    _chunk({"tool_calls": [_tool_piece(0, id="call_a", name="mcp__svc__helpdesk_list_tickets")]}),
    _chunk({"tool_calls": [_tool_piece(0, arguments='{"sta')]}),
    _chunk({"tool_calls": [_tool_piece(1, id="call_b", name="mcp__svc__helpdesk_get_ticket", arguments="")]}),
    _chunk({"tool_calls": [_tool_piece(0, arguments='tus": "open"}')]}),
    _chunk({"tool_calls": [_tool_piece(1, arguments='{"id": 7}')]}),
    _chunk({}, finish="tool_calls"),
    {"model": "teacher-2", "choices": [], "usage": {"prompt_tokens": 13, "completion_tokens": 9}},
]


async def _teacher_stream(mode: str) -> AsyncIterator[bytes]:
    """The teacher's SSE answer, cut into odd pieces (events split across HTTP chunks)."""
    events = [b"data: " + json.dumps(e).encode() for e in TEACHER_EVENTS]
    if mode == "stream-cut":
        events = events[:5]
    elif mode == "stream-error":
        events.insert(2, b'data: {"error": {"message": "engine died", "code": 500}}')
    elif mode == "stream-garbage":
        events.insert(2, b"data: {not json")
    if mode != "stream-cut":
        events.append(b"data: [DONE]")
    raw = b": keep-alive\r\n\r\n" + b"".join(e + b"\r\n\r\n" for e in events)
    for i in range(0, len(raw), 97):
        yield raw[i : i + 97]
        await asyncio.sleep(0)


def fake_app(tokenizer: Any) -> FastAPI:
    app = FastAPI()
    app.state.seen = []

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        body = await request.json()
        app.state.seen.append(body)
        mode = body.get("model")
        if mode == "down":
            return JSONResponse({"error": "overloaded"}, status_code=503)
        if mode == "slow":
            await asyncio.sleep(1.0)
        if mode == "cut":
            return Response(b'{"choices": [{"text": "<tool', media_type="application/json")
        ids = [*tokenizer.encode(CANNED, add_special_tokens=False), 2]
        choice: dict[str, Any] = {
            "text": CANNED,
            "finish_reason": "stop",
            "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids)},
        }
        if mode == "echo-wrong":
            choice["prompt_token_ids"] = [1, 2, 3]
        if mode == "plain":  # an OpenAI-compatible server without the vLLM extras
            choice["logprobs"]["tokens"] = tokenizer.convert_ids_to_tokens(ids)
        return JSONResponse({"choices": [choice]})

    @app.post("/generate")
    async def generate(request: Request) -> Response:
        body = await request.json()
        app.state.seen.append(body)
        ids = tokenizer.encode(CANNED, add_special_tokens=False)
        return JSONResponse(
            {
                "text": CANNED,
                "meta_info": {
                    "output_token_logprobs": [[-0.25, i, None] for i in ids],
                    "finish_reason": {"type": "length"},
                },
            }
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        app.state.seen.append({"headers": dict(request.headers), "client": request.client, **body})
        mode = str(body.get("model"))
        if mode.startswith("status-"):
            return JSONResponse({"error": {"message": "no"}}, status_code=int(mode[7:]))
        if mode == "slow":
            await asyncio.sleep(1.0)
        if mode == "cut":
            return Response(b'{"choices": [{"message": {"content": "Hel', media_type="application/json")
        if body.get("stream") and mode != "stream-json":
            return StreamingResponse(_teacher_stream(mode), media_type="text/event-stream")
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_teacher_9",
                    "type": "function",
                    "function": {
                        "name": "mcp__svc__helpdesk_list_tickets",
                        "arguments": '{"status": "open"}',
                    },
                }
            ],
        }
        return JSONResponse(
            {
                "model": "teacher-1",
                "choices": [{"message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7},
            }
        )

    return app


@pytest.fixture(scope="module")
def server(tokenizer: Any) -> Iterator[tuple[str, FastAPI]]:
    import uvicorn

    app = fake_app(tokenizer)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="off"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}", app
    srv.should_exit = True
    thread.join(5)
    sock.close()


async def test_upstream_vllm_sends_token_ids_and_returns_ids_with_logprobs(
    server: tuple[str, FastAPI], tokenizer: Any
) -> None:
    url, app = server
    backend = UpstreamBackend(url + "/v1", tokenizer, model="m", flavor="vllm", version="w7")
    req = ChatRequest(messages=(user(),), tools=MCP_TOOLS, max_tokens=64, temperature=0.6)
    comp = await backend.complete(req)
    sent = app.state.seen[-1]
    assert sent["prompt"] == list(comp.prompt_ids)
    assert list(comp.prompt_ids) == tokenizer.encode(
        get_codec("smollm2").render_text(req), add_special_tokens=False
    )
    assert sent["logprobs"] == 1
    assert sent["return_tokens_as_token_ids"] is True
    assert sent["max_tokens"] == 64
    assert sent["temperature"] == 0.6
    assert list(comp.output_ids) == [*tokenizer.encode(CANNED, add_special_tokens=False), 2]
    assert comp.logprobs == (-0.5,) * len(comp.output_ids)
    assert comp.turn.tool_calls[0].name == "mcp__svc__helpdesk_list_tickets"
    assert comp.turn.tool_calls[0].arguments == '{"status":"open"}'
    assert comp.policy_version == "w7"
    assert comp.token_exact
    plain = UpstreamBackend(url, tokenizer, model="plain", flavor="openai")
    assert (await plain.complete(req)).output_ids == comp.output_ids
    assert "return_tokens_as_token_ids" not in app.state.seen[-1]
    await backend.aclose()
    await plain.aclose()


async def test_upstream_sglang_native_generate(server: tuple[str, FastAPI], tokenizer: Any) -> None:
    url, app = server
    backend = UpstreamBackend(url, tokenizer, flavor="sglang", codec="hermes")
    req = ChatRequest(messages=(user(),), tools=MCP_TOOLS)
    comp = await backend.complete(req)
    assert app.state.seen[-1]["input_ids"] == list(comp.prompt_ids)
    assert app.state.seen[-1]["return_logprob"] is True
    assert "# Tools" in tokenizer.decode(comp.prompt_ids)
    assert comp.logprobs == (-0.25,) * len(comp.output_ids)
    assert comp.turn.tool_calls[0].id == "call_0"
    await backend.aclose()


@pytest.mark.parametrize(
    ("model", "kind"),
    [("down", "http_5xx"), ("slow", "timeout"), ("cut", "truncated"), ("echo-wrong", "token_mismatch")],
)
async def test_upstream_failures_are_backend_errors(
    server: tuple[str, FastAPI], tokenizer: Any, model: str, kind: str
) -> None:
    url, _ = server
    backend = UpstreamBackend(url + "/v1", tokenizer, model=model, timeout_s=0.3)
    try:
        with pytest.raises(BackendError) as err:
            await backend.complete(ChatRequest(messages=(user(),), tools=MCP_TOOLS))
        assert err.value.kind == kind
    finally:
        await backend.aclose()


async def test_upstream_unreachable_is_a_connect_error(tokenizer: Any) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    backend = UpstreamBackend(f"http://127.0.0.1:{port}/v1", tokenizer)
    with pytest.raises(BackendError) as err:
        await backend.complete(ChatRequest(messages=(user(),)))
    await backend.aclose()
    assert err.value.kind == "connect"


async def test_passthrough_maps_the_chat_api_both_ways(server: tuple[str, FastAPI]) -> None:
    url, app = server
    backend = PassthroughBackend(url + "/v1", model="teacher", api_key="sk-test")
    history = (
        user(),
        Message(
            role="assistant",
            tool_calls=(ToolCall(id="c0", name="mcp__svc__helpdesk_get_ticket", arguments="{}"),),
        ),
        Message(role="tool", content="{}", tool_call_id="c0"),
    )
    comp = await backend.complete(ChatRequest(messages=history, tools=MCP_TOOLS, max_tokens=99))
    sent = app.state.seen[-1]
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert sent["model"] == "teacher"
    assert sent["max_tokens"] == 99
    assert sent["tools"][0] == {
        "type": "function",
        "function": {
            "name": "mcp__svc__helpdesk_list_tickets",
            "description": "helpdesk_list_tickets",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert sent["messages"][1]["tool_calls"][0]["function"] == {
        "name": "mcp__svc__helpdesk_get_ticket",
        "arguments": "{}",
    }
    assert sent["messages"][2] == {"role": "tool", "content": "{}", "tool_call_id": "c0"}
    assert not comp.token_exact
    assert comp.output_ids == ()
    assert comp.prompt_ids == ()
    assert comp.turn.finish_reason == "tool_calls"
    assert comp.turn.tool_calls == (
        ToolCall(id="call_teacher_9", name="mcp__svc__helpdesk_list_tickets", arguments='{"status": "open"}'),
    )
    assert (comp.model, comp.usage_prompt_tokens, comp.usage_completion_tokens) == ("teacher-1", 11, 7)
    await backend.aclose()


async def test_passthrough_streamed_assembles_content_and_interleaved_tool_calls(
    server: tuple[str, FastAPI],
) -> None:
    url, app = server
    backend = PassthroughBackend(url + "/v1", model="stream", api_key="sk-test", stream=True)
    comp = await backend.complete(ChatRequest(messages=(user(),), tools=MCP_TOOLS))
    sent = app.state.seen[-1]
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert comp.turn.content == comp.text == "Let me look."
    assert comp.turn.tool_calls == (
        ToolCall(id="call_a", name="mcp__svc__helpdesk_list_tickets", arguments='{"status": "open"}'),
        ToolCall(id="call_b", name="mcp__svc__helpdesk_get_ticket", arguments='{"id": 7}'),
    )
    assert comp.turn.finish_reason == "tool_calls"
    assert not comp.token_exact
    assert (comp.prompt_ids, comp.output_ids, comp.logprobs) == ((), (), ())
    assert (comp.model, comp.usage_prompt_tokens, comp.usage_completion_tokens) == ("teacher-2", 13, 9)
    await backend.aclose()


@pytest.mark.parametrize(
    ("model", "stream", "kind"),
    [
        ("status-429", False, "rate_limit"),
        ("status-503", True, "http_5xx"),
        ("status-400", True, "http_4xx"),
        ("slow", True, "timeout"),
        ("cut", False, "truncated"),
        ("stream-cut", True, "truncated"),
        ("stream-error", True, "upstream_error"),
        ("stream-garbage", True, "bad_response"),
        ("stream-json", True, "bad_response"),
    ],
)
async def test_passthrough_failures_are_backend_errors(
    server: tuple[str, FastAPI], model: str, stream: bool, kind: str
) -> None:
    url, _ = server
    backend = PassthroughBackend(url + "/v1", model=model, timeout_s=0.3, stream=stream)
    try:
        with pytest.raises(BackendError) as err:
            await backend.complete(ChatRequest(messages=(user(),)))
        assert err.value.kind == kind
        assert url in str(err.value)
    finally:
        await backend.aclose()


async def test_passthrough_unreachable_is_a_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    backend = PassthroughBackend(f"http://127.0.0.1:{port}/v1", stream=True)
    with pytest.raises(BackendError) as err:
        await backend.complete(ChatRequest(messages=(user(),)))
    await backend.aclose()
    assert err.value.kind == "connect"


async def test_passthrough_reuses_one_keepalive_connection(server: tuple[str, FastAPI]) -> None:
    url, app = server
    backend = PassthroughBackend(url + "/v1", model="stream", stream=True)
    for _ in range(5):
        await backend.complete(ChatRequest(messages=(user(),)))
    for _ in range(5):
        await asyncio.gather(*(backend.complete(ChatRequest(messages=(user(),))) for _ in range(3)))
    await backend.aclose()
    ports = {seen["client"][1] for seen in app.state.seen[-20:]}
    assert len(ports) <= 3  # sequential calls on one connection; 3 concurrent need at most 3


def test_passthrough_client_closes_with_its_loop_without_aclose(server: tuple[str, FastAPI]) -> None:
    import gc
    import warnings

    url, _ = server
    backend = PassthroughBackend(url + "/v1", model="teacher")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # a second loop gets its own client; the first one's was closed with it
            turn = asyncio.run(backend.complete(ChatRequest(messages=(user(),)))).turn
            assert turn.tool_calls[0].id == "call_teacher_9"
            clients = [client for _, client, _ in backend.http._clients.values()]
            assert len(clients) == 1
            assert clients[0].session.closed  # type: ignore[union-attr]
        gc.collect()


async def test_json_poster_through_an_injected_httpx_transport() -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["model"] == "down":
            return httpx.Response(502, text="bad gateway")
        if body.get("stream"):
            events = b"data: " + json.dumps(_chunk({"content": "hi"}, finish="stop")).encode()
            return httpx.Response(
                200, content=events + b"\n\ndata: [DONE]\n\n", headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(
            200, json={"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}
        )

    transport = httpx.MockTransport(handler)
    for stream in (False, True):
        backend = PassthroughBackend("http://teacher/v1", model="m", stream=stream, transport=transport)
        assert (await backend.complete(ChatRequest(messages=(user(),)))).text == "hi"
        await backend.aclose()
    poster = JsonPoster(timeout_s=1, transport=transport)
    with pytest.raises(BackendError) as err:
        await poster.post("http://teacher/v1/chat/completions", {"model": "down"})
    assert (err.value.kind, "HTTP 502: bad gateway" in str(err.value)) == ("http_5xx", True)
    await poster.aclose()


async def test_sse_data_reassembles_events_across_chunk_boundaries() -> None:
    raw = b': c\r\n\r\ndata: {"a": 1}\r\n\r\nevent: x\ndata: line1\ndata:line2\n\ndata: [DONE]\n\ndata: torn'

    async def pieces(size: int) -> AsyncIterator[bytes]:
        for i in range(0, len(raw), size):
            yield raw[i : i + size]

    for size in (1, 2, 5, 13, len(raw)):
        assert [d async for d in _sse_data(pieces(size))] == [b'{"a": 1}', b"line1\nline2", b"[DONE]"]


# ================================================================ factory


def test_parse_spec_and_factory_errors() -> None:
    assert parse_spec("vllm:http://h:8000/v1?model=q&temperature=0.5") == (
        "vllm",
        "http://h:8000/v1",
        {"model": "q", "temperature": 0.5},
    )
    assert parse_spec("embedded?seed=2") == ("embedded", "", {"seed": 2})
    with pytest.raises(CoworkError, match="unknown kind 'gpt'"):
        make_backend("gpt:x")
    with pytest.raises(CoworkError, match="needs an http"):
        make_backend("vllm:localhost")
    with pytest.raises(CoworkError, match="unknown option"):
        make_backend("passthrough:http://x/v1?colour=red")
    with pytest.raises(CoworkError, match="not a number"):
        make_backend("scripted?fault_rate=lots")
    with pytest.raises(CoworkError, match="no built-in task 'nope'"):
        make_backend("scripted:nope")


async def test_factory_builds_each_kind(tmp_path: Any) -> None:
    spec_file = tmp_path / "task.json"
    spec_file.write_text(json.dumps(base_spec()))
    scripted = make_backend(f"scripted:{spec_file}?fault_rate=0.5&fault_seed=1")
    assert isinstance(scripted, ScriptedBackend)
    assert scripted.faults == Faults(rate=0.5, seed=1)
    routed = make_backend("scripted")
    assert isinstance(routed, ScriptedBackend)
    assert isinstance(make_backend("passthrough:http://x/v1?model=gpt"), PassthroughBackend)
    up = make_backend("sglang:http://x:3000?codec=hermes&max_tokens=32")
    assert isinstance(up, UpstreamBackend)
    assert (up.url, up.max_tokens, up.codec.family) == ("http://x:3000/generate", 32, "hermes")


def test_fixed_sampling_decodes_every_request_at_its_settings() -> None:
    """The evaluation wrapper replaces the harness's temperature (and top_p), delegates the rest."""
    from coworkenv.proxy.backends.sampling import FixedSampling

    seen: list[ChatRequest] = []

    class Recorder:
        name = "recorder"
        policy_version = "sft-4"
        tokenizer = "tok"

        async def complete(self, request: ChatRequest) -> Completion:
            seen.append(request)
            return Completion(turn=AssistantTurn(content="ok"), text="ok", policy_version=self.policy_version)

    inner = Recorder()
    greedy = FixedSampling(inner, 0.0)
    asked = ChatRequest(messages=(Message(role="user", content="hi"),), temperature=0.9, top_p=0.8)
    out = asyncio.run(greedy.complete(asked))
    assert out.text == "ok"
    assert (seen[-1].temperature, seen[-1].top_p) == (0.0, 0.8)  # top_p not given: the harness's stays
    asyncio.run(FixedSampling(inner, 0.5, top_p=1.0).complete(asked))
    assert (seen[-1].temperature, seen[-1].top_p) == (0.5, 1.0)
    assert isinstance(greedy, Backend)
    assert (greedy.name, greedy.policy_version, greedy.tokenizer) == ("recorder", "sft-4", "tok")
    inner.policy_version = "rl-1"  # a weight push to the inner backend is what the wrapper serves
    assert greedy.policy_version == "rl-1"
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        FixedSampling(inner, -1.0)


def test_top_p_by_top_k_first_keeps_what_the_full_sort_keeps() -> None:
    """The top-p mask from the most likely candidates equals the one from sorting the vocabulary,
    on peaked, flat and tied distributions at several temperatures and top-p; the only allowed
    difference is a token whose mass-above is within float rounding of top_p."""
    import torch

    from coworkenv.proxy.backends.embedded import processed_logprobs, processed_logprobs_sorted

    # fp32 throughout (processed_logprobs computes in float32 on every CPU): tolerances from its eps
    eps = torch.finfo(torch.float32).eps
    g = torch.Generator().manual_seed(0)
    compared = differ = 0
    for trial in range(200):
        x = torch.randn(49152, generator=g) * (0.5, 1.0, 3.0, 8.0)[trial % 4]
        if trial % 7 == 0:
            x[:10] = x.max() + 1  # a tie at the top
        for temperature in (0.7, 1.0, 1.3):
            for top_p in (0.5, 0.9, 0.95):
                fast = processed_logprobs(x, temperature, top_p)
                full = processed_logprobs_sorted(x, temperature, top_p)
                compared += 1
                kept_fast, kept_full = ~torch.isinf(fast), ~torch.isinf(full)
                if torch.equal(kept_fast, kept_full):
                    assert torch.equal(fast[kept_fast], full[kept_full])  # the same masked log-softmax
                    continue
                differ += 1
                probs = torch.softmax(x / temperature, dim=-1)
                (edge,) = torch.nonzero(kept_fast ^ kept_full).flatten().tolist()
                above = float(probs[probs > probs[edge]].sum())
                assert abs(above - top_p) < 128 * eps, (trial, temperature, top_p, above)  # rounding
    assert compared == 1800
    assert differ <= 3
