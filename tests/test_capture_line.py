"""A capture record's line is the model's own JSON, encoded faster (proxy/capture.py record_line)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from coworkenv.jsonl import jsonl_lines
from coworkenv.proxy.capture import CapturedCall, CaptureStore, read_calls, record_line
from coworkenv.proxy.messages import ChatRequest, Message, ToolSpec, reusing


def _call(seq: int, n: int) -> CapturedCall:
    request = ChatRequest(
        messages=(Message(role="user", content='h\u00e9llo \u2028 "quoted" \\ back'),),
        tools=(ToolSpec(name="crm_find", description="find", parameters={"type": "object"}),),
    )
    ids = tuple((i * 7919) % 151_000 for i in range(n))
    return CapturedCall(
        rollout_id="r-1",
        seq=seq,
        call_id=f"chatcmpl-{seq}",
        dialect="openai_chat",
        request=request,
        prompt_ids=ids,
        output_ids=ids[:40],
        logprobs=tuple(-math.pi * i / 40 for i in range(40)),
        response={"content": "ok", "tool_calls": []},
        finish_reason="stop",
        t_start=1.25,
        t_end=2.5,
    )


def test_the_line_is_the_models_json() -> None:
    for n in (0, 1, 5_000):
        call = _call(0, n)
        line = record_line(call)
        assert line.endswith(b"}\n")
        assert line.count(b"\n") == 1
        assert json.loads(line) == json.loads(call.model_dump_json(exclude={"prompt_base", "request_base"}))
        assert CapturedCall.model_validate_json(line) == call


def test_the_store_writes_lines_read_calls_reads_back(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    calls = [_call(seq, 300 * (seq + 1)) for seq in range(3)]
    for call in calls:
        store.append(call)
    read, problems = read_calls(store.path("r-1"))
    assert problems == []
    assert read == calls


def test_opening_a_rollout_creates_its_file_and_keeps_a_resumed_ones_calls(tmp_path: Path) -> None:
    """The file exists before the first call (its creation is not on a call's latency); creating it
    again, as a resumed rollout's open does, keeps what it holds."""
    from coworkenv.proxy.backends.scripted import Script, ScriptedBackend
    from coworkenv.proxy.server import ProxyServer

    store = CaptureStore(tmp_path)
    proxy = ProxyServer(ScriptedBackend(Script((), "ok")), store)
    proxy.open_rollout("r-1")
    assert store.path("r-1").read_bytes() == b""
    assert read_calls(store.path("r-1")) == ([], [])
    first = _call(0, 300)
    store.append(first)
    proxy.close_rollout("r-1")
    again = ProxyServer(ScriptedBackend(Script((), "ok")), store)  # a new process resumes the rollout
    again.open_rollout("r-1")
    assert read_calls(store.path("r-1")) == ([first], [])


def test_text_with_unicode_line_separators_stays_one_record(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are written raw inside JSON strings; a reader that split lines with
    ``str.splitlines`` cut such a record in two and dropped it as unreadable."""
    text = "a\u2028b\u2029c\x85d"
    call = _call(0, 10).model_copy(update={"text": text})
    store = CaptureStore(tmp_path)
    store.append(call)
    read, problems = read_calls(store.path("r-1"))
    assert problems == []
    assert read[0].text == text
    assert [line for line in jsonl_lines(store.path("r-1")) if line] == [record_line(call).decode()[:-1]]


def _turns(n_calls: int, system: int = 3_000) -> list[CapturedCall]:
    """An agent loop's calls: each prompt is the previous prompt, its output, then new tokens."""
    calls: list[CapturedCall] = []
    prompt: tuple[int, ...] = tuple(range(system))
    request = _call(0, 0).request
    for seq in range(n_calls):
        output = tuple(100_000 + 50 * seq + i for i in range(50))
        update = {"prompt_ids": prompt, "output_ids": output, "logprobs": (-0.5,) * 50, "request": request}
        calls.append(_call(seq, 0).model_copy(update=update))
        prompt = prompt + output + tuple(200_000 + 30 * seq + i for i in range(30))  # the tool result
        turn = (
            Message(role="assistant", content=f"calling {seq}"),
            Message(role="tool", content=f"result \u2028 {seq}", tool_call_id=f"c{seq}"),
        )
        request = request.model_copy(update={"messages": request.messages + turn})
    return calls


def test_an_agent_loops_prompts_are_stored_as_deltas_and_read_back_whole(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    calls = _turns(12)
    for call in calls:
        store.append(call)
    lines = [json.loads(x) for x in jsonl_lines(store.path("r-1")) if x]
    assert "prompt_base" not in lines[0]
    assert [x["prompt_base"] for x in lines[1:]] == [
        [c.seq - 1, len(calls[c.seq - 1].prompt_ids) + 50] for c in calls[1:]
    ]
    assert all(len(x["prompt_ids"]) == 30 for x in lines[1:])  # only the new tokens
    assert [x["request_base"] for x in lines[1:]] == [[c.seq - 1, 2 * c.seq - 1, True] for c in calls[1:]]
    assert all(len(x["request"]["messages"]) == 2 for x in lines[1:])  # only the new messages
    assert all("tools" not in x["request"] for x in lines[1:])
    read, problems = read_calls(store.path("r-1"))
    assert problems == []
    assert read == calls
    whole = sum(len(record_line(c)) for c in calls)
    assert store.path("r-1").stat().st_size < whole / 4


def test_a_prompt_that_does_not_extend_the_previous_one_is_stored_whole(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    first, second = _turns(2)
    rewritten = second.model_copy(update={"prompt_ids": (7, *second.prompt_ids[1:])})  # history edited
    p = rewritten.prompt_ids  # one token changed where no position is sampled: only the hash sees it
    edited = (*p[:1], 99, *p[2:], *rewritten.output_ids)
    same_length = second.model_copy(update={"seq": 2, "prompt_ids": edited})
    for call in (first, rewritten, same_length):
        store.append(call)
    lines = [json.loads(x) for x in jsonl_lines(store.path("r-1")) if x]
    assert ["prompt_base" in x for x in lines] == [False, False, False]
    read, _ = read_calls(store.path("r-1"))
    assert read == [first, rewritten, same_length]


def test_a_delta_whose_base_is_unreadable_is_reported_not_guessed(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    calls = _turns(3)
    for call in calls:
        store.append(call)
    path = store.path("r-1")
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[1] = lines[1][: len(lines[1]) // 2]  # call 1 torn: call 2 extends it
    path.write_text("\n".join(lines), encoding="utf-8")
    read, problems = read_calls(path)
    assert [c.seq for c in read] == [0]
    assert len(problems) == 2
    assert "extends call 1" in problems[1]


def test_a_closed_rollouts_next_call_is_stored_whole(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    first, second = _turns(2)
    store.append(first)
    store.sync("r-1")
    store.append(second)
    lines = [json.loads(x) for x in jsonl_lines(store.path("r-1")) if x]
    assert "prompt_base" not in lines[1]


def test_edited_history_and_changed_tools_are_stored(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    first, second, third = _turns(3)
    messages = third.request.messages
    compacted = (messages[0], Message(role="user", content="summary of the above"), *messages[3:])
    tools = (ToolSpec(name="other", description="another tool", parameters={"type": "object"}),)
    edited = third.model_copy(
        update={"request": third.request.model_copy(update={"messages": compacted, "tools": tools})}
    )
    for call in (first, second, edited):
        store.append(call)
    last = json.loads([x for x in jsonl_lines(store.path("r-1")) if x][-1])
    assert last["request_base"] == [1, 1, False]  # only the system message is shared
    assert len(last["request"]["messages"]) == len(compacted) - 1
    assert last["request"]["tools"][0]["name"] == "other"
    read, problems = read_calls(store.path("r-1"))
    assert problems == []
    assert read == [first, second, edited]


def _fresh(call: CapturedCall) -> CapturedCall:
    """``call`` with its request parsed anew: equal values, no object shared with any other call."""
    request = ChatRequest.model_validate_json(call.request.model_dump_json())
    return call.model_copy(update={"request": request})


def test_reused_history_is_stored_byte_for_byte_as_a_fresh_parse(tmp_path: Path) -> None:
    """The proxy hands the capture a request whose history is the previous call's own objects
    (``reusing``); the capture skips encoding those, and the file must not change for it."""
    calls = _turns(6)
    fresh = [_fresh(c) for c in calls]
    reused: list[CapturedCall] = []
    previous: ChatRequest | None = None
    for c in fresh:
        request = reusing(previous, c.request)
        reused.append(c.model_copy(update={"request": request}))
        previous = request
    assert all(r.request == c.request for r, c in zip(reused, calls, strict=True))
    assert reused[3].request.messages[0] is reused[1].request.messages[0]
    assert reused[3].request.tools is reused[0].request.tools
    files = []
    for name, sequence in (("fresh", fresh), ("reused", reused)):
        store = CaptureStore(tmp_path / name)
        for c in sequence:
            store.append(c)
        files.append(store.path("r-1").read_bytes())
    assert files[0] == files[1]
    read, problems = read_calls(tmp_path / "reused" / "r-1.calls.jsonl")
    assert problems == []
    assert read == calls


def test_reusing_keeps_the_request_and_shares_only_equal_leading_parts() -> None:
    tools = (ToolSpec(name="crm_find", description="find", parameters={"type": "object"}),)
    a, b, c = (Message(role="user", content=x) for x in "abc")
    first = ChatRequest(messages=(a, b), tools=tools)
    same_again = ChatRequest.model_validate_json(first.model_dump_json())
    assert reusing(None, same_again) is same_again
    both = reusing(first, same_again)
    assert both == first
    assert all(x is y for x, y in zip(both.messages, first.messages, strict=True))
    assert both.tools is first.tools
    edited = ChatRequest(messages=(Message(role="user", content="a"), c, b), tools=())
    out = reusing(first, edited)
    assert out == edited
    assert out.messages[0] is a  # only the leading equal message is shared
    assert out.messages[1] is edited.messages[1]
    assert out.messages[2] is edited.messages[2]  # equal to first's b, but not at the same position
    assert out.tools == ()
    unrelated = ChatRequest(messages=(c,), tools=(ToolSpec(name="other"),))
    assert reusing(first, unrelated) is unrelated
