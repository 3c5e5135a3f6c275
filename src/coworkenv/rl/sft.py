"""SFT on curated conversations: loss on assistant tokens (responses and tool calls) only.

Contract:

* Input: JSONL, one ``{"messages": [...OpenAI chat messages with tool_calls...], "tools": [...]}``
  per line (TRL conversational format). :func:`read_sft_jsonl` names file:line of bad rows.
* :func:`tokenize_conversation` renders with the embedded backend's codec
  (:mod:`coworkenv.proxy.codecs`, default ``smollm2``): for each assistant message the prompt up to
  it (``codec.render_text``) supplies context tokens (mask 0) and the canonical assistant text
  (``codec.format_assistant`` + the end-of-turn text) supplies target tokens (mask 1). When a later
  prompt does not extend the earlier text, a new example starts. Examples are truncated to
  ``max_len``.
* :class:`SFTTrainer` trains (LoRA or full) with gradient accumulation; the loss is the mean over
  supervised tokens of each optimizer step; checkpoints resume; metrics go to ``metrics.jsonl``
  (loss, supervised and forwarded tokens, and both per second);
  :meth:`SFTTrainer.export` writes a merged checkpoint that :func:`coworkenv.models.load_causal_lm` reads.
* Packing (``pack``, the default): an optimizer step's conversations are merged into prefix tries
  (:func:`pack_examples`, at most ``pack_tokens`` nodes each) and forwarded through tree attention
  (:mod:`coworkenv.rl.attention`), so a prefix shared by several conversations — the system prompt
  and tool list of a task family — is forwarded once, with no padding. A trained node shared by
  ``n`` conversations carries weight ``n``, so the loss (and its gradient) equals the unpacked
  one. Batches are bucketed by prefix (shuffled, grouped by their first tokens, then the batches
  shuffled) so conversations that share a prefix land in the same step.
* Activation checkpointing (``model.gradient_checkpointing``) applies to every forward, or with
  ``checkpoint_over`` only to forwards of more tokens than that: the others skip the recompute.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from coworkenv.errors import SpecError
from coworkenv.jsonl import jsonl_lines
from coworkenv.machine import native_bf16
from coworkenv.proxy.messages import ChatRequest, Message, ToolCall, ToolSpec
from coworkenv.rl.attention import use_tree_attention
from coworkenv.rl.common import (
    MetricsLog,
    build_policy,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    save_merged,
    seed_all,
)
from coworkenv.rl.config import SFTConfig
from coworkenv.rl.packing import Unit, forward_logprobs


@dataclass(frozen=True)
class SFTExample:
    ids: tuple[int, ...]
    mask: tuple[int, ...]


def _message(raw: dict[str, Any]) -> Message:
    calls = []
    for i, c in enumerate(raw.get("tool_calls") or []):
        fn = c.get("function", c)
        args = fn.get("arguments", "{}")
        calls.append(
            ToolCall(
                id=str(c.get("id") or f"call_{i}"),
                name=str(fn["name"]),
                arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            )
        )
    content = raw.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return Message(
        role=raw["role"],
        content=str(content),
        tool_calls=tuple(calls),
        tool_call_id=raw.get("tool_call_id"),
        name=raw.get("name"),
    )


def _tool_list(raw: Any) -> list[dict[str, Any]]:
    """``tools`` as curation exports it (a JSON string, so Arrow keeps schemas intact) or as a list of
    dicts / JSON strings (TRL's other accepted shapes)."""
    if not raw:
        return []
    if isinstance(raw, str):
        raw = json.loads(raw)
    return [json.loads(t) if isinstance(t, str) else t for t in raw]


def _tool(raw: dict[str, Any]) -> ToolSpec:
    fn = raw.get("function", raw)
    return ToolSpec(
        name=fn["name"],
        description=fn.get("description", ""),
        parameters=fn.get("parameters") or {"type": "object", "properties": {}},
    )


def read_sft_jsonl(path: Path) -> list[tuple[list[Message], list[ToolSpec]]]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(f.exists() for f in files):
        raise SpecError.single(path, "", "no SFT JSONL found (expected a .jsonl file or a directory of them)")
    rows: list[tuple[list[Message], list[ToolSpec]]] = []
    for f in files:
        for n, line in enumerate(jsonl_lines(f), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                msgs = [_message(m) for m in obj["messages"]]
                tools = [_tool(t) for t in _tool_list(obj.get("tools"))]
            except (ValueError, KeyError, TypeError) as exc:
                raise SpecError.single(f"{f}:{n}", "messages", f"unreadable SFT row: {exc}") from None
            rows.append((msgs, tools))
    return rows


Encode = Callable[[str], list[int]]


def tokenize_conversation(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    encode: Encode,
    *,
    codec: Any,
    max_len: int,
) -> list[SFTExample]:
    stop = codec.stop_texts[0] if codec.stop_texts else ""
    out: list[SFTExample] = []
    ids: list[int] = []
    mask: list[int] = []
    prev = ""

    def flush() -> None:
        if any(mask):
            out.append(SFTExample(tuple(ids[:max_len]), tuple(mask[:max_len])))

    for i, m in enumerate(messages):
        if m.role != "assistant":
            continue
        prompt = codec.render_text(ChatRequest(messages=tuple(messages[:i]), tools=tuple(tools)))
        if not prompt.startswith(prev):
            flush()
            ids, mask, prev = [], [], ""
        ctx = encode(prompt[len(prev) :])
        target = encode(codec.format_assistant(m.content, m.tool_calls) + stop)
        ids += ctx + target
        mask += [0] * len(ctx) + [1] * len(target)
        prev = prompt + codec.format_assistant(m.content, m.tool_calls) + stop
    flush()
    return out


def build_examples(
    rows: Sequence[tuple[list[Message], list[ToolSpec]]],
    tokenizer: Any,
    *,
    max_len: int,
    codec_family: str = "smollm2",
) -> list[SFTExample]:
    from coworkenv.proxy.codecs import get_codec

    codec = get_codec(codec_family, tokenizer)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    out: list[SFTExample] = []
    for msgs, tools in rows:
        out.extend(tokenize_conversation(msgs, tools, encode, codec=codec, max_len=max_len))
    return out


def _batches(
    examples: Sequence[SFTExample], size: int, rng: random.Random, *, bucket: bool = False
) -> Iterator[list[SFTExample]]:
    order = list(range(len(examples)))
    rng.shuffle(order)
    if not bucket:
        for i in range(0, len(order), size):
            yield [examples[j] for j in order[i : i + size]]
        return
    # shuffled, then grouped by their opening tokens (a stable sort keeps the shuffle inside a group)
    order.sort(key=lambda j: examples[j].ids[:PREFIX_KEY])
    chunks = [order[i : i + size] for i in range(0, len(order), size)]
    rng.shuffle(chunks)
    for chunk in chunks:
        yield [examples[j] for j in chunk]


PREFIX_KEY = 512  # tokens compared when bucketing conversations by their shared prefix
MIN_PACK_SHARED = 64  # a conversation joins a trie only when it shares at least this many tokens


def pack_examples(examples: Sequence[SFTExample], max_nodes: int) -> list[Unit]:
    """Prefix tries over ``examples`` (each at most ``max_nodes`` nodes, one example at least).

    An example joins the current trie only when it shares at least ``MIN_PACK_SHARED`` opening
    tokens with it; otherwise it starts a new unit, so unrelated conversations are forwarded as
    plain causal sequences (tree attention over a unit costs memory and time quadratic in its size).

    Nodes merge when parent, token and loss mask agree; a trained node's weight counts the examples
    through it, so the weighted loss over the tries equals the sum over the examples."""
    units: list[Unit] = []
    cur: Unit | None = None
    index: dict[tuple[int, int, int], int] = {}
    count = 0
    for e in examples:
        if cur is not None:
            shared, parent = 0, -1  # how many of its opening tokens the current trie already holds
            for tok, m in zip(e.ids, e.mask, strict=True):
                node = index.get((parent, tok, m))
                if node is None:
                    break
                shared, parent = shared + 1, node
            # a conversation that shares (almost) nothing gains nothing from the trie and would cost
            # tree attention over the whole unit: it starts a unit of its own (a plain causal forward)
            if shared < MIN_PACK_SHARED or len(cur) + len(e.ids) - shared > max_nodes:
                cur.tree = count > 1
                units.append(cur.finalize())
                cur = None
        if cur is None:
            cur, index, count = Unit("sft", [], [], [], [], [], [], [], tree=True), {}, 0
        count += 1
        parent = -1
        for tok, m in zip(e.ids, e.mask, strict=True):
            key = (parent, tok, m)
            node = index.get(key)
            if node is None:
                node = index[key] = len(cur.tokens)
                cur.tokens.append(tok)
                cur.parent.append(parent)
                cur.pos.append(0 if parent < 0 else cur.pos[parent] + 1)
                cur.mask.append(float(m))
                cur.weight.append(0.0)
                cur.logp_rollout.append(0.0)
                cur.adv.append(0.0)
            if m:
                cur.weight[node] += 1.0
            parent = node
    if cur is not None:
        cur.tree = count > 1
        units.append(cur.finalize())
    return units


def use_bf16(setting: str) -> bool:
    """``autocast`` setting → whether to autocast to bf16 (see :class:`SFTConfig`)."""
    if setting == "bf16":
        return True
    return setting == "auto" and native_bf16()


class SFTTrainer:
    def __init__(
        self,
        cfg: SFTConfig,
        *,
        model: Any | None = None,
        tokenizer: Any | None = None,
        log_metrics: bool = True,
    ) -> None:
        self.cfg = cfg
        seed_all(cfg.run.seed)
        self.model, self.tokenizer = build_policy(cfg.model, model, tokenizer)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        o = cfg.optim
        self.optimizer = torch.optim.AdamW(
            self.trainable, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay
        )
        self.packed = cfg.pack and use_tree_attention(self.model)
        self.bf16 = use_bf16(cfg.autocast)
        # the decoder layers that checkpoint (when the model config turned it on): toggled per
        # forward by ``checkpoint_over``, so only forwards large enough to need it pay the recompute
        self._ckpt_layers = [
            m for m in self.model.modules() if getattr(m, "gradient_checkpointing", False) is True
        ]
        self.step_count = 0
        self.metrics = MetricsLog(cfg.run.out_dir, enabled=log_metrics)
        if cfg.run.resume and (ck := latest_checkpoint(cfg.run.out_dir)) is not None:
            self.step_count = int(load_checkpoint(ck, self.model, self.optimizer)["step"])
        if cfg.run.resume:
            self.metrics.truncate(self.step_count)

    def _loss(self, batch: Sequence[SFTExample]) -> tuple[torch.Tensor, int]:
        length = max(len(e.ids) for e in batch)
        ids = torch.zeros(len(batch), length, dtype=torch.long)
        att = torch.zeros(len(batch), length, dtype=torch.long)
        labels = torch.full((len(batch), length), -100, dtype=torch.long)
        for b, e in enumerate(batch):
            n = len(e.ids)
            ids[b, :n] = torch.tensor(e.ids)
            att[b, :n] = 1
            labels[b, :n] = torch.tensor([t if m else -100 for t, m in zip(e.ids, e.mask, strict=True)])
        # The output layer only on the positions that predict a trained token: the full logits of a
        # 4k-token sequence over a 49k vocabulary would be ~0.8 GB per copy.
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        hidden = base.get_decoder()(input_ids=ids, attention_mask=att, use_cache=False).last_hidden_state
        tgt = labels[:, 1:]
        keep = tgt != -100
        rows = hidden[:, :-1][keep]
        logits = base.get_output_embeddings()(rows).float()
        loss = torch.nn.functional.cross_entropy(logits, tgt[keep], reduction="sum")
        return loss, int(keep.sum())

    def _checkpoint_for(self, tokens: int) -> None:
        """Activation checkpointing on for the next forward only if it is over ``checkpoint_over``
        tokens (each forward's backward runs before the next forward, so the switch is per forward)."""
        limit = self.cfg.checkpoint_over
        on = limit is None or tokens > limit
        for m in self._ckpt_layers:
            m.gradient_checkpointing = on

    def _losses(self, group: Sequence[Sequence[SFTExample]]) -> Iterator[tuple[torch.Tensor, int]]:
        """(summed loss, tokens forwarded) per forward of a step; each forward under bf16 autocast
        when it is on (the context ends before the caller's backward)."""
        if self.packed:
            for unit in pack_examples([e for b in group for e in b], self.cfg.pack_tokens):
                self._checkpoint_for(len(unit))
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                    ((logp, _),) = forward_logprobs(self.model, [unit])
                w = torch.tensor([unit.weight[i] for i in unit.train_idx], dtype=torch.float32)
                yield -(w * logp.float()).sum(), len(unit)
            return
        for b in group:
            n = len(b) * max(len(e.ids) for e in b)
            self._checkpoint_for(n)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
                loss, _ = self._loss(b)
            yield loss.float(), n

    def train(
        self, examples: Sequence[SFTExample], *, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        cfg = self.cfg
        per_epoch = -(-len(examples) // (cfg.batch_size * cfg.grad_accum))
        total = per_epoch * cfg.epochs
        if cfg.run.max_steps:
            total = min(total, cfg.run.max_steps)
        rng = random.Random(cfg.run.seed)
        self.model.train()
        last: dict[str, Any] = {}
        step = 0
        for _epoch in range(cfg.epochs):
            batches = list(
                _batches(
                    examples, cfg.batch_size * (cfg.grad_accum if self.packed else 1), rng, bucket=self.packed
                )
            )
            accum = 1 if self.packed else cfg.grad_accum
            for k in range(0, len(batches), accum):
                step += 1
                if step <= self.step_count:
                    continue  # resumed: these updates were already applied (same shuffle, same seed)
                if step > total:
                    break
                t0 = time.perf_counter()
                group = batches[k : k + accum]
                n_tok = sum(sum(e.mask[1:]) for b in group for e in b)
                self.optimizer.zero_grad(set_to_none=True)
                loss_sum = 0.0
                forwarded = 0
                for loss, n_fwd in self._losses(group):
                    (loss / max(n_tok, 1)).backward()
                    loss_sum += float(loss.detach())
                    forwarded += n_fwd
                gnorm = float(torch.nn.utils.clip_grad_norm_(self.trainable, cfg.optim.grad_clip))
                for g in self.optimizer.param_groups:
                    w = cfg.optim.warmup_steps
                    g["lr"] = cfg.optim.lr * (min(1.0, step / w) if w else 1.0)
                if torch.isfinite(torch.tensor(gnorm)):
                    self.optimizer.step()
                self.step_count = step
                dt = time.perf_counter() - t0
                last = {
                    "loss": loss_sum / max(n_tok, 1),
                    "precision": "bf16-autocast" if self.bf16 else "fp32",
                    "tokens": n_tok,
                    "forwarded": forwarded,
                    "supervised_tok_s": n_tok / dt,
                    "forwarded_tok_s": forwarded / dt,
                    "grad_norm": gnorm,
                    "step_s": dt,
                }
                self.metrics.log(step, last)
                if progress:
                    progress(step, total)
                if cfg.run.save_every and step % cfg.run.save_every == 0:
                    self.save()
        self.model.eval()
        return {**last, "steps": self.step_count}

    @torch.no_grad()
    def evaluate(self, examples: Sequence[SFTExample], batch_size: int | None = None) -> float | None:
        """Mean loss per supervised token over ``examples`` (e.g. a held-out split), no update; the
        same forward as training (packed tries when packing is on). None when nothing is supervised."""
        was_training = self.model.training
        self.model.eval()
        size = batch_size or self.cfg.batch_size
        total, n_tok = 0.0, 0
        try:
            for i in range(0, len(examples), size):
                chunk = list(examples[i : i + size])
                n_tok += sum(sum(e.mask[1:]) for e in chunk)
                total += sum(float(loss) for loss, _ in self._losses([chunk]))
        finally:
            self.model.train(was_training)
        return total / n_tok if n_tok else None

    def save(self) -> Path:
        return save_checkpoint(
            self.cfg.run.out_dir,
            self.step_count,
            self.model,
            self.optimizer,
            {"kind": "sft"},
            keep=self.cfg.run.keep_checkpoints,
        )

    def export(self, path: Path | None = None) -> Path:
        return save_merged(self.model, self.tokenizer, path or self.cfg.run.out_dir / "final")
