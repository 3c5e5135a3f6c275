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


# ---------------------------------------------------------------- the engine's levers (issue 32)


def engine(model: Any, tokenizer: Any, **kw: Any) -> Any:
    from coworkenv.proxy.backends.batching import BatchEngine

    return BatchEngine(model, end_ids=frozenset(), decode=tokenizer.decode, seed=3, **kw)


def shared_prefix_workload(model: Any, tokenizer: Any, eng: Any = None, **kw: Any) -> tuple[list[Any], Any]:
    """Prompts sharing prefixes of several lengths, a request joining mid-decode, a continuation:
    mixed prefill and decode steps, blocks read at different widths. Greedy, so tokens compare."""
    if eng is None:
        eng = engine(model, tokenizer, step_tokens=48, **kw)
    else:
        eng.step_tokens = 48
    g = torch.Generator().manual_seed(1)
    trunk = torch.randint(100, 40_000, (70,), generator=g).tolist()
    own = [torch.randint(100, 40_000, (k,), generator=g).tolist() for k in (9, 25, 3, 40)]
    prompts = [trunk + own[0], trunk + own[1], trunk[:50] + own[2], trunk + own[0][:5] + own[3]]
    first = [eng.submit(p, 14, 0.0, 1.0) for p in prompts[:3]]
    while eng.stats.decoded < 4:
        time.sleep(0.005)
    late = eng.submit(prompts[3], 10, 0.0, 1.0)  # joins while the others decode
    results = [f.result(60) for f in (*first, late)]
    cont = prompts[0] + list(results[0].output_ids) + own[2]  # the first rollout's next call
    results.append(eng.submit(cont, 6, 0.0, 1.0).result(60))
    eng.close()
    return [*prompts, cont], (results, eng.stats)


def test_cascade_attention_equals_per_request_attention(tiny: Any, tokenizer: Any) -> None:
    """Shared-prefix (cascade) and grouped attention: the same greedy tokens and logprobs within fp32
    rounding as one SDPA per request over a private copy, and equal to a fresh forward pass."""
    from coworkenv.proxy.backends.embedded import processed_logprobs

    prompts, (plain, plain_stats) = shared_prefix_workload(tiny, tokenizer, attention="per_request")
    assert plain_stats.shared_rows == 0
    for mode in ("cascade", "arena", "grouped"):
        _, (results, stats) = shared_prefix_workload(tiny, tokenizer, attention=mode)
        assert (stats.shared_rows > 0) == (mode in ("cascade", "arena"))  # blocks read together
        assert (stats.arena_rows > 0) == (mode == "arena")  # decodes attended in one call
        assert stats.prefill_cached == plain_stats.prefill_cached > 0  # the same prefix-cache hits
        for prompt, a, b in zip(prompts, results, plain, strict=True):
            assert a.output_ids == b.output_ids
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
            seq = torch.tensor([[*prompt, *a.output_ids]])
            with torch.no_grad():
                logits = tiny(input_ids=seq).logits[0, len(prompt) - 1 : -1]
            fresh = processed_logprobs(logits, 0.0, 1.0)
            want = [float(fresh[i, t]) for i, t in enumerate(a.output_ids)]
            assert a.logprobs == pytest.approx(want, abs=1e-4)


