"""Continuous batching with a prefix KV cache: the embedded backend's generation engine.

Contract: :class:`BatchEngine` owns one decoder-only model (Llama-family: ``llama``, ``qwen2``) and a
worker thread. :meth:`BatchEngine.submit` queues a prompt (token ids) and returns a
``concurrent.futures.Future`` of a :class:`Generation`; requests join the running batch at the next
step and leave it the step they finish, so every concurrent rollout is served by the same forward
passes. Each step forwards one flat sequence of tokens — one new token per decoding request plus
chunks of prompts being prefilled, within ``step_tokens`` (chunked prefill: a long prompt is fed a
chunk per step beside the decodes, never stalling them) — through the model's own modules (its
projections, norms, MLPs and rotary embedding; attention is the engine's own, below).

Prefix cache: the KV of every finished request (its prompt and all but the last output token) is
kept, up to ``cache_tokens`` tokens, least recently used evicted first. A new prompt starts from the
longest common token prefix among cached and running sequences, so a task's shared system prompt
and tool list, and a rollout's own history, are prefilled once. A continuation takes the cached
entry over in place. Keys are stored after the rotary embedding, so a reused prefix is exactly what
a fresh prefill would compute (up to float summation order).

Attention (``attention=``): ``per_request`` copies a shared prefix into each new sequence and runs
one SDPA per request and layer over its own KV. ``grouped`` does the same with a kernel that takes
the query heads of each KV head as rows (no expansion of the KV for grouped-query attention) and
returns the log-sum-exp. ``cascade`` is ``grouped`` plus shared blocks: a shared
prefix is not copied — the sequence it came from is split in place into a block (its first tokens,
never written again) and its own rest — and every request reading that block attends over it in
one call per layer and step (outputs and log-sum-exp), over its own suffix separately, the two
merged by log-sum-exp. ``arena`` (the default) is ``cascade`` with the running sequences' own KV in one slot
arena, (layers, 2, slots, kv_heads, ``slot_tokens``, dim): every request decoding a token attends
over its own KV in one call per layer and step for the whole batch (one row block per slot, a mask
per slot's length; its new key and value are written by one indexed store), instead of one call per
request — a call over a few hundred keys costs more in dispatch than in arithmetic. A sequence joins
the arena when its own part fits a slot (else it keeps its own tensor and its own calls), leaves it
compacted when it finishes (into the prefix cache), and a prefix shared from it is copied into a
block (a block must never live in a slot that is reused). All four give the same attention up to
float rounding (tested).

Sampling (``sampler=``): ``batched`` (the default) samples every request finishing a step in one
pass (:func:`~coworkenv.proxy.backends.embedded.sample_batch`); ``per_row`` is the earlier loop.
Logprobs are those of the distribution each token was sampled from (see
:func:`~coworkenv.proxy.backends.embedded.processed_logprobs`, bit for bit in both samplers); every
request has its own seeded ``torch.Generator`` (seed, arrival number), so a request's tokens never
depend on what else shares the batch. ``matmul="bf16"`` runs the decoder's linear layers on bf16
copies of their weights, made at first use and after every swap (the fp32 weights stay for
training; attention, KV, norms, the LM head and logprobs stay float32); ``auto`` picks it where
the CPU computes bf16 natively; ``fp32`` is the default. Its logprobs then differ from the
trainer's fp32 recomputation by bf16 rounding (measured by ``benchmarks/bench_generation.py``).
Where oneDNN runs (x86 torch builds), the linears' weight copies — bf16, or float32 copies of a
float32 model (double its weights' memory, for speed) — and a float32 copy of the LM head are kept
in oneDNN's packed layout, so a matmul of a step's few rows skips the per-call reorder a plain
weight costs (bf16: bit for bit the same; float32: another summation order, float32 rounding).

Speculative decoding (``speculate=K``, off by default): after each token a decoding request proposes
up to K draft tokens by prompt lookup (:class:`~coworkenv.proxy.backends.lookup.PromptLookup`: what
followed the latest earlier occurrence of its last tokens in its own prompt and output) and feeds
them with its token in the next step, a chunk with its causal mask; the logits at every position
are checked by speculative sampling (:func:`~coworkenv.proxy.backends.embedded.accept_draft`), so
each emitted token has exactly the distribution and logprob a plain step would have given it, and
the KV of rejected positions is overwritten later. A request with no draft decodes as before.

:meth:`BatchEngine.swap` runs a weight change between steps once the running requests have finished
(no new request is admitted meanwhile), then drops the prefix cache, so no response ever mixes two
policies. A failure inside a step fails only the requests that step touched;
:meth:`BatchEngine.cancel` frees a request's batch slot and KV.
"""

from __future__ import annotations

import concurrent.futures
import functools
import heapq
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from coworkenv.proxy.backends.base import BackendError
from coworkenv.proxy.backends.lookup import PromptLookup
from coworkenv.proxy.messages import FinishReason

log = logging.getLogger(__name__)

SUPPORTED_TYPES = frozenset({"llama", "qwen2"})
MIN_SHARED = 16  # shorter common prefixes are not worth a copy
ATTENTIONS = ("cascade", "arena", "grouped", "per_request")
SAMPLERS = ("batched", "per_row")
MATMULS = ("fp32", "bf16", "auto")
KVS = ("fp32", "bf16", "auto")
MAX_SPECULATE = 16


@dataclass(frozen=True)
class Generation:
    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    policy_version: str = "0"
    cached_prompt_tokens: int = 0


@dataclass
class EngineStats:
    """Counters since the engine started (read them, never write)."""

    steps: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    prefill_computed: int = 0
    prefill_cached: int = 0
    decoded: int = 0
    failed: int = 0
    cancelled: int = 0
    max_batch_seen: int = 0
    shared_rows: int = 0  # query rows that read a shared prefix block together with others
    arena_rows: int = 0  # decoding rows that attended over their own KV in the arena's one call
    drafted: int = 0  # prompt-lookup draft tokens fed for verification (``speculate``)
    draft_accepted: int = 0  # of them, kept: each one a token made without a forward of its own

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(eq=False)
class _Block:
    """A shared prefix's KV, (layers, 2, kv_heads, length, dim): never written after it is made."""

    kv: Any


