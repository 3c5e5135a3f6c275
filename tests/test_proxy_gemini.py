"""The proxy's Gemini API dialect: what Gemini CLI speaks (``:generateContent``,
``:streamGenerateContent?alt=sse``), its capture, and bad requests answered in Google's error shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from coworkenv.proxy.messages import AssistantTurn
from tests.test_proxy_support import ToyBackend, call, fail, make_proxy

TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "mcp_cowork_helpdesk_get_ticket",
                "description": "Get a ticket.",
                "parameters": {"type": "OBJECT", "properties": {"id": {"type": "STRING"}}},
            }
        ]
    },
    {"googleSearch": {}},
]


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "contents": [{"role": "user", "parts": [{"text": "Look at ticket T-1."}]}],
        "systemInstruction": {"parts": [{"text": "You are an agent."}]},
        "tools": TOOLS,
        "generationConfig": {"temperature": 0.5, "topP": 0.9, "topK": 64, "maxOutputTokens": 99},
        **extra,
    }


async def _post(
    tmp_path: Path, path: str, body: Any, backend: ToyBackend | None = None, *, secret: str | None = None
) -> tuple[httpx.Response, Any, Any]:
    backend = backend or ToyBackend(call("mcp_cowork_helpdesk_get_ticket", '{"id":"T-1"}', "call_7"))
    proxy, store = make_proxy(tmp_path, backend)
    prefix = proxy.open_rollout("r")
    if secret is not None:
        prefix = prefix.rsplit("/", 1)[0] + "/" + secret
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy.app), base_url="http://p") as http:
        res = await http.post(
            f"{prefix}{path}", content=content, headers={"content-type": "application/json"}
        )
    return res, proxy, store


async def test_generate_content_translates_request_and_answers_a_function_call(tmp_path: Path) -> None:
    backend = ToyBackend(call("mcp_cowork_helpdesk_get_ticket", '{"id":"T-1"}', "call_7"))
    res, _proxy, store = await _post(tmp_path, "/v1beta/models/policy:generateContent", _body(), backend)
    assert res.status_code == 200, res.text
    (request,) = backend.requests
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.model == "policy"
    assert request.max_tokens == 99
    assert request.top_p == 0.9
    (tool,) = request.tools  # googleSearch dropped
    assert tool.parameters == {"type": "object", "properties": {"id": {"type": "string"}}}
    cand = res.json()["candidates"][0]
    assert cand["finishReason"] == "STOP"
    assert cand["content"]["parts"] == [
        {"functionCall": {"id": "call_7", "name": "mcp_cowork_helpdesk_get_ticket", "args": {"id": "T-1"}}}
    ]
    assert res.json()["usageMetadata"]["candidatesTokenCount"] > 0
    (captured,), problems = store.read("r")
    assert not problems
    assert captured.dialect == "gemini"
    assert captured.error is None
    assert captured.output_ids
    assert len(captured.logprobs) == len(captured.output_ids)


async def test_stream_generate_content_sse_and_json_array(tmp_path: Path) -> None:
    backend = ToyBackend(AssistantTurn(content="All done."))
    res, _, store = await _post(
        tmp_path, "/v1beta/models/policy:streamGenerateContent?alt=sse", _body(), backend
    )
    assert res.headers["content-type"].startswith("text/event-stream")
    frames = [ln for ln in res.text.splitlines() if ln.startswith("data: ")]
    (chunk,) = [json.loads(f[6:]) for f in frames]
    assert chunk["candidates"][0]["content"]["parts"] == [{"text": "All done."}]
    (captured,), _ = store.read("r")
    assert captured.stream
    res2, _, _ = await _post(tmp_path / "b", "/v1beta/models/policy:streamGenerateContent", _body())
    assert res2.headers["content-type"].startswith("application/json")
    assert isinstance(res2.json(), list)
    assert res2.json()[0]["candidates"]


async def test_history_pairs_responses_with_calls_without_ids(tmp_path: Path) -> None:
    contents = [
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [
                {"thought": True, "text": "thinking..."},
                {"functionCall": {"name": "a", "args": {"x": 1}}},
                {"functionCall": {"name": "b", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "b", "response": {"result": 2}}},
                {"functionResponse": {"name": "a", "response": {"output": "one"}}},
                {"text": "and?"},
            ],
        },
    ]
    backend = ToyBackend(AssistantTurn(content="ok"))
    res, _, _ = await _post(tmp_path, "/v1beta/models/m:generateContent", {"contents": contents}, backend)
    assert res.status_code == 200, res.text
    msgs = backend.requests[0].messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool", "user"]
    a, b = msgs[1].tool_calls
    assert msgs[1].content == ""  # the thought is not replayed as text
    assert (msgs[2].tool_call_id, msgs[2].content) == (b.id, '{"result":2}')
    assert (msgs[3].tool_call_id, msgs[3].content) == (a.id, "one")
    assert a.arguments == '{"x":1}'


async def test_count_tokens_is_not_a_model_call(tmp_path: Path) -> None:
    res, proxy, _ = await _post(tmp_path, "/v1beta/models/m:countTokens", _body())
    assert res.status_code == 200
    assert res.json()["totalTokens"] > 0
    assert proxy.stats("r")["calls"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"systemInstruction": {"parts": []}}, "contents"),
        ({"contents": "hello"}, "contents"),
        ({"contents": [{"role": "wizard", "parts": []}]}, "contents[0].role"),
        ({"contents": [{"role": "user", "parts": [{"text": 3}]}]}, "contents[0].parts[0].text"),
        (
            {"contents": [{"role": "user", "parts": [{"functionCall": {"name": "x", "args": {}}}]}]},
            "contents[0].parts[0].functionCall",
        ),
        (
            {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "x", "args": 5}}]}]},
            "contents[0].parts[0].functionCall.args",
        ),
        ({"contents": [], "tools": [{"functionDeclarations": [{"description": "x"}]}]}, "name"),
        ({"contents": [], "generationConfig": {"maxOutputTokens": "many"}}, "maxOutputTokens"),
        (b"{not json", "not valid JSON"),
        ([1, 2], "JSON object"),
    ],
)
async def test_bad_requests_are_400_in_googles_shape_and_recorded(
    tmp_path: Path, body: Any, field: str
) -> None:
    res, proxy, store = await _post(tmp_path, "/v1beta/models/m:streamGenerateContent?alt=sse", body)
    assert res.status_code == 400, res.text
    err = res.json()["error"]
    assert err["code"] == 400
    assert err["status"] == "INVALID_ARGUMENT"
    assert field in err["message"]
    (captured,), _ = store.read("r")  # a bad request is still one recorded call
    assert captured.error
    assert captured.dialect == "gemini"
    assert proxy.stats("r") == {"calls": 1, "errors": 1, "pending": 0}


async def test_unserved_method_wrong_secret_and_backend_failure(tmp_path: Path) -> None:
    res, proxy, _ = await _post(tmp_path / "a", "/v1beta/models/m:embedContent", _body())
    assert res.status_code == 404
    assert res.json()["error"]["status"] == "NOT_FOUND"
    assert proxy.stats("r")["calls"] == 0
    res, _, _ = await _post(tmp_path / "b", "/v1beta/models/m:generateContent", _body(), secret="nope")
    assert res.status_code == 404  # a wrong secret is answered as an unknown rollout
    assert res.json()["error"]["status"] == "NOT_FOUND"
    res, _, store = await _post(
        tmp_path / "c", "/v1beta/models/m:generateContent", _body(), ToyBackend(fail("http_5xx"))
    )
    assert res.status_code == 502
    assert res.json()["error"]["status"] == "UNAVAILABLE"
    (captured,), _ = store.read("r")
    assert captured.error
    assert captured.error.startswith("http_5xx")