def test_shared_blocks_split_in_place_and_deepen(tiny: Any, tokenizer: Any) -> None:
    """A sequence first shared over a short header is split in place (the block is a view of its
    KV); a later request sharing much more moves it onto a longer block. Greedy outputs equal the
    per-request engine's either way."""
    g = torch.Generator().manual_seed(4)
    header, body = (torch.randint(100, 40_000, (k,), generator=g).tolist() for k in (20, 60))
    tails = [torch.randint(100, 40_000, (6,), generator=g).tolist() for _ in range(3)]
    prompts = [header + body + tails[0], header + tails[1], header + body + tails[2]]
    runs = {}
    for mode in ("cascade", "per_request"):
        eng = engine(tiny, tokenizer, attention=mode)
        first = eng.submit(prompts[0], 30, 0.0, 1.0)  # still running when the others attach
        while eng.stats.decoded < 2:
            time.sleep(0.005)
        second = eng.submit(prompts[1], 4, 0.0, 1.0).result(60)
        if mode == "cascade":
            owner = eng._running[0].seq
            assert owner.base_len == len(header)  # split in place: the block is a view of its KV
            assert owner.base.kv.untyped_storage().data_ptr() == owner.kv.untyped_storage().data_ptr()
        third = eng.submit(prompts[2], 4, 0.0, 1.0).result(60)
        if mode == "cascade":
            assert owner.base_len == len(header) + len(body)  # moved onto the longer block
        runs[mode] = [first.result(60), second, third]
        eng.close()
    for a, b in zip(runs["cascade"], runs["per_request"], strict=True):
        assert a.output_ids == b.output_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_the_arena_matches_per_request_attention_whatever_its_memory_held(tiny: Any, tokenizer: Any) -> None:
    """``attention="arena"``: the running sequences' own KV in slots, every decode in one call per
    layer. Greedy tokens and logprobs equal the per-request engine's — with the arena's memory
    filled with NaN before first use (the masked columns are zeroed before they are read), with
    slots too small for some sequences (those keep their own tensors), and a shared prefix taken
    from a sequence in a slot is a copy (the slot is reused after it finishes); every slot is
    free again at the end."""
    _prompts, (plain, _) = shared_prefix_workload(tiny, tokenizer, attention="per_request")
    for slot_tokens in (1024, 64):
        eng = engine(tiny, tokenizer, attention="arena", slot_tokens=slot_tokens)
        shape = (eng.layers, 2, eng.max_batch, eng.kv_heads, eng.slot_tokens, eng.head_dim)
        eng._arena = torch.full(shape, float("nan"))
        _, (results, stats) = shared_prefix_workload(tiny, tokenizer, eng=eng)
        assert stats.arena_rows > 0
        for a, b in zip(results, plain, strict=True):
            assert a.output_ids == b.output_ids, slot_tokens
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
        assert sorted(eng._free_slots) == list(range(eng.max_batch))
        assert all(s.slot is None for s in eng._cache.values())
        eng.close()
    runs = {}
    g = torch.Generator().manual_seed(4)
    header = torch.randint(100, 40_000, (30,), generator=g).tolist()
    tails = [torch.randint(100, 40_000, (6,), generator=g).tolist() for _ in range(2)]
    for mode in ("arena", "per_request"):
        eng = engine(tiny, tokenizer, attention=mode)
        first = eng.submit(header + tails[0], 30, 0.0, 1.0)
        while eng.stats.decoded < 2:
            time.sleep(0.005)
        second = eng.submit(header + tails[1], 4, 0.0, 1.0).result(60)
        if mode == "arena":
            owner = eng._running[0].seq
            assert owner.slot is not None
            assert owner.base_len == len(header)
            assert owner.base.kv.untyped_storage().data_ptr() != eng._arena.untyped_storage().data_ptr()
        runs[mode] = [first.result(60), second]
        eng.close()
    for a, b in zip(runs["arena"], runs["per_request"], strict=True):
        assert a.output_ids == b.output_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_cascade_kernel_matches_sdpa_on_random_spans(tiny: Any, tokenizer: Any) -> None:
    """The block + suffix split merged by log-sum-exp equals SDPA over the concatenated KV, for
    prefill chunks (causal inside the chunk) and single decode rows, blocks read at two widths."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    from coworkenv.proxy.backends.batching import _Block, _Seq

    eng = engine(tiny, tokenizer)
    layers, kvh, hd, heads = eng.layers, eng.kv_heads, eng.head_dim, eng.heads
    g = torch.Generator().manual_seed(0)
    block = _Block(kv=torch.randn(layers, 2, kvh, 40, hd, generator=g))
    specs = [(40, 7, 1), (40, 12, 5), (30, 3, 1), (30, 0, 6)]  # (base_len, own before, fed now)
    seqs, spans, members, start = [], [], [], 0
    for base_len, own, n in specs:
        seq = _Seq(ids=[], kv=torch.randn(layers, 2, kvh, own + n, hd, generator=g), base=block)
        seq.base_len, seq.length = base_len, base_len + own
        mask = None
        if n > 1:
            allowed = torch.arange(own + n)[None, :] <= torch.arange(n)[:, None] + own
            mask = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf")).repeat(heads // kvh, 1)
        members.append(len(spans))
        spans.append((seq, start, n, mask))
        seqs.append(seq)
        start += n
    q = torch.randn(1, heads, start, hd, generator=g)
    plan = eng._cascade_plan(spans, members)
    for li in range(layers):
        out = torch.zeros_like(q)
        eng._cascade(plan, li, q, out, spans=spans, scale=0.125)
        for seq, s, n, _ in spans:
            keys = torch.cat([block.kv[li, :, :, : seq.base_len], seq.kv[li, :, :, : seq.own + n]], dim=2)
            allowed = torch.arange(keys.shape[2])[None, :] <= torch.arange(n)[:, None] + seq.length
            ref = sdpa(
                q[:, :, s : s + n],
                keys[0][None],
                keys[1][None],
                attn_mask=allowed,
                scale=0.125,
                enable_gqa=True,
            )
            assert torch.allclose(out[:, :, s : s + n], ref, atol=1e-5), (li, s, n)
    eng.close()


def test_the_batched_sampler_has_the_old_samplers_logprobs_and_distribution() -> None:
    """Batched sampling (one top-k / log-softmax over the rows, inverse CDF per row with the row's
    own generator): logprobs bit-equal to processed_logprobs row by row at mixed settings, greedy
    rows equal to argmax, and the same distribution as torch.multinomial on fixed seeds."""
    from coworkenv.proxy.backends.embedded import processed_logprobs, processed_logprobs_batch, sample_batch

    g = torch.Generator().manual_seed(0)
    for trial in range(12):
        x = torch.randn(8, 49152, generator=g) * (0.5, 1.0, 3.0, 8.0)[trial % 4]
        x[1, :10] = x[1].max() + 1  # a tie at the top
        x[2, 5] += 30.0  # one dominant token: top-p settles inside the first candidates
        temps = [(0.7, 1.0, 1.3, 0.0)[(trial + i) % 4] for i in range(8)]
        tops = [(0.5, 0.9, 0.95, 1.0, 0.999999)[(trial * 3 + i) % 5] for i in range(8)]
        batch = processed_logprobs_batch(x, temps, tops)
        for i in range(8):
            assert torch.equal(batch[i], processed_logprobs(x[i], temps[i], tops[i])), (trial, i)
        # greedy and T = 1 rows only (no division), top-p on some: the same rows, the input untouched
        plain = [(1.0, 0.0)[(trial + i) % 2] for i in range(8)]
        kept = x.clone()
        same = processed_logprobs_batch(x, plain, tops)
        assert torch.equal(x, kept)
        for i in range(8):
            assert torch.equal(same[i], processed_logprobs(x[i], plain[i], tops[i])), (trial, i)
        gens = [torch.Generator().manual_seed(i) for i in range(8)]
        tokens, lps = sample_batch(x, temps, tops, gens)
        for i, (t, lp) in enumerate(zip(tokens, lps, strict=True)):
            assert lp == float(batch[i, t])
            assert lp > float("-inf")
            if temps[i] <= 0:
                assert t == int(torch.argmax(x[i]))
    # the distribution: a small vocabulary, many draws, both samplers against the exact probabilities
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0, 1.5, 0.2])
    exact = processed_logprobs(logits, 0.9, 0.9).exp()
    draws = 20_000
    gens = [torch.Generator().manual_seed(100 + i) for i in range(draws)]
    new, _ = sample_batch(logits.expand(draws, -1), [0.9] * draws, [0.9] * draws, gens)
    old_gen = torch.Generator().manual_seed(5)
    old = [int(torch.multinomial(exact, 1, generator=old_gen)) for _ in range(draws)]
    for sample in (new, old):
        freq = torch.bincount(torch.tensor(sample), minlength=8).float() / draws
        assert torch.allclose(freq, exact, atol=0.015)
        assert freq[exact == 0].sum() == 0  # nothing outside the nucleus
    # each request's tokens depend only on its own generator
    again, _ = sample_batch(
        logits.expand(3, -1), [0.9] * 3, [0.9] * 3, [torch.Generator().manual_seed(100 + i) for i in range(3)]
    )
    assert again == new[:3]


def test_engine_options_are_checked_and_reported(tiny: Any, tokenizer: Any) -> None:
    eng = engine(tiny, tokenizer, attention="per_request", sampler="per_row", matmul="fp32")
    assert eng.options == {"attention": "per_request", "sampler": "per_row", "matmul": "fp32"}
    eng.close()
    with pytest.raises(BackendError, match="attention"):
        engine(tiny, tokenizer, attention="paged")


def test_bf16_matmuls_keep_logprobs_close_to_the_fp32_recomputation(tiny: Any, tokenizer: Any) -> None:
    """matmul="bf16": the linears run on bf16 copies (fp32 weights kept for training); the captured
    logprobs stay within bf16 rounding of the trainer's fp32 recomputation, and a weight swap
    refreshes the copies."""
    from coworkenv.proxy.backends.embedded import tiny_random_model

    eng = engine(tiny, tokenizer, matmul="bf16")
    assert eng.options["matmul"] == "bf16"
    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(100, 40_000, (60,), generator=g).tolist()
    gen = eng.submit(prompt, 12, 1.0, 1.0).result(60)
    assert any(w.dtype == torch.bfloat16 for w, _ in eng._w16.values())  # the bf16 copies were made
    seq = torch.tensor([[*prompt, *gen.output_ids]])
    with torch.no_grad():
        fresh = torch.log_softmax(tiny(input_ids=seq).logits[0, len(prompt) - 1 : -1].float(), dim=-1)
    delta = [
        abs(lp - float(fresh[i, t]))
        for i, (t, lp) in enumerate(zip(gen.output_ids, gen.logprobs, strict=True))
    ]
    assert max(delta) < 0.1
    new = tiny_random_model(tokenizer, seed=9, layers=3)
    eng.swap(lambda: tiny.load_state_dict(new.state_dict()), "v1")
    assert not eng._w16  # dropped at the swap, remade from the new weights at the next step
    eng.close()


def test_packed_bf16_weights_give_the_same_tokens_and_logprobs(
    tiny: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where oneDNN runs bf16 (native bf16 CPUs), matmul="bf16" keeps its weight copies in oneDNN's
    packed layout: sampled tokens and logprobs are bit for bit those of the plain bf16 copies. Where
    it does not (an AVX2 CPU, or ``ONEDNN_MAX_CPU_ISA=AVX2``), the copies stay plain and the engine
    runs."""
    from coworkenv.proxy.backends import batching

    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(100, 40_000, (n,), generator=g).tolist() for n in (40, 75, 9)]

    def run() -> tuple[list[Any], bool]:
        eng = engine(tiny, tokenizer, matmul="bf16")
        gens = [eng.submit(p, 10, t, 1.0).result(60) for p, t in zip(prompts, (1.0, 0.0, 0.7), strict=True)]
        packed = any(w.is_mkldnn and w.dtype == torch.bfloat16 for w, _ in eng._w16.values())
        eng.close()
        return [(x.output_ids, x.logprobs) for x in gens], packed

    got, packed = run()
    assert packed == batching._packs_bf16()
    if not packed:
        return
    monkeypatch.setattr(batching, "_packs_bf16", lambda: False)
    plain, was_packed = run()
    assert not was_packed
    assert got == plain