@dataclass(frozen=True)
class _Decodes:
    """One step's plan for the arena's one call: the spans fed from a slot (their indices and rows
    each: a decode token, and with ``speculate`` its draft), every such row's flat query position,
    ``store``: for each such row and KV head (row-major) the row of a layer's arena keys (or values)
    viewed as (slots × kv_heads × slot_tokens, dim) its key goes to — one ``index_copy_`` per layer
    (the ``index_put`` it replaces, slot and position indices around the head slice, ran a parallel
    region that stalled whenever another process held the other core: 7.9 ms against 10 µs there,
    both ~7 µs on one thread alone) — the slot range ``lo`` .. ``lo + width`` read with
    ``depth`` query rows per slot, ``src`` the flat position each of the call's (slot, row) reads its
    query from (padding reads position 0, masked to one column, discarded), ``dst`` the call's
    (slot, row) of each span row, the keys read per slot and an additive causal mask per (slot, row)."""

    spans: list[int]
    rows: list[int]
    idx: Any
    store: Any
    lo: int
    width: int
    depth: int
    src: Any
    dst: Any
    keys: int
    mask: Any
    plain: tuple[Any, Any] | None  # (span rows of the call, flat positions) of the spans without a base


@dataclass(frozen=True)
class _Cascade:
    """One step's plan for the spans sharing a block: the block, their query rows (flat positions),
    the keys read from the block, an additive mask of those keys per query row (None when every
    span reads them all) and the spans' indices."""

    block: _Block
    idx: Any
    width: int
    mask: Any
    members: list[int]


@dataclass
class _Seq:
    """A token sequence and the KV of its first ``length`` tokens. The first ``base_len`` positions
    are read from ``base`` (a prefix shared with other sequences), the rest from its own ``kv``:
    (layers, 2, kv_heads, cap, dim) holding positions ``base_len ..`` — a view of arena slot
    ``slot`` when it has one."""

    ids: list[int]
    kv: Any
    length: int = 0
    base: _Block | None = None
    base_len: int = 0
    slot: int | None = None

    @property
    def capacity(self) -> int:
        return self.base_len + int(self.kv.shape[3])

    @property
    def own(self) -> int:
        """Tokens whose KV lives in ``kv``."""
        return self.length - self.base_len


@dataclass(eq=False)
class _Request:
    prompt: list[int]
    max_new: int
    temperature: float
    top_p: float
    stop_texts: tuple[str, ...]
    generator: Any
    future: concurrent.futures.Future[Generation]
    seq: _Seq | None = None
    todo: list[int] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    lps: list[float] = field(default_factory=list)
    cached: int = 0
    version: str = ""
    cancelled: bool = False
    look: PromptLookup | None = None  # the prompt and output so far, indexed for drafts
    draft: list[int] = field(default_factory=list)  # todo[1:] when it is a draft to verify


def supports(model: Any) -> bool:
    """Whether :class:`BatchEngine` can run ``model`` (a Llama-family causal LM)."""
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    return (
        getattr(config, "model_type", None) in SUPPORTED_TYPES
        and not getattr(config, "sliding_window", None)
        and inner is not None
        and hasattr(inner, "layers")
        and hasattr(inner, "rotary_emb")
        and hasattr(model, "lm_head")
    )


