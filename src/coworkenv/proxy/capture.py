"""Captured model calls and the append-only store they go to.

Contract: one :class:`CapturedCall` per model call that reached the proxy under a valid rollout
prefix, successful or not (``error`` set on failure). The store appends one JSON line per call to
``<root>/<rollout_id>.calls.jsonl`` and flushes it to the OS before the harness gets its answer, so
a crash of the proxy process loses at most the call in flight (``fsync=True`` also survives a power
cut, at ~4 ms per call on a typical disk; :meth:`CaptureStore.sync` fsyncs one rollout's file, which
the proxy does when a rollout settles or closes); :func:`read_calls` skips a torn last line and reports it.
``seq`` numbers calls of one rollout in arrival order, starting at 0.

On disk a call that extends the rollout's previous call (its prompt, then some of its output, as
every turn of an agent loop does) is stored as a delta on it: ``prompt_base: [seq, length]`` and
only the tokens after it, ``request_base: [seq, count, same_tools]`` and only the messages after the
shared ones (the tools only when they changed). A rollout's file grows with its tokens, not with
their square (50 calls of a 22,000-token harness prompt were ~1.1M ids, ~6 MB, per rollout). The
store checks the extension by the previous prompt's length, hash and sampled positions and by a
hash per message; anything else is stored whole. :func:`read_calls` restores every call in full
(both bases ``None`` in memory) and reports, never guesses, a record whose base it could not read.
Schema version 2; version 1 files (every call whole) read unchanged.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coworkenv.jsonl import jsonl_lines
from coworkenv.proxy.messages import ChatRequest, Message, ToolSpec

CAPTURE_SCHEMA_VERSION = 2


class CapturedCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: int = CAPTURE_SCHEMA_VERSION
    rollout_id: str
    seq: int = Field(ge=0)
    call_id: str
    task_id: str = ""
    harness: str = ""
    dialect: str = Field(description="openai_chat | openai_responses | anthropic")
    stream: bool = False
    request: ChatRequest = Field(description="The normalized request (messages, tools, params).")
    prompt_ids: tuple[int, ...] = ()
    output_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    token_exact: bool = True
    text: str = Field(default="", description="Raw generated text (decoded output ids).")
    response: dict[str, Any] = Field(
        default_factory=dict, description="The AssistantTurn the harness received (model_dump)."
    )
    finish_reason: str = ""
    malformed: bool = False
    error: str | None = None
    policy_version: str = "0"
    model: str = ""
    state_hash: str | None = Field(
        default=None, description="Hash of the rollout's service state when the call arrived (GiGPO)."
    )
    t_start: float = 0.0
    t_first_byte: float | None = None
    t_end: float = 0.0
    prompt_base: tuple[int, int] | None = Field(
        default=None,
        description="On disk only: prompt_ids holds the tokens after the first `length` of call `seq`'s "
        "prompt + output (read_calls restores the whole prompt and clears this).",
    )
    request_base: tuple[int, int, bool] | None = Field(
        default=None,
        description="On disk only: request.messages holds the messages after the first `count` of call "
        "`seq`'s, and with `same_tools` its tools are that call's (read_calls restores and clears this).",
    )


PROBES = 16


@dataclass(slots=True, frozen=True)
class _Tail:
    """What the store keeps of a rollout's last call, to store the next one as a delta on it: the
    prompt's length, hash and sampled positions, the output ids, a hash per message's JSON and of
    the tools', and references to the call's message and tool objects (the proxy holds them anyway as
    the rollout's last request: no copy of the conversation)."""

    seq: int
    prompt_len: int
    prompt_hash: int
    probes: tuple[int, ...]
    """Sampled positions and their tokens, flat: ``(i0, t0, i1, t1, ...)`` (one object per rollout
    for the cyclic collector, not one pair per position)."""
    output_ids: tuple[int, ...]
    message_hashes: tuple[int, ...]
    tools_hash: int
    messages: tuple[Message, ...] = ()
    """The call's message objects: a next call holding the same objects (the proxy's ``reusing``)
    takes their hashes from here instead of encoding them again."""
    tools: tuple[ToolSpec, ...] = ()

    def shared(self, prompt: tuple[int, ...]) -> int:
        """How many leading tokens of ``prompt`` are this call's prompt + output (0 unless ``prompt``
        starts with this call's whole prompt)."""
        lp = self.prompt_len
        if (
            lp == 0
            or len(prompt) < lp
            or any(prompt[i] != t for i, t in zip(self.probes[::2], self.probes[1::2], strict=True))
        ):
            return 0
        if hash(prompt[:lp]) != self.prompt_hash:
            return 0
        k, out, limit = 0, self.output_ids, min(len(self.output_ids), len(prompt) - lp)
        while k < limit and prompt[lp + k] == out[k]:
            k += 1
        return lp + k


def _probes(p: tuple[int, ...]) -> tuple[int, ...]:
    positions = range(len(p) - 1, -1, -max(1, len(p) // PROBES))[:PROBES]
    return tuple(x for i in positions for x in (i, p[i]))


_APPEND = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class CaptureStore:
    """Append-only JSONL per rollout; safe for concurrent writers in one process."""

    def __init__(self, root: Path, *, fsync: bool = False) -> None:
        self.root = root
        self.fsync = fsync
        root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._tails: dict[str, _Tail] = {}

    def path(self, rollout_id: str) -> Path:
        return self.root / f"{rollout_id}.calls.jsonl"

    def create(self, rollout_id: str) -> None:
        """The rollout's file, empty, before its first call (the proxy does this when it opens the
        rollout): creating a file costs the kernel tens of times an append (a directory entry, an
        inode), and on the first call it sat on that call's latency. An existing file is left as it
        is (a resumed rollout)."""
        os.close(os.open(self.path(rollout_id), _APPEND | os.O_CREAT, 0o644))

    def append(self, call: CapturedCall) -> None:
        with self._lock:
            line, tail = encode(call, self._tails.get(call.rollout_id))
            fd = os.open(self.path(call.rollout_id), _APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:  # one write on a regular file; the loop only guards a short one
                    view = view[os.write(fd, view) :]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if tail is not None:
                self._tails[call.rollout_id] = tail

    def sync(self, rollout_id: str) -> None:
        """Force one rollout's records to disk (the rollout is settling or closing: a later call of
        it is stored whole)."""
        with self._lock:
            self._tails.pop(rollout_id, None)
        path = self.path(rollout_id)
        if path.exists():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self, rollout_id: str) -> tuple[list[CapturedCall], list[str]]:
        return read_calls(self.path(rollout_id))


_STORED_APART = frozenset({"request", "prompt_ids", "output_ids", "logprobs", "prompt_base", "request_base"})


def record_line(call: CapturedCall) -> bytes:
    """One call as a JSON line on its own (no delta): the same JSON as ``model_dump_json``, less the
    null storage fields, in another field order."""
    return encode(call, None)[0]


def encode(call: CapturedCall, tail: _Tail | None) -> tuple[bytes, _Tail | None]:
    """``call`` as a JSON line — as a delta on ``tail``'s call where it extends it — and the rollout's
    tail after it (None: keep the previous one, ``call`` had neither prompt nor messages).

    pydantic encodes the fields and each message, orjson the token arrays (~4x faster on tens of
    thousands of ids: a 40,000-id prompt took 0.95 ms with pydantic's encoder, most of the capture's
    time per call); the token arrays go last."""
    request = call.request
    same = 0  # leading messages that are the tail's own objects: hashed already, not encoded again
    if tail is not None:
        limit = min(len(request.messages), len(tail.messages))
        while same < limit and request.messages[same] is tail.messages[same]:
            same += 1
    fresh = [m.model_dump_json().encode() for m in request.messages[same:]]
    hashes = (tail.message_hashes[:same] if tail is not None else ()) + tuple(hash(m) for m in fresh)
    if tail is not None and request.tools is tail.tools:
        tools, tools_hash = b"", tail.tools_hash
    else:
        tools = b"[" + b",".join(t.model_dump_json().encode() for t in request.tools) + b"]"
        tools_hash = hash(tools)
    prompt, prompt_base, kept, request_base = call.prompt_ids, b"", same, b""
    if tail is not None:
        shared = tail.shared(call.prompt_ids)
        if shared:
            prompt, prompt_base = prompt[shared:], b',"prompt_base":' + orjson.dumps((tail.seq, shared))
        while kept < min(len(hashes), len(tail.message_hashes)) and hashes[kept] == tail.message_hashes[kept]:
            kept += 1
        same_tools = tools_hash == tail.tools_hash
        if kept or same_tools:
            request_base = b',"request_base":' + orjson.dumps((tail.seq, kept, same_tools))
            tools = b"" if same_tools else tools
    head = request.model_dump_json(exclude={"messages", "tools"}).encode()
    request_json = b"".join(
        (
            head[:-1],
            b"," if head != b"{}" else b"",
            b'"messages":[',
            b",".join(fresh[kept - same :]),
            b"]",
            b',"tools":' + tools if tools else b"",
            b"}",
        )
    )
    line = b"".join(
        (
            call.model_dump_json(exclude=set(_STORED_APART)).encode()[:-1],
            b',"request":',
            request_json,
            prompt_base,
            request_base,
            b',"prompt_ids":',
            orjson.dumps(prompt),
            b',"output_ids":',
            orjson.dumps(call.output_ids),
            b',"logprobs":',
            orjson.dumps(call.logprobs),
            b"}\n",
        )
    )
    if not call.prompt_ids and not call.request.messages:
        return line, None
    p = call.prompt_ids
    return line, _Tail(
        call.seq,
        len(p),
        hash(p),
        _probes(p),
        call.output_ids,
        hashes,
        tools_hash,
        request.messages,
        request.tools,
    )


def read_calls(path: Path) -> tuple[list[CapturedCall], list[str]]:
    """All readable calls in ``path`` and one problem line per record skipped."""
    calls: list[CapturedCall] = []
    problems: list[str] = []
    if not path.exists():
        return calls, problems
    by_seq: dict[int, CapturedCall] = {}
    for n, raw in enumerate(jsonl_lines(path), start=1):
        if not raw.strip():
            continue
        try:  # pydantic's own JSON parser: ~2x faster than json.loads + validation on token-id arrays
            call = CapturedCall.model_validate_json(raw)
        except ValidationError as exc:
            problems.append(f"{path}:{n}: unreadable capture record ({type(exc).__name__})")
            continue
        if call.prompt_base is not None or call.request_base is not None:
            whole = _restored(call, by_seq)
            if whole is None:
                problems.append(
                    f"{path}:{n}: capture record extends call {_base_seq(call)}, which no readable "
                    "record before it holds (or holds too little)"
                )
                continue
            call = whole
        by_seq[call.seq] = call
        calls.append(call)
    return calls, problems


def _base_seq(call: CapturedCall) -> int:
    base = call.prompt_base or call.request_base
    assert base is not None
    return base[0]


def _restored(call: CapturedCall, by_seq: dict[int, CapturedCall]) -> CapturedCall | None:
    """``call`` whole, from the calls it extends (None when one cannot hold what it refers to)."""
    update: dict[str, Any] = {"prompt_base": None, "request_base": None}
    if call.prompt_base is not None:
        seq, length = call.prompt_base
        ref = by_seq.get(seq)
        if ref is None or length > len(ref.prompt_ids) + len(ref.output_ids):
            return None
        lp = len(ref.prompt_ids)
        head = ref.prompt_ids[:length] if length <= lp else ref.prompt_ids + ref.output_ids[: length - lp]
        update["prompt_ids"] = head + call.prompt_ids
    if call.request_base is not None:
        seq, count, same_tools = call.request_base
        ref = by_seq.get(seq)
        if ref is None or count > len(ref.request.messages):
            return None
        messages = ref.request.messages[:count] + call.request.messages
        tools = ref.request.tools if same_tools else call.request.tools
        update["request"] = call.request.model_copy(update={"messages": messages, "tools": tools})
    return call.model_copy(update=update)
