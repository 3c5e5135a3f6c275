"""A small synthetic capture generator (a toy chat template over a toy tokenizer) and its checks.

A scripted harness drives a conversation and records one :class:`CapturedCall` per model call the
way the proxy would: ``prompt_ids`` = rendered messages + assistant header, ``output_ids`` = the
assistant body + end token. When the harness echoes the assistant turn unchanged, the next prompt
extends ``prompt + output`` token-exactly; with ``rewrite`` it re-serializes the tool arguments and
renames the call ids (as some harnesses do), so it does not. Scenarios add retries (malformed then
regenerated turns), title side calls, subagent calls and context compaction, and return the
ground truth the tests compare against.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from coworkenv.proxy.capture import CapturedCall
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, Message, ToolCall, ToolSpec
from coworkenv.rollout.record import RewardParts, RolloutRecord

ROLE = {"system": 1, "user": 2, "assistant": 3, "tool": 4}
END, SEP = 5, 6
TOOLS = (ToolSpec(name="lookup", description="Look a thing up."), ToolSpec(name="save"))
COMPACT_ASK = "Please summarize the conversation so far so we can continue in a new context."


def enc(text: str) -> list[int]:
    return [100 + (ord(c) % 5000) for c in text]


def body(content: str, calls: tuple[ToolCall, ...]) -> list[int]:
    out = enc(content)
    for tc in calls:
        out += [SEP, *enc(tc.name), SEP, *enc(tc.arguments)]
    return out


def render(messages: list[Message]) -> list[int]:
    out: list[int] = []
    for m in messages:
        out += [ROLE[m.role], *body(m.content, m.tool_calls), END]
    return [*out, ROLE["assistant"]]


@dataclass
class Truth:
    main_calls: int = 0
    retries: int = 0
    aux: dict[str, int] = field(default_factory=dict)
    segments: int = 1
    rewrites: int = 0


@dataclass
class SynthHarness:
    rollout_id: str
    rng: random.Random
    rewrite_p: float = 0.0
    system: str = "You are the main agent. Use tools."
    calls: list[CapturedCall] = field(default_factory=list)
    truth: Truth = field(default_factory=Truth)

    def call(self, messages: list[Message], turn: AssistantTurn, tools: tuple[ToolSpec, ...] = TOOLS) -> None:
        out = [*body(turn.content, turn.tool_calls), END]
        self.calls.append(
            CapturedCall(
                rollout_id=self.rollout_id,
                seq=len(self.calls),
                call_id=f"c{len(self.calls)}",
                dialect="openai_chat",
                request=ChatRequest(messages=tuple(messages), tools=tools),
                prompt_ids=tuple(render(messages)),
                output_ids=tuple(out),
                logprobs=tuple(-self.rng.random() * 3 for _ in out),
                text=turn.content,
                response=turn.model_dump(),
                malformed=turn.malformed,
                state_hash=f"s{len(self.calls)}",
            )
        )

    def echo(self, turn: AssistantTurn, force_rewrite: bool = False) -> Message:
        """The assistant message as the harness puts it back into the history."""
        calls = turn.tool_calls
        if calls and (force_rewrite or self.rng.random() < self.rewrite_p):
            self.truth.rewrites += 1
            calls = tuple(
                ToolCall(
                    id=f"renamed_{tc.id}",
                    name=tc.name,
                    arguments=json.dumps(json.loads(tc.arguments), indent=1),
                )
                for tc in calls
            )
        return Message(role="assistant", content=turn.content, tool_calls=calls)

    def aux(self, kind: str) -> None:
        self.truth.aux[kind] = self.truth.aux.get(kind, 0) + 1


def tool_turn(rng: random.Random, k: int) -> AssistantTurn:
    args = json.dumps({"q": f"item-{k}-{rng.randint(0, 99)}", "n": k})
    return AssistantTurn(
        content=f"Step {k}: looking up.",
        tool_calls=(ToolCall(id=f"t{k}", name="lookup", arguments=args),),
        finish_reason="tool_calls",
    )


def scenario(
    rollout_id: str,
    seed: int,
    *,
    turns: int = 6,
    retry_p: float = 0.0,
    rewrite_p: float = 0.0,
    title: bool = False,
    subagent: bool = False,
    compact_at: int | None = None,
    rewrite_at: tuple[int, ...] = (),
) -> SynthHarness:
    """One rollout's calls; the harness's ``truth`` says what a correct tree finds."""
    rng = random.Random(seed)
    h = SynthHarness(rollout_id, rng, rewrite_p=rewrite_p)
    request = f"Task {seed}: find the items and save a report."
    msgs = [Message(role="system", content=h.system), Message(role="user", content=request)]
    if title:
        h.call(
            [Message(role="system", content="Write a 5-word title."), msgs[1]],
            AssistantTurn(content="Items report task"),
            (),
        )
        h.aux("side_call")
    for k in range(turns):
        if compact_at is not None and k == compact_at:
            summary = f"Summary of work so far for task {seed}: looked up {k} items, nothing saved yet."
            h.call([*msgs, Message(role="user", content=COMPACT_ASK)], AssistantTurn(content=summary))
            h.aux("compaction")
            h.truth.segments += 1
            msgs = [msgs[0], Message(role="user", content=f"{request}\n\nContext so far: {summary}")]
        if retry_p and rng.random() < retry_p:
            bad = AssistantTurn(content="<tool_call>{broken", malformed=True)
            h.call(list(msgs), bad)
            h.truth.retries += 1
            h.truth.main_calls += 1
        final = k == turns - 1
        turn = AssistantTurn(content=f"Done: report for task {seed}.") if final else tool_turn(rng, k)
        h.call(list(msgs), turn)
        h.truth.main_calls += 1
        if final:
            break
        msgs.append(h.echo(turn, k in rewrite_at))
        result = f"result {k}: " + "x" * rng.randint(1, 30)
        if subagent and k == 1:
            sub = [
                Message(role="system", content="You are a research subagent."),
                Message(role="user", content="dig"),
            ]
            h.call(sub, AssistantTurn(content="sub finding: " + "y" * 12))
            h.aux("subagent")
            result += " (subagent: sub finding)"
        for tc in turn.tool_calls:
            msgs.append(Message(role="tool", content=result, tool_call_id=tc.id))
    return h


def record_for(
    h: SynthHarness, *, reward: float = 0.75, harness: str = "synth", status: str = "ok"
) -> RolloutRecord:
    ok = status == "ok"
    return RolloutRecord(
        rollout_id=h.rollout_id,
        task_id="T1_synth",
        harness=harness,
        trial=0,
        status="ok" if ok else "infra_failure",
        failure=None if ok else {"kind": "harness_crash", "detail": "boom"},  # type: ignore[arg-type]
        grade={"completion": reward, "reward": reward} if ok else None,
        rewards=RewardParts(reward=reward, completion=reward, safety=1.0, robustness=1.0) if ok else None,
        n_calls=len(h.calls),
    )


def write_dir(root: Path, harnesses: list[tuple[SynthHarness, RolloutRecord]]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with (root / "rollouts.jsonl").open("w") as fh:
        for h, rec in harnesses:
            fh.write(rec.model_dump_json() + "\n")
            with (root / f"{h.rollout_id}.calls.jsonl").open("w") as cf:
                for c in h.calls:
                    cf.write(c.model_dump_json() + "\n")
    return root


def test_echoed_history_extends_token_exactly() -> None:
    h = scenario("r", 1, turns=4)
    for a, b in zip(h.calls, h.calls[1:], strict=False):
        hist = a.prompt_ids + a.output_ids
        assert b.prompt_ids[: len(hist)] == hist


def test_rewritten_history_does_not() -> None:
    h = scenario("r", 1, turns=4, rewrite_p=1.0)
    a, b = h.calls[0], h.calls[1]
    hist = a.prompt_ids + a.output_ids
    assert b.prompt_ids[: len(hist)] != hist
    assert h.truth.rewrites == 3
