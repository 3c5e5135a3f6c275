"""The embedded backend's batching engine: exact logprobs, prefix reuse, joins, swaps, faults."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.messages import ChatRequest, Message

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SYSTEM = "You are a careful operations assistant. Follow the runbook exactly. " * 12


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from coworkenv.proxy.backends.embedded import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture
def tiny(tokenizer: Any) -> Any:
    from coworkenv.proxy.backends.embedded import tiny_random_model

    return tiny_random_model(tokenizer, layers=3)


def request(text: str, max_tokens: int = 12, **kw: Any) -> ChatRequest:
    msgs = (Message(role="system", content=SYSTEM), Message(role="user", content=text))
    return ChatRequest(messages=msgs, max_tokens=max_tokens, **kw)


def recomputed(model: Any, comp: Completion, temperature: float = 1.0, top_p: float = 1.0) -> list[float]:
    """The sampling-distribution logprobs of ``comp``'s output, by one fresh full forward pass."""
    from coworkenv.proxy.backends.embedded import processed_logprobs

    seq = torch.tensor([[*comp.prompt_ids, *comp.output_ids]])
    with torch.no_grad():
        logits = model(input_ids=seq).logits[0]
    n = len(comp.prompt_ids)
    lp = processed_logprobs(logits[n - 1 : -1], temperature, top_p)
    return [float(lp[i, t]) for i, t in enumerate(comp.output_ids)]


def backend(tiny: Any, tokenizer: Any, **kw: Any) -> Any:
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    kw.setdefault("seed", 7)
    return EmbeddedBackend(tiny, tokenizer, **kw)


async def test_concurrent_requests_share_steps_and_logprobs_are_exact(tiny: Any, tokenizer: Any) -> None:
    b = backend(tiny, tokenizer, temperature=0.8, top_p=0.9)
    assert b.engine is not None
    comps = await asyncio.gather(*(b.complete(request(f"ticket {i}", 16)) for i in range(6)))
    stats = b.engine.stats
    assert stats.max_batch_seen >= 2  # they were decoded together, not one after another
    for c in comps:
        assert 0 < len(c.output_ids) <= 16
        assert c.logprobs == pytest.approx(recomputed(tiny, c, 0.8, 0.9), abs=1e-4)
    # the shared system prompt was prefilled once and copied for the others
    assert stats.prefill_cached > 0
    assert stats.prefill_computed + stats.prefill_cached == stats.prompt_tokens
    b.close()


async def test_a_rollouts_next_call_reuses_its_own_history(tiny: Any, tokenizer: Any) -> None:
    b = backend(tiny, tokenizer)
    first = await b.complete(request("close the ticket", 10))
    follow = (
        *request("close the ticket", 10).messages,
        Message(role="assistant", content=first.text),
        Message(role="user", content="and now the next one"),
    )
    before = b.engine.stats.prefill_cached
    second = await b.complete(ChatRequest(messages=follow, max_tokens=10))
    reused = b.engine.stats.prefill_cached - before
    assert reused >= len(first.prompt_ids) - 1  # at least the whole first prompt came from the cache
    assert second.logprobs == pytest.approx(recomputed(tiny, second), abs=1e-4)
    b.close()


async def test_outputs_do_not_depend_on_what_else_is_in_the_batch(tiny: Any, tokenizer: Any) -> None:
    """Each request samples with its own generator (seed, arrival number): batching is invisible."""
    reqs = [request(f"case {i}", 10) for i in range(4)]
    alone = backend(tiny, tokenizer)
    one_by_one = [await alone.complete(r) for r in reqs]
    twin = backend(tiny, tokenizer)
    together = await asyncio.gather(*(twin.complete(r) for r in reqs))
    assert [c.output_ids for c in together] == [c.output_ids for c in one_by_one]


async def test_a_request_joins_a_running_batch(tiny: Any, tokenizer: Any) -> None:
    b = backend(tiny, tokenizer, temperature=0.0)
    b.end_ids = frozenset()
    long = asyncio.ensure_future(b.complete(request("long one", 60)))
    while b.engine.stats.decoded < 5:
        await asyncio.sleep(0.01)
    short = await b.complete(request("short one", 4))
    assert not long.done()  # the short request finished while the long one was still decoding
    assert len(short.output_ids) == 4
    done = await long
    assert len(done.output_ids) == 60
    assert done.logprobs == pytest.approx(recomputed(tiny, done), abs=1e-4)
    b.close()