def test_a_bf16_kv_cache_keeps_logprobs_close_in_every_attention(tiny: Any, tokenizer: Any) -> None:
    """kv="bf16": keys, values and attention in bf16 (as an engine serving bf16 keeps them), the
    linears and logprobs in fp32: on the shared-prefix workload every attention mode stores bf16
    KV and its logprobs stay within bf16 rounding of the fp32 engine's; a bad value names the option."""
    _, (ref, _) = shared_prefix_workload(tiny, tokenizer, attention="per_request")
    for mode in ("arena", "cascade", "per_request"):
        eng = engine(tiny, tokenizer, step_tokens=48, attention=mode, kv="bf16")
        assert eng.options["kv"] == "bf16"
        assert eng.kv_dtype == torch.bfloat16
        _, (results, stats) = shared_prefix_workload(tiny, tokenizer, eng=eng)
        assert (stats.arena_rows > 0) == (mode == "arena")
        for a, b in zip(results, ref, strict=True):
            n = min(len(a.output_ids), len(b.output_ids))
            agree = next((i for i in range(n) if a.output_ids[i] != b.output_ids[i]), n)
            assert agree >= 1  # the first token is the fp32 engine's
            assert a.logprobs[:agree] == pytest.approx(b.logprobs[:agree], abs=0.1)
        if mode == "arena":
            assert eng._arena.dtype == torch.bfloat16
    with pytest.raises(BackendError, match="kv="):
        engine(tiny, tokenizer, kv="fp8")


