"""The embedded backend: a Hugging Face causal LM (SmolLM2-135M-Instruct by default) on CPU.

Contract: ``complete`` renders the request with the codec, encodes it with the model's tokenizer
(``prompt_ids`` are exactly the ids fed to the model), samples up to ``max_tokens`` new tokens with a
KV cache and stops at the tokenizer's end ids (``<|im_end|>``, ``<|endoftext|>``) or a stop text.
``output_ids`` include the end token when one was produced (the policy chose to stop; training
needs it); ``text`` is the decoded output without special tokens.

Logprobs: ``logprobs[i]`` is ``log_softmax`` of the *processed* logits actually sampled from —
logits divided by the temperature, then nucleus (top-p) filtered and renormalized — evaluated at
``output_ids[i]``. That is the rollout policy's probability, which is what an importance-sampling
correction needs; with temperature 1 and top_p 1 it equals the model's own log-probability.
Temperature 0 means greedy decoding; the logprobs are then the model's (temperature-1) ones.

Engines (``engine=``): ``batched`` (the default for Llama-family models) serves every concurrent
request together with continuous batching and a prefix KV cache
(:mod:`coworkenv.proxy.backends.batching`); each request samples with its own seeded generator
(seed, arrival number); its options ``step_tokens`` (chunked prefill: tokens per step),
``attention`` (``arena``, the default: requests sharing a prefix read its KV together, and the
decoding requests' own KV is read in one call per layer, slots of ``slot_tokens``; ``cascade``: the
former only),
``sampler`` (``batched``, the default: one sampling pass per step, :func:`sample_batch`) and
``matmul`` (``fp32``, the default; ``bf16``; ``auto``: bf16 where the CPU computes it natively)
``speculate`` (draft tokens per step by prompt lookup, verified by speculative sampling; 0 = off,
the default) and ``kv`` (``fp32``, the default; ``bf16``: KV cache and attention in bf16; ``auto``)
are passed through. ``serial`` is the earlier engine, kept as the baseline and for other
architectures: one request at a time under a lock, a full prefill every call, one generator
advanced call after call. Either way generation runs off the event loop; ``set_weights`` waits
until no response is in progress (new ones wait for it), so weights never change in the middle of
a turn, and every Completion carries the ``policy_version`` it was generated with.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from coworkenv.models import EMBEDDED, ModelError, embedded_checkpoint, load_causal_lm
from coworkenv.proxy.backends.base import BackendError, Completion
from coworkenv.proxy.backends.batching import BatchEngine, Generation, supports
from coworkenv.proxy.codecs import Codec, get_codec
from coworkenv.proxy.codecs.base import count_tool_calls
from coworkenv.proxy.messages import ChatRequest, FinishReason


def smollm2_tokenizer() -> Any:
    """The real SmolLM2 tokenizer from the cached converted checkpoint."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_checkpoint(), local_files_only=True)