class BatchEngine:
    """Continuous batching with a prefix KV cache (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        *,
        end_ids: frozenset[int],
        decode: Callable[[Sequence[int]], str],
        seed: int = 0,
        version: str = "0",
        max_batch: int = 32,
        step_tokens: int = 512,
        cache_tokens: int = 65_536,
        attention: str = "arena",
        sampler: str = "batched",
        matmul: str = "fp32",
        slot_tokens: int = 1024,
        speculate: int = 0,
        kv: str = "fp32",
    ) -> None:
        _check_options(attention, sampler, matmul, kv, speculate)
        if not supports(model):
            kind = getattr(getattr(model, "config", None), "model_type", "?")
            raise BackendError(
                "unsupported_model", f"continuous batching supports {sorted(SUPPORTED_TYPES)}, not {kind}"
            )
        import torch

        cfg = model.config
        self.model = model
        self.end_ids = end_ids
        self.decode = decode
        self.max_batch = max_batch
        self.step_tokens = max(step_tokens, max_batch)
        self.cache_tokens = cache_tokens
        self.heads = int(cfg.num_attention_heads)
        self.kv_heads = int(getattr(cfg, "num_key_value_heads", None) or self.heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads)
        self.layers = len(model.model.layers)
        self.dtype = next(model.parameters()).dtype
        self.cascade = attention in ("cascade", "arena")
        self.grouped = attention in ("cascade", "arena", "grouped")
        self.use_arena = attention == "arena"
        self.slot_tokens = -(-max(64, slot_tokens) // 64) * 64
        self._arena: Any = None  # (layers, 2, max_batch, kv_heads, slot_tokens, dim), made at first use
        self._free_slots: list[int] = list(range(max_batch))  # a heap: the lowest free slot first
        self._clean = [0] * max_batch  # per slot: its first columns known to hold finite values
        self.batched_sampler = sampler == "batched"
        self.bf16 = _resolve(matmul) == "bf16" and self.dtype == torch.float32
        self.kv_dtype = (
            torch.bfloat16 if _resolve(kv) == "bf16" and self.dtype == torch.float32 else self.dtype
        )
        weights = "fp32" if self.dtype == torch.float32 else str(self.dtype).removeprefix("torch.")
        self.speculate = speculate
        self.options = {
            "attention": attention,
            "sampler": sampler,
            "matmul": "bf16" if self.bf16 else weights,
            **({"speculate": str(speculate)} if speculate else {}),
            **({"kv": "bf16"} if self.kv_dtype != self.dtype else {}),
        }
        self._w16: dict[int, tuple[Any, Any]] = {}  # id(owner) -> (weight, bias) copies (see _copies, _head)
        self._flash = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
        self.stats = EngineStats()
        self.version = version
        self._torch = torch
        self._seed = seed
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._waiting: list[_Request] = []
        self._running: list[_Request] = []
        self._cache: OrderedDict[int, _Seq] = OrderedDict()  # finished sequences, LRU order
        self._cache_ids = itertools.count()
        self._swaps: list[tuple[Callable[[], None], str, concurrent.futures.Future[None]]] = []
        self._closed = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ public API

    def submit(
        self,
        prompt: Sequence[int],
        max_new: int,
        temperature: float,
        top_p: float,
        stop_texts: Sequence[str] = (),
    ) -> concurrent.futures.Future[Generation]:
        """Queue one prompt; the future holds its :class:`Generation` (or a :class:`BackendError`)."""
        if not prompt:
            raise BackendError("invalid_prompt", "an empty prompt cannot be generated from")
        gen = self._torch.Generator().manual_seed(self._seed * 1_000_003 + next(self._counter))
        req = _Request(
            prompt=list(prompt),
            max_new=max(1, int(max_new)),
            temperature=float(temperature),
            top_p=float(top_p),
            stop_texts=tuple(stop_texts),
            generator=gen,
            future=concurrent.futures.Future(),
        )
        req.future.set_running_or_notify_cancel()
        with self._cond:
            if self._closed:
                raise BackendError("closed", "the engine was closed")
            self._waiting.append(req)
            self._ensure_thread()
            self._cond.notify_all()
        return req.future

    def cancel(self, future: concurrent.futures.Future[Generation]) -> None:
        """Drop the request behind ``future`` at the next step boundary; its KV is freed."""
        with self._cond:
            for req in (*self._waiting, *self._running):
                if req.future is future:
                    req.cancelled = True
            self._cond.notify_all()

    def swap(self, change: Callable[[], None], version: str, timeout: float | None = None) -> None:
        """Run ``change`` (e.g. loading new weights) when no request is mid-response, then name the
        policy ``version`` and drop the prefix cache (its KV came from the old weights).

        Requests already running finish with the old weights; waiting ones start after the change.
        If ``change`` raises, the version and cache stay as they were and the error is re-raised."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._w16.clear()  # weight copies are remade from whatever the weights become
                change()
                self.version = version
                self._cache.clear()
                return
            self._swaps.append((change, version, done))
            self._cond.notify_all()
        done.result(timeout)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    @property
    def cached_tokens(self) -> int:
        return sum(s.length for s in self._cache.values())

    # ------------------------------------------------------------------ worker

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="coworkenv-batch-engine", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._closed or self._waiting or self._running or self._swaps):
                    self._cond.wait()
                if self._closed:
                    self._fail(self._waiting + self._running, BackendError("closed", "the engine was closed"))
                    self._waiting, self._running = [], []
                    return
                self._drop_cancelled()
                if self._swaps and not self._running:
                    self._apply_swaps()
                    continue
                fresh = [] if self._swaps else self._admit()
                batch = list(self._running)
            if not batch:
                continue
            try:
                for req in fresh:
                    self._attach(req)
                self._step(batch)
            except Exception as exc:  # fail what this step touched; the engine goes on
                log.exception("batch step failed for %d request(s)", len(batch))
                err = (
                    exc
                    if isinstance(exc, BackendError)
                    else BackendError("engine", f"{type(exc).__name__}: {exc}")
                )
                with self._cond:
                    self._running = [r for r in self._running if r not in batch]
                    self._fail(batch, err)

    def _admit(self) -> list[_Request]:
        """Move waiting requests into the batch (FCFS, up to ``max_batch``). A request whose prompt
        shares a longer prefix with a prompt still being prefilled waits for that prefill, so
        rollouts that start together compute their common system prompt once."""
        fresh: list[_Request] = []
        keep: list[_Request] = []
        for req in self._waiting:
            if len(self._running) >= self.max_batch or self._behind_prefill(req):
                keep.append(req)
                continue
            self._running.append(req)
            fresh.append(req)
        self._waiting = keep
        return fresh

    def _behind_prefill(self, req: _Request) -> bool:
        np = _np()
        prompt = np.asarray(req.prompt)
        for other in self._running:
            if other.out:
                continue  # past its prompt: everything it can share is computed
            done = other.seq.length if other.seq is not None else 0
            n = min(len(other.prompt), len(prompt) - 1)
            if n < MIN_SHARED:
                continue
            diff = np.flatnonzero(np.asarray(other.prompt[:n]) != prompt[:n])
            lcp = int(diff[0]) if diff.size else n
            if lcp >= MIN_SHARED and lcp > done:
                return True
        return False

    def _apply_swaps(self) -> None:
        for change, version, done in self._swaps:
            self._w16.clear()
            try:
                change()
            except BaseException as exc:
                done.set_exception(exc)
            else:
                self.version = version
                self._cache.clear()
                done.set_result(None)
        self._swaps = []

    def _drop_cancelled(self) -> None:
        gone = [r for r in (*self._waiting, *self._running) if r.cancelled]
        if not gone:
            return
        self._waiting = [r for r in self._waiting if not r.cancelled]
        self._running = [r for r in self._running if not r.cancelled]
        for req in gone:
            self._release(req.seq)
            req.seq = None
            self.stats.cancelled += 1
            if not req.future.done():
                req.future.set_exception(BackendError("cancelled", "the caller cancelled the request"))

    def _fail(self, reqs: Sequence[_Request], err: BaseException) -> None:
        for req in reqs:
            self._release(req.seq)
            req.seq = None
            self.stats.failed += 1
            if not req.future.done():
                req.future.set_exception(err)

    # ------------------------------------------------------------------ prefix cache

    def _alloc(self, capacity: int) -> Any:
        cap = -(-capacity // 64) * 64
        return self._torch.empty((self.layers, 2, self.kv_heads, cap, self.head_dim), dtype=self.kv_dtype)

    def _own_kv(self, capacity: int) -> tuple[Any, int | None]:
        """Storage for a sequence's own KV of ``capacity`` tokens: an arena slot where it fits
        (``attention="arena"``; there is always a free slot for a running request), else a tensor of
        its own. Returns (kv, slot or None)."""
        if not (self._fits(capacity) and self._free_slots):
            return self._alloc(capacity), None
        if self._arena is None:
            shape = (self.layers, 2, self.max_batch, self.kv_heads, self.slot_tokens, self.head_dim)
            self._arena = self._torch.empty(shape, dtype=self.kv_dtype)
        slot = heapq.heappop(self._free_slots)
        return self._arena[:, :, slot], slot

    def _fits(self, capacity: int) -> bool:
        """Whether own KV of ``capacity`` tokens goes into an arena slot."""
        return self.use_arena and capacity <= self.slot_tokens

    def _release(self, seq: _Seq | None, *, keep: bool = False) -> None:
        """Give ``seq``'s arena slot back; with ``keep`` (it goes to the prefix cache) its own KV
        moves into a tensor of its own first."""
        if seq is None or seq.slot is None:
            return
        if keep:
            kv = self._alloc(seq.own)
            kv[:, :, :, : seq.own] = seq.kv[:, :, :, : seq.own]
            seq.kv = kv
        heapq.heappush(self._free_slots, seq.slot)
        seq.slot = None

    def _attach(self, req: _Request) -> None:
        """Give ``req`` a KV sequence starting from the longest cached or running prefix."""
        np = _np()
        prompt = np.asarray(req.prompt)
        need = len(req.prompt) + req.max_new
        best_len, best_key, best_seq = 0, None, None
        candidates: list[tuple[int | None, _Seq]] = [(k, s) for k, s in self._cache.items()]
        candidates += [(None, r.seq) for r in self._running if r.seq is not None and r is not req]
        for key, seq in candidates:
            n = min(seq.length, len(prompt) - 1)
            if n < MIN_SHARED or n <= best_len:
                continue
            diff = np.flatnonzero(np.asarray(seq.ids[:n]) != prompt[:n])
            lcp = int(diff[0]) if diff.size else n
            if lcp > best_len:
                best_len, best_key, best_seq = lcp, key, seq
        if best_seq is None or best_len < MIN_SHARED:
            kv, slot = self._own_kv(need)
            seq = _Seq(ids=[], kv=kv, slot=slot)
            best_len = 0
        elif best_key is not None and best_len * 2 >= best_seq.length and best_len >= best_seq.base_len:
            # a continuation of a finished sequence: take the cache entry over in place
            seq = self._cache.pop(best_key)
            seq.length = best_len
            del seq.ids[best_len:]
            if seq.capacity < need or self._fits(need - seq.base_len):
                kv, slot = self._own_kv(need - seq.base_len)
                kv[:, :, :, : seq.own] = seq.kv[:, :, :, : seq.own]
                seq.kv, seq.slot = kv, slot
        elif self.cascade:
            # read the common prefix from a shared block: no copy of it, one read per step for all
            base, base_len = self._share(best_seq, best_len)
            kv, slot = self._own_kv(need - base_len)
            seq = _Seq(
                ids=list(req.prompt[:best_len]),
                kv=kv,
                length=best_len,
                base=base,
                base_len=base_len,
                slot=slot,
            )
            lo, hi = base_len - best_seq.base_len, best_len - best_seq.base_len
            seq.kv[:, :, :, : hi - lo] = best_seq.kv[:, :, :, lo:hi]
        else:
            seq = _Seq(ids=list(req.prompt[:best_len]), kv=self._alloc(need), length=best_len)
            seq.kv[:, :, :, :best_len] = best_seq.kv[:, :, :, :best_len]  # no bases without cascade
        req.seq = seq
        req.version = self.version
        req.cached = best_len
        req.todo = req.prompt[best_len:]
        self.stats.requests += 1
        self.stats.prompt_tokens += len(req.prompt)
        self.stats.prefill_cached += best_len

    def _share(self, seq: _Seq, length: int) -> tuple[_Block, int]:
        """A block holding (a prefix of) ``seq``'s first ``length`` tokens, and how many of them it
        holds. A sequence without a base is split in place (no copy): its first ``length`` positions
        become the block, the rest stay its own; nothing ever writes below a sequence's
        ``base_len`` again, so a block is immutable. A sequence whose block covers less than half
        of ``length`` moves onto a new block of ``length`` tokens (one copy; the readers of the old
        block keep it). A sequence in an arena slot is never split in place (the slot is reused
        once it finishes): its block is a copy, and its own KV moves down in the slot."""
        if seq.base is not None and (length <= seq.base_len or seq.base_len * 2 >= length):
            return seq.base, min(length, seq.base_len)
        if seq.base is not None:
            kv = self._torch.empty((*seq.kv.shape[:3], length, self.head_dim), dtype=seq.kv.dtype)
            kv[:, :, :, : seq.base_len] = seq.base.kv[:, :, :, : seq.base_len]
            kv[:, :, :, seq.base_len :] = seq.kv[:, :, :, : length - seq.base_len]
            self._drop_front(seq, length - seq.base_len)
            seq.base, seq.base_len = _Block(kv=kv), length
            return seq.base, length
        block = seq.kv[:, :, :, :length]
        if seq.slot is not None:
            block = block.clone(memory_format=self._torch.contiguous_format)
        self._drop_front(seq, length)
        seq.base, seq.base_len = _Block(kv=block), length
        return seq.base, length

    def _drop_front(self, seq: _Seq, k: int) -> None:
        """Drop the first ``k`` positions of ``seq``'s own KV (they now live in its block): a view
        past them, or in an arena slot the positions it has written moved down by ``k``."""
        if seq.slot is None:
            seq.kv = seq.kv[:, :, :, k:]
            return
        written = seq.own
        if written > k:
            seq.kv[:, :, :, : written - k] = seq.kv[:, :, :, k:written].clone()

    def _retire(self, req: _Request) -> None:
        """Keep a finished request's sequence for later prefixes, within the token budget."""
        seq, req.seq = req.seq, None
        if seq is None or seq.length < MIN_SHARED:
            self._release(seq)
            return
        self._release(seq, keep=True)
        self._cache[next(self._cache_ids)] = seq
        total = self.cached_tokens
        while total > self.cache_tokens and self._cache:
            _, old = self._cache.popitem(last=False)
            total -= old.length

    # ------------------------------------------------------------------ one step

    def _plan(self, batch: Sequence[_Request]) -> list[tuple[_Request, int]]:
        """(request, tokens to feed this step): every decoding request its token (and its draft, in
        full), prefills share the rest."""
        decoding = [(r, len(r.todo)) for r in batch if r.out or len(r.todo) == 1]
        budget = self.step_tokens - sum(n for _, n in decoding)
        plan = list(decoding)
        for req in batch:
            if not req.out and len(req.todo) > 1 and budget > 0:
                n = min(len(req.todo), budget)
                plan.append((req, n))
                budget -= n
        return plan

    def _step(self, batch: Sequence[_Request]) -> None:
        torch = self._torch
        plan = self._plan(batch)
        ids: list[int] = []
        pos: list[int] = []
        for req, n in plan:
            assert req.seq is not None
            ids += req.todo[:n]
            pos += range(req.seq.length, req.seq.length + n)
        with torch.inference_mode():
            hidden = self._forward(plan, torch.tensor([ids]), torch.tensor([pos]))
        ends: list[int] = []
        finishing: list[_Request] = []
        verifying: list[tuple[_Request, int, int]] = []
        offset = 0
        for req, n in plan:
            assert req.seq is not None
            if req.draft:  # its token and a draft: what the KV keeps is decided by the verification
                verifying.append((req, offset, n))
                offset += n
                continue
            req.seq.ids += req.todo[:n]
            req.seq.length += n
            req.todo = req.todo[n:]
            offset += n
            if req.out:
                self.stats.decoded += n
            else:
                self.stats.prefill_computed += n
            if not req.todo:
                ends.append(offset - 1)
                finishing.append(req)
        self.stats.steps += 1
        self.stats.max_batch_seen = max(self.stats.max_batch_seen, len(batch))
        if not finishing and not verifying:
            return
        rows = ends + [i for _, s, n in verifying for i in range(s, s + n)]
        with torch.inference_mode():
            every = self._head(hidden[0, rows])  # fp32 always: a few rows a step
        logits, checked = every[: len(ends)], every[len(ends) :]
        done = self._next_tokens(finishing, logits)
        at = 0
        for req, _, n in verifying:
            if self._verify(req, checked[at : at + n]):
                done.append(req)
            at += n
        if done:
            with self._cond:
                self._running = [r for r in self._running if r not in done]
                for req in done:
                    self._retire(req)

    def _next_tokens(self, finishing: Sequence[_Request], logits: Any) -> list[_Request]:
        """Sample a token for each of ``finishing`` (row ``i`` of ``logits`` is its last position's);
        returns those that finished."""
        if not finishing:
            return []
        if not self.batched_sampler:
            return [r for r, row in zip(finishing, logits, strict=True) if self._sample(r, row)]
        from coworkenv.proxy.backends.embedded import sample_batch

        tokens, lps = sample_batch(
            logits,
            [r.temperature for r in finishing],
            [r.top_p for r in finishing],
            [r.generator for r in finishing],
        )
        return [r for r, t, lp in zip(finishing, tokens, lps, strict=True) if self._advance(r, t, lp)]

    def _sample(self, req: _Request, row: Any) -> bool:
        """Sample the next token of ``req`` alone (``sampler="per_row"``); see :meth:`_advance`."""
        from coworkenv.proxy.backends.embedded import processed_logprobs

        torch = self._torch
        logp = processed_logprobs(row, req.temperature, req.top_p)
        if req.temperature <= 0:
            token = int(torch.argmax(row))
        else:
            token = int(torch.multinomial(logp.exp(), 1, generator=req.generator))
        return self._advance(req, token, float(logp[token]))

    def _advance(self, req: _Request, token: int, logprob: float) -> bool:
        """Append a sampled token; True when the request finished (its future is set)."""
        req.out.append(token)
        req.lps.append(logprob)
        finish: FinishReason | None = None
        if token in self.end_ids or (
            req.stop_texts and any(s in self.decode(req.out[-16:]) for s in req.stop_texts)
        ):
            finish = "stop"
        elif len(req.out) >= req.max_new:
            finish = "length"
        if finish is None:
            req.todo = [token]
            if self.speculate:
                self._propose(req)
            return False
        if not req.future.done():
            req.future.set_result(Generation(tuple(req.out), tuple(req.lps), finish, req.version, req.cached))
        return True

    def _propose(self, req: _Request) -> None:
        """A prompt-lookup draft after ``req``'s last token (``speculate``), within its token budget:
        its KV positions stay inside the capacity reserved for prompt + ``max_new``."""
        if req.look is None:
            req.look = PromptLookup(req.prompt)
        look = req.look
        look.extend(req.out[len(look.ids) - len(req.prompt) :])
        room = req.max_new - len(req.out) - 1
        req.draft = list(look.propose(min(self.speculate, room))) if room > 0 else []
        req.todo = [req.todo[0], *req.draft]

    def _verify(self, req: _Request, logits: Any) -> bool:
        """``req`` fed its token and a draft this step; ``logits`` at each of those positions. The
        draft's accepted prefix is kept (:func:`~coworkenv.proxy.backends.embedded.accept_draft`:
        every token emitted is distributed as, and logged with the logprob of, the distribution a
        plain step would have sampled it from), the KV of the rejected positions is left to be
        overwritten, and the tokens go through :meth:`_advance` one by one (a stop ends them)."""
        from coworkenv.proxy.backends.embedded import accept_draft, processed_logprobs_batch

        seq = req.seq
        assert seq is not None
        n = int(logits.shape[0])
        logp = processed_logprobs_batch(logits, [req.temperature] * n, [req.top_p] * n)
        emitted = accept_draft(logp, req.draft, req.temperature, req.generator)
        keep = len(emitted)  # the token fed and the draft tokens accepted
        seq.ids += req.todo[:keep]
        seq.length += keep
        self.stats.decoded += keep
        self.stats.drafted += len(req.draft)
        self.stats.draft_accepted += keep - 1
        req.todo, req.draft = [], []
        return any(self._advance(req, token, lp) for token, lp in emitted)

    # ------------------------------------------------------------------ the model

    def _copy_dtype(self) -> Any:
        """The dtype of the linears' weight copies: bf16 with bf16 matmuls; float32 for a float32
        model where oneDNN runs (the copies then only change the layout); None: no copies, the
        modules run as they are."""
        torch = self._torch
        if self.bf16:
            return torch.bfloat16
        return torch.float32 if self.dtype == torch.float32 and _packs_fp32() else None

    def _plain(self, *modules: Any) -> bool:
        """Whether the copies apply: a copy dtype (:meth:`_copy_dtype`) and every module a plain Linear."""
        return self._copy_dtype() is not None and all(type(m) is self._torch.nn.Linear for m in modules)

    def _linear(self, module: Any, x: Any) -> Any:
        """``module(x)``; a plain ``nn.Linear`` runs on a copy of its weights (made at first use,
        dropped at every swap) and returns float32."""
        if not self._plain(module):
            return module(x.to(self.dtype))
        w, b = self._copies(module, module)
        return self._mm(x, w, b).float()

    def _copies(self, owner: Any, *modules: Any, dtype: Any = None) -> tuple[Any, Any]:
        """Copies of ``modules``' weights (and biases) in :meth:`_copy_dtype`, stacked along the
        output dimension, so linears reading the same input run as one matmul; packed in oneDNN's
        blocked layout where oneDNN runs that dtype; cached under ``owner`` until a swap."""
        got = self._w16.get(id(owner))
        if got is None:
            torch = self._torch
            dtype = dtype or self._copy_dtype()
            weight = torch.cat([m.weight.detach() for m in modules]).to(dtype)
            bias = None
            if any(m.bias is not None for m in modules):
                parts = [
                    m.bias.detach() if m.bias is not None else torch.zeros(m.weight.shape[0]) for m in modules
                ]
                bias = torch.cat(parts).to(dtype)
            if _packs_fp32() if dtype == torch.float32 else _packs_bf16():  # made once per swap
                weight = torch.ops.mkldnn._reorder_linear_weight(weight)
            got = self._w16[id(owner)] = (weight, bias)
        return got

    def _head(self, x: Any) -> Any:
        """The LM head's fp32 logits of ``x`` (a few rows). Where oneDNN runs, on a copy of its
        weight packed in oneDNN's layout (cached like the bf16 copies, until a swap): fp32 on both
        paths, only the summation order differs (logprobs within a few 1e-6 of ``lm_head``'s)."""
        head = self.model.lm_head
        if type(head) is not self._torch.nn.Linear or not _packs_fp32():
            return head(x)
        w, b = self._copies(head, head, dtype=self._torch.float32)
        return self._mm(x, w, b)

    def _mm(self, x: Any, weight: Any, bias: Any) -> Any:
        """``x @ weight.T + bias`` on a copy from :meth:`_copies`, in the copy's dtype. A packed copy
        saves the per-call reorder ``linear`` does on a plain one: in bf16 the same result bit for
        bit (tested), in float32 another summation order (fp32 rounding), and faster at decode's few
        rows either way (``benchmarks/roofline_generation.py``)."""
        torch = self._torch
        x = x.to(weight.dtype)
        if not weight.is_mkldnn:
            return torch.nn.functional.linear(x, weight, bias)
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, bias, "none", [], "")

    def _qkv(self, attn: Any, x: Any) -> tuple[Any, Any, Any]:
        """The query, key and value projections of ``x``; on weight copies one fused matmul."""
        parts = (attn.q_proj, attn.k_proj, attn.v_proj)
        if not self._plain(*parts):
            return parts[0](x), parts[1](x), parts[2](x)
        w, b = self._copies(attn, *parts)
        y = self._mm(x, w, b).float()
        q, k, v = y.split([int(p.weight.shape[0]) for p in parts], dim=-1)
        return q, k, v

    def _mlp(self, mlp: Any, x: Any) -> Any:
        """The layer's MLP; on weight copies a Llama MLP (gate, up, down: plain linears) runs in the
        copies' dtype from its input (gate and up as one matmul) to the down projection's float32
        output."""
        gate, up, down = (getattr(mlp, n, None) for n in ("gate_proj", "up_proj", "down_proj"))
        if not hasattr(mlp, "act_fn") or not self._plain(gate, up, down):
            return mlp(x)
        assert gate is not None  # a plain Linear
        wgu, bgu = self._copies(mlp, gate, up)
        wd, bd = self._copies(down, down)
        gu = self._mm(x, wgu, bgu)
        width = int(gate.weight.shape[0])
        return self._mm(mlp.act_fn(gu[..., :width]) * gu[..., width:], wd, bd).float()

    def _forward(self, plan: Sequence[tuple[_Request, int]], ids: Any, pos: Any) -> Any:
        """The model's decoder over one flat token sequence. Attention: a request without a shared
        base attends over its own KV in one call (``per_request``: SDPA, which expands the KV heads
        for grouped-query attention; ``grouped`` and ``cascade``: a kernel fed the query heads of
        each KV head as rows, no expansion); with ``cascade`` the requests sharing a base block
        attend over it together (one call per block and layer, returning outputs and log-sum-exp),
        each over its own suffix separately, merged by log-sum-exp; with ``arena`` every request
        decoding from a slot attends over its own KV in one call for all of them."""
        torch = self._torch
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        inner = self.model.model
        total = ids.shape[1]
        h = inner.embed_tokens(ids)
        cos, sin = inner.rotary_emb(h, position_ids=pos)
        hd, heads, kvh = self.head_dim, self.heads, self.kv_heads
        spans, cascades, dec = self._spans(plan)
        for li, layer in enumerate(inner.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q, k, v = self._qkv(attn, x)
            q = q.view(1, total, heads, hd).transpose(1, 2)
            k = k.view(1, total, kvh, hd).transpose(1, 2)
            v = v.view(1, total, kvh, hd).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            if self.kv_dtype != q.dtype:  # kv="bf16": keys, values, queries and attention in bf16
                q, k, v = q.to(self.kv_dtype), k.to(self.kv_dtype), v.to(self.kv_dtype)
            out = torch.empty_like(q)
            pre = {} if dec is None else self._arena_attend(dec, li, q, k, v, out=out, scale=attn.scaling)
            self._own_attend(li, q, k, v, out=out, spans=spans, skip=pre, scale=attn.scaling)
            for plan_ in cascades:
                self._cascade(plan_, li, q, out, spans=spans, scale=attn.scaling, pre=pre)
            h = h + self._linear(attn.o_proj, out.transpose(1, 2).reshape(1, total, heads * hd))
            h = h + self._mlp(layer.mlp, layer.post_attention_layernorm(h))
        return inner.norm(h)

    def _spans(
        self, plan: Sequence[tuple[_Request, int]]
    ) -> tuple[list[tuple[_Seq, int, int, Any]], list[_Cascade], _Decodes | None]:
        """This step's spans (sequence, first flat position, tokens fed, causal mask of a chunk or
        None), the cascades of the spans sharing a block, and the arena's decode plan."""
        torch = self._torch
        rep = self.heads // self.kv_heads
        spans: list[tuple[_Seq, int, int, Any]] = []
        groups: dict[int, list[int]] = {}
        start = 0
        for req, n in plan:
            seq = req.seq
            assert seq is not None
            past = seq.own
            mask = None
            if n > 1:
                cols = torch.arange(past + n)
                rows = torch.arange(n).unsqueeze(1) + past
                mask = cols.unsqueeze(0) <= rows
            if seq.base is not None:
                groups.setdefault(id(seq.base), []).append(len(spans))
            if mask is not None and self.grouped:  # an additive mask, one row per query head
                mask = torch.zeros(mask.shape).masked_fill(~mask, float("-inf")).repeat(rep, 1)
            spans.append((seq, start, n, mask))
            start += n
        cascades = [self._cascade_plan(spans, members) for members in groups.values()]
        self.stats.shared_rows += sum(int(c.idx.shape[0]) for c in cascades if len(c.members) > 1)
        dec = self._decodes_plan(spans) if self._arena is not None else None
        if dec is not None:
            self.stats.arena_rows += sum(dec.rows)
        return spans, cascades, dec

    def _own_attend(
        self,
        li: int,
        q: Any,
        k: Any,
        v: Any,
        *,
        out: Any,
        spans: Sequence[tuple[_Seq, int, int, Any]],
        skip: dict[int, Any],
        scale: float,
    ) -> None:
        """Layer ``li``: every span not in ``skip`` (done by the arena) stores its keys and values,
        and one without a base attends over its own KV into ``out``."""
        from torch.nn.functional import scaled_dot_product_attention as sdpa

        heads, kvh, hd = self.heads, self.kv_heads, self.head_dim
        for i, (seq, s, n, mask) in enumerate(spans):
            if i in skip:
                continue
            past = seq.own
            cache = seq.kv[li]
            cache[0, :, past : past + n] = k[0, :, s : s + n]
            cache[1, :, past : past + n] = v[0, :, s : s + n]
            if seq.base is None and self.grouped:
                o, _ = self._attend(
                    q[0, :, s : s + n].reshape(1, kvh, -1, hd),
                    cache[0, :, : past + n].unsqueeze(0),
                    cache[1, :, : past + n].unsqueeze(0),
                    mask,
                    scale,
                )
                out[0, :, s : s + n] = o.reshape(heads, n, hd)
            elif seq.base is None:
                out[:, :, s : s + n] = sdpa(
                    q[:, :, s : s + n],
                    cache[0, :, : past + n].unsqueeze(0),
                    cache[1, :, : past + n].unsqueeze(0),
                    attn_mask=mask,
                    scale=scale,
                    enable_gqa=heads != kvh,
                )

    def _cascade_plan(self, spans: Sequence[tuple[_Seq, int, int, Any]], members: list[int]) -> _Cascade:
        """The :class:`_Cascade` of the spans ``members`` (which share one block) for this step."""
        torch = self._torch
        first = spans[members[0]][0]
        assert first.base is not None
        lens = [spans[m][0].base_len for m in members]
        counts = [spans[m][2] for m in members]
        idx = torch.cat([torch.arange(spans[m][1], spans[m][1] + spans[m][2]) for m in members])
        width = max(lens)
        pmask = None
        if min(lens) < width:
            row_len = torch.repeat_interleave(torch.tensor(lens), torch.tensor(counts))
            allowed = torch.arange(width)[None, :] < row_len[:, None]
            pmask = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
            pmask = pmask.repeat(self.heads // self.kv_heads, 1)
        return _Cascade(first.base, idx, width, pmask, members)

    def _cascade(
        self,
        plan: _Cascade,
        li: int,
        q: Any,
        out: Any,
        *,
        spans: Sequence[tuple[_Seq, int, int, Any]],
        scale: float,
        pre: dict[int, tuple[Any, Any]] | None = None,
    ) -> None:
        """Attention of the spans sharing ``plan.block`` in layer ``li``: every query row over the
        block at once, each span over its own suffix (taken from ``pre`` where the arena's call
        already computed it: (heads, rows, dim) outputs and (heads, rows) log-sum-exp), merged by
        log-sum-exp into ``out``."""
        torch = self._torch
        heads, kvh, hd = self.heads, self.kv_heads, self.head_dim
        idx, width = plan.idx, plan.width
        rows = int(idx.shape[0])
        qg = q[0].index_select(1, idx)  # (heads, rows, dim): query heads of one KV head are adjacent
        kv = plan.block.kv[li]
        keys, values = kv[0, :, :width].unsqueeze(0), kv[1, :, :width].unsqueeze(0)
        o_pre, lse_pre = self._attend(qg.reshape(1, kvh, -1, hd), keys, values, plan.mask, scale)
        o_pre, lse_pre = o_pre.reshape(heads, rows, hd), lse_pre.reshape(heads, rows)
        o_own, lse_own = [], []
        for m in plan.members:
            if pre and m in pre:
                o_own.append(pre[m][0])
                lse_own.append(pre[m][1])
                continue
            seq, s, n, mask = spans[m]
            cache = seq.kv[li]
            upto = seq.own + n
            o, lse = self._attend(
                q[0, :, s : s + n].reshape(1, kvh, -1, hd),
                cache[0, :, :upto].unsqueeze(0),
                cache[1, :, :upto].unsqueeze(0),
                mask,
                scale,
            )
            o_own.append(o.reshape(heads, n, hd))
            lse_own.append(lse.reshape(heads, n))
        o_suf = torch.cat(o_own, dim=1) if len(o_own) > 1 else o_own[0]
        lse_suf = torch.cat(lse_own, dim=1) if len(lse_own) > 1 else lse_own[0]
        top = torch.maximum(lse_pre, lse_suf)
        w_pre, w_suf = torch.exp(lse_pre - top), torch.exp(lse_suf - top)
        merged = (o_pre * w_pre[..., None] + o_suf * w_suf[..., None]) / (w_pre + w_suf)[..., None]
        out[0].index_copy_(1, idx, merged.to(out.dtype))

    def _decodes_plan(self, spans: Sequence[tuple[_Seq, int, int, Any]]) -> _Decodes | None:
        """The :class:`_Decodes` of this step's spans fed from an arena slot — one token, or with
        ``speculate`` a token and its draft (at most ``1 + speculate`` rows) — None when there are
        none. Makes the columns every slot's mask reads finite first."""
        torch = self._torch
        depth_max = 1 + self.speculate
        members = [i for i, (seq, _, n, _) in enumerate(spans) if n <= depth_max and seq.slot is not None]
        if not members:
            return None
        rows = [spans[i][2] for i in members]
        slots = [int(spans[i][0].slot) for i in members]  # type: ignore[arg-type]
        pasts = [spans[i][0].own for i in members]  # its own KV before this step's rows
        lo, hi = min(slots), max(slots) + 1
        depth, keys = max(rows), max(p + n for p, n in zip(pasts, rows, strict=True))
        self._clean_columns(range(lo, hi), keys)
        width = hi - lo
        limit = [1] * (width * depth)  # keys each (slot, row) reads; padding reads one column
        src = [0] * (width * depth)
        idx: list[int] = []
        row_slots: list[int] = []
        pos: list[int] = []
        dst: list[int] = []
        cols: list[int] = []  # the span rows (in member order) of the spans without a base
        for i, slot, past, n in zip(members, slots, pasts, rows, strict=True):
            if spans[i][0].base is None:
                cols += range(len(idx), len(idx) + n)
            first, start = (slot - lo) * depth, spans[i][1]
            limit[first : first + n] = range(past + 1, past + n + 1)  # causal: row r reads past + r + 1
            src[first : first + n] = range(start, start + n)
            idx += range(start, start + n)
            row_slots += [slot] * n
            pos += range(past, past + n)
            dst += range(first, first + n)
        lim = torch.tensor(limit).view(width, depth)
        allowed = torch.arange(keys)[None, None, :] < lim[:, :, None]  # (width, depth, keys)
        allowed = allowed.repeat_interleave(self.heads // self.kv_heads, dim=1)  # rows: r * rep + e
        mask = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))[:, None]
        flat = torch.tensor(idx)
        rows_plain = torch.tensor(cols, dtype=torch.long)
        plain = (rows_plain, flat[rows_plain]) if cols else None
        return _Decodes(
            spans=members,
            rows=rows,
            idx=flat,
            store=self._store_rows(row_slots, pos),
            lo=lo,
            width=width,
            depth=depth,
            src=torch.tensor(src),
            dst=torch.tensor(dst),
            keys=keys,
            mask=mask,
            plain=plain,
        )

    def _store_rows(self, slots: list[int], pos: list[int]) -> Any:
        """:attr:`_Decodes.store` for rows at ``slots`` and own positions ``pos``."""
        torch = self._torch
        kvh, width = self.kv_heads, self.slot_tokens
        heads = torch.arange(kvh)
        rows = (torch.tensor(slots)[:, None] * kvh + heads[None, :]) * width + torch.tensor(pos)[:, None]
        return rows.reshape(-1)

    def _clean_columns(self, slots: range, keys: int) -> None:
        """Zero the first ``keys`` columns (rounded up to 64) of ``slots`` where nothing was written
        yet, once per slot: a masked key read by the arena's call is multiplied by zero, never meets
        a NaN left in memory. Only the slots a call reads are touched, so the arena's resident
        memory follows the batch actually running."""
        new = min(self.slot_tokens, -(-keys // 64) * 64)
        if all(self._clean[slot] >= new for slot in slots):
            return
        seqs = [r.seq for r in self._running if r.seq is not None]
        written = {seq.slot: seq.own for seq in seqs if seq.slot is not None}
        for slot in slots:
            start = max(self._clean[slot], written.get(slot, 0))
            if start < new:
                self._arena[:, :, slot, :, start:new] = 0
            self._clean[slot] = max(self._clean[slot], new)

    def _arena_attend(
        self, dec: _Decodes, li: int, q: Any, k: Any, v: Any, *, out: Any, scale: float
    ) -> dict[int, tuple[Any, Any]]:
        """Layer ``li`` for the spans of ``dec``: their new keys and values stored in their slots,
        then one attention call over the slots ``dec.lo ..`` (each slot's rows × query heads as the
        call's rows, its causal mask cutting its own length). A span without a base gets its output
        in ``out``; returns, per span index, its (heads, rows, dim) output and (heads, rows)
        log-sum-exp over its own KV (a span with a base merges them with its block's in
        :meth:`_cascade`)."""
        heads, kvh, hd = self.heads, self.kv_heads, self.head_dim
        rep, width, depth = heads // kvh, dec.width, dec.depth
        arena = self._arena[li]  # (2, slots, kv_heads, slot_tokens, dim)
        for kv, new in ((arena[0], k), (arena[1], v)):  # (rows, kv_heads, dim) rows of (slot, head, pos)
            kv.view(-1, hd).index_copy_(
                0, dec.store, new[0].index_select(1, dec.idx).transpose(0, 1).reshape(-1, hd)
            )
        qs = q[0].index_select(1, dec.src).view(kvh, rep, width, depth, hd)
        qs = qs.permute(2, 0, 3, 1, 4).reshape(width, kvh, depth * rep, hd)
        window = slice(dec.lo, dec.lo + width)
        o, lse = self._attend(
            qs, arena[0, window, :, : dec.keys], arena[1, window, :, : dec.keys], dec.mask, scale
        )
        o = o.reshape(width, kvh, depth, rep, hd).permute(1, 3, 0, 2, 4).reshape(heads, width * depth, hd)
        lse = lse.reshape(width, kvh, depth, rep).permute(1, 3, 0, 2).reshape(heads, width * depth)
        o_rows, lse_rows = o.index_select(1, dec.dst), lse.index_select(1, dec.dst)
        if dec.plain is not None:
            cols, flat = dec.plain
            out[0].index_copy_(1, flat, o_rows.index_select(1, cols))
        got: dict[int, tuple[Any, Any]] = {}
        at = 0
        for i, n in zip(dec.spans, dec.rows, strict=True):
            got[i] = (o_rows[:, at : at + n], lse_rows[:, at : at + n])
            at += n
        return got

    def _attend(self, q: Any, k: Any, v: Any, mask: Any, scale: float) -> tuple[Any, Any]:
        """Attention of ``q`` (batch, kv_heads, rows, dim) over ``k``/``v`` (batch, kv_heads, keys,
        dim) with an additive ``mask`` broadcast to (batch, kv_heads, rows, keys) or None: (output,
        log-sum-exp over the keys per row)."""
        torch = self._torch
        if self._flash is not None:
            o, lse = self._flash(q, k, v, attn_mask=mask, scale=scale)
            return o, lse
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores + mask
        lse = torch.logsumexp(scores.float(), dim=-1)
        return torch.matmul(torch.exp(scores - lse[..., None]).to(v.dtype), v), lse


def _check_options(attention: str, sampler: str, matmul: str, kv: str, speculate: int) -> None:
    """A :class:`BackendError` naming the option and its values for any value out of range."""
    if attention not in ATTENTIONS or sampler not in SAMPLERS or matmul not in MATMULS or kv not in KVS:
        raise BackendError(
            "invalid_option",
            f"attention={attention!r} sampler={sampler!r} matmul={matmul!r} kv={kv!r}: use attention in "
            f"{ATTENTIONS}, sampler in {SAMPLERS}, matmul in {MATMULS}, kv in {KVS}",
        )
    if not 0 <= speculate <= MAX_SPECULATE:
        raise BackendError(
            "invalid_option", f"speculate={speculate}: use 0 (off) to {MAX_SPECULATE} draft tokens a step"
        )


def _resolve(precision: str) -> str:
    """``auto``: bf16 where the CPU computes it natively, else fp32; anything else as it is."""
    if precision != "auto":
        return precision
    from coworkenv.machine import native_bf16

    return "bf16" if native_bf16() else "fp32"


@functools.cache
def _packs_fp32() -> bool:
    """Whether this torch build runs fp32 linears on oneDNN-packed weights (any x86 CPU it runs on)."""
    import torch

    mkldnn = torch.ops.mkldnn
    return bool(
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


@functools.cache
def _packs_bf16() -> bool:
    """Whether this torch build can run bf16 linears on oneDNN-packed weights here (a oneDNN build,
    and a CPU oneDNN runs bf16 on: ``ONEDNN_MAX_CPU_ISA=AVX2`` or an AVX2-only CPU says no)."""
    import torch

    mkldnn = torch.ops.mkldnn
    try:
        return bool(
            torch.backends.mkldnn.is_available()
            and hasattr(mkldnn, "_reorder_linear_weight")
            and hasattr(mkldnn, "_linear_pointwise")
            and mkldnn._is_mkldnn_bf16_supported()
        )
    except (AttributeError, RuntimeError):
        return False


def _np() -> Any:
    import numpy

    return numpy