def test_a_long_prompt_is_prefilled_in_chunks_beside_the_decodes(tiny: Any, tokenizer: Any) -> None:
    """Chunked prefill: with ``step_tokens`` 32 a 150-token prompt takes several steps, and every one
    of them also decodes the running request (a long prompt never stalls the batch)."""
    eng = engine(tiny, tokenizer, step_tokens=32)
    plans: list[list[tuple[int, int]]] = []
    real = eng._plan

    def recorded(batch: Any) -> Any:
        plan = real(batch)
        plans.append([(len(r.out), n) for r, n in plan])
        return plan

    eng._plan = recorded
    g = torch.Generator().manual_seed(6)
    running = eng.submit(torch.randint(100, 40_000, (20,), generator=g).tolist(), 40, 1.0, 1.0)
    while eng.stats.decoded < 2:
        time.sleep(0.005)
    long = eng.submit(torch.randint(100, 40_000, (150,), generator=g).tolist(), 3, 1.0, 1.0)
    long.result(60)
    running.result(60)
    eng.close()
    mixed = [p for p in plans if any(n > 1 for _, n in p)]
    assert len(mixed) >= 5  # 150 tokens in chunks of at most 31
    assert all(sum(n for _, n in p) <= 32 for p in plans)
    assert sum(1 for p in mixed if any(out > 0 and n == 1 for out, n in p)) >= 4  # decoding beside