def tiny_random_model(tokenizer: Any, *, seed: int = 0, layers: int = 2, hidden: int = 64) -> Any:
    """A randomly initialized LlamaForCausalLM sized for ``tokenizer`` (for fast tests)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.eval()
    return model


TOP_K_FIRST = 256
"""Candidates :func:`processed_logprobs` looks at before sorting the whole vocabulary for top-p."""


def processed_logprobs(logits: Any, temperature: float, top_p: float) -> Any:
    """Log-probabilities of the distribution sampled from (temperature, then top-p renormalized).

    Works on the last dimension; ``temperature <= 0`` (greedy) returns the plain model log-softmax.
    Top-p looks at the :data:`TOP_K_FIRST` most likely tokens first and sorts the whole vocabulary
    only when they hold less than ``top_p`` of the mass or a tie straddles the cut. The kept set is
    the full sort's (:func:`processed_logprobs_sorted`) but where the mass above the last token
    kept is within float rounding (~1e-6) of ``top_p`` (tested); sampler and trainer both call this
    function (the batched sampler its row-wise twin :func:`processed_logprobs_batch`, bit-equal), so
    what is sampled and what is scored agree exactly."""
    import torch

    logits = logits.float()
    if temperature <= 0:
        return torch.log_softmax(logits, dim=-1)
    logits = logits / temperature
    if 0 < top_p < 1 and logits.dim() == 1 and logits.shape[-1] > TOP_K_FIRST:
        probs = torch.softmax(logits, dim=-1)
        top, idx = torch.topk(probs, TOP_K_FIRST)
        before = torch.cumsum(top, dim=-1) - top
        keep = int((before < top_p).sum())  # the smallest prefix reaching top_p
        if keep < TOP_K_FIRST and bool(top[keep - 1] > top[keep]):  # inside, and no tie at the cut
            out = torch.full_like(logits, float("-inf"))
            out[idx[:keep]] = logits[idx[:keep]]
            return torch.log_softmax(out, dim=-1)
    return processed_logprobs_sorted(logits, 1.0, top_p)


def processed_logprobs_batch(logits: Any, temperatures: Sequence[float], top_ps: Sequence[float]) -> Any:
    """:func:`processed_logprobs` of every row of ``logits`` (rows, vocab) at its own settings, in a
    few batched calls: one softmax and one top-k over the rows that use top-p, one masked
    log-softmax over all. Each row equals ``processed_logprobs(logits[i], temperatures[i],
    top_ps[i])`` bit for bit (tested); a row whose top-p set is not settled within the
    :data:`TOP_K_FIRST` candidates falls back to that row's full sort, as the one-row function does."""
    import torch

    logits = logits.float()
    rows, vocab = logits.shape
    x = logits
    if any(t > 0 and t != 1.0 for t in temperatures):  # else every row is as it is (greedy, or T = 1)
        temps = torch.tensor([t if t > 0 else 1.0 for t in temperatures], dtype=torch.float32)
        x = logits / temps[:, None]  # a row divided by 1.0 is bit for bit itself
    nucleus = [i for i in range(rows) if temperatures[i] > 0 and 0 < top_ps[i] < 1]
    if nucleus and x is logits:
        x = logits.clone()  # its nucleus rows are masked below: never the caller's logits
    fallback = [] if vocab > TOP_K_FIRST else nucleus
    if nucleus and not fallback:
        sub = x[nucleus]
        top, idx = torch.topk(torch.softmax(sub, dim=-1), TOP_K_FIRST, dim=-1)
        before = torch.cumsum(top, dim=-1) - top
        p = torch.tensor([top_ps[i] for i in nucleus], dtype=torch.float32)
        keep = (before < p[:, None]).sum(-1)
        at = torch.clamp(keep, max=TOP_K_FIRST - 1)
        last = top.gather(1, (at - 1).clamp(min=0)[:, None])[:, 0]
        nxt = top.gather(1, at[:, None])[:, 0]
        settled = (keep < TOP_K_FIRST) & (last > nxt)
        inside = torch.arange(TOP_K_FIRST)[None, :] < keep[:, None]
        masked = torch.full_like(sub, float("-inf"))
        masked.scatter_(1, idx, torch.where(inside, sub.gather(1, idx), float("-inf")))
        fallback = [i for i, ok in zip(nucleus, settled.tolist(), strict=True) if not ok]
        unsettled = {i: sub[j] for j, i in enumerate(nucleus) if i in fallback}
        x[nucleus] = masked
    else:
        unsettled = {i: x[i] for i in fallback}
    out = torch.log_softmax(x, dim=-1)
    for i in fallback:
        out[i] = processed_logprobs_sorted(unsettled[i], 1.0, top_ps[i])
    return out


