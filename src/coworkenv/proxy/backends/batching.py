"""Continuous batching with a prefix KV cache: the embedded backend's generation engine.

Contract: :class:`BatchEngine` owns one decoder-only model (Llama-family: ``llama``, ``qwen2``) and a
worker thread. :meth:`BatchEngine.submit` queues a prompt (token ids) and returns a
``concurrent.futures.Future`` of a :class:`Generation`; requests join the running batch at the next
step and leave it the step they finish, so every concurrent rollout is served by the same forward
passes. Each step forwards one flat sequence of tokens — one new token per decoding request plus
chunks of prompts being prefilled — through the model's own modules (its projections, norms, MLPs
and rotary embedding; attention runs per request over that request's own KV).

Prefix cache: the KV of every finished request (its prompt and all but the last output token) is
kept, up to ``cache_tokens`` tokens, least recently used evicted first. A new prompt starts from the
longest common token prefix among cached and running sequences, so a task's shared system prompt
and tool list, and a rollout's own history, are prefilled once. A continuation takes the cached
entry over in place; a shared prefix is copied. Keys are stored after the rotary embedding, so a
reused prefix is exactly what a fresh prefill would compute (up to float summation order).

Logprobs are those of the distribution each token was sampled from (see
:func:`~coworkenv.proxy.backends.embedded.processed_logprobs`); every request has its own seeded
``torch.Generator`` (seed, arrival number). :meth:`BatchEngine.swap` runs a weight change between
steps once the running requests have finished (no new request is admitted meanwhile), then drops
the prefix cache, so no response ever mixes two policies. A failure inside a step fails only the
requests that step touched; :meth:`BatchEngine.cancel` frees a request's batch slot and KV.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from coworkenv.proxy.backends.base import BackendError
from coworkenv.proxy.messages import FinishReason

log = logging.getLogger(__name__)

SUPPORTED_TYPES = frozenset({"llama", "qwen2"})
MIN_SHARED = 16  # shorter common prefixes are not worth a copy


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

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Seq:
    """A token sequence and the KV of its first ``length`` tokens: (layers, 2, kv_heads, cap, dim)."""

    ids: list[int]
    kv: Any
    length: int = 0

    @property
    def capacity(self) -> int:
        return int(self.kv.shape[3])


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
    ) -> None:
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
            req.seq = None
            self.stats.cancelled += 1
            if not req.future.done():
                req.future.set_exception(BackendError("cancelled", "the caller cancelled the request"))

    def _fail(self, reqs: Sequence[_Request], err: BaseException) -> None:
        for req in reqs:
            req.seq = None
            self.stats.failed += 1
            if not req.future.done():
                req.future.set_exception(err)

    # ------------------------------------------------------------------ prefix cache

    def _alloc(self, capacity: int) -> Any:
        cap = -(-capacity // 64) * 64
        return self._torch.empty((self.layers, 2, self.kv_heads, cap, self.head_dim), dtype=self.dtype)

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
            seq = _Seq(ids=[], kv=self._alloc(need))
            best_len = 0
        elif best_key is not None and best_len * 2 >= best_seq.length:
            # a continuation of a finished sequence: take the cache entry over in place
            seq = self._cache.pop(best_key)
            seq.length = best_len
            del seq.ids[best_len:]
            if seq.capacity < need:
                kv = self._alloc(need)
                kv[:, :, :, :best_len] = seq.kv[:, :, :, :best_len]
                seq.kv = kv
        else:
            seq = _Seq(ids=list(req.prompt[:best_len]), kv=self._alloc(need), length=best_len)
            seq.kv[:, :, :, :best_len] = best_seq.kv[:, :, :, :best_len]
        req.seq = seq
        req.version = self.version
        req.cached = best_len
        req.todo = req.prompt[best_len:]
        self.stats.requests += 1
        self.stats.prompt_tokens += len(req.prompt)
        self.stats.prefill_cached += best_len

    def _retire(self, req: _Request) -> None:
        """Keep a finished request's sequence for later prefixes, within the token budget."""
        seq, req.seq = req.seq, None
        if seq is None or seq.length < MIN_SHARED:
            return
        self._cache[next(self._cache_ids)] = seq
        total = self.cached_tokens
        while total > self.cache_tokens and self._cache:
            _, old = self._cache.popitem(last=False)
            total -= old.length

    # ------------------------------------------------------------------ one step

    def _plan(self, batch: Sequence[_Request]) -> list[tuple[_Request, int]]:
        """(request, tokens to feed this step): every decoding request 1, prefills share the rest."""
        decoding = [(r, 1) for r in batch if len(r.todo) == 1]
        budget = self.step_tokens - len(decoding)
        plan = list(decoding)
        for req in batch:
            if len(req.todo) > 1 and budget > 0:
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
        offset = 0
        for req, n in plan:
            assert req.seq is not None
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
        if not finishing:
            return
        with torch.inference_mode():
            logits = self.model.lm_head(hidden[0, ends])
        done: list[_Request] = []
        for req, row in zip(finishing, logits, strict=True):
            if self._sample(req, row):
                done.append(req)
        if done:
            with self._cond:
                self._running = [r for r in self._running if r not in done]
                for req in done:
                    self._retire(req)

    def _sample(self, req: _Request, row: Any) -> bool:
        """Sample the next token of ``req``; True when the request finished (its future is set)."""
        from coworkenv.proxy.backends.embedded import processed_logprobs

        torch = self._torch
        logp = processed_logprobs(row, req.temperature, req.top_p)
        if req.temperature <= 0:
            token = int(torch.argmax(row))
        else:
            token = int(torch.multinomial(logp.exp(), 1, generator=req.generator))
        req.out.append(token)
        req.lps.append(float(logp[token]))
        finish: FinishReason | None = None
        if token in self.end_ids or (
            req.stop_texts and any(s in self.decode(req.out[-16:]) for s in req.stop_texts)
        ):
            finish = "stop"
        elif len(req.out) >= req.max_new:
            finish = "length"
        if finish is None:
            req.todo = [token]
            return False
        if not req.future.done():
            req.future.set_result(Generation(tuple(req.out), tuple(req.lps), finish, req.version, req.cached))
        return True

    def _forward(self, plan: Sequence[tuple[_Request, int]], ids: Any, pos: Any) -> Any:
        """The model's decoder over one flat token sequence; attention per request over its own KV."""
        torch = self._torch
        from torch.nn.functional import scaled_dot_product_attention as sdpa
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        inner = self.model.model
        total = ids.shape[1]
        h = inner.embed_tokens(ids)
        cos, sin = inner.rotary_emb(h, position_ids=pos)
        spans: list[tuple[_Seq, int, int, Any]] = []
        start = 0
        for req, n in plan:
            assert req.seq is not None
            past = req.seq.length
            mask = None
            if n > 1:
                cols = torch.arange(past + n)
                rows = torch.arange(n).unsqueeze(1) + past
                mask = cols.unsqueeze(0) <= rows
            spans.append((req.seq, start, n, mask))
            start += n
        hd, heads, kvh = self.head_dim, self.heads, self.kv_heads
        for li, layer in enumerate(inner.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q = attn.q_proj(x).view(1, total, heads, hd).transpose(1, 2)
            k = attn.k_proj(x).view(1, total, kvh, hd).transpose(1, 2)
            v = attn.v_proj(x).view(1, total, kvh, hd).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            out = torch.empty_like(q)
            for seq, s, n, mask in spans:
                past = seq.length
                cache = seq.kv[li]
                cache[0, :, past : past + n] = k[0, :, s : s + n]
                cache[1, :, past : past + n] = v[0, :, s : s + n]
                out[:, :, s : s + n] = sdpa(
                    q[:, :, s : s + n],
                    cache[0, :, : past + n].unsqueeze(0),
                    cache[1, :, : past + n].unsqueeze(0),
                    attn_mask=mask,
                    scale=attn.scaling,
                    enable_gqa=heads != kvh,
                )
            h = h + attn.o_proj(out.transpose(1, 2).reshape(1, total, heads * hd))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return inner.norm(h)


def _np() -> Any:
    import numpy

    return numpy