async def test_a_weight_push_waits_for_running_responses_and_never_mixes(tiny: Any, tokenizer: Any) -> None:
    from coworkenv.proxy.backends.embedded import tiny_random_model

    b = backend(tiny, tokenizer, temperature=0.0, version="v0")
    b.end_ids = frozenset()
    old = tiny_random_model(tokenizer, layers=3)
    old.load_state_dict(tiny.state_dict())
    new = tiny_random_model(tokenizer, seed=5, layers=3)
    running = asyncio.ensure_future(b.complete(request("in flight", 40)))
    while b.engine.stats.decoded < 3:
        await asyncio.sleep(0.01)
    pushed = threading.Event()

    def push() -> None:
        b.set_weights(new, "v1")
        pushed.set()

    pusher = threading.Thread(target=push)
    pusher.start()
    await asyncio.sleep(0.05)
    queued = asyncio.ensure_future(b.complete(request("queued behind the push", 6)))
    first = await running
    second = await queued
    pusher.join(10)
    assert pushed.is_set()
    assert first.policy_version == "v0"
    assert first.logprobs == pytest.approx(recomputed(old, first), abs=1e-4)  # all old weights
    assert second.policy_version == "v1" == b.policy_version
    assert second.logprobs == pytest.approx(recomputed(new, second), abs=1e-4)  # all new weights
    b.close()


async def test_a_failed_step_fails_only_its_requests(tiny: Any, tokenizer: Any, monkeypatch: Any) -> None:
    b = backend(tiny, tokenizer)
    real = b.engine._forward
    calls = {"n": 0}

    def flaky(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated kernel fault")
        return real(*args)

    monkeypatch.setattr(b.engine, "_forward", flaky)
    with pytest.raises(BackendError, match="simulated kernel fault") as err:
        await b.complete(request("unlucky", 5))
    assert err.value.kind == "engine"
    ok = await b.complete(request("lucky", 5))  # the engine goes on
    assert ok.logprobs == pytest.approx(recomputed(tiny, ok), abs=1e-4)
    assert b.engine.stats.failed == 1
    b.close()


async def test_cancelling_a_call_frees_its_slot(tiny: Any, tokenizer: Any) -> None:
    b = backend(tiny, tokenizer)
    b.end_ids = frozenset()
    task = asyncio.ensure_future(b.complete(request("to be cancelled", 200)))
    while b.engine.stats.decoded < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while b.engine.stats.cancelled == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert b.engine.stats.cancelled == 1
    assert not b.engine._running
    assert not b.engine._waiting
    assert b.engine.cached_tokens == 0  # a cancelled request's KV is freed, not cached
    b.close()


async def test_a_prompt_over_the_context_is_refused_before_the_engine(tiny: Any, tokenizer: Any) -> None:
    b = backend(tiny, tokenizer)
    b.context_limit = 30
    with pytest.raises(BackendError, match="context is 30") as err:
        await b.complete(request("too long"))
    assert err.value.kind == "context_length"
    assert b.engine.stats.requests == 0


def test_the_serial_engine_stays_available_as_the_baseline(tiny: Any, tokenizer: Any) -> None:
    b = backend(tiny, tokenizer, engine="serial")
    assert b.engine is None
    comp = asyncio.run(b.complete(request("serial", 6)))
    assert comp.logprobs == pytest.approx(recomputed(tiny, comp), abs=1e-4)
    with pytest.raises(Exception, match="engine='warp'"):
        backend(tiny, tokenizer, engine="warp")


def test_real_smollm2_batched_logprobs_match_a_recomputed_forward_pass() -> None:
    """fp32 SmolLM2-135M: the batched engine's logprobs equal a fresh forward pass within 1e-3."""
    from coworkenv.proxy.backends.embedded import EmbeddedBackend

    b = EmbeddedBackend.from_checkpoint(seed=0, temperature=1.0, top_p=1.0)

    async def run() -> list[Completion]:
        return await asyncio.gather(*(b.complete(request(f"Say hello to {n}.", 8)) for n in ("Ann", "Bo")))

    for comp in asyncio.run(run()):
        worst = max(abs(a - r) for a, r in zip(comp.logprobs, recomputed(b.model, comp), strict=True))
        assert worst <= 1e-3
    assert b.engine is not None
    assert b.engine.stats.prefill_cached > 0
    b.close()