def sample_batch(
    logits: Any, temperatures: Sequence[float], top_ps: Sequence[float], generators: Sequence[Any]
) -> tuple[list[int], list[float]]:
    """Sample one token per row of ``logits`` (rows, vocab): ``(tokens, logprobs)``.

    The distribution of row ``i`` is :func:`processed_logprobs` of that row (and ``logprobs[i]`` is
    its value at the token, bit for bit); temperature <= 0 is argmax. Each row draws one uniform
    number from its own ``generators[i]`` and inverts the row's cumulative distribution (float64),
    so a request's tokens depend only on its own generator, never on the other rows — the same
    distribution as ``torch.multinomial`` (tested), though not the same token for a given seed."""
    import torch

    logp = processed_logprobs_batch(logits, temperatures, top_ps)
    rows = logp.shape[0]
    tokens = [0] * rows
    sampled = [i for i in range(rows) if temperatures[i] > 0]
    if sampled:
        probs = logp[sampled].exp().double()
        cdf = torch.cumsum(probs, dim=-1)
        u = torch.cat([torch.rand(1, generator=generators[i], dtype=torch.float64) for i in sampled])
        pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]
        pick = torch.clamp(pick, max=logp.shape[1] - 1)
        for j, (i, t) in enumerate(zip(sampled, pick.tolist(), strict=True)):
            tokens[i] = _on_support(probs[j], int(t))
    for i in range(rows):
        if temperatures[i] <= 0:
            tokens[i] = int(torch.argmax(logits[i]))
    picked = logp.gather(1, torch.tensor(tokens)[:, None])[:, 0].tolist()
    return tokens, [float(v) for v in picked]


def _on_support(probs: Any, t: int) -> int:
    """``t``, the token an inverse-CDF draw picked, or the last token of positive probability where
    ``u · total`` rounded onto the total and picked one of probability 0."""
    import torch

    return t if float(probs[t]) > 0 else int(torch.nonzero(probs > 0)[-1])


def accept_draft(
    logp: Any, draft: Sequence[int], temperature: float, generator: Any
) -> list[tuple[int, float]]:
    """Speculative sampling of a deterministic draft (e.g. prompt lookup): the tokens to emit, each
    with its logprob.

    ``logp`` (len(draft) + 1, vocab) holds the processed log-probabilities
    (:func:`processed_logprobs`) at the position of each draft token and after the last one. Draft
    token ``d`` at row ``i`` is accepted with probability ``p_i(d)`` (one uniform draw from
    ``generator``); at the first rejection the token is drawn from ``p_i`` without ``d``,
    renormalized, and nothing after it is kept; when every draft token is accepted one more is drawn
    from the last row. Each emitted token is then distributed exactly as ``p_i`` (speculative
    sampling with a point-mass draft), so its logprob is ``log p_i(token)`` — the same contract as
    sampling without a draft, and what the trainer's IS correction expects. ``temperature <= 0``
    (greedy): accepted while the draft token is the row's argmax, then the argmax."""
    import torch

    out: list[tuple[int, float]] = []
    for i, row in enumerate(logp):
        d = draft[i] if i < len(draft) else None
        if temperature <= 0:
            best = int(torch.argmax(row))
            out.append((best, float(row[best])))
            if d is None or best != d:
                return out
            continue
        if d is not None:
            p_d = float(row[d].exp())
            if float(torch.rand(1, generator=generator, dtype=torch.float64)) < p_d:
                out.append((d, float(row[d])))
                continue
        probs = row.exp().double()
        if d is not None:
            probs[d] = 0.0
        cdf = torch.cumsum(probs, dim=-1)
        u = torch.rand(1, generator=generator, dtype=torch.float64) * cdf[-1]
        t = _on_support(probs, min(int(torch.searchsorted(cdf, u, right=True)), int(row.shape[0]) - 1))
        out.append((t, float(row[t])))
        return out
    return out


def processed_logprobs_sorted(logits: Any, temperature: float, top_p: float) -> Any:
    """:func:`processed_logprobs` by one sort of the whole vocabulary (the reference)."""
    import torch

    logits = logits.float()
    if temperature <= 0:
        return torch.log_softmax(logits, dim=-1)
    logits = logits / temperature
    if 0 < top_p < 1:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass strictly above each token
        drop_sorted = before >= top_p  # keeps the smallest prefix reaching top_p (never the first)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.log_softmax(logits, dim=-1)