def test_speculative_decoding_keeps_the_greedy_tokens_and_logprobs(tiny: Any, tokenizer: Any) -> None:
    """Prompt-lookup drafts verified in the step after: the same greedy tokens and logprobs (within
    fp32 rounding: the draft's positions attend as a chunk) as decoding one token a step, in every
    attention mode, with drafts fed and some accepted."""
    for mode in ("arena", "cascade", "per_request"):
        _, (plain, plain_stats) = shared_prefix_workload(tiny, tokenizer, attention=mode)
        _, (spec, stats) = shared_prefix_workload(tiny, tokenizer, attention=mode, speculate=4)
        assert stats.drafted > 0
        assert 0 < stats.draft_accepted <= stats.drafted
        assert stats.steps < plain_stats.steps  # accepted drafts saved forwards
        if mode == "arena":  # a token and its draft attend in the arena's one call, several rows a slot
            assert stats.arena_rows >= stats.drafted + stats.decoded - stats.draft_accepted
        for a, b in zip(spec, plain, strict=True):
            assert a.output_ids == b.output_ids
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
            assert a.finish_reason == b.finish_reason


async def test_speculative_sampling_logs_the_sampled_distributions_logprobs(
    tiny: Any, tokenizer: Any
) -> None:
    """Sampled (the speculative-sampling path; a low temperature so the random model repeats itself
    and drafts occur): every logprob is the processed distribution's at the token, as recomputed."""
    b = backend(tiny, tokenizer, temperature=0.05, top_p=0.9, speculate=4)
    assert b.engine is not None
    assert b.engine.options["speculate"] == "4"
    comps = await asyncio.gather(*(b.complete(request(f"ticket {i}", 24)) for i in range(4)))
    assert b.engine.stats.draft_accepted > 0
    for c in comps:
        assert 0 < len(c.output_ids) <= 24
        assert c.logprobs == pytest.approx(recomputed(tiny, c, 0.05, 0.9), abs=1e-4)
    b.close()
    with pytest.raises(BackendError, match="speculate"):
        engine(tiny, tokenizer, speculate=99)
