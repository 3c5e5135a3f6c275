"""Message-level matching: which earlier call a rewritten prompt continues.

Contract: :meth:`MessageIndex.continued_call` returns the earlier call ``j`` (by tree index) with the
most request messages such that the new request's messages start with ``j``'s request messages
followed by an assistant message equal to ``j``'s response — all compared after normalization:
tool-call ids and ``tool_call_id`` are ignored (harnesses rename them), tool arguments are compared
as canonical JSON (re-serialization, key order, whitespace), ``null``/missing content equals ``""``,
surrounding whitespace is ignored, and an assistant message matches a response whose text contains
it (harnesses drop reasoning). Only calls with more messages than the token parent are considered,
so a prompt that extends its token parent normally costs nothing here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from coworkenv.proxy.capture import CapturedCall
from coworkenv.proxy.messages import Message, ToolCall

NormMessage = tuple[str, str, tuple[tuple[str, str], ...]]


def canonical_arguments(arguments: str) -> str:
    """Tool arguments as canonical JSON (sorted keys, no spaces); ``null``/empty → ``{}``."""
    text = arguments.strip()
    if not text or text == "null":
        return "{}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    if value is None:
        return "{}"
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalize(m: Message) -> NormMessage:
    calls = tuple((tc.name, canonical_arguments(tc.arguments)) for tc in m.tool_calls)
    return (m.role, m.content.strip(), calls)


def response_message(call: CapturedCall) -> Message:
    """The assistant message the harness received for ``call`` (from ``call.response``)."""
    resp = call.response
    calls: list[ToolCall] = []
    for i, tc in enumerate(resp.get("tool_calls") or ()):
        if isinstance(tc, dict):
            args = tc.get("arguments", "{}")
            calls.append(
                ToolCall(
                    id=str(tc.get("id") or f"call_{i}"),
                    name=str(tc.get("name") or ""),
                    arguments=args if isinstance(args, str) else json.dumps(args),
                )
            )
    content = resp.get("content")
    return Message(
        role="assistant", content=content if isinstance(content, str) else "", tool_calls=tuple(calls)
    )


def assistant_matches(seen: NormMessage, produced: NormMessage) -> bool:
    if seen[0] != "assistant" or seen[2] != produced[2]:
        return False
    return seen[1] == produced[1] or seen[1] in produced[1]


@dataclass
class _Entry:
    index: int
    call: CapturedCall
    count: int
    last: NormMessage | None
    reply: NormMessage
    full: list[NormMessage] | None = None

    def normalized(self) -> list[NormMessage]:
        if self.full is None:
            self.full = [normalize(m) for m in self.call.request.messages]
        return self.full


class MessageIndex:
    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.by_seq: dict[int, int] = {}

    def add(self, index: int, call: CapturedCall) -> None:
        msgs = call.request.messages
        last = normalize(msgs[-1]) if msgs else None
        self.entries.append(_Entry(index, call, len(msgs), last, normalize(response_message(call))))
        self.by_seq[call.seq] = len(self.entries) - 1

    def continued_call(self, call: CapturedCall, token_parent: CapturedCall | None) -> int | None:
        msgs = call.request.messages
        floor = -1 if token_parent is None else len(token_parent.request.messages)
        cands = [e for e in self.entries if floor < e.count < len(msgs)]
        if not cands:
            return None
        cands.sort(key=lambda e: (e.count, e.index), reverse=True)
        mine: list[NormMessage | None] = [None] * len(msgs)

        def at(k: int) -> NormMessage:
            got = mine[k]
            if got is None:
                got = mine[k] = normalize(msgs[k])
            return got

        for e in cands:
            if not assistant_matches(at(e.count), e.reply):
                continue
            if e.count and at(e.count - 1) != e.last:
                continue
            theirs = e.normalized()
            if all(at(k) == theirs[k] for k in range(e.count)):
                return e.index
        return None
