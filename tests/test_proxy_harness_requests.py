"""Every real harness request in shared/harness-requests/ goes through the proxy and is translated.

Expected (roles, tool count) per request were checked by hand against the logged bodies: Claude's
mid-conversation ``system`` entries stay in place and its ``tool_result`` becomes a ``tool``
message; Codex's developer messages are system messages, its two namespaces are flattened (web_search
dropped); Qwen/OpenHands tool results given as part arrays become plain text; Gemini CLI's
``systemInstruction`` is the system message, its ``functionResponse`` a ``tool`` message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from coworkenv.proxy.messages import AssistantTurn, ChatRequest
from tests.test_proxy_support import ToyBackend, call, make_proxy

REQUESTS = Path(__file__).resolve().parents[2] / "shared" / "harness-requests"

# (file, index) -> (roles of the normalized messages, number of tools)
EXPECTED: dict[tuple[str, int], tuple[str, int]] = {
    ("claude197_run2_mcp", 0): ("sus", 25),
    ("claude197_run2_mcp", 1): ("susat", 25),
    ("claude332_run1", 0): ("sus", 12),
    ("claude332_run1", 1): ("susat", 12),
    ("claude332_run2_noisy", 0): ("sus", 3),
    ("claude332_run2_noisy", 1): ("susat", 3),
    ("claude332_run3_notoolsearch", 0): ("sus", 22),
    ("claude332_run3_notoolsearch", 1): ("susat", 22),
    ("codex_run1", 0): ("ssuu", 16),
    ("codex_run1", 1): ("ssuuat", 16),
    ("codex_run2_lean", 0): ("ssuu", 8),
    ("codex_run2_lean", 1): ("ssuuat", 8),
    ("mini_run1", 0): ("su", 1),
    ("mini_run1", 1): ("suat", 1),
    ("mini_run1", 2): ("suatu", 1),
    ("mini_run1", 3): ("suatuu", 1),
    ("openclaw_run1", 0): ("suu", 11),
    ("openclaw_run1", 1): ("suatu", 11),
    ("opencode_run1", 0): ("suu", 0),
    ("opencode_run1", 1): ("su", 11),
    ("opencode_run1", 2): ("suat", 11),
    ("openhands_run1", 0): ("su", 5),
    ("openhands_run1", 1): ("suat", 5),
    ("qwen_run1", 0): ("su", 14),
    ("qwen_run1", 1): ("suat", 14),
    ("gemini_run3_model", 0): ("su", 16),
    ("gemini_run3_model", 1): ("suat", 16),
}


def _logged() -> list[tuple[str, int, dict[str, Any]]]:
    if not REQUESTS.is_dir():
        return []
    out = []
    for path in sorted(REQUESTS.glob("*.jsonl")):
        for i, line in enumerate(path.read_text().splitlines()):
            out.append((path.stem, i, json.loads(line)))
    return out


LOGGED = _logged()
pytestmark = pytest.mark.skipif(not LOGGED, reason=f"harness requests not found at {REQUESTS}")


def test_every_logged_request_is_covered() -> None:
    seen = {(name, i) for name, i, _ in LOGGED}
    assert seen == set(EXPECTED)


def _reply(request: ChatRequest) -> AssistantTurn:
    # first call of a run: call the harness's first tool; later calls: finish with text
    if request.tools and not any(m.role == "tool" for m in request.messages):
        return call(request.tools[0].name, '{"command": "ls"}')
    return AssistantTurn(content="Done.")


@pytest.mark.parametrize(
    ("name", "index", "logged"),
    LOGGED,
    ids=[f"{n}#{i}" for n, i, _ in LOGGED],
)
async def test_logged_request_is_accepted_and_translated(
    tmp_path: Path, name: str, index: int, logged: dict[str, Any]
) -> None:
    backend = ToyBackend(_reply)
    proxy, store = make_proxy(tmp_path, backend)
    prefix = proxy.open_rollout("r")
    url = f"{prefix}{logged['path']}" + (f"?{logged['query']}" if logged.get("query") else "")
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
        res = await http.post(url, json=logged["body"], headers={"anthropic-version": "2023-06-01"})
    assert res.status_code == 200, res.text
    request = backend.requests[0]
    roles, n_tools = EXPECTED[(name, index)]
    assert "".join(m.role[0] for m in request.messages) == roles
    assert len(request.tools) == n_tools
    assert len({t.name for t in request.tools}) == n_tools  # flattening never collides
    body = logged["body"]
    if "streamGenerateContent" in logged["path"]:
        assert res.headers["content-type"].startswith("text/event-stream")
        (frame,) = [ln for ln in res.text.splitlines() if ln.startswith("data: ")]
        assert json.loads(frame[6:])["candidates"][0]["content"]["role"] == "model"
    elif body.get("stream"):
        assert res.headers["content-type"].startswith("text/event-stream")
        tail = res.text.rstrip().rsplit("\n", 1)[-1]
        assert tail in ("data: [DONE]", 'data: {"type":"message_stop"}') or '"response.completed"' in tail
    else:
        assert res.json()["choices"][0]["message"]["role"] == "assistant"
    (captured,), problems = store.read("r")
    assert problems == []
    assert captured.error is None
    assert captured.request == request


def test_codex_namespaces_flatten_and_map_back(tmp_path: Path) -> None:
    from coworkenv.proxy.dialects.openai_responses import OpenAIResponses

    (body,) = [b["body"] for n, i, b in LOGGED if (n, i) == ("codex_run1", 1)]
    parsed = OpenAIResponses().parse(body)
    assert parsed.namespaced["mcp__stub__stub_echo"] == ("mcp__stub", "stub_echo")
    assert "multi_agent_v1__close_agent" in parsed.namespaced
    names = [t.name for t in parsed.request.tools]
    assert "web_search" not in names
    assert "mcp__stub__stub_echo" in names
    call_msg = parsed.request.messages[4]
    assert call_msg.tool_calls[0].arguments == '{"cmd": "echo hello > out.txt && ls"}'  # byte-identical
    assert parsed.request.messages[5].tool_call_id == call_msg.tool_calls[0].id


def test_qwen_part_array_tool_result_becomes_text() -> None:
    from coworkenv.proxy.dialects.openai_chat import OpenAIChat

    (body,) = [b["body"] for n, i, b in LOGGED if (n, i) == ("qwen_run1", 1)]
    tool = OpenAIChat().parse(body).request.messages[-1]
    assert tool.role == "tool"
    assert tool.tool_call_id
    assert "out.txt" in tool.content


def test_gemini_call_and_response_pair_up_byte_identically() -> None:
    from coworkenv.proxy.dialects.gemini import GeminiGenerate

    (body,) = [b["body"] for n, i, b in LOGGED if (n, i) == ("gemini_run3_model", 1)]
    parsed = GeminiGenerate(model="m", stream=True, sse=True).parse(body)
    assert parsed.stream
    assert parsed.model == "m"
    system, _, assistant, tool = parsed.request.messages
    assert system.content.startswith("You are Gemini CLI")
    (tc,) = assistant.tool_calls
    assert (tc.id, tc.name) == ("run_shell_command_1796012274674_0", "run_shell_command")
    assert tc.arguments == '{"command":"echo hello > out.txt && ls"}'
    assert tool.tool_call_id == tc.id
    assert "Output: out.txt" in tool.content
    shell = next(t for t in parsed.request.tools if t.name == "run_shell_command")
    assert shell.parameters["type"] == "object"
