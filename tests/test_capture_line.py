"""A capture record's line is the model's own JSON, encoded faster (proxy/capture.py record_line)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from coworkenv.proxy.capture import CapturedCall, CaptureStore, read_calls, record_line
from coworkenv.proxy.messages import ChatRequest, Message, ToolSpec


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
        assert json.loads(line) == json.loads(call.model_dump_json())
        assert CapturedCall.model_validate_json(line) == call


def test_the_store_writes_lines_read_calls_reads_back(tmp_path: Path) -> None:
    store = CaptureStore(tmp_path)
    calls = [_call(seq, 300 * (seq + 1)) for seq in range(3)]
    for call in calls:
        store.append(call)
    read, problems = read_calls(store.path("r-1"))
    assert problems == []
    assert read == calls


def test_text_with_unicode_line_separators_stays_one_record(tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 are written raw inside JSON strings; a reader that split lines with
    ``str.splitlines`` cut such a record in two and dropped it as unreadable."""
    from coworkenv.jsonl import jsonl_lines

    text = "a\u2028b\u2029c\x85d"
    call = _call(0, 10).model_copy(update={"text": text})
    store = CaptureStore(tmp_path)
    store.append(call)
    read, problems = read_calls(store.path("r-1"))
    assert problems == []
    assert read[0].text == text
    assert [line for line in jsonl_lines(store.path("r-1")) if line] == [record_line(call).decode()[:-1]]