class EmbeddedBackend:
    """Generate with a local model; see the module docstring for the exact token/logprob contract."""

    name = "embedded"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        codec: Codec | str = "smollm2",
        seed: int = 0,
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        version: str = "0",
        engine: str = "batched",
        max_batch: int = 32,
        cache_tokens: int = 65_536,
        step_tokens: int = 512,
        attention: str = "arena",
        sampler: str = "batched",
        matmul: str = "fp32",
        slot_tokens: int = 1024,
        speculate: int = 0,
        kv: str = "fp32",
    ) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.codec = get_codec(codec, tokenizer) if isinstance(codec, str) else codec
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self._version = version
        self._lock = threading.Lock()
        self._generator = torch.Generator().manual_seed(seed)
        ends = {tokenizer.eos_token_id, getattr(model.config, "eos_token_id", None)}
        vocab = tokenizer.get_vocab()
        ends.update(vocab.get(text) for text in (*self.codec.stop_texts, "<|im_end|>", "<|endoftext|>"))
        self._end_ids = frozenset(int(t) for t in ends if isinstance(t, int))
        self.context_limit = int(getattr(model.config, "max_position_embeddings", 8192))
        if engine not in ("batched", "serial"):
            raise ModelError(f"engine={engine!r}: use 'batched' (continuous batching) or 'serial'")
        self.engine: BatchEngine | None = None
        if engine == "batched" and supports(model):
            self.engine = BatchEngine(
                model,
                end_ids=self._end_ids,
                decode=lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=False)),
                seed=seed,
                version=version,
                max_batch=max_batch,
                cache_tokens=cache_tokens,
                step_tokens=step_tokens,
                attention=attention,
                sampler=sampler,
                matmul=matmul,
                slot_tokens=slot_tokens,
                speculate=speculate,
                kv=kv,
            )

    @classmethod
    def from_checkpoint(cls, path: str = EMBEDDED, **kwargs: Any) -> EmbeddedBackend:
        """Load ``"smollm2"`` (the embedded default) or a saved checkpoint directory."""
        model, tok = load_causal_lm(path)
        kwargs.setdefault("version", path if path == EMBEDDED else str(path).rstrip("/").rsplit("/", 1)[-1])
        return cls(model, tok, **kwargs)

    @property
    def end_ids(self) -> frozenset[int]:
        """Token ids that end a turn (kept in the output ids, stripped from the text)."""
        return self._end_ids

    @end_ids.setter
    def end_ids(self, ids: frozenset[int]) -> None:
        self._end_ids = frozenset(ids)
        if self.engine is not None:
            self.engine.end_ids = self._end_ids

    @property
    def policy_version(self) -> str:
        return self.engine.version if self.engine is not None else self._version

    def close(self) -> None:
        """Stop the batching engine's worker thread (requests still queued fail as ``closed``)."""
        if self.engine is not None:
            self.engine.close()

    def set_weights(self, weights: Mapping[str, Any] | Any, version: str) -> None:
        """Load new weights (a state dict or a model with the same architecture) and name them.

        Waits for the current turn to finish; tensors are copied, the caller keeps its own."""
        state = weights.state_dict() if hasattr(weights, "state_dict") else weights

        def load() -> None:
            try:
                self.model.load_state_dict(state, strict=True)
            except RuntimeError as exc:
                first = str(exc).splitlines()[:3]
                raise ModelError(
                    f"set_weights({version!r}): the weights do not fit the embedded model's "
                    f"architecture ({' '.join(first)[:300]}); push a state dict of the same model"
                ) from None

        if self.engine is not None:
            self.engine.swap(load, version)
            return
        with self._lock:
            load()
            self._version = version

    async def complete(self, request: ChatRequest) -> Completion:
        if self.engine is None:
            return await asyncio.to_thread(self._complete_locked, request)
        rendered, limit, temperature, top_p, stops = self._prepare(request)
        future = self.engine.submit(rendered.ids, limit, temperature, top_p, stops)
        try:
            gen = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.engine.cancel(future)
            raise
        return self._completion(request, rendered.ids, gen)

    # ------------------------------------------------------------ generation

    def _prepare(self, request: ChatRequest) -> tuple[Any, int, float, float, tuple[str, ...]]:
        """Render and check a request: (rendered prompt, max new tokens, temperature, top_p, stops)."""
        rendered = self.codec.render(request, self.tokenizer)
        room = self.context_limit - len(rendered.ids)
        if room <= 0:
            raise BackendError(
                "context_length",
                f"the prompt is {len(rendered.ids)} tokens and the model's context is "
                f"{self.context_limit}; shorten the conversation or the tool list",
            )
        limit = min(request.max_tokens or self.max_new_tokens, self.max_new_tokens, room)
        temperature = self.temperature if request.temperature is None else request.temperature
        top_p = self.top_p if request.top_p is None else request.top_p
        extra = tuple(s for s in request.stop if s not in self.codec.stop_texts)
        return rendered, limit, temperature, top_p, extra

    def _complete_locked(self, request: ChatRequest) -> Completion:
        with self._lock:
            rendered, limit, temperature, top_p, stops = self._prepare(request)
            gen = self.generate(rendered.ids, limit, temperature, top_p, stops)
            gen = Generation(gen.output_ids, gen.logprobs, gen.finish_reason, self._version)
        return self._completion(request, rendered.ids, gen)

    def _completion(self, request: ChatRequest, prompt_ids: Sequence[int], gen: Generation) -> Completion:
        body = [t for t in gen.output_ids if t not in self.end_ids]
        text = str(self.tokenizer.decode(body, skip_special_tokens=True))
        for stop in request.stop:
            cut = text.find(stop)
            if cut != -1:
                text = text[:cut]
        turn = self.codec.parse(
            text,
            request.tools,
            first_call_index=count_tool_calls(request.messages),
            finish_reason=gen.finish_reason,
        )
        return Completion(
            turn=turn,
            text=text,
            prompt_ids=tuple(prompt_ids),
            output_ids=gen.output_ids,
            logprobs=gen.logprobs,
            policy_version=gen.policy_version,
            model=request.model or self.name,
            usage_prompt_tokens=len(prompt_ids),
            usage_completion_tokens=len(gen.output_ids),
        )

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new: int,
        temperature: float,
        top_p: float,
        stop_texts: Sequence[str] = (),
    ) -> Generation:
        """The serial engine: sample up to ``max_new`` tokens after ``prompt_ids`` with a KV cache
        (caller holds the lock); ``stop_texts`` are stops beyond the end ids."""
        import torch

        out: list[int] = []
        lps: list[float] = []
        finish: FinishReason = "length"
        extra_stops = list(stop_texts)
        with torch.inference_mode():
            result = self.model(input_ids=torch.tensor([list(prompt_ids)]), use_cache=True, logits_to_keep=1)
            for _ in range(max_new):
                logits = result.logits[0, -1]
                logp = processed_logprobs(logits, temperature, top_p)
                if temperature <= 0:
                    token = int(torch.argmax(logits))
                else:
                    token = int(torch.multinomial(logp.exp(), 1, generator=self._generator))
                out.append(token)
                lps.append(float(logp[token]))
                if token in self.end_ids:
                    finish = "stop"
                    break
                if extra_stops:
                    tail = str(self.tokenizer.decode(out[-16:], skip_special_tokens=False))
                    if any(s in tail for s in extra_stops):
                        finish = "stop"
                        break
                result = self.model(input_ids=torch.tensor([[token]]), cache=result.cache, use_cache=True)
        return Generation(tuple(out), tuple(lps), finish)
