"""Fault injection: 240 concurrent rollouts through all three dialects with ~10% backend faults.

Every call must be captured exactly once under its own rollout (count, seq and request content),
every fault must be recorded (``error`` set, or ``malformed`` for garbage tool calls), and the SDK
clients must see an error exactly for the calls that failed.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import anthropic
import openai

from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.messages import AssistantTurn, ChatRequest, ToolCall
from tests.test_proxy_support import Site, ToyBackend, make_proxy, serving

ROLLOUTS = 240
STEPS = 3
KINDS = ("timeout", "http_5xx", "truncated", "garbage", "late_timeout", "crash")


class FaultyBackend:
    """One rollout's policy: answers name the rollout; ``plan[k]`` is the fault of call k (or None)."""

    name = "faulty"
    policy_version = "f1"

    def __init__(self, rollout_id: str, plan: list[str | None]) -> None:
        self.rollout_id = rollout_id
        self.plan = plan
        self.calls = 0
        self.toy = ToyBackend()

    async def complete(self, request: ChatRequest) -> Completion:
        k = self.calls
        self.calls += 1
        fault = self.plan[k]
        await asyncio.sleep(0.001 * (hash(self.rollout_id) % 5))  # interleave rollouts
        if fault in ("timeout", "late_timeout"):
            await asyncio.sleep(0.02 if fault == "timeout" else 0.15)  # late: after a keep-alive
            raise BackendError("timeout", f"injected timeout ({self.rollout_id} #{k})")
        if fault in ("http_5xx", "truncated"):
            raise BackendError(fault, f"injected {fault} ({self.rollout_id} #{k})")
        if fault == "crash":
            raise RuntimeError(f"injected crash ({self.rollout_id} #{k})")
        if fault == "garbage":
            turn = AssistantTurn(tool_calls=(ToolCall(id="c", name="bash", arguments='{"command": "'),))
        else:
            turn = AssistantTurn(content=f"answer for {self.rollout_id} #{k}")
        self.toy.replies = [turn]
        return await self.toy.complete(request)


async def _one_call(site: Site, prefix: str, dialect: str, stream: bool, text: str) -> tuple[bool, str]:
    """(failed as seen by the SDK, answer text)."""
    msgs: list[Any] = [{"role": "user", "content": text}]
    try:
        if dialect == "chat":
            client = site.oai(prefix)
            if not stream:
                res = await client.chat.completions.create(model="m", messages=msgs)
                return False, res.choices[0].message.content or ""
            chunks = await client.chat.completions.create(model="m", messages=msgs, stream=True)
            return False, "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        if dialect == "responses":
            client = site.oai(prefix)
            if not stream:
                r = await client.responses.create(model="m", input=text)
                return False, r.output_text
            events = [e async for e in await client.responses.create(model="m", input=text, stream=True)]
            if events[-1].type == "response.failed":
                return True, ""
            return False, events[-1].response.output_text  # type: ignore[union-attr]
        a = site.ant(prefix)
        if not stream:
            m = await a.messages.create(model="m", max_tokens=50, messages=msgs)
            return False, m.content[0].text  # type: ignore[union-attr]
        async with a.messages.stream(model="m", max_tokens=50, messages=msgs) as s:
            final = await s.get_final_message()
        return False, final.content[0].text  # type: ignore[union-attr]
    except (openai.APIConnectionError, anthropic.APIConnectionError) as exc:
        raise AssertionError(f"{dialect} call never got an answer: {exc!r}") from exc  # not a proxy fault
    except (openai.APIError, anthropic.APIError):
        return True, ""


async def test_faults_across_concurrent_rollouts_lose_and_misattribute_nothing(tmp_path: Path) -> None:
    rng = random.Random(7)
    plans = {
        f"roll-{n:03d}": [rng.choice(KINDS) if rng.random() < 0.10 else None for _ in range(STEPS)]
        for n in range(ROLLOUTS)
    }
    proxy, store = make_proxy(tmp_path, ToyBackend(), keepalive_s=0.05)
    prefixes = {
        rid: proxy.open_rollout(rid, task_id=f"task-{rid}", backend=FaultyBackend(rid, plan))
        for rid, plan in plans.items()
    }
    seen: dict[str, list[tuple[bool, str]]] = {}

    async def rollout(n: int, rid: str, site: Site) -> None:
        dialect = ("chat", "responses", "anthropic")[n % 3]
        results = []
        for k in range(STEPS):
            stream = (n + k) % 2 == 0
            results.append(await _one_call(site, prefixes[rid], dialect, stream, f"rollout {rid} step {k}"))
        seen[rid] = results

    async with serving(proxy.app) as site:
        await asyncio.gather(*(rollout(n, rid, site) for n, rid in enumerate(plans)))
        counts = await asyncio.gather(*(proxy.settle(rid, quiet_s=0.01, timeout_s=5) for rid in plans))
    assert counts == [STEPS] * ROLLOUTS

    n_faults = sum(f is not None for plan in plans.values() for f in plan)
    assert 0.05 * ROLLOUTS * STEPS < n_faults < 0.15 * ROLLOUTS * STEPS
    for rid, plan in plans.items():
        calls, problems = store.read(rid)
        assert problems == []
        assert sorted(c.seq for c in calls) == list(range(STEPS)), rid
        by_seq = {c.seq: c for c in calls}
        for k, fault in enumerate(plan):
            c = by_seq[k]
            assert c.rollout_id == rid
            assert c.task_id == f"task-{rid}"
            assert c.request.messages[-1].content == f"rollout {rid} step {k}"  # its own request
            failed, answer = seen[rid][k]
            hard = fault not in (None, "garbage")
            assert (c.error is not None) == hard, (rid, k, fault, c.error)
            assert failed == hard, (rid, k, fault)
            if fault == "garbage":
                assert c.malformed
                assert answer.startswith("<tool_call>")  # delivered as plain text
            elif fault is None:
                assert answer == f"answer for {rid} #{k}"
                assert c.text == answer
            else:
                expected = "internal" if fault == "crash" else fault.replace("late_", "")
                assert c.error is not None
                assert c.error.startswith(expected), c.error
        stats = proxy.stats(rid)
        assert stats == {
            "calls": STEPS,
            "errors": sum(f not in (None, "garbage") for f in plan),
            "pending": 0,
        }
