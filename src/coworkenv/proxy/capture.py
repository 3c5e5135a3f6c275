"""Captured model calls and the append-only store they go to.

Contract: one :class:`CapturedCall` per model call that reached the proxy under a valid rollout
prefix, successful or not (``error`` set on failure). The store appends one JSON line per call to
``<root>/<rollout_id>.calls.jsonl`` and flushes it to the OS before the harness gets its answer, so
a crash of the proxy process loses at most the call in flight (``fsync=True`` also survives a power
cut, at ~4 ms per call on a typical disk; :meth:`CaptureStore.sync` fsyncs one rollout's file, which
the proxy does when a rollout settles or closes); :func:`read_calls` skips a torn last line and reports it.
``seq`` numbers calls of one rollout in arrival order, starting at 0.

On disk a prompt that extends the rollout's previous call (its prompt, then some of its output, as
every turn of an agent loop does) is stored as that call's ``prompt_base: [seq, length]`` and only
the tokens after it: a rollout's file grows with its tokens, not with their square (50 calls of a
22,000-token harness prompt were ~1.1M ids, ~6 MB, per rollout). The store checks the extension by
the previous prompt's length, hash and sampled positions; anything else is stored whole.
:func:`read_calls` restores every prompt in full (``prompt_base`` is ``None`` in memory) and reports,
never guesses, a record whose base it could not read. Schema version 2; version 1 files (whole
prompts) read unchanged.
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
from coworkenv.proxy.messages import ChatRequest

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


PROBES = 16


@dataclass(slots=True, frozen=True)
class _Tail:
    """What the store keeps of a rollout's last call with tokens, to store the next prompt as a delta."""

    seq: int
    prompt_len: int
    prompt_hash: int
    probes: tuple[tuple[int, int], ...]
    output_ids: tuple[int, ...]

    @classmethod
    def of(cls, call: CapturedCall) -> _Tail:
        p = call.prompt_ids
        probes = tuple((i, p[i]) for i in range(len(p) - 1, -1, -max(1, len(p) // PROBES))[:PROBES])
        return cls(call.seq, len(p), hash(p), probes, call.output_ids)

    def shared(self, prompt: tuple[int, ...]) -> int:
        """How many leading tokens of ``prompt`` are this call's prompt + output (0 unless ``prompt``
        starts with this call's whole prompt)."""
        lp = self.prompt_len
        if lp == 0 or len(prompt) < lp or any(prompt[i] != t for i, t in self.probes):
            return 0
        if hash(prompt[:lp]) != self.prompt_hash:
            return 0
        k, out, limit = 0, self.output_ids, min(len(self.output_ids), len(prompt) - lp)
        while k < limit and prompt[lp + k] == out[k]:
            k += 1
        return lp + k


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

    def append(self, call: CapturedCall) -> None:
        with self._lock:
            tail = self._tails.get(call.rollout_id)
            shared = tail.shared(call.prompt_ids) if tail is not None else 0
            line = record_line(call, (tail.seq, shared) if tail is not None and shared else None)
            with self.path(call.rollout_id).open("ab") as fh:
                fh.write(line)
                fh.flush()
                if self.fsync:
                    os.fsync(fh.fileno())
            if call.prompt_ids:
                self._tails[call.rollout_id] = _Tail.of(call)

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


_STORED_APART = frozenset({"prompt_ids", "output_ids", "logprobs", "prompt_base"})


def record_line(call: CapturedCall, base: tuple[int, int] | None = None) -> bytes:
    """One call as a JSON line: pydantic's encoder for the fields, orjson's for the token arrays
    (~4x faster on tens of thousands of ids: a 40,000-id prompt took 0.95 ms to encode, most of the
    capture's time per call), the token arrays last. Without ``base``, the same JSON as
    ``model_dump_json`` (less the null ``prompt_base``); with ``(seq, length)``, the prompt after
    that call's first ``length`` prompt + output tokens, and ``prompt_base``."""
    head = call.model_dump_json(exclude=set(_STORED_APART)).encode()
    prompt = call.prompt_ids if base is None else call.prompt_ids[base[1] :]
    return b"".join(
        (
            head[:-1],
            b"" if base is None else b',"prompt_base":' + orjson.dumps(base),
            b',"prompt_ids":',
            orjson.dumps(prompt),
            b',"output_ids":',
            orjson.dumps(call.output_ids),
            b',"logprobs":',
            orjson.dumps(call.logprobs),
            b"}\n",
        )
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
        if call.prompt_base is not None:
            full = _restored(call, by_seq.get(call.prompt_base[0]))
            if full is None:
                seq, length = call.prompt_base
                problems.append(
                    f"{path}:{n}: capture record's prompt extends call {seq} (its first {length} "
                    "tokens), which no readable record before it holds"
                )
                continue
            call = call.model_copy(update={"prompt_ids": full, "prompt_base": None})
        by_seq[call.seq] = call
        calls.append(call)
    return calls, problems


def _restored(call: CapturedCall, ref: CapturedCall | None) -> tuple[int, ...] | None:
    """``call``'s whole prompt from its base ``ref`` (None when ``ref`` cannot hold that base)."""
    assert call.prompt_base is not None
    length = call.prompt_base[1]
    if ref is None or length > len(ref.prompt_ids) + len(ref.output_ids):
        return None
    lp = len(ref.prompt_ids)
    head = ref.prompt_ids[:length] if length <= lp else ref.prompt_ids + ref.output_ids[: length - lp]
    return head + call.prompt_ids
